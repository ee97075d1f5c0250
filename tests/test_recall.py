"""Recall end to end: the walk reaches a bridge fact, the inline fallback keeps its deadline,
distill removes a block whose facts were said, requests keep their prefix, and recall never
reads across memories (MECHANISM: "Recall"). Every test that opens a store runs on both
stores (`both_stores`: its `db` is a SQLite file, then a fresh PostgreSQL database)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import UTC, datetime
from types import SimpleNamespace

import msgspec
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import fadeway
from fadeway import _constants as C
from fadeway import blocks
from fadeway._aio import run_ready
from fadeway.embed import HashingEmbedder
from fadeway.engine import Engine
from fadeway.index.indexes import Indexes
from fadeway.judge import OfflineJudge, ScriptedJudge
from fadeway.memory import Memory
from fadeway.recall.block import block_tokens, excerpts_of, window
from fadeway.recall.dates import named_spans
from fadeway.recall.grouping import group_facts
from fadeway.recall.pipeline import _lifted, recall
from fadeway.recall.snapshot import Snapshot
from fadeway.records import PassageRecord
from helpers import NOTE_ASKING, chat_reply, converse_with_notes, note_call
from reference import window_reference

pytestmark = pytest.mark.both_stores

OWNER = ("Dana owns the checkout migration.", "Dana", "checkout migration", False)
LEAVE = ("Dana is on parental leave until May.", "Dana", "parental leave", False)
OTHER = [
    ("The office plants get watered on Fridays.", "office plants", "Fridays", False),
    ("Legal reviews every refund term.", "legal", "refund term", False),
]
QUESTION = "Can the checkout migration owner join the review next week?"
# Eight facts about one person, to fill a block.
STEPS = [
    (f"Dana moved the checkout migration step {i} to review {i}.", "Dana", f"step {i}", False)
    for i in range(8)
]
# Notes with them, three notes in all.
STEP_NOTES = [[OWNER, *OTHER], STEPS[:4], [LEAVE, *STEPS[4:]]]
# What the first turns say about it (fadeway's note calls are not passages: these are).
TALK = [
    "The checkout migration review is next week.",
    "Who will own the checkout migration after the review?",
    "Can we join the checkout review remotely?",
]


def _open(path, clock, judge=None, **settings):
    return fadeway.open(
        path,
        clock=clock,
        background=False,
        judge=judge or ScriptedJudge(),
        **NOTE_ASKING,
        **settings,
    )


def _with_facts(eng, mem, clock, notes, **settings):
    """Talk with `mem` until `notes` are taken and sealed (`converse_with_notes`), then forget
    the sealed episodes, so that the facts block is empty and recall may show every fact.
    Returns the history as sent."""
    history = converse_with_notes(eng, mem, clock, notes, **settings)
    with eng.store.write(mem.memory_id) as tx:
        sealed = [e.n for e in tx.episodes() if e.state == "sealed"]
        tx.set_episode_states(dict.fromkeys(sealed, "forgotten"))
        tx.set_facts_order("[]")
        tx.set_facts_block(None)
    return history


def _asked(eng, mem, clock):
    """`_with_facts` for the owner's facts, then QUESTION decorated: the history as sent (the
    question last) and the decorated request."""
    history = [
        *_with_facts(eng, mem, clock, [[OWNER, *OTHER]]),
        {"role": "user", "content": QUESTION},
    ]
    return history, mem.decorate({"model": "gpt-4.1", "messages": history})


def _block_before(request, question):
    """The text of the message before the user message `question` (its recall block), wherever
    it stands (a note ask may follow it)."""
    messages = request["messages"]
    at = max(i for i, m in enumerate(messages) if m.get("content") == question)
    return messages[at - 1]["content"]


def _levels(scores):
    """A scripted walk: each fact's level by its text (unknown facts are unrelated)."""
    return lambda facts, dialogue: [scores.get(f.text, 0) for f in facts]


def _recall(engine, memory_id, message, *, judge=None, **kw):
    """Recall in `engine`'s memory, by `judge` when one is given."""
    services = engine.services if judge is None else replace(engine.services, judge=judge)
    return recall(services, memory_id, message, message, **kw)


def test_the_walk_reaches_a_bridge_fact_that_search_alone_misses(db, clock):
    with _open(db, clock) as eng:
        mem = eng.memory("m")
        _with_facts(eng, mem, clock, [[OWNER, *OTHER], [LEAVE]])
        keeps = ScriptedJudge(levels=_levels({OWNER[0]: 1}))  # keeps, never leads on
        plain = _recall(eng, "m", QUESTION, judge=keeps)
        leads = ScriptedJudge(levels=_levels({OWNER[0]: 3, LEAVE[0]: 2}))
        walked = _recall(eng, "m", QUESTION, judge=leads)
    # A judge that never leads on shows what search found: the owner, not the bridge.
    assert plain.walk == walked.walk == "inline"
    assert OWNER[0] in plain.block and LEAVE[0] not in plain.block
    assert OWNER[0] in walked.block and LEAVE[0] in walked.block
    # Both sit around Dana: one group, named for the entity they share.
    assert "## Dana\n" in walked.block


def test_the_offline_judge_walks_inline_without_an_event_loop(db, clock, monkeypatch):
    with _open(db, clock, judge=OfflineJudge()) as eng:
        mem = eng.memory("m")
        converse_with_notes(eng, mem, clock, [[OWNER, *OTHER], [LEAVE]])

        def no_loop(coro):
            coro.close()
            raise AssertionError("the offline walk started an event loop")

        monkeypatch.setattr(fadeway.recall.walk, "run_sync", no_loop)
        result = _recall(eng, "m", QUESTION)
    assert result.walk == "inline" and OWNER[0] in result.block


def test_the_graphs_searches_run_on_the_calling_thread_when_no_search_thread_is_free(
    db, clock, monkeypatch
):
    # While the passages found are read and windowed here, the graph's searches run on a
    # search thread; one busy with another recall's searches, or none at all, costs nothing but
    # time: they run here instead, and the block is the same.
    import threading

    from fadeway.recall import searches

    with _open(db, clock, judge=OfflineJudge()) as eng:
        mem = eng.memory("m")
        converse_with_notes(eng, mem, clock, [[OWNER, *OTHER], [LEAVE]])
        free = _recall(eng, "m", QUESTION)
        release, started = threading.Event(), threading.Event()

        def busy() -> None:
            started.set()
            release.wait(10)

        hold = searches._SEARCHES.submit(busy)  # the one search thread, taken
        assert started.wait(10)
        try:
            taken = _recall(eng, "m", QUESTION)
            assert not hold.done()  # it never waited for the search thread
        finally:
            release.set()
            hold.result()
        monkeypatch.setattr(C, "RECALL_SEARCH_THREADS", 1)
        alone = _recall(eng, "m", QUESTION)
    assert free.block is not None and OWNER[0] in free.block
    assert free.block == taken.block == alone.block
    assert free.facts == taken.facts == alone.facts and free.passages == alone.passages


def test_run_ready_runs_what_never_waits_and_refuses_what_does():
    async def answer():
        return 42

    async def outer():
        return await answer() + 1

    async def waits():
        await asyncio.sleep(0)

    assert run_ready(outer()) == 43
    with pytest.raises(RuntimeError, match="waited"):
        run_ready(waits())


def test_without_a_prepared_walk_a_slow_judge_falls_back_to_the_hits(db, clock, monkeypatch):
    monkeypatch.setattr(C, "RECALL_WALK_DEADLINE", 0.3)
    with _open(db, clock) as eng:
        mem = eng.memory("m")
        history = _with_facts(eng, mem, clock, [[OWNER, *OTHER]])
        mem = Memory(replace(eng.services, judge=ScriptedJudge(delay=5.0)), "m")
        history.append({"role": "user", "content": "Fine, thanks."})
        request = mem.decorate({"model": "gpt-4.1", "messages": history})
        reply = chat_reply("Noted.")
        mem.report(request, reply)  # queues the walk; it is not run (no drain)
        history += [reply["choices"][0]["message"], {"role": "user", "content": QUESTION}]
        start = time.monotonic()
        request = mem.decorate({"model": "gpt-4.1", "messages": history})
        elapsed = time.monotonic() - start
    assert elapsed < 0.3 + 1.5
    block = request["messages"][-2]["content"]
    assert blocks.is_block(block) and block.startswith("[assistant_recent_memories]")
    assert OWNER[0] in block


