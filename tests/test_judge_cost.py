"""The cost bench's figures, loosely (benches/judge_cost.py): the memory's own model over a
replay of the bundled launch-week sample's first 250 lines, at a 6,000-token ceiling, through a
scripted endpoint that counts the tokens of each call. The ceilings sit about twice above today's
figures (reads 10.1 times the conversation's text, writes 0.08 of reads, 2.0 calls a user turn),
so a regression that doubles them fails; the issue's goal (10 times, a tenth) is below them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))

import judge_cost as bench  # noqa: E402
import pytest  # noqa: E402

from fadeway import _constants as C  # noqa: E402
from fadeway.judge.base import UnitText  # noqa: E402

#: Every judgment the mechanism names that this replay reaches (none is skipped to save cost).
JUDGMENTS = {
    "judge:boundaries",
    "judge:about",
    "judge:same_entity",
    "judge:relate",
    "judge:levels",
    "judge:distill",
    "note",
}


def test_the_memory_s_own_model_spends_within_loose_ceilings():
    lines = bench.sample_lines(bench.BUNDLED)[:250]
    cost = bench.measure(bench.BUNDLED, lines, 6_000)
    # The memory reports what the endpoint counted, call by call.
    assert {kind: tuple(c) for kind, c in cost.counted.items()} == cost.usage
    assert set(cost.usage) == JUDGMENTS
    assert all(calls > 0 and tin > 0 and tout > 0 for calls, tin, tout in cost.usage.values())
    assert cost.turns == 70 and 13_000 < cost.text < 15_000
    assert cost.reads <= 22 * cost.text
    assert cost.writes <= 0.16 * cost.reads
    assert cost.calls <= 4 * cost.turns


def test_the_bench_s_prompt_cache_serves_a_long_shared_prefix_in_steps():
    cache = bench.PromptCache()
    shared = " ".join(f"word{i}" for i in range(900))  # about 1,800 tokens

    def body(tail: str) -> dict:
        return {
            "messages": [
                {"role": "system", "content": "rules"},
                {"role": "user", "content": shared + tail},
            ]
        }

    assert cache.cached("judge:about", body(" one"), 2_000) == 0  # nothing seen yet
    served = cache.cached("judge:about", body(" two"), 2_000)
    assert served >= 1_024 and (served - 1_024) % 128 == 0 and served <= 2_000
    assert cache.cached("judge:relate", body(" two"), 2_000) == 0  # another judgment's prompts
    short = {"messages": [{"role": "user", "content": "a short prompt"}]}
    assert cache.cached("judge:x", short, 10) == 0 and cache.cached("judge:x", short, 10) == 0


def test_the_selective_model_answers_as_the_offline_judge_through_the_llm_judge_s_prompts():
    """`selective` reads each judgment back from the LLM judge's own prompt: through them, the
    LLM judge's answers are the offline judge's, item for item."""
    import asyncio

    from fadeway.http import Endpoint
    from fadeway.judge.base import FactText
    from fadeway.judge.llm import LLMJudge
    from fadeway.judge.offline import OfflineJudge
    from openai_server import OpenAIServer

    facts = [
        FactText("Dana owns the checkout migration.", "Dana", "checkout migration"),
        FactText("The pricing page launches on 2026-03-14.", "pricing page", "2026-03-14"),
        FactText("Legal reviews refunds within two days.", "Legal", "refunds"),
        FactText("The pricing page launches on 2026-04-02.", "pricing page", "2026-04-02"),
    ]
    dialogue = "Who owns the checkout migration now?\nDana does, since the launch moved."
    drawn_on = FactText("Dana owns the checkout migration since the March reorg.", "Dana", "it")
    exchange = "Who owns the checkout migration?\nDana does; she took it over after the reorg."
    pairs = [(facts[3], facts[1]), (facts[0], facts[2])]
    names = [("Dana", "dana"), ("pricing page", "legal team")]
    offline = OfflineJudge()
    with OpenAIServer() as server, bench.walk_lines_recorded():
        server.script(*[bench.Counter("selective")] * 20)
        judge = LLMJudge(Endpoint(server.url, backoff_initial=0.01), model=bench.MODEL)

        async def both(name, *args):
            return await getattr(judge, name)(*args), await getattr(offline, name)(*args)

        for name, args in [
            ("levels", (facts, dialogue)),
            ("distill", ([drawn_on, *facts], exchange)),
            ("relate", (pairs,)),
            ("same_entity", (names,)),
        ]:
            llm, expected = asyncio.run(both(name, *args))
            # What a list leaves out is the judgment's "no" (0, False, "unrelated").
            no = {"levels": 0, "distill": False, "relate": "unrelated", "same_entity": False}
            assert [no[name] if a is None else a for a in llm] == expected, name
            assert len(set(expected)) >= 2, name  # a yes and a no at least
        # Boundaries: the third of the units the offline judge scores highest, with its scores;
        # the rest below them, in its order.
        topics = ["the sourdough recipe and the oven", "the Lisbon flight on Friday", "the budget"]
        units = [UnitText("user", f"{topic} ({k})") for topic in topics for k in range(4)]
        llm, expected = asyncio.run(both("boundaries", units))
        strength = [max(f, g) for f, g in zip(expected.first, expected.last, strict=True)]
        top = sorted(range(len(units)), key=lambda j: -strength[j])[: len(units) // 3]
        for j in range(len(units)):
            got, want = (llm.first[j], llm.last[j]), (expected.first[j], expected.last[j])
            if j in top:  # as a model writes them: to two places
                assert got == pytest.approx(want, abs=0.005), j
            else:
                scale = C.LLM_JUDGE_UNLISTED_BOUNDARY
                assert got == pytest.approx((scale * want[0], scale * want[1])), j
        judge.close()


def test_the_selective_model_notes_as_the_offline_note_writer_through_the_llm_prompt():
    """A selective model's note is the offline note writer's, read back from the LLM note
    writer's request (its context and ask left out, a tool output marked as one)."""
    import asyncio

    from fadeway.http import Endpoint
    from fadeway.notes.writers.base import LeavingMessage, NoteContext
    from fadeway.notes.writers.llm import LLMNoteWriter
    from fadeway.notes.writers.offline import OfflineNoteWriter
    from openai_server import OpenAIServer

    messages = [
        LeavingMessage(1, "user", "Caroline: I went to the LGBTQ support group in Boston."),
        LeavingMessage(1, "assistant", "Melanie: The support group sounds great for you."),
        LeavingMessage(2, "user", "Who owns the checkout migration now?"),
        LeavingMessage(
            2, "tool", "Dana Whitfield owns the checkout migration since March.", "lookup"
        ),
        LeavingMessage(2, "assistant", "Dana Whitfield owns it; the launch moved to 16 April."),
    ]
    context = NoteContext(instructions="Be brief.", names=("Dana Whitfield",), facts=("x",))
    ask = "Write the facts of the turns above."
    expected = asyncio.run(OfflineNoteWriter().write(ask, messages))
    with OpenAIServer() as server:
        server.script(bench.Counter("selective"))
        writer = LLMNoteWriter(Endpoint(server.url, backoff_initial=0.01), model=bench.MODEL)
        note = asyncio.run(writer.write(ask, messages, context=context))
        writer.close()
    assert note == expected
    assert len(note.notes) >= 3 and any("Dana Whitfield" in n.note for n in note.notes)
