"""Usage accounting: model calls recorded by a judge reach the store with the memory they were
spent on, from the lane and from decorate, and the export keeps them without latencies."""

from __future__ import annotations

import fadeway
from fadeway import tokens, usage
from fadeway.embed import EndpointEmbedder
from fadeway.http import Endpoint
from fadeway.judge import ScriptedJudge
from helpers import NOTE_ASKING, chat_reply, converse_with_notes
from openai_server import OpenAIServer

FACTS = [("Dana owns the checkout migration.", "Dana", "checkout migration", False)]


class MeteredJudge(ScriptedJudge):
    """Records one call per judgment, as a model-backed judge does."""

    async def about(self, facts, episodes, *, deadline=None):
        n = len(facts)
        usage.record("judge:about", "judge-model", 100 * n, 5 * n, 0.25, tokens_cached=60 * n)
        return await super().about(facts, episodes, deadline=deadline)

    async def levels(self, facts, dialogue, *, deadline=None):
        usage.record("judge:levels", "judge-model", 40, 4, 0.5)
        return await super().levels(facts, dialogue, deadline=deadline)

    async def boundaries(self, units, **kwargs):
        usage.record("judge:boundaries", "judge-model", 10 * len(units), len(units), 0.1)
        return await super().boundaries(units, **kwargs)


def test_usage_is_recorded_per_memory_and_exported_without_latency(tmp_path, clock):
    with fadeway.open(
        tmp_path / "u.db",
        clock=clock,
        background=False,
        judge=MeteredJudge(),
        **NOTE_ASKING,
    ) as eng:
        a, b = eng.memory("a"), eng.memory("b")
        history = converse_with_notes(eng, a, clock, [FACTS])
        with eng.store.write("a") as tx:  # out of the facts block: a walk may reach the fact
            sealed = [e.n for e in tx.episodes() if e.state == "sealed"]
            tx.set_episode_states(dict.fromkeys(sealed, "forgotten"))
            tx.set_facts_order("[]")
            tx.set_facts_block(None)
        history.append({"role": "user", "content": "Who owns the checkout migration?"})
        request = a.decorate({"model": "gpt-4.1", "messages": history})
        a.report(request, chat_reply("Dana owns the checkout migration."))
        eng.drain()  # the walk prepared from that exchange judges the fact
        summary = {(s.kind, s.model): s for s in a.usage()}
        about = summary[("judge:about", "judge-model")]
        assert about.calls >= 1 and about.tokens_in == 100 * about.calls
        assert about.tokens_cached == 60 * about.calls  # stored with the call, summed
        assert about.seconds == 0.25 * about.calls
        assert ("judge:levels", "judge-model") in summary  # the lane's prepared walks
        assert b.usage() == []  # nothing was spent on b
        export = a.export()
        assert len(export.usage) == sum(s.calls for s in a.usage())
        assert all(not hasattr(u, "seconds") for u in export.usage)
        assert {u.tokens_cached for u in export.usage if u.kind == "judge:about"} == {60}
        doc = fadeway.dumps(export)
    with fadeway.open(tmp_path / "copy.db", background=False) as other:
        assert fadeway.dumps(other.import_memory(doc).export()) == doc


def test_a_cut_asked_for_by_hand_records_its_judgment(tmp_path, clock):
    """`mem.cut()` judges boundaries outside decorate and the lane: what it spent is the
    memory's usage too."""
    with fadeway.open(
        tmp_path / "c.db",
        clock=clock,
        background=False,
        judge=MeteredJudge(),
        episode_min_tokens=20,
        episode_max_tokens=60,
        cut_after_tokens=1_000_000,  # no cut but the one asked for
    ) as eng:
        mem = eng.memory("m")
        history: list = []
        for t in range(6):
            clock.advance(60)
            history.append({"role": "user", "content": f"Turn {t}: " + "word " * 30})
            request = mem.decorate({"model": "gpt-4.1", "messages": history})
            reply = chat_reply(f"answer {t}")
            mem.report(request, reply)
            history.append(reply["choices"][0]["message"])
        assert ("judge:boundaries", "judge-model") not in {(s.kind, s.model) for s in mem.usage()}
        assert mem.cut() > 1
        spent = {(s.kind, s.model): s for s in mem.usage()}[("judge:boundaries", "judge-model")]
        assert spent.calls >= 1 and spent.tokens_in == 10 * spent.tokens_out


def test_every_embedding_request_is_counted_with_the_memory_it_served(tmp_path, clock):
    """Recall in decorate, the lane's index and graph jobs, and a search each embed through an
    endpoint; every request the endpoint got is in some memory's usage, with the tokens it
    read (counted by fadeway: the server reports none)."""
    with OpenAIServer(dim=16) as server:
        embedder = EndpointEmbedder(Endpoint(server.url), model="embed-model")
        with fadeway.open(
            tmp_path / "u.db",
            clock=clock,
            background=False,
            embedder=embedder,
            judge=ScriptedJudge(),
            **NOTE_ASKING,
        ) as eng:
            a, b = eng.memory("a"), eng.memory("b")
            history = converse_with_notes(eng, a, clock, [FACTS])
            history.append({"role": "user", "content": "Who owns the checkout migration?"})
            a.report(a.decorate({"model": "gpt-4.1", "messages": history}), chat_reply("Dana."))
            eng.drain()
            before = len(server.requests)
            assert a.search("checkout migration")
            assert len(server.requests) == before + 1
            b.decorate({"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]})
            spent = [s for m in (a, b) for s in m.usage() if s.kind == "embed"]
    assert {s.model for s in spent} == {"embed-model"}
    assert sum(s.calls for s in spent) == len(server.requests) > 1
    read = [tokens.count_texts("o200k_base", r.body["input"]) for r in server.requests]
    assert sum(s.tokens_in for s in spent) == sum(map(sum, read))
    assert all(s.tokens_out == 0 for s in spent)


def test_calls_recorded_before_cached_tokens_were_kept_read_as_none_cached(tmp_path, clock):
    from test_migrations import _as_of

    call = usage.UsageRecord(
        kind="note", model="x", tokens_in=50, tokens_out=5, seconds=1.0, tokens_cached=20
    )
    today = tmp_path / "today.db"
    with fadeway.open(today, clock=clock, background=False) as eng:
        eng.memory("m").decorate(
            {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}
        )
        with eng.store.write("m") as tx:
            tx.insert_usage([call], 1.0)
    _as_of(12, today, tmp_path / "v12.db")  # the schema before cached tokens: the column goes
    with fadeway.open(tmp_path / "v12.db", clock=clock, background=False) as eng:
        mem = eng.memory("m")
        assert [(u.tokens_in, u.tokens_cached) for u in mem.usage()] == [(50, 0)]
        with eng.store.write("m") as tx:  # and the calls recorded from now on keep them
            tx.insert_usage([call], 2.0)
        assert [(u.tokens_in, u.tokens_cached) for u in mem.usage()] == [(100, 20)]