PLANTS = [
    (
        f"The office plants on floor {i} get watered on Fridays by the plant team.",
        "office plants",
        f"floor {i}",
        False,
    )
    for i in range(5)
]


def _after_a_prepared_walk(eng, mem, clock, history):
    """The plants talked about and a walk prepared that judged every plant fact central; then a
    question on another topic (the checkout migration's owner) decorated. Returns the request
    and the recall stored with the question."""
    clock.advance(60)
    history.append({"role": "user", "content": "When do the office plants get watered?"})
    request = mem.decorate({"model": "gpt-4.1", "messages": history})
    reply = chat_reply("On Fridays, by the plant team, on every floor.")
    mem.report(request, reply)
    eng.drain()  # prepares the walk for the next message: the plants, central
    history += [
        reply["choices"][0]["message"],
        {"role": "user", "content": "Who owns the checkout migration?"},
    ]
    request = mem.decorate({"model": "gpt-4.1", "messages": history})
    [recalled] = [r for r in mem.export().recalls if r.turn == eng.services.mirrors.peek("m").turn]
    return request, recalled


def _plants_judged_central(db, clock):
    eng = _open(db, clock)
    history = _with_facts(eng, eng.memory("m"), clock, [[*PLANTS, OWNER]])
    judge = ScriptedJudge(levels=_levels({p[0]: 3 for p in PLANTS}))
    eng = Engine(replace(eng.services, judge=judge), background=False)
    return eng, history


def test_a_walk_that_judged_a_fact_central_shows_it_ahead_of_unjudged_hits(db, clock, monkeypatch):
    """The walk prepared after the previous reply judged that exchange; the new message's own
    search hits are added to it unjudged. Every fact it kept is shown while the block has room
    (no count of facts caps it), the judged ones ranked first: when the block must shrink, a
    central fact outlasts an unjudged hit."""
    eng, history = _plants_judged_central(db, clock)
    with eng:
        texts = {f.n: f.text for f in eng.memory("m").export().facts}
        request, recalled = _after_a_prepared_walk(eng, eng.memory("m"), clock, history)
        block = _block_before(request, "Who owns the checkout migration?")
        assert block == recalled.text and OWNER[0] in block  # the new topic's hit is there
        assert all(p[0] in block for p in PLANTS)  # five walked facts: more than an old cap of 4
        shown = [texts[n] for n in recalled.facts]
        plants = {p[0] for p in PLANTS}
        assert set(shown[: len(plants)]) == plants and OWNER[0] in shown[len(plants) :]
        # The same recall in the tokens of the central facts alone: they stay, the hits go.
        question = history[-1]["content"]
        whole = _recall(eng, "m", question, prepared_turn=recalled.turn - 1)
        assert whole.walk == "prepared" and OWNER[0] in whole.block
        central = whole.contents.copy()
        central.grouped = [n for n in central.grouped if n in central.firm]
        central.sections, central.excerpts = [], []
        limit = block_tokens(central.render())
        monkeypatch.setattr(C, "RECALL_BLOCK_TOKENS", limit)
        monkeypatch.setattr(C, "RECALL_FACTS_SHARE", 1.0)  # excerpts go first, then facts
        smaller = _recall(eng, "m", question, prepared_turn=recalled.turn - 1)
    assert block_tokens(smaller.block) <= limit
    assert {texts[n] for n in smaller.facts} == plants and OWNER[0] not in smaller.block


def _blocks_of_the_turn(messages):
    """(facts block, the recall block before the last user message) of a request."""
    facts = next(
        (
            m["content"]
            for m in messages
            if m["role"] == "system" and m["content"].startswith("Recorded facts")
        ),
        "",
    )
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    before = messages[last_user - 1] if last_user else {}
    recalled = before.get("content", "") if before.get("role") == "system" else ""
    return facts, recalled if recalled.startswith("[assistant_recent_memories]") else ""


def _answer(eng, mem, history, request, t):
    """The model's reply to turn `t`: the owner's fact in the notes of the first turns, filler
    facts after, and the lane drained."""
    calls = None
    if any(x["function"]["name"] == "note" for x in request.get("tools") or []):
        facts = [OWNER] if t < 15 else [(f"Filler {t}.", f"filler {t}", f"thing {t}", False)]
        calls = [note_call(f"note_{t}", facts)]
    reply = chat_reply(f"answer {t}", tool_calls=calls)
    mem.report(request, reply)
    history.append(reply["choices"][0]["message"])
    eng.drain()


def test_a_fact_sealed_or_forgotten_in_the_same_call_stands_in_one_block(db, clock):
    """Recall runs before decorate seals and fades: a fact its block shows that this call
    seals into the facts block leaves the recall block, and a fact the facts block held that
    this call's fade forgets comes back in the recall block when the message asks for it."""
    with _open(db, clock) as eng:
        mem = eng.memory("m")
        history: list = []
        seen = {"sealed": 0, "forgotten": 0}
        for t in range(60):
            clock.advance(60)
            asks = "Who owns the checkout migration? " if t > 3 else ""
            history.append(
                {
                    "role": "user",
                    "content": asks + f"Turn {t}: " + " ".join(f"w{t}_{i}" for i in range(40)),
                }
            )
            states_before = {e.n: e.state for e in mem.episodes()}
            request = mem.decorate({"model": "gpt-4.1", "messages": history})
            facts, recalled = _blocks_of_the_turn(request["messages"])
            assert not (OWNER[0] in facts and OWNER[0] in recalled), f"turn {t}: shown twice"
            changed = {
                n: s
                for n, s in ((e.n, e.state) for e in mem.episodes())
                if states_before.get(n) != s
            }
            if asks and "sealed" in changed.values() and OWNER[0] in facts:
                seen["sealed"] += 1
            if asks and "forgotten" in changed.values() and OWNER[0] not in facts:
                assert OWNER[0] in recalled, f"turn {t}: forgotten here, and in neither block"
                seen["forgotten"] += 1
            _answer(eng, mem, history, request, t)
            if all(seen.values()):
                return
    pytest.fail(f"the run did not reach both cases: {seen}")


def test_a_fact_let_go_by_the_facts_block_comes_back_in_one_block_of_a_request(db, clock):
    """Two new user messages both ask about a fact this call's fade takes out of the facts
    block: it comes back in one of their blocks, not in both."""
    with _open(db, clock) as eng:
        mem = eng.memory("m")
        history: list = []
        came_back = 0
        for t in range(80):
            clock.advance(60)
            words = f"Turn {t}: " + " ".join(f"w{t}_{i}" for i in range(40))
            if t > 3:
                question = "Who owns the checkout migration?"
                history += [
                    {"role": "user", "content": f"{question} ({t})"},
                    {"role": "user", "content": f"{question} {words}"},
                ]
            else:
                history.append({"role": "user", "content": words})
            request = mem.decorate({"model": "gpt-4.1", "messages": history})
            recalled = [text for _, text in _blocks_before_users(request["messages"])]
            facts, _ = _blocks_of_the_turn(request["messages"])
            if t > 3:
                assert sum(OWNER[0] in b for b in recalled[-2:]) <= 1, f"turn {t}: twice"
                came_back += OWNER[0] not in facts and any(OWNER[0] in b for b in recalled[-2:])
            _answer(eng, mem, history, request, t)
            if came_back:
                return
    pytest.fail("the fact never came back from the facts block")


def test_a_restated_fact_is_dated_by_its_latest_statement(db, clock):
    """A restatement merges into the held fact; the block dates the fact with the restatement's
    turns and their time, and orders its group by them ("newest first; newer facts win")."""
    with _open(db, clock) as eng:
        mem = eng.memory("m")
        _with_facts(eng, mem, clock, [[OWNER, OTHER[0]], [OTHER[1]], [OWNER]], turns=200)
        export = mem.export()
        result = _recall(eng, "m", "Who owns the checkout migration, and who reviews refunds?")
    owner = sorted((f.at, f.note) for f in export.facts if f.text == OWNER[0])
    assert len(owner) == 2 and owner[0] < owner[1]
    assert any(e.merged_into is not None for e in export.edges)  # the second merged
    lines = [line for line in result.block.splitlines() if line.startswith(("## ", "- ["))]
    restated = {e for e, note in export.acks if note == owner[1][1]}
    said = max(e.end_at for e in export.episodes if e.n in restated)  # the restatement's turns
    stamp = datetime.fromtimestamp(said, UTC).strftime("%Y-%m-%d %H:%M UTC")
    owner_line = next(line for line in lines if line.endswith(OWNER[0]))
    assert owner_line.startswith(f"- [{stamp}, ")
    assert lines[0] == "## Dana"  # restated last: the newest group


def _blocks_before_users(messages):
    """(index, text) of every recall block in a request."""
    return [
        (i, m["content"])
        for i, m in enumerate(messages)
        if m["role"] == "system"
        and isinstance(m["content"], str)
        and m["content"].startswith("[assistant_recent_memories]")
    ]


def _unsaid(items, conversation):
    """A scripted distill: keep what the turn did not say word for word."""
    return [item.text.split(": ", 1)[-1] not in conversation for item in items]


def test_distill_removes_a_block_whose_facts_were_all_said(db, clock):
    with _open(db, clock, ScriptedJudge(distill=_unsaid)) as eng:
        mem = eng.memory("m")
        history, request = _asked(eng, mem, clock)
        assert request["messages"][-1]["content"] == QUESTION
        block = request["messages"][-2]["content"]
        assert OWNER[0] in block
        reply = chat_reply("Here is all I know:\n" + block)  # says every fact and excerpt
        mem.report(request, reply)
        eng.drain()
        history += [reply["choices"][0]["message"], {"role": "user", "content": "Thanks!"}]
        nxt = mem.decorate({"model": "gpt-4.1", "messages": history})
        export = mem.export()
    # The first with that text (the reply said every fact: the next message's may match it).
    question_turn = min(r.turn for r in export.recalls if r.text == block)
    [final] = [f for f in export.recall_finals if f.turn == question_turn]
    assert final.text is None
    index = next(i for i, m in enumerate(nxt["messages"]) if m.get("content") == QUESTION)
    assert not nxt["messages"][index - 1]["content"].startswith("[assistant_recent_memories]")


def test_distill_reads_the_turns_tool_outputs_as_said(db, clock):
    """A fact a tool output of the turn already stated is said: distill leaves it out."""
    with _open(db, clock, ScriptedJudge(distill=_unsaid)) as eng:
        mem = eng.memory("m")
        history, request = _asked(eng, mem, clock)
        assert OWNER[0] in request["messages"][-2]["content"]
        reply = chat_reply(
            None,
            tool_calls=[
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "lookup_owner", "arguments": "{}"},
                }
            ],
        )
        mem.report(request, reply)
        history += [
            reply["choices"][0]["message"],
            {"role": "tool", "tool_call_id": "c1", "content": OWNER[0]},
        ]
        request = mem.decorate({"model": "gpt-4.1", "messages": history})
        mem.report(request, chat_reply("Yes, she can."))
        eng.drain()
        export = mem.export()
    turn = max(r.turn for r in export.recalls)
    [distilled] = [d for d in export.distills if d.turn == turn]
    assert OWNER[0] not in (distilled.text or "")


def test_distill_rereads_an_excerpt_as_the_block_showed_it(db, clock):
    """A long passage the block showed as a window is reread as that window, not whole: the
    turn read no more of it (whole passages of an agent's turns were most of what an LLM
    judge's distill read)."""
    calls: list = []

    def judged(items, conversation):
        calls.append(items)
        return [True] * len(items)

    with _open(db, clock, ScriptedJudge(distill=judged)) as eng:
        mem = eng.memory("m")
        history = _with_facts(eng, mem, clock, [[OWNER, *OTHER]])
        question = "What came of w5_12 and w1_25?"
        history.append({"role": "user", "content": question})
        request = mem.decorate({"model": "gpt-4.1", "messages": history})
        block = _block_before(request, question)
        mem.report(request, chat_reply("Nothing came of w5_12 or w1_25 yet."))
        eng.drain()
        export = mem.export()
    [recalled] = [r for r in export.recalls if r.turn == max(r.turn for r in export.recalls)]
    texts = {p.n: p.text for p in export.passages}
    quoted = [i for i in calls[-1] if not i.object]  # the excerpts (a fact has an object)
    assert len(quoted) == len(recalled.passages) >= 2
    for item, n in zip(quoted, sorted(recalled.passages), strict=True):
        shown = item.text.removeprefix(f"{item.subject}: ")
        assert f"\n{shown}\n" in block  # the excerpt's line, as the block showed it
        assert len(shown) < len(texts[n])  # a window of a longer passage


@pytest.mark.parametrize("keep", ["all", "every other"])
def test_distill_rewrites_a_block_to_what_it_kept_and_nothing_more(db, clock, keep):
    """A rewrite shows only the facts and excerpts distill kept, so it never grows the block it
    shrinks (excerpts once took their episode's first facts, kept or not); keeping everything
    keeps the block's text as it was."""

    def judged(items, conversation):
        return [keep == "all" or i % 2 == 0 for i in range(len(items))]

    with _open(db, clock, ScriptedJudge(distill=judged)) as eng:
        mem = eng.memory("m")
        history = _with_facts(eng, mem, clock, [[OWNER, LEAVE, *OTHER]])
        history.append(
            {
                "role": "user",
                "content": QUESTION + " Also who waters the plants? "
                "As in w2_3 w2_4, w5_6 and w5_7.",
            }
        )  # words of passages too
        request = mem.decorate({"model": "gpt-4.1", "messages": history})
        reply = chat_reply("Let me check.")
        mem.report(request, reply)
        eng.drain()
        export = mem.export()
    [recalled] = [r for r in export.recalls if r.turn == max(r.turn for r in export.recalls)]
    [distilled] = [d for d in export.distills if d.turn == recalled.turn]
    facts = {f.n: f.text for f in export.facts}
    assert len(recalled.facts) + len(recalled.passages) >= 3
    if keep == "all":
        assert distilled.text == recalled.text
        return
    kept = [n for i, n in enumerate(recalled.facts) if i % 2 == 0]
    dropped = [n for i, n in enumerate(recalled.facts) if i % 2 == 1]
    assert distilled.tokens < recalled.tokens
    assert distilled.text is not None
    assert all(facts[n] in distilled.text for n in kept)
    assert not any(
        facts[n] in distilled.text for n in dropped if facts[n] not in [facts[k] for k in kept]
    )
    shown = [f for f in facts.values() if f in distilled.text]
    assert set(shown) <= {facts[n] for n in recalled.facts}  # nothing the block did not show


def test_requests_keep_their_prefix_and_the_facts_block_between_fades(db, clock):
    """Every decorated request repeats the previous request's prefix up to that previous
    turn's recall block; the facts block is byte-identical between fades."""
    with _open(db, clock) as eng:
        mem = eng.memory("m")
        history = converse_with_notes(eng, mem, clock, [[OWNER, LEAVE, *OTHER]])
        questions = [
            QUESTION,
            "Who reviews refund terms?",
            "When are the plants watered?",
            "Is Dana back in May?",
            "And the checkout migration owner again?",
            "Anything on refund terms from legal?",
        ]
        previous, previous_states, checked = None, None, 0
        for q in questions * 2:
            clock.advance(60)
            history.append({"role": "user", "content": q})
            request = mem.decorate({"model": "gpt-4.1", "messages": history})
            states = [e.state for e in mem.episodes()]
            if previous is not None and states == previous_states:
                old = previous["messages"]
                new = request["messages"]
                assert new[0] == old[0]  # the facts block (or instructions), byte for byte
                found = _blocks_before_users(old)
                cut = found[-1][0] if found else len(old) - 1
                assert new[:cut] == old[:cut]
                checked += 1
            reply = chat_reply(f"About {q.lower()}: I will check.")
            mem.report(request, reply)
            history.append(reply["choices"][0]["message"])
            eng.drain()
            previous, previous_states = request, [e.state for e in mem.episodes()]
    assert checked >= 6


def test_recall_never_reads_across_memories(db, clock):
    with _open(db, clock) as eng:
        _with_facts(eng, eng.memory("a"), clock, [[OWNER, LEAVE]])
        _with_facts(eng, eng.memory("b"), clock, [OTHER])
        in_b = _recall(eng, "b", QUESTION)
        in_a = _recall(eng, "a", QUESTION)
    assert in_a.block is not None and OWNER[0] in in_a.block
    assert in_b.block is None or "Dana" not in in_b.block


def test_grouping_keeps_every_fact_and_names_groups_for_their_hub(db, clock):
    facts = [
        ("Dana owns the checkout migration.", "Dana", "checkout migration", False),
        ("Dana reviews the tax rate table.", "Dana", "tax rate table", False),
        ("The tax rate table comes from finance.", "tax rate table", "finance", False),
        ("The office plants get watered on Fridays.", "office plants", "Fridays", False),
    ]
    with _open(db, clock) as eng:
        converse_with_notes(eng, eng.memory("m"), clock, [facts])
        with eng.store.read("m") as tx:
            snap = Snapshot(tx)
    snap.block_facts = set()
    ns = sorted(snap.facts)
    groups = group_facts(snap, ns)
    assert sorted(f.text for g in groups for f in g.facts) == sorted(f[0] for f in facts)
    by_name = {g.name: {f.text for f in g.facts} for g in groups}
    hub = next(name for name in by_name if len(by_name[name]) == 3)
    assert hub in ("Dana", "tax rate table")
    assert {f[0] for f in facts[:3]} == by_name[hub]


def test_a_tie_names_the_group_by_its_first_facts_subject_whatever_the_hash_seed():
    """Facts not in the graph yet are grouped by their names as written, which are strings: the
    group's name must not hang on string hashing (which differs between processes), or a replay
    differs from run to run."""
    from types import SimpleNamespace

    subjects = [f"subject {i} {chr(97 + i % 26)}" for i in range(40)]
    facts = {
        n: SimpleNamespace(subject=s, object=f"object {n}", at=float(n))
        for n, s in enumerate(subjects)
    }
    snap = SimpleNamespace(
        graph=SimpleNamespace(edges={}, entities={}),
        facts=facts,
        recalled=lambda n: n,
        stated=lambda n: n,
        when=lambda n: facts[n].at,
    )
    groups = group_facts(snap, sorted(facts))
    assert sorted(g.name for g in groups) == sorted(subjects)


def test_the_walk_leads_on_through_a_bridge_but_not_through_a_hub():
    """A lead fact's far side is the next step, except through an entity most facts touch (a
    speaker of the conversation): what a step took of those would be happenstance."""
    from fadeway.graph.held import Graph
    from fadeway.judge.base import FactText
    from fadeway.recall.walk import walk
    from fadeway.records import EdgeRecord, EntityRecord

    names = ["Dana", "checkout migration", *(f"topic {i}" for i in range(40))]
    # Fact 0 joins Dana and the migration; 1-2 are about the migration only; 3-42 about Dana.
    ends = [(0, 1), (2, 1), (3, 1), *((0, 4 + i) for i in range(40))]
    graph = Graph(
        [EntityRecord(n=n, name=name, at=0.0) for n, name in enumerate(names)],
        [],
        [EdgeRecord(fact=n, subject=s, object=o, at=0.0) for n, (s, o) in enumerate(ends)],
        [],
    )
    asked: list[list[str]] = []

    def levels(facts, dialogue):
        asked.append([f.text for f in facts])
        return [2] * len(facts)

    snap = SimpleNamespace(
        graph=graph,
        facts=dict.fromkeys(range(len(ends))),
        block_facts=set(),
        shown=graph.shown,
        fact_text=lambda n: FactText(f"fact {n}", names[ends[n][0]], names[ends[n][1]]),
    )
    levels_of = run_ready(
        walk(ScriptedJudge(levels=levels), snap, "who owns it?", [0], deadline=None)
    )
    assert asked[0] == ["fact 0"]
    assert asked[1] == ["fact 1", "fact 2"]  # the migration's far side; Dana's 41 facts are not
    assert sorted(levels_of) == [0, 1, 2]
    assert graph.held == len(ends) and len(graph.touching(0)) > C.WALK_FANOUT


def test_a_step_past_the_fanout_takes_the_facts_most_like_the_dialogue_not_the_oldest():
    """Two leads cross to 2 x 12 facts, more than a step takes (WALK_FANOUT): the step takes
    those the ranking puts first (recall's and the walk job's: BM25 over the dialogue), and
    without one the newest, never simply the graph's oldest."""
    from fadeway.graph.held import Graph
    from fadeway.judge.base import FactText
    from fadeway.recall.walk import walk
    from fadeway.records import EdgeRecord, EntityRecord

    # Fact 0 joins A and B, fact 1 C and D; facts 2-13 touch B, 14-25 touch D.
    ends = [(0, 1), (2, 3), *((1, 4 + i) for i in range(12)), *((3, 16 + i) for i in range(12))]
    graph = Graph(
        [EntityRecord(n=n, name=f"entity {n}", at=0.0) for n in range(28)],
        [],
        [EdgeRecord(fact=n, subject=s, object=o, at=0.0) for n, (s, o) in enumerate(ends)],
        [],
    )
    snap = SimpleNamespace(
        graph=graph,
        facts=dict.fromkeys(range(len(ends))),
        block_facts=set(),
        shown=graph.shown,
        fact_text=lambda n: FactText(f"fact {n}", "", ""),
    )

    def second_step(rank):
        asked: list[list[int]] = []

        def levels(facts, dialogue):
            asked.append([int(f.text.split()[1]) for f in facts])
            return [2 if len(asked) == 1 else 0] * len(facts)

        run_ready(
            walk(ScriptedJudge(levels=levels), snap, "dialogue", [0, 1], deadline=None, rank=rank)
        )
        return asked[1]

    def odd_first(ns: list[int]) -> list[int]:  # a ranking that tells the facts apart
        return sorted(ns, key=lambda n: n % 2 == 0)

    assert len(graph.touching(1)) + len(graph.touching(3)) - 2 > C.WALK_FANOUT
    assert second_step(odd_first) == odd_first(list(range(25, 1, -1)))[: C.WALK_FANOUT]
    assert second_step(None) == list(range(25, 25 - C.WALK_FANOUT, -1))  # the newest


def test_a_prepared_walk_never_shows_a_fact_now_in_the_facts_block(db, clock):
    from fadeway.records import WalkRecord

    with _open(db, clock) as eng:
        converse_with_notes(eng, eng.memory("m"), clock, [[OWNER, LEAVE, *OTHER]])
        export = eng.memory("m").export()
        number = {f.text: f.n for f in export.facts}
        with eng.store.write("m") as tx:
            tx.set_facts_order(f"[{number[OWNER[0]]}]")  # the owner sits in the facts block
            tx.insert_walk(
                WalkRecord(
                    turn=999, at=clock(), levels=[(number[OWNER[0]], 3), (number[LEAVE[0]], 3)]
                )
            )
        result = _recall(eng, "m", "Anything new?", prepared_turn=999)
    assert result.walk == "prepared"
    assert number[LEAVE[0]] in result.facts and number[OWNER[0]] not in result.facts
    assert OWNER[0] not in (result.block or "") and LEAVE[0] in result.block


class _OneDirection(HashingEmbedder):
    """Every text the same vector, so every search by meaning finds everything at cosine 1;
    recall takes them as hits only above `floor`, this embedder's `min_similarity`."""

    def __init__(self, floor: float) -> None:
        super().__init__(8)
        self.floor = floor

    @property
    def min_similarity(self) -> float:
        return self.floor

    def embed_sync(self, texts, *, deadline=None):
        rows = np.zeros((len(texts), 8), dtype=np.float32)
        rows[:, 0] = 1.0
        return rows


@pytest.mark.parametrize(("floor", "found"), [(0.5, True), (1.5, False)])
def test_hits_by_meaning_count_from_the_embedders_own_floor(db, clock, floor, found):
    """A message that shares no word with any fact finds them only by meaning, and only where
    the embedder's `min_similarity` lets its cosines count."""
    keeps = ScriptedJudge(levels=lambda facts, dialogue: [C.KEEP_LEVEL] * len(facts))
    with _open(db, clock, embedder=_OneDirection(floor)) as eng:
        _with_facts(eng, eng.memory("m"), clock, [[OWNER, *OTHER]])
        result = _recall(eng, "m", "Zebras hum quietly.", judge=keeps)
    assert (OWNER[0] in (result.block or "")) is found


def test_a_failing_embedder_costs_the_turn_its_block_not_the_turn(db, clock, caplog):
    """An embeddings endpoint that is down: decorate stores and returns the turn, no block."""
    import socket

    from fadeway.embed import EndpointEmbedder
    from fadeway.http import Endpoint

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = EndpointEmbedder(
        Endpoint(f"http://127.0.0.1:{port}/v1", max_attempts=1), model="m", dim=8
    )
    with _open(db, clock) as eng:
        history = converse_with_notes(eng, eng.memory("m"), clock, [[OWNER, *OTHER]])
        services = replace(eng.services, embedder=dead, indexes=Indexes(dead, None))
        eng = Engine(services, background=False)
        history.append({"role": "user", "content": QUESTION})
        with caplog.at_level("ERROR", logger="fadeway"):
            request = eng.memory("m").decorate({"model": "gpt-4.1", "messages": history})
        assert request["messages"][-1]["content"] == QUESTION
        assert not request["messages"][-2]["content"].startswith("[assistant_recent_memories]")
        assert eng.memory("m").messages()[-1].body.endswith(QUESTION.encode() + b'"}')
    assert "recall failed" in caplog.text


def test_a_block_over_its_share_of_the_ceiling_leaves_out_the_least_first(db, clock, monkeypatch):
    many = [
        (
            f"Dana moved the checkout migration step {i} to review {i}.",
            "Dana",
            f"checkout step {i}",
            False,
        )
        for i in range(8)
    ]
    with _open(db, clock) as eng:
        mem = eng.memory("m")
        _with_facts(eng, mem, clock, [[OWNER, *OTHER], many[:4], [LEAVE, *many[4:]]], opening=TALK)
        text = {f.n: f.text for f in mem.export().facts}
        monkeypatch.setattr(C, "RECALL_BLOCK_SHARE", 1.0)
        monkeypatch.setattr(C, "RECALL_FACTS_SHARE", 1.0)  # facts within their room throughout
        whole = _recall(eng, "m", QUESTION)
        size = block_tokens(whole.block)
        assert whole.passages and len(whole.facts) > 2  # excerpts and facts to leave out
        for share in (0.6 * size / eng.ceiling, 0.3 * size / eng.ceiling):
            monkeypatch.setattr(C, "RECALL_BLOCK_SHARE", share)
            part = _recall(eng, "m", QUESTION)
            assert part.block is not None and block_tokens(part.block) <= share * eng.ceiling
            # Excerpts go first, from the last: what stays is the start of what was quoted.
            assert part.passages == whole.passages[: len(part.passages)] != whole.passages
            assert set(part.facts) <= set(whole.facts)
            for n in part.facts:  # what it says it shows, it shows
                assert text[n] in part.block
        monkeypatch.setattr(C, "RECALL_BLOCK_SHARE", 1 / eng.ceiling)
        assert _recall(eng, "m", QUESTION).block is None  # nothing fits in one token


@pytest.mark.parametrize(("room", "level"), [(0.0, 1), (1.0, 1), (0.0, 3)])
def test_facts_past_their_room_give_way_to_excerpts_and_within_it_outlast_them(
    db, clock, monkeypatch, room, level
):
    """Every fact the walk kept is shown while the block fits. A block that must shrink gives up
    its lowest ranked facts before any excerpt while the facts take more than their room
    (`RECALL_FACTS_SHARE` of its size); within it, the excerpts go first. Only facts the walk
    judged related (level 1) give way to the room: one it judged relevant or central goes only
    after every excerpt, however many such facts there are."""
    judge = ScriptedJudge(levels=lambda facts, dialogue: [level] * len(facts))
    with _open(db, clock) as eng:
        _with_facts(eng, eng.memory("m"), clock, STEP_NOTES, opening=TALK)
        whole = _recall(eng, "m", QUESTION, judge=judge)
        assert whole.passages and len(whole.facts) > 4  # more than the old cap of four facts
        assert bool(whole.contents.firm) == (level > C.KEEP_LEVEL)
        monkeypatch.setattr(C, "RECALL_BLOCK_TOKENS", whole.size - 1)
        monkeypatch.setattr(C, "RECALL_FACTS_SHARE", room)
        part = _recall(eng, "m", QUESTION, judge=judge)
    assert part.block is not None and part.size < whole.size
    if room == 0.0 and level == 1:  # the lowest ranked facts went, every excerpt stayed
        grouped, before = part.contents.grouped, whole.contents.grouped
        assert part.passages == whole.passages and grouped == before[: len(grouped)] != before
    else:  # the last excerpt went, every fact stayed
        assert part.passages == whole.passages[:-1] and part.facts == whole.facts


def _several_new_messages(eng, clock, asked):
    """A conversation with notes taken, then one request holding several new user messages."""
    mem = eng.memory("m")
    history = _with_facts(eng, mem, clock, [[OWNER, *OTHER], [LEAVE]])
    history += [{"role": "user", "content": q} for q in asked]
    return mem, history


ASKED = [
    "Who waters the office plants, and on which day?",
    "Is the checkout migration on track?",
    QUESTION,
]


def test_each_new_user_message_gets_its_own_block_and_a_fact_is_shown_once(db, clock):
    """Several user messages before a reply (a group chat, say): each is a turn, recalled as
    if it had come alone, with its block just before it; no fact stands in two blocks."""
    with _open(db, clock) as eng:
        mem, history = _several_new_messages(eng, clock, ASKED)
        request = mem.decorate({"model": "gpt-4.1", "messages": history})
        again = mem.decorate({"model": "gpt-4.1", "messages": history})  # a resend
        export = mem.export()
    messages = request["messages"]
    tail = messages[next(i for i, m in enumerate(messages) if m["content"] == ASKED[0]) - 1 :]
    shown = _blocks_before_users(tail)
    # Each block stands just before one of the new messages; the first one's holds its answer.
    assert all(tail[i + 1]["content"] in ASKED for i, _ in shown)
    assert tail[1]["content"] == ASKED[0] and OTHER[0][0] in tail[0]["content"]
    assert [m["content"] for m in tail if m["role"] == "user"] == ASKED
    # Stored with the new messages' own turns, once: the resend recalled nothing more.
    asked_seqs = [
        m.seq for m in export.messages if msgspec.json.decode(m.message).get("content") in ASKED
    ]
    new = [r for r in export.recalls if r.seq in asked_seqs]
    assert [r.text for r in new] == [text for _, text in shown]
    assert all(r.turn == export.messages[r.seq].turn for r in new)
    assert (
        len({r.turn for r in new})
        == len(new)
        == len({r.seq for r in export.recalls} & set(asked_seqs))
    )
    assert again["messages"] == request["messages"]
    # No fact twice.
    facts = [n for r in new for n in r.facts]
    assert len(facts) == len(set(facts))


def test_every_block_a_reply_answered_is_distilled(db, clock):
    """Several user messages, then one reply: each message's block is distilled against what
    followed it, and fixed to its rewrite when the next message comes."""
    with _open(db, clock, ScriptedJudge(distill=_unsaid)) as eng:
        mem, history = _several_new_messages(eng, clock, ASKED)
        request = mem.decorate({"model": "gpt-4.1", "messages": history})
        reply = chat_reply(
            "Here is all I know:\n"
            + "\n".join(t for _, t in _blocks_before_users(request["messages"]))
        )  # says every fact and excerpt
        mem.report(request, reply)
        eng.drain()
        history += [reply["choices"][0]["message"], {"role": "user", "content": "Thanks!"}]
        mem.decorate({"model": "gpt-4.1", "messages": history})
        export = mem.export()
    asked = {
        m.seq for m in export.messages if msgspec.json.decode(m.message).get("content") in ASKED
    }
    turns = {r.turn for r in export.recalls if r.seq in asked}
    assert len(turns) >= 2  # the first and the last at least (a fact stands in one block)
    assert {d.turn for d in export.distills} >= turns
    finals = {f.turn: f for f in export.recall_finals}
    assert all(finals[t].text is None for t in turns)  # the reply said all of every block


def test_a_block_no_reply_answered_is_removed_when_the_next_message_comes(db, clock):
    """A user message whose turn ended without a reply (the next user message came first, in
    a later request): nothing drew on its block, so it is removed, as distill would."""
    with _open(db, clock) as eng:
        mem = eng.memory("m")
        history = _with_facts(eng, mem, clock, [[OWNER, *OTHER], [LEAVE]])
        history.append({"role": "user", "content": QUESTION})
        first = mem.decorate({"model": "gpt-4.1", "messages": history})
        assert _blocks_before_users(first["messages"])[-1][0] == len(first["messages"]) - 2
        clock.advance(30)
        history.append({"role": "user", "content": ASKED[0]})
        nxt = mem.decorate({"model": "gpt-4.1", "messages": history})
        export = mem.export()
    index = next(i for i, m in enumerate(nxt["messages"]) if m.get("content") == QUESTION)
    assert not nxt["messages"][index - 1]["content"].startswith("[assistant_recent_memories]")
    question_seq = max(
        m.seq for m in export.messages if msgspec.json.decode(m.message).get("content") == QUESTION
    )
    [recalled] = [r for r in export.recalls if r.seq == question_seq]
    [final] = [f for f in export.recall_finals if f.turn == recalled.turn]
    assert final.text is None and final.tokens == 0
    assert not [d for d in export.distills if d.turn == recalled.turn]


def test_a_user_message_answered_within_the_request_still_gets_its_recall(db, clock):
    """A caller that sends several turns at once (user, reply, user): every user message not
    stored yet is recalled for, not only those that end the request, and each block stands
    just before its own message."""
    reply = {"role": "assistant", "content": "I will ask around."}
    with _open(db, clock, judge=OfflineJudge()) as eng:  # keeps what is asked
        mem = eng.memory("m")
        history = _with_facts(eng, mem, clock, [[OWNER, *OTHER], [LEAVE]])
        history += [
            {"role": "user", "content": ASKED[0]},
            reply,
            {"role": "user", "content": QUESTION},
        ]
        request = mem.decorate({"model": "gpt-4.1", "messages": history})
        recalls = mem.export().recalls
    messages = request["messages"]
    first = next(i for i, m in enumerate(messages) if m["content"] == ASKED[0])
    shown = dict(_blocks_before_users(messages[first - 1 :]))
    assert set(shown) == {0, 3}  # before the first message, and before the question
    assert OTHER[0][0] in shown[0] and OWNER[0] in shown[3]
    assert messages[first + 1] == reply
    # Stored with their own turns: the answered message's turn is the one before the question's.
    turns = sorted(r.turn for r in recalls[-2:])
    assert turns[1] == turns[0] + 1


def test_the_earlier_messages_get_no_block_once_their_time_is_spent(db, clock, caplog, monkeypatch):
    monkeypatch.setattr(C, "RECALL_EARLIER_DEADLINE", 0.0)
    with _open(db, clock) as eng:
        mem, history = _several_new_messages(eng, clock, ASKED)
        with caplog.at_level("WARNING", logger="fadeway"):
            request = mem.decorate({"model": "gpt-4.1", "messages": history})
    tail = request["messages"][-4:]
    assert [m["content"] for m in tail[:2]] == ASKED[:2]
    assert tail[2]["content"].startswith("[assistant_recent_memories]")
    assert caplog.text.count("no time left for recall") == 1
    assert "2 earlier user message(s)" in caplog.text


def test_a_judge_that_raises_its_own_clients_errors_costs_decorate_nothing(db, clock, caplog):
    """A judge of the caller's wraps some HTTP client, whose errors are not fadeway's: while it
    is down, decorate's inline cut falls back to sizes and its walk to the search hits, and
    the conversation goes on (the lane's jobs fail and are retried, as for any judge)."""
    from conftest import open_small
    from helpers import chat_reply, note_call

    class Down(ScriptedJudge):
        down = False

        async def boundaries(self, *args, **kwargs):
            if self.down:
                raise ConnectionError("judge unreachable")
            return await super().boundaries(*args, **kwargs)

        async def levels(self, *args, **kwargs):
            if self.down:
                raise ConnectionError("judge unreachable")
            return await super().levels(*args, **kwargs)

    judge = Down()
    eng = open_small(db, clock, judge=judge, lane_retry_seconds=0.0)
    mem = eng.memory("m")
    history: list = []
    with caplog.at_level("INFO", logger="fadeway"):
        for t in range(60):
            judge.down = t >= 30
            clock.advance(60)
            history.append(
                {
                    "role": "user",
                    "content": f"Turn {t}: Dana and Lee "
                    + " ".join(f"w{t}_{i}" for i in range(40)),
                }
            )
            req = mem.decorate({"model": "gpt-4.1", "messages": history})
            asked = any(x.get("function", {}).get("name") == "note" for x in req.get("tools", []))
            reply = chat_reply(
                f"answer {t}",
                tool_calls=[note_call(f"n{t}", [(f"Dana said {t}.", "Dana", f"w{t}_1", False)])]
                if asked
                else None,
            )
            mem.report(req, reply)
            history.append(reply["choices"][0]["message"])
            eng.drain()
    assert "ConnectionError" in caplog.text and "by size alone" in caplog.text
    assert "the judge failed; the search hits are used" in caplog.text
    assert max(e.last_turn for e in mem.episodes()) > 35  # cut on while the judge was down
    eng.close()


def test_a_lane_behind_skips_the_walk_and_distill_no_one_will_read(db, clock):
    """When the next message came (and was recalled for) before the lane ran, the previous
    turn's walk and distill would never be read: they are skipped, not prepared late."""
    distilled: list[int] = []

    def counting(items, conversation):
        distilled.append(len(items))
        return [True] * len(items)

    with _open(db, clock, ScriptedJudge(distill=counting)) as eng:
        mem = eng.memory("m")
        history, request = _asked(eng, mem, clock)
        distilled.clear()  # the talk before distilled its own turns' blocks
        reply = chat_reply("Let me check.")
        mem.report(request, reply)  # queues the turn's walk and distill; the lane waits
        with eng.store.read("m") as tx:
            queued = sorted(j.kind for j in tx.jobs() if j.state == "pending")
        assert {"walk", "distill"} <= set(queued)
        history += [reply["choices"][0]["message"], {"role": "user", "content": QUESTION}]
        mem.decorate({"model": "gpt-4.1", "messages": history})
        eng.drain()
        export = mem.export()
    asked, again = sorted(r.turn for r in export.recalls)[-2:]
    assert again == asked + 1
    assert [w.turn for w in export.walks if w.turn >= asked] == []
    assert [d.turn for d in export.distills if d.turn >= asked] == [] and distilled == []
    assert {f.turn for f in export.recall_finals} >= {asked}  # fixed as it was shown


def test_a_fact_is_dated_with_its_turns_time_not_its_notes(db, clock):
    """A note may come days after the turns it covers; a temporal question asks about the
    turns, so the block dates each fact with their time."""
    with _open(db, clock) as eng:
        mem, history = eng.memory("m"), []
        for t in range(80):
            clock.advance(60)
            history.append({"role": "user", "content": f"Turn {t}: " + " ".join(["w"] * 40)})
            request = mem.decorate({"model": "gpt-4.1", "messages": history})
            if any(x["function"]["name"] == "note" for x in request.get("tools") or []):
                break
            reply = chat_reply(f"answer {t}")
            mem.report(request, reply)
            history.append(reply["choices"][0]["message"])
            eng.drain()
        clock.advance(2 * 24 * 3600)  # the note comes two days after the leaving turns
        mem.report(request, chat_reply("Noted.", tool_calls=[note_call("late", [OWNER])]))
        eng.drain()
        with eng.store.read("m") as tx:
            snap = Snapshot(tx)
            [fact] = snap.facts.values()
            dated = snap.recalled(fact.n)
            turns = [snap.episodes[e] for e in snap.fact_episodes[fact.n]]
    assert dated.when == max(e.end_at for e in turns)
    assert fact.at - dated.when >= 2 * 24 * 3600
    line = blocks.recall_block([blocks.RecallGroup("Dana", [dated])], [], [])
    stamp = datetime.fromtimestamp(dated.when, UTC).strftime("%Y-%m-%d %H:%M UTC")
    assert f"[{stamp}, turn" in line


def test_a_long_excerpt_shows_the_window_that_matches_the_message():
    filler = [f"w{i}" for i in range(60)]
    words = ["Gina:", *filler[:30], "the", "refund", "line", "awaits", "legal", *filler[30:]]
    text = " ".join(words)
    shown = window(text, "Did legal come back on the refund line?")
    kept = shown.split()
    assert kept[0] == "Gina:" and kept[1] == "…" and kept[-1] == "…"  # who said it, and cuts
    assert "refund line awaits legal" in shown
    assert len(kept) - 3 == C.EXCERPT_WINDOW_WORDS
    assert " ".join(kept[2:-1]) in text  # one run of the text, as it was
    short = "Gina: the refund line awaits legal"
    assert window(short, "refund") == short
    # Nothing matches: the start, cut at its end only.
    assert window(text, "pricing page").split() == [*words[: C.EXCERPT_WINDOW_WORDS], "…"]


_WINDOW_WORDS = st.sampled_from(
    ["Gina:", "refund", "refunds", "the", "Legal", "line's", "w1", "…", "-", "x:", ":", "café"]
)


# What separates words: Python's str.split() splits at each (U+001C-U+001F too, which are not
# Unicode White_Space) and Rust's best_window must count the same words.
_WINDOW_GAPS = st.sampled_from([" ", "  ", "\n\t", "\x1c", "\x1f", "\u00a0", "\u2003", "\u3000"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_WINDOW_WORDS, _WINDOW_GAPS), max_size=60),
    st.lists(_WINDOW_WORDS, max_size=8),
)
@example(
    [("x:", "\x1c")] * 10 + [("the", "\u3000")] * 17 + [("refund", " ")] + [("w1", "\x1f")] * 2,
    ["refund"],
)
def test_a_window_is_its_slow_twins(words, query):
    """`window` (the best run of words found in Rust by a running sum) shows what the plain
    reading shows (`reference.window_reference`), whatever space separates the words."""
    text, asked = "".join(w + gap for w, gap in words), " ".join(query)
    want = window_reference(text, asked, C.EXCERPT_MAX_WORDS, C.EXCERPT_WINDOW_WORDS)
    assert window(text, asked) == want


_PASSAGE_WORDS = st.sampled_from(["Gina", "refund", "line", "legal", "the", "w1", "café", "…"])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_PASSAGE_WORDS, min_size=1, max_size=40),
    st.integers(min_value=1, max_value=60),
    st.integers(min_value=0, max_value=1000),
)
def test_excerpts_stop_only_where_a_block_of_the_room_could_show_no_more(words, count, room):
    """Recall makes excerpts only while a block of its size could still show them: what it
    leaves out is the end of the list, and a block showing those it made takes more than the
    room already."""
    passages = [
        PassageRecord(
            n=i,
            episode=1,
            seq=i,
            part=0,
            turn=i,
            at=1.7e9 + i,
            role="user",
            text="user: " + " ".join(words[i % len(words) :] + words[: i % len(words)]),
        )
        for i in range(count)
    ]
    snap = SimpleNamespace(merged_into=dict)  # no facts ranked: none under an excerpt
    whole, _ = excerpts_of(snap, passages, {}, query="the refund line")
    made, _ = excerpts_of(snap, passages, {}, query="the refund line", room=room)
    assert made == whole[: len(made)]
    if len(made) < len(whole):
        assert block_tokens(blocks.recall_block([], [], made)) > room


def test_a_fact_an_excerpt_says_is_not_repeated_until_the_excerpt_gives_way(db, clock):
    """A fact that quotes its own turn says nothing its excerpt does not: while the excerpt is
    shown the fact is left out of the groups, and it comes back when the excerpt gives way."""
    central = ScriptedJudge(levels=_levels({OWNER[0]: 3}))
    with _open(db, clock) as eng:
        mem = eng.memory("m")
        _with_facts(
            eng, mem, clock, [[OWNER, *OTHER]], opening=["Dana owns the checkout migration."]
        )
        text = {f.n: f.text for f in mem.export().facts}
        owner = next(n for n, t in text.items() if t == OWNER[0])
        whole = _recall(eng, "m", "Who owns the checkout migration?", judge=central)
        assert whole.passages and "Dana owns the checkout migration. w0_0" in whole.block
        assert owner not in whole.facts and f"] {OWNER[0]}" not in whole.block
        # Room for the facts but not the excerpt: the fact is back.
        facts_only = whole.contents.copy()
        facts_only.excerpts, facts_only.quoted = [], []
        small = whole.within(block_tokens(facts_only.render()))
        assert not small.passages and owner in small.facts and f"] {OWNER[0]}" in small.block


def test_passages_said_by_someone_the_message_names_rank_higher(monkeypatch):
    """Who said it is what BM25 over the words weighs least: a passage said by the person the
    message names ranks as if its place were divided by 1 + the lift, so it moves up past
    weaker matches but not past every better one; the order stands when no one is named."""
    monkeypatch.setattr(C, "RECALL_SPEAKER_LIFT", 3.0)
    said = {
        n: SimpleNamespace(role="user", text=f"user: Jon: The studio, part {n}.", at=0.0)
        for n in range(9)
    }
    said[2] = SimpleNamespace(role="assistant", text="assistant: Gina: I opened my store.", at=0.0)
    said[3] = SimpleNamespace(role="Gina", text="Gina: The store opening went well.", at=0.0)
    order = [1, 4, 2, 5, 6, 7, 8, 3]  # Gina's at places 3 and 8: as if at 0.75 and 2
    assert _lifted(order, said, "When did Gina open her store?", []) == [2, 1, 4, 3, 5, 6, 7, 8]
    assert _lifted(order, said, "When does the studio open?", []) == order


def test_passages_said_on_a_day_the_message_names_rank_higher(monkeypatch):
    """A passage said on a day the message names is lifted in place as a speaker's is (one
    said a few days after is not: the day's own search reaches those); named and said on the
    day, it is lifted by both."""
    monkeypatch.setattr(C, "RECALL_SPEAKER_LIFT", 3.0)
    monkeypatch.setattr(C, "RECALL_DATE_LIFT", 3.0)
    monkeypatch.setattr(C, "RECALL_DATE_AFTER_DAYS", 3)
    may_8 = datetime(2023, 5, 8, 15, tzinfo=UTC).timestamp()
    said = {
        n: SimpleNamespace(role="user", text=f"user: part {n}.", at=may_8 - 30 * 86_400)
        for n in range(9)
    }
    said[5] = SimpleNamespace(role="user", text="user: part 5.", at=may_8)
    said[7] = SimpleNamespace(role="user", text="user: part 7.", at=may_8 + 2 * 86_400)
    said[8] = SimpleNamespace(role="Gina", text="Gina: part 8.", at=may_8 + 5 * 86_400)
    order = [1, 2, 3, 4, 5, 6, 7, 8]
    spans = named_spans("What did Gina do on 8 May 2023?")
    # 5 as if at place 1.25; 7, two days on, where it was; Gina's 8, too late for the day, at 2.
    assert _lifted(order, said, "What did Gina do?", spans) == [1, 5, 2, 8, 3, 4, 6, 7]
    assert _lifted(order, said, "What did they do?", []) == order


def _fit_one_at_a_time(contents, limit):
    """The block fitted as the module's order says, one render per item given up."""
    block = contents.render()
    while (
        block is not None
        and block_tokens(block) > limit
        and contents.grouped
        and contents.grouped[-1] not in contents.firm
        and block_tokens(contents.render(facts_only=True)) > contents.facts_room
    ):
        contents.grouped.pop()
        block = contents.render()
    while block is not None and block_tokens(block) > limit:
        if contents.excerpts:
            n = len(contents.excerpts.pop().facts)
            del contents.excerpt_facts[len(contents.excerpt_facts) - n :]
            contents.quoted.pop()
        elif contents.sections:
            del contents.section_facts[
                len(contents.section_facts) - len(contents.sections.pop().facts) :
            ]
        else:
            contents.grouped.pop()
        block = contents.render()
    return block


@pytest.mark.parametrize("room", [0.0, 0.25, 1.0])
def test_fitting_a_block_reckons_what_to_leave_out_as_one_render_per_item_would(
    db, clock, monkeypatch, room
):
    """Fitting reckons from each item's own size what to leave out; what it shows at every
    limit is what giving up one item at a time, rendering each time, would show."""
    with _open(db, clock) as eng:
        _with_facts(eng, eng.memory("m"), clock, STEP_NOTES, opening=[*TALK, OWNER[0]])
        monkeypatch.setattr(C, "RECALL_BLOCK_SHARE", 1.0)
        whole = _recall(eng, "m", QUESTION)
    assert whole.passages and len(whole.facts) > 4 and whole.contents.said  # one said by both
    for limit in range(whole.size, 0, -max(1, whole.size // 40)):
        contents = whole.contents.copy()
        contents.facts_room = room * limit
        reference = contents.copy()
        assert contents.fit(limit) == _fit_one_at_a_time(reference, limit), limit
        assert contents.shown() == reference.shown()


def test_the_call_that_seals_a_models_note_recalls_what_it_seals(db, clock):
    """A note the decorated model wrote acknowledges its turns; the next decorate seals them
    out of view. They are cut into passages when the note is taken, so that decorate's own
    recall finds them: before, they were neither in view nor searchable in that request."""
    from conftest import open_small

    opening = ["my locker code at the gym is Quillby7 and I keep forgetting it"]
    with open_small(db, clock) as eng:
        mem = eng.memory("m")
        history = converse_with_notes(eng, mem, clock, [[OTHER[0]]], settle=False, opening=opening)
        leaving = [e for e in mem.episodes() if e.state == "leaving"]
        assert leaving and leaving[0].first_turn == 1  # the opening turn awaits its sealing
        hits = mem.search("locker code Quillby7", kind="passage", k=3)
        assert any("Quillby7" in h.text for h in hits)
        clock.advance(60)
        question = {"role": "user", "content": "What was my locker code at the gym again?"}
        request = mem.decorate({"model": "gpt-4.1", "messages": [*history, question]})
        assert [e.state for e in mem.episodes() if e.n == leaving[0].n] == ["sealed"]
    view = [m for m in request["messages"] if m.get("role") in ("user", "assistant")]
    assert not any("Quillby7" in str(m.get("content")) for m in view[:-1])  # out of view
    block = request["messages"][-2]["content"]
    assert block.startswith(blocks.RECALL_OPEN) and "Quillby7" in block


_DAYS = ["planted basil", "pruned roses", "mulched beds", "sowed carrots", "staked beans"]


class _DayClock:
    """A clock a day ahead at every `advance` (a conversation of one exchange a day)."""

    def __init__(self) -> None:
        self.now = 1_767_225_600.0  # 2026-01-01T00:00:00Z

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += 86_400


@pytest.mark.both_stores
def test_a_day_the_message_names_brings_back_what_was_said_that_day(db, monkeypatch):
    """Each day's turn shares the message's words alike ("garden"); only its day tells them
    apart. Named in the message, a day brings its own turn to the top of the excerpts: two
    messages alike but for the day they name bring two turns."""
    clock = _DayClock()
    said = [f"In the garden today I {_DAYS[d % len(_DAYS)]}." for d in range(40)]
    with _open(db, clock) as eng:
        mem = eng.memory("m")
        _with_facts(eng, mem, clock, [[LEAVE], [OWNER], [*OTHER]], opening=said)
        sealed = {p.turn: p for p in mem.export().passages if p.text.startswith("user: Turn")}
        assert len(sealed) >= 4  # days out of view
        monkeypatch.setattr(C, "RECALL_BLOCK_SHARE", 0.06)  # a few excerpts
        for turn in sorted(sealed)[1], sorted(sealed)[-1]:
            day = datetime.fromtimestamp(sealed[turn].at, UTC)
            asked = f"What did I do in the garden on {day:%B} {day.day}, {day.year}?"
            dated = _recall(eng, "m", asked)
            assert dated.passages[0] == sealed[turn].n, asked
            # Said a day later, "on Monday, January 5" still finds the turn of the 5th.
            later = _recall(eng, "m", f"What did I do in the garden on {day:%A, %B} {day.day}?")
            assert later.passages[0] == sealed[turn].n


def test_a_day_named_from_the_message_s_time_brings_back_that_day(db, monkeypatch):
    """Decorate reads the days a message names from the time it is said: "N days ago" finds
    the turn said then, among turns alike but for their day."""
    clock = _DayClock()
    said = [f"In the garden today I {_DAYS[d % len(_DAYS)]}." for d in range(40)]
    with _open(db, clock) as eng:
        mem = eng.memory("m")
        history = _with_facts(eng, mem, clock, [[LEAVE], [OWNER], [*OTHER]], opening=said)
        sealed = {p.turn: p for p in mem.export().passages if p.text.startswith("user: Turn")}
        monkeypatch.setattr(C, "RECALL_BLOCK_SHARE", 0.06)  # a few excerpts
        for turn in sorted(sealed)[1], sorted(sealed)[-1]:
            ago = round((clock.now - sealed[turn].at) / 86_400)
            asked = {"role": "user", "content": f"What did I do in the garden {ago} days ago?"}
            request = mem.decorate({"model": "gpt-4.1", "messages": [*history, asked]})
            at = [m.get("content") for m in request["messages"]].index(asked["content"])
            block = request["messages"][at - 1]["content"]
            assert block.startswith("[assistant_recent_memories]")
            first = block.split("Conversation excerpts:\n", 1)[1].splitlines()[0]
            assert first.startswith(f"- [Turn {turn} "), (asked, first)
            reply = chat_reply("You did some gardening.")
            mem.report(request, reply)
            history += [asked, reply["choices"][0]["message"]]


def test_a_decorate_reads_the_recall_blocks_in_view_once(db, clock, monkeypatch):
    """Fixing earlier turns' final texts and showing the blocks in view share one read of the
    recall blocks with their finals (a round trip to PostgreSQL); the finals are as before: a
    turn's final is stored once, and what the view shows is it."""
    from fadeway.store.postgres import _PostgresTransaction
    from fadeway.store.sqlite import _SQLiteTransaction

    transaction = _PostgresTransaction if db.startswith("postgresql") else _SQLiteTransaction

    with _open(db, clock) as eng:
        mem = eng.memory("m")
        history = _with_facts(eng, mem, clock, [[OWNER, *OTHER]])
        for text in ("Who owns w5_12?", "And w1_25?"):
            history.append({"role": "user", "content": text})
            request = mem.decorate({"model": "gpt-4.1", "messages": history})
            reply = chat_reply(f"About {text}")
            mem.report(request, reply)
            history.append(reply["choices"][0]["message"])
            eng.drain()
        reads: list[str] = []
        for name in ("recalls", "recall_blocks", "block_texts"):
            real = getattr(transaction, name)
            monkeypatch.setattr(
                transaction,
                name,
                lambda tx, *a, _r=real, _n=name, **k: reads.append(_n) or _r(tx, *a, **k),
            )
        history.append({"role": "user", "content": "What about w5_12 now?"})
        mem.decorate({"model": "gpt-4.1", "messages": history})
        decorated = list(reads)
        export = mem.export()
    assert decorated.count("recall_blocks") == 1 and "recalls" not in decorated
    assert decorated.count("block_texts") <= 1  # the distills, only when a final is missing
    finals = [b.turn for b in export.recall_finals]
    assert finals and len(finals) == len(set(finals))  # each earlier turn's final fixed once
