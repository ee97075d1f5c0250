"""Forgetting end to end: the ceiling, the landing, the note ask, sealing, and sleep."""

from __future__ import annotations

import logging
from unittest import mock

import msgspec
import pytest

import fadeway
from conftest import SMALL_CEILING as CEILING
from conftest import open_small
from fadeway import tokens
from fadeway.forgetting.fade import fade_episodes as forgetting_fade_episodes
from fadeway.judge import ScriptedJudge
from fadeway.notes import tool as notes
from helpers import chat_reply

ORDER = ["live", "leaving", "sealed", "forgotten"]


def _note_call(request, call_id):
    """A scripted model's note: one fact per leaving turn range named in the ask."""
    ask = request["messages"][-1]["content"]
    first_line = ask.splitlines()[0]
    entry = {
        "note": f"Summary of what happened: {first_line}",
        "subject": "user",
        "object": "project",
        "milestone": False,
    }
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "note", "arguments": msgspec.json.encode({"notes": [entry]}).decode()},
    }


def _asks(request):
    tools = request.get("tools") or []
    return any(t.get("function", {}).get("name") == "note" for t in tools)


def _user(t, words=40):
    return {"role": "user", "content": f"Turn {t}: " + " ".join(f"w{t}_{i}" for i in range(words))}


def _states(mem):
    return {e.n: e.state for e in mem.episodes()}


def _fades(caplog):
    """(landing, projected view, whole) of every fade logged so far."""
    return [
        (r.args[1], r.args[2], bool(r.args[3]))
        for r in caplog.records
        if r.msg.startswith("memory %r: fade to the landing")
    ]


def test_a_scripted_model_that_answers_every_ask(small, clock, caplog):
    caplog.set_level("INFO", logger="fadeway")
    mem = small.memory("m")
    history: list = []
    seen: dict[int, str] = {}
    asked_turns = 0
    for t in range(60):
        clock.advance(60)
        history.append(_user(t))
        before = _states(mem)
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        after = _states(mem)
        # States only move forward, one step at a time.
        for n, state in after.items():
            old = before.get(n, seen.get(n, "live"))
            assert ORDER.index(state) - ORDER.index(old) in (0, 1, 2), (n, old, state)
            assert ORDER.index(state) >= ORDER.index(old)
            seen[n] = state
        # One fade at a time: nothing starts leaving while something was leaving and unsealed.
        was_leaving = {n for n, s in before.items() if s == "leaving"}
        newly_leaving = {n for n, s in after.items() if s == "leaving" and before.get(n) == "live"}
        if was_leaving - {n for n, s in after.items() if s != "leaving"}:
            assert not newly_leaving
        estimate = mem.measure(req)
        if not any(s == "leaving" for s in after.values()):
            assert estimate <= CEILING, f"turn {t}: view {estimate} over the ceiling"
        if _asks(req):
            asked_turns += 1
            reply = chat_reply(f"answer {t}", tool_calls=[_note_call(req, f"note_{t}")])
        else:
            reply = chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)))
        result = mem.report(req, reply)
        assert all(c["function"]["name"] != "note" for c in result.tool_calls)
        history.append(reply["choices"][0]["message"])
        small.drain()
    assert asked_turns > 0
    fades = _fades(caplog)
    assert fades, "nothing ever faded"
    for landing, projected, short in fades:  # each fade reaches the landing
        assert projected <= landing or short
    doc = mem.export()
    assert len(doc.messages) == len(history)  # nothing is ever deleted
    assert "forgotten" in _states(mem).values() or "sealed" in _states(mem).values()
    assert doc.facts and doc.notes
    fact_traces = [t for t in doc.traces if t.kind == "fact"]
    assert fact_traces, "facts were never judged against episodes"


def test_a_model_that_ignores_the_ask_is_asked_again(small, clock, caplog):
    mem = small.memory("m")
    history: list = []
    asked, overs, warnings = [], 0, 0
    for t in range(40):
        clock.advance(60)
        history.append(_user(t))
        with caplog.at_level(logging.WARNING, logger="fadeway"):
            req = mem.decorate({"model": "gpt-4.1", "messages": history})
        over = mem.measure(req) > CEILING
        warned = [r for r in caplog.records if "wait for the model's note (asked)" in r.message]
        # The first request over the ceiling while the note waits says so, with its figures;
        # the next ones, for the same reason, do not repeat it.
        assert len(warned) == (over and not overs), f"turn {t}: {len(warned)} warnings"
        assert all(f"stands at {mem.measure(req)} tokens" in r.message for r in warned)
        overs += over
        warnings += len(warned)
        caplog.clear()
        asked.append(_asks(req))
        reply = chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)))
        mem.report(req, reply)
        history.append(reply["choices"][0]["message"])
        small.drain()
    first = asked.index(True)
    assert all(asked[first:]), "once asked, every later request asks until the note comes"
    assert overs >= 10  # the history grew past the ceiling while the note waited
    assert warnings == 1
    leaving = [n for n, s in _states(mem).items() if s == "leaving"]
    assert leaving
    # Now the model answers: the episodes are acknowledged, and seal at the next call.
    clock.advance(60)
    history.append(_user(99))
    req = mem.decorate({"model": "gpt-4.1", "messages": history})
    reply = chat_reply("", tool_calls=[_note_call(req, "note_late")])
    reply["choices"][0]["message"]["content"] = None
    result = mem.report(req, reply)
    assert result.note_taken and result.call_again and result.tool_calls == []
    history.append(reply["choices"][0]["message"])
    nxt = mem.decorate({"model": "gpt-4.1", "messages": history})
    states = _states(mem)
    # They sealed; the history had grown far past its budget while they waited, so the next
    # fade may already have forgotten them (their facts stay in the store and the export).
    assert all(states[n] in ("sealed", "forgotten") for n in leaving)
    doc = mem.export()
    assert {e for e, _ in doc.acks} >= set(leaving)
    assert [f.text for f in doc.facts][-1].startswith("Summary of what happened")
    # The note call is answered by fadeway, right after it.
    i = next(
        k
        for k, m in enumerate(nxt["messages"])
        if m.get("tool_calls") and m["tool_calls"][0]["id"] == "note_late"
    )
    assert nxt["messages"][i + 1] == notes.note_output(
        fadeway.wire.Format.CHAT_COMPLETIONS, "note_late", True
    )


def test_sealed_facts_stand_in_the_facts_block(small, clock):
    mem = small.memory("m")
    history: list = []
    for t in range(30):
        clock.advance(60)
        history.append(_user(t))
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        tool_calls = [_note_call(req, f"note_{t}")] if _asks(req) else None
        reply = chat_reply(f"answer {t}", tool_calls=tool_calls)
        mem.report(req, reply)
        history.append(reply["choices"][0]["message"])
        small.drain()
        states = _states(mem)
        if "sealed" in states.values():
            block = req["messages"][0]["content"] if req["messages"][0]["role"] == "system" else ""
            nxt = mem.decorate({"model": "gpt-4.1", "messages": history})
            assert nxt["messages"][0]["role"] == "system"
            assert nxt["messages"][0]["content"].startswith(
                "Recorded facts from compacted history, most relevant first"
            )
            assert "Summary of what happened" in nxt["messages"][0]["content"]
            # A quiet call repeats the block byte for byte (cache stability).
            again = mem.decorate({"model": "gpt-4.1", "messages": history})
            assert again["messages"][0] == nxt["messages"][0]
            assert block is not None
            return
    pytest.fail("nothing ever sealed")


def test_a_fade_counts_a_notes_facts_once_however_many_episodes_it_sealed(small, clock):
    """One note acknowledges every leaving episode, so its facts belong to each of them; the
    facts block shows each fact once, and a fade must count it once (it counted it once per
    episode, and a budget shrunk tenfold forgot history no ceiling asked to forget)."""
    mem = small.memory("m")
    entries = [
        {
            "note": f"Service svc{k} runs on host h{k} with {k} replicas.",
            "subject": f"svc{k}",
            "object": f"h{k}",
            "milestone": False,
        }
        for k in range(8)
    ]
    counted: list[tuple[int, str]] = []  # (facts block size the fade used, the block it saw)
    fade, block_text = forgetting_fade_episodes, ""

    def spy(episodes, activation_of, block_sizes, sealed_facts, fact_sizes, *rest):
        counted.append((rest[2], block_text))  # (ratio, history, block, landing_of, ...)
        return fade(episodes, activation_of, block_sizes, sealed_facts, fact_sizes, *rest)

    history: list = []
    noted = 0
    with mock.patch("fadeway.forgetting.fade.fade_episodes", spy):
        for t in range(70):
            clock.advance(60)
            history.append(_user(t))
            req = mem.decorate({"model": "gpt-4.1", "messages": history})
            first = req["messages"][0]
            block_text = first["content"] if first["content"].startswith("Recorded facts") else ""
            calls = None
            if _asks(req):
                calls = [
                    {
                        "id": f"note_{t}",
                        "type": "function",
                        "function": {
                            "name": "note",
                            "arguments": msgspec.json.encode({"notes": entries}).decode(),
                        },
                    }
                ]
                noted += 1
            reply = chat_reply(
                f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)), tool_calls=calls
            )
            mem.report(req, reply)
            history.append(reply["choices"][0]["message"])
            small.drain()
    held = [(size, text) for size, text in counted if text]
    assert noted >= 2 and held, "no fade ran while a facts block stood"
    acks = mem.export().acks
    by_note = max(sum(note == n for _, note in acks) for _, n in acks)
    assert by_note >= 3  # the case at stake: one note acknowledged several episodes
    for size, text in held:
        lines = text.count("\n- ")
        # What the block's lines weigh: each fact once (the header and names are extra).
        assert size <= tokens.count_texts("o200k_base", [text])[0]
        assert size >= 8 * lines


@pytest.mark.parametrize("reports", [True, False], ids=["reported", "report skipped"])
@pytest.mark.parametrize(("hours", "fades"), [(25, True), (23, False)])
def test_sleep_fades_to_the_landing_after_a_day_of_silence(tmp_path, clock, hours, fades, reports):
    eng = fadeway.open(
        tmp_path / "s.db",
        clock=clock,
        background=False,
        ceiling=16_000,
        judge=ScriptedJudge(),
        episode_min_tokens=100,
        episode_max_tokens=400,
        cut_after_tokens=10**9,
    )
    mem = eng.memory("m")
    history: list = []
    for t in range(40):
        clock.advance(60)
        history.append(_user(t))
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        reply = chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)))
        if reports:  # else the reply reaches fadeway only with the next request
            mem.report(req, reply)
        history.append(reply["choices"][0]["message"])
    assert mem.episodes() == []  # under the ceiling, nothing was cut or faded
    clock.advance(hours * 3600)
    history.append(_user(40))
    req = mem.decorate({"model": "gpt-4.1", "messages": history})
    states = _states(mem)
    assert ("leaving" in states.values()) is fades
    assert _asks(req) is fades
    eng.close()


@pytest.mark.parametrize(("tools_until", "back_at", "fades"), [(20, 30, True), (2, 23, False)])
def test_sleep_counts_from_the_user_message_before_not_the_tool_rounds_since(
    tmp_path, clock, tools_until, back_at, fades
):
    """The silence is the user's: an agent that ran tools alone until hour 20 does not keep a
    user who comes back at hour 30 from sleeping (spec: "since the last one")."""
    from helpers import call

    eng = fadeway.open(
        tmp_path / "s.db",
        clock=clock,
        background=False,
        ceiling=16_000,
        judge=ScriptedJudge(),
        episode_min_tokens=100,
        episode_max_tokens=400,
        cut_after_tokens=10**9,
    )
    mem = eng.memory("m")
    for t in range(40):
        clock.advance(60)
        req = mem.decorate({"model": "gpt-4.1", "messages": [_user(t)]})
        mem.report(req, chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30))))
    start = clock()
    req = mem.decorate({"model": "gpt-4.1", "messages": [_user(40)]})
    mem.report(req, chat_reply(None, tool_calls=[call("c0")]))
    for k in range(1, tools_until + 1):  # a tool round an hour
        clock.advance(3600)
        req = mem.decorate(
            {
                "model": "gpt-4.1",
                "messages": [
                    {"role": "tool", "tool_call_id": f"c{k - 1}", "content": f"step {k} done"}
                ],
            }
        )
        mem.report(req, chat_reply(None, tool_calls=[call(f"c{k}")]))
    clock.advance(3600)
    req = mem.decorate(
        {
            "model": "gpt-4.1",
            "messages": [
                {"role": "tool", "tool_call_id": f"c{tools_until}", "content": "all done"}
            ],
        }
    )
    mem.report(req, chat_reply("Finished the job."))
    assert "leaving" not in _states(mem).values()
    clock.advance(start + back_at * 3600 - clock())
    req = mem.decorate({"model": "gpt-4.1", "messages": [_user(41)]})
    assert ("leaving" in _states(mem).values()) is fades
    assert _asks(req) is fades
    eng.close()


def _unanswered(fmt, items):
    """Call ids made in a request's history that no output answers."""
    made, answered = [], set()
    for m in items:
        if fmt == "chat":
            made += [c["id"] for c in m.get("tool_calls") or []]
            if m.get("role") == "tool":
                answered.add(m["tool_call_id"])
        else:
            if m.get("type") == "function_call":
                made.append(m["call_id"])
            if m.get("type") == "function_call_output":
                answered.add(m["call_id"])
    return [c for c in made if c not in answered]


def _responses_reply(t, note_arguments=None):
    output = [
        {
            "type": "message",
            "id": f"msg_{t}",
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "annotations": [],
                    "logprobs": [],
                    "text": f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)),
                }
            ],
        }
    ]
    if note_arguments is not None:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{t}",
                "call_id": f"note_{t}",
                "name": "note",
                "arguments": note_arguments,
                "status": "completed",
            }
        )
    return {
        "id": f"resp_{t}",
        "object": "response",
        "status": "completed",
        "output": output,
        "usage": {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110},
    }


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_both_formats_validate_and_never_leave_a_call_unanswered(small, clock, fmt):
    from helpers import Schemas, openapi_path

    path = openapi_path()
    if path is None:
        pytest.skip("the OpenAI OpenAPI document is absent from shared/data")
    schemas = Schemas(msgspec.json.decode(path.read_bytes()))
    name = "CreateChatCompletionRequest" if fmt == "chat" else "CreateResponse"
    key = "messages" if fmt == "chat" else "input"
    mem = small.memory(fmt)
    history: list = []
    asked = took = 0
    for t in range(40):
        clock.advance(60)
        history.append(_user(t))
        base = {"model": "gpt-4.1", key: history}
        if fmt == "responses":
            base["instructions"] = "Be brief."
        req = mem.decorate(base)
        schemas.check(name, req)
        assert _unanswered(fmt, req[key]) == []
        if _asks(req) or any(tl.get("name") == "note" for tl in req.get("tools") or []):
            asked += 1
            arguments = msgspec.json.encode(
                {
                    "notes": [
                        {
                            "note": f"Turns before {t} covered the w-words.",
                            "subject": "user",
                            "object": "w-words",
                            "milestone": False,
                        }
                    ]
                }
            ).decode()
            if fmt == "chat":
                reply = chat_reply(
                    f"answer {t}",
                    tool_calls=[
                        {
                            "id": f"note_{t}",
                            "type": "function",
                            "function": {"name": "note", "arguments": arguments},
                        }
                    ],
                )
                items = [reply["choices"][0]["message"]]
            else:
                reply = _responses_reply(t, arguments)
                items = reply["output"]
        else:
            if fmt == "chat":
                reply = chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)))
                items = [reply["choices"][0]["message"]]
            else:
                reply = _responses_reply(t)
                items = reply["output"]
        result = mem.report(req, reply)
        took += result.note_taken
        assert result.tool_calls == []
        history.extend(items)  # the caller keeps the reply as sent, note call and all
        small.drain()
    assert asked and took
    assert {"sealed", "forgotten"} & set(_states(mem).values())


def test_locomo_replay_with_a_low_ceiling_and_the_offline_note_writer(tmp_path):
    from fadeway.notes.writers import OfflineNoteWriter
    from fadeway.replay.locomo import locomo_lines, read_locomo
    from fadeway.replay.runner import replay
    from helpers import shared_data

    path = shared_data("locomo/locomo10.json")
    if path is None:
        pytest.skip("LoCoMo is not in shared/data (it is never bundled)")
    sample = read_locomo(path)[0]
    lines = [line for _, line in locomo_lines(sample)]
    with fadeway.open(tmp_path / "l.db", background=False, ceiling=6_000) as engine:
        mem = engine.memory(sample["sample_id"])
        replay(mem, lines, note_writer=OfflineNoteWriter())
        engine.drain()
        doc = mem.export()
    assert len(doc.messages) == len(lines)  # nothing deleted
    states = {e.state for e in doc.episodes}
    assert {"sealed", "forgotten"} & states
    assert doc.notes and all(n.source == "note-writer:offline" for n in doc.notes)
    assert doc.facts and all(f.subject and f.object for f in doc.facts)
    # Every fact is a sentence of the conversation (extractive), speaker prefixes aside.
    corpus = " ".join(
        " ".join(msgspec.json.decode(m.message)["content"].split()) for m in doc.messages
    )
    assert all(f.text.split(": ", 1)[-1][:40] in corpus for f in doc.facts)
    counted = [t for t in doc.traces if t.kind == "fact" and t.counted]
    assert counted, "no fact was judged to be about an episode"


def _until_asked(mem, small, clock, history, limit=40):
    for t in range(limit):
        clock.advance(60)
        history.append(_user(t))
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        if _asks(req):
            return req, t
        reply = chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)))
        mem.report(req, reply)
        history.append(reply["choices"][0]["message"])
        small.drain()
    pytest.fail("never asked")


def test_a_malformed_note_is_no_note_and_the_ask_stands(small, clock, caplog):
    mem = small.memory("m")
    history: list = []
    req, t = _until_asked(mem, small, clock, history)
    bad = {
        "id": "note_bad",
        "type": "function",
        "function": {"name": "note", "arguments": '{"notes": [{"note": 5}]'},
    }
    reply = chat_reply("here you go", tool_calls=[bad])
    result = mem.report(req, reply)
    assert not result.note_taken and result.tool_calls == [] and not result.call_again
    assert "could not be read" in caplog.text
    history.append(reply["choices"][0]["message"])
    history.append(_user(t + 1))
    nxt = mem.decorate({"model": "gpt-4.1", "messages": history})
    assert _asks(nxt)  # asked again
    i = next(k for k, m in enumerate(nxt["messages"]) if m.get("tool_calls"))
    assert nxt["messages"][i + 1] == notes.note_output(
        fadeway.wire.Format.CHAT_COMPLETIONS, "note_bad", False
    )
    assert mem.export().notes == []


def test_a_note_in_the_history_is_taken_once_when_report_was_skipped(small, clock):
    mem = small.memory("m")
    history: list = []
    req, t = _until_asked(mem, small, clock, history)
    leaving = [n for n, s in _states(mem).items() if s == "leaving"]
    history.append(
        chat_reply("ok", tool_calls=[_note_call(req, "note_x")])["choices"][0]["message"]
    )  # the caller never called report
    history.append(_user(t + 1))
    mem.decorate({"model": "gpt-4.1", "messages": history})
    mem.decorate({"model": "gpt-4.1", "messages": history})
    doc = mem.export()
    assert [n.call_id for n in doc.notes] == ["note_x"]
    assert {e for e, _ in doc.acks} == set(leaving)


def test_a_caller_that_sends_back_the_decorated_view_stores_nothing_twice(small, clock):
    """The caller keeps `request["messages"]` (our view, blocks and all) and appends to it."""
    mem = small.memory("m")
    messages = [{"role": "system", "content": "Be brief."}]
    sent = 0
    for t in range(40):
        clock.advance(60)
        messages.append(_user(t))
        sent += 1
        req = mem.decorate({"model": "gpt-4.1", "messages": messages})
        tool_calls = [_note_call(req, f"note_{t}")] if _asks(req) else None
        reply = chat_reply(
            f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)), tool_calls=tool_calls
        )
        mem.report(req, reply)
        sent += 1
        messages = req["messages"] + [reply["choices"][0]["message"]]
        small.drain()
    assert len(mem.messages()) == sent
    assert {"sealed", "forgotten"} & set(_states(mem).values())


def test_a_request_stays_under_the_ceiling_by_giving_up_its_own_recall_block(small, clock, caplog):
    """The request whose new message takes the history over its budget still holds the turns a
    fade sends leaving, and the spec's room leaves out the new message and its block; that
    block gives way (the least of it first) so the request stays under the ceiling, and what
    is stored with the turn is what the request showed."""
    mem, history = small.memory("m"), []
    shrunk = []
    with caplog.at_level(logging.INFO, logger="fadeway"):
        for t in range(80):
            clock.advance(60)
            # Each message comes back to words of earlier turns, so recall finds their facts.
            history.append(
                {
                    "role": "user",
                    "content": f"Turn {t}: what about "
                    + " ".join(f"w{k}_{i}" for k in range(max(0, t - 12), t, 3) for i in range(6)),
                }
            )
            req = mem.decorate({"model": "gpt-4.1", "messages": history})
            turn_block = [
                m["content"]
                for m in req["messages"][:-1]
                if m["role"] == "system" and m["content"].startswith("[assistant_recent_memories]")
            ]
            stored = {r.turn: r.text for r in mem.export().recalls}
            if any("recall blocks shrunk" in r.getMessage() for r in caplog.records):
                shrunk.append(t)
                caplog.clear()
            current = small.services.mirrors.peek(mem.memory_id).turn
            # The estimate the ceiling is checked with is the request's own measure: fadeway's
            # outputs for its note calls and the ask counted as messages.
            assert mem.export().requests[-1].estimate == mem.measure(req)
            over = mem.measure(req) - CEILING
            if over > 0:  # only by the new message itself, its block given up whole
                assert current not in stored, f"turn {t} kept a block over the ceiling"
                assert over <= tokens.count_texts("o200k_base", [history[-1]["content"]])[0] + 4
            # The block shown before the new message is the one stored with its turn.
            if current in stored:
                assert stored[current] in turn_block
            calls = [_note_call(req, f"note_{t}")] if _asks(req) else None
            reply = chat_reply(
                f"answer {t} " + " ".join(f"w{t}_{i}" for i in range(40)), tool_calls=calls
            )
            mem.report(req, reply)
            history.append(reply["choices"][0]["message"])
            small.drain()
    assert shrunk, "no request needed its block shrunk: the test does not reach the case"


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_two_note_calls_in_one_reply_answer_the_same_ask_in_the_order_made(small, clock, fmt):
    """Note calls of one reply are taken in the order they were made (never a set's order,
    which changes with the process's string hashing), and both are the leaving episodes'; in
    Responses each call is an item of its own, and the reply is their run."""
    mem, history = small.memory("m"), []
    for t in range(80):
        clock.advance(60)
        history.append(_user(t))
        key = "messages" if fmt == "chat" else "input"
        req = mem.decorate({"model": "gpt-4.1", key: history})
        asks = any((x.get("function") or x).get("name") == "note" for x in req.get("tools") or [])
        # Ids whose order as strings is the reverse of the order they were made in.
        ids = [f"zz_{t}", f"aa_{t}"] if asks else []
        if fmt == "chat":
            calls = [{**_note_call({"messages": req[key]}, i), "id": i} for i in ids] or None
            reply = chat_reply(f"answer {t}", tool_calls=calls)
            kept = [reply["choices"][0]["message"]]
        else:
            arguments = msgspec.json.encode(
                {
                    "notes": [
                        {
                            "note": f"Turn {t} was noted.",
                            "subject": "user",
                            "object": f"turn {t}",
                            "milestone": False,
                        }
                    ]
                }
            ).decode()
            reply = _responses_reply(t)
            reply["output"] += [
                {
                    "type": "function_call",
                    "id": f"fc_{i}",
                    "call_id": i,
                    "name": "note",
                    "arguments": arguments,
                    "status": "completed",
                }
                for i in ids
            ]
            kept = reply["output"]
        mem.report(req, reply)
        history += kept
        if ids:
            break
    doc = mem.export()
    assert [n.call_id for n in doc.notes] == [f"zz_{t}", f"aa_{t}"]
    # Both answer the same ask: the second's facts are the same episodes' (none is orphaned,
    # dated "turn 0" and kept out of the facts block).
    by_note = {n.n: {e for e, note in doc.acks if note == n.n} for n in doc.notes}
    assert by_note[doc.notes[0].n] == by_note[doc.notes[1].n] != set()


def test_a_turns_size_counts_the_recall_block_it_carries_in_view(small, clock):
    """A typical turn, and the turn in progress that the landing never goes below, weigh what
    the view holds of them: their messages and the recall block before their user message."""
    from fadeway.forgetting.budget import turn_sizes

    mem, history = small.memory("m"), []
    for t in range(4):
        clock.advance(60)
        history.append(_user(t, words=10 * (t + 1)))
        request = mem.decorate({"model": "gpt-4.1", "messages": history})
        reply = chat_reply(f"answer {t}")
        mem.report(request, reply)
        history.append(reply["choices"][0]["message"])
    mirror = small.services.mirrors.peek(mem.memory_id)
    # The last turn is still the one in progress: only the turns before it are complete.
    users = [seq for seq in range(mirror.turn_start) if mirror.sides[seq] == "user"]
    assert len(users) == 3
    plain_sizes, plain_steps = turn_sizes(mirror, 1.0)
    blocks = {seq: 100 * (i + 1) for i, seq in enumerate(users)}
    sizes, steps = turn_sizes(mirror, 2.0, blocks)
    assert steps == [2 * s for s in plain_steps]  # a block is no part of the assistant's step
    assert sizes == [2 * (s + blocks[seq]) for s, seq in zip(plain_sizes, users, strict=True)]
    assert plain_sizes == [
        sum(mirror.tokens[i] for i in range(len(mirror)) if mirror.turns[i] == mirror.turns[seq])
        for seq in users
    ]


def test_the_budget_holds_room_for_the_note_ask_a_fade_will_add(small, clock):
    """The note ask and the note tool are part of what forgetting cannot shrink: a memory whose
    requests let the ask go out fades a few turns earlier than one whose tool_choice keeps it
    waiting, and the request carrying the ask stays under the ceiling but for its new message
    and that message's recall block."""
    first_fade = {}
    for choice in ("auto", "none"):
        mem, history = small.memory(f"m-{choice}"), []
        for t in range(40):
            clock.advance(60)
            history.append(_user(t))
            req = mem.decorate({"model": "gpt-4.1", "tool_choice": choice, "messages": history})
            if "leaving" in _states(mem).values():
                first_fade[choice] = t
                break
            reply = chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)))
            mem.report(req, reply)
            history.append(reply["choices"][0]["message"])
        if choice == "auto":
            assert _asks(req)
            last = req["messages"][-2:]  # the new message's block (if any), then the ask
            new = [m for m in req["messages"] if m.get("content") == history[-1]["content"]]
            blocks_before = [
                m
                for m in req["messages"][:-1]
                if m["role"] == "system" and "[assistant_recent_memories]" in m["content"]
            ]
            extra = tokens.count_texts(
                "o200k_base", [history[-1]["content"], *[m["content"] for m in blocks_before[-1:]]]
            )
            assert new and last[-1]["content"].startswith("History from turns")
            assert mem.measure(req) <= CEILING + sum(extra) + 20
    assert first_fade["auto"] < first_fade["none"]


@pytest.mark.parametrize("used_turn", [None, 3])
def test_the_fade_counts_the_note_ask_its_picks_make(small, clock, used_turn):
    """The ask names the leaving turns, and before the fade it is counted as one span of them.
    A fade of the oldest episodes makes that ask and picks once; episodes picked apart (those
    of a turn in the middle in heavy use) make a longer one, and the fade picks again with the
    fixed part that ask makes: its landing is the one the request it sends holds."""
    import numpy as np

    from fadeway import blocks
    from fadeway.forgetting import budget, fade

    real_fade, real_landing = fade.fade_episodes, budget.landing
    fixed_seen: list[int] = []

    def scattered(columns, activation_of, *args):
        turns = np.array(small.services.mirrors.peek(mem.memory_id).turns)[columns.first_seq]
        used = columns.n[turns == used_turn]

        def boosted(numbers):
            return activation_of(numbers) * np.where(np.isin(numbers, used), 1e6, 1.0)

        return real_fade(columns, boosted, *args)

    def landing(ceiling, fixed, *args):
        fixed_seen.append(int(np.min(fixed)))  # no facts block yet: fixed + 0
        return real_landing(ceiling, fixed, *args)

    mem, history = small.memory("m"), []
    with (
        mock.patch.object(fade, "fade_episodes", scattered),
        mock.patch.object(budget, "landing", landing),
    ):
        for t in range(40):
            clock.advance(60)
            history.append(_user(t))
            req = mem.decorate({"model": "gpt-4.1", "messages": history})
            if "leaving" in _states(mem).values():
                break
            fixed_seen.clear()
            reply = chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)))
            mem.report(req, reply)
            history.append(reply["choices"][0]["message"])
    ask = req["messages"][-1]["content"]
    assert ask.startswith("History from turns")
    turn = small.services.mirrors.peek(mem.memory_id).turn
    counted, sent = tokens.count_texts("o200k_base", [blocks.note_ask(turn, turn + 1), ask])
    if used_turn is None:
        assert " and turn" not in ask.splitlines()[0]
        assert len(set(fixed_seen)) == 1 and sent == counted
    else:
        assert " and turn" in ask.splitlines()[0]
        assert len(set(fixed_seen)) >= 2 and sent > counted  # picked again once it was known
        # The last pass's fixed part holds the ask the request sends, and no more.
        assert fixed_seen[-1] - fixed_seen[0] == sent - counted


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_the_room_for_the_next_call_is_one_step_not_a_whole_turn(small, clock, fmt):
    """The spec's room is "one batch of tool outputs and the reply": in a turn of many tool
    rounds, the largest round with its outputs, not all of them together."""
    from fadeway.forgetting.budget import next_call_room, turn_sizes

    mem, history = small.memory(f"m-{fmt}"), []
    rounds = [3, 12, 5]  # words of each round's output, in hundreds of tokens roughly
    for t in range(2):
        clock.advance(60)
        history.append(_user(t, words=10))
        for r, words in enumerate(rounds):
            call_id = f"c{t}_{r}"
            if fmt == "chat":
                history += [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": call_id,
                                "type": "function",
                                "function": {"name": "lookup", "arguments": "{}"},
                            }
                        ],
                    },
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": " ".join(f"o{r}_{i}" for i in range(50 * words)),
                    },
                ]
            else:
                history += [
                    {"type": "reasoning", "id": f"rs_{call_id}", "summary": []},
                    {
                        "type": "function_call",
                        "id": f"fc_{call_id}",
                        "call_id": call_id,
                        "name": "lookup",
                        "arguments": "{}",
                    },
                    {
                        "type": "function_call_output",
                        "call_id": call_id,
                        "output": " ".join(f"o{r}_{i}" for i in range(50 * words)),
                    },
                ]
        history.append({"role": "assistant", "content": f"answer {t}"})
    clock.advance(60)
    history.append(_user(9, words=10))
    key = "messages" if fmt == "chat" else "input"
    mem.decorate({"model": "gpt-4.1", key: history})
    mirror = small.services.mirrors.peek(mem.memory_id)
    _, steps = turn_sizes(mirror, 1.0)
    # Each step as sent: the call (with its reasoning item) and its output; then the answer.
    width = 2 if fmt == "chat" else 3
    turn_length = 1 + width * len(rounds) + 1
    rounds_of = [
        [sum(mirror.tokens[t * turn_length + 1 + width * r :][:width]) for r in range(len(rounds))]
        for t in range(2)
    ]
    answers = [mirror.tokens[(t + 1) * turn_length - 1] for t in range(2)]
    assert steps == [max(*rounds_of[t], answers[t]) for t in range(2)]
    assert next_call_room(steps) == max(rounds_of[0]) == rounds_of[0][1]
    whole_turn = sum(rounds_of[0]) + answers[0]  # what the room was before: twice as much
    assert next_call_room(steps) < 0.7 * whole_turn


def _unscored_note(tx, at: float, text: str, subject: str, obj: str) -> int:
    """A note of one fact, acknowledging no episode, written by hand after the memory's last
    (its score job not run yet); returns its number."""
    from fadeway.records import FactRecord, NoteRecord

    n = tx.notes()[-1].n + 1
    tx.insert_note(
        NoteRecord(n=n, at=at, call_id=None, source="test", arguments="{}"),
        [
            FactRecord(
                n=tx.facts()[-1].n + 1,
                note=n,
                text=text,
                subject=subject,
                object=obj,
                milestone=False,
                at=at,
            )
        ],
        [],
    )
    return n


def _score_job(note: int, at: float):
    """The lane's score job for `note`, as its payload was before it listed the episodes."""
    from fadeway.records import JobRecord

    return JobRecord(n=1, kind="score", payload=msgspec.json.encode({"note": note}), created_at=at)


def test_a_notes_facts_are_judged_once_though_the_job_runs_again(small, clock):
    """The score job finds a note's facts by the note, and a rerun (after a crash between its
    apply and its done) appends no second set of traces."""
    import asyncio

    from fadeway.forgetting.scoring import ScoreJob
    from helpers import converse_with_notes

    mem = small.memory("m")
    first = [("Dana owns the checkout.", "Dana", "checkout", False)]
    second = [
        ("Ben owns the tax table.", "Ben", "tax table", False),
        ("Ben is back in May.", "Ben", "May", False),
    ]
    converse_with_notes(small, mem, clock, [first, second])
    with small.store.write("m") as tx:
        notes, facts = [n.n for n in tx.notes()], tx.facts()
        assert len(notes) == 2
        for k in notes:
            assert tx.facts(note=k) == [f for f in facts if f.note == k]
            assert tx.note_traced(k)
        assert tx.facts(facts[-1].n - 1, note=notes[-1]) == facts[-1:]
        # A note whose facts were not judged yet (its job still queued).
        new = _unscored_note(tx, clock(), "Dana is back in June.", "Dana", "June")
        assert not tx.note_traced(new)
    job = _score_job(new, clock())
    scoring = ScoreJob(small.store, small.services.indexes, small.judge)
    prepared = asyncio.run(scoring.prepare("m", job))
    assert prepared[1], "the judge gave no answer to append"
    counts = []
    for _ in range(2):
        with small.store.write("m") as tx:
            assert scoring.apply(tx, job, prepared)
            counts.append(tx.trace_count())
            assert tx.note_traced(new)
    assert counts[0] > 0 and counts[1] == counts[0]


def test_the_score_job_reads_an_earlier_notes_sealed_episodes_as_their_facts(small, clock):
    """A note's facts are judged against every episode still remembered: those in view as
    their messages, an earlier note's sealed ones as the facts that stand for them
    (`remembered_text`), so the judge does not read their messages again."""
    import asyncio

    from fadeway.forgetting.scoring import ScoreJob
    from fadeway.judge.base import REMEMBERED, remembered_text
    from helpers import converse_with_notes

    mem = small.memory("m")
    first = [
        ("Dana owns the checkout.", "Dana", "checkout", False),
        ("Ben is back in May.", "Ben", "May", False),
    ]
    converse_with_notes(small, mem, clock, [first])
    with small.store.write("m") as tx:
        episodes = tx.episodes()
        sealed = [e for e in episodes if e.state == "sealed"]
        in_view = [e for e in episodes if e.state in ("live", "leaving")]
        said = {e.n: [m.body for m in tx.messages(e.first_seq, e.last_seq + 1)] for e in episodes}
        new = _unscored_note(tx, clock(), "Dana hands the checkout to Ben.", "Dana", "Ben")
    assert sealed and in_view
    calls: list[list[str]] = []
    real = type(small.judge).about

    async def recorded(self, facts, episodes, **kwargs):
        calls.append(list(episodes))
        return await real(self, facts, episodes, **kwargs)

    job = _score_job(new, clock())
    with mock.patch.object(type(small.judge), "about", recorded):
        _, answers = asyncio.run(
            ScoreJob(small.store, small.services.indexes, small.judge).prepare("m", job)
        )
    (read,) = calls
    held = remembered_text(["Dana owns the checkout.", "Ben is back in May."])
    assert read.count(held) == len(sealed)
    texts = [t for t in read if t != held]
    assert len(texts) == len(in_view) and not any(REMEMBERED in t for t in texts)
    for e in in_view:
        first_words = " ".join(fadeway.wire.text_of(msgspec.json.decode(said[e.n][0])))
        assert any(t.startswith(first_words) for t in texts)
    # Every sealed episode is still judged: its answer becomes a trace like any other.
    judged = {episode for _, episode, _, _ in answers}
    assert {e.n for e in sealed} <= judged


def test_the_offline_judge_reads_a_remembered_episode_fact_by_fact():
    """Offline, a fact is about a remembered episode as much as it is about its closest fact;
    the heading that marks it out of view counts for nothing."""
    import asyncio

    from fadeway.judge import OfflineJudge
    from fadeway.judge.base import REMEMBERED, remembered_text

    episodes = [
        remembered_text(["Ben is back in May.", "Dana owns the checkout migration."]),
        remembered_text(["The office plants need water on Fridays."]),
        REMEMBERED,
    ]
    ((restated, unrelated, heading_only),) = asyncio.run(
        OfflineJudge().about(["Dana owns the checkout migration now."], episodes)
    )
    assert restated.yes and restated.score > 0.8
    assert not unrelated.yes
    assert not heading_only.yes and heading_only.score == 0.0


def test_the_scripted_judge_s_default_about_reads_a_remembered_episode_without_its_heading():
    import asyncio

    from fadeway.judge import ScriptedJudge
    from fadeway.judge.base import remembered_text

    episodes = [remembered_text(["Dana owns the checkout."]), remembered_text(["Ben is away."])]
    # "of" and "the" are in the heading; only the second episode's fact shares a word.
    ((first, second),) = asyncio.run(ScriptedJudge().about(["out of office: Ben"], episodes))
    assert not first.yes and second.yes and second.score == 1.0


def test_note_arguments_reads_only_the_messages_asked_for(small, clock):
    """Decorate decodes the note calls in view, not every note the memory ever took: the
    arguments come back for the messages named, and all of them when none are."""
    import json

    from fadeway.mirror.history import note_arguments
    from helpers import converse_with_notes

    mem = small.memory("m")
    first = [("Dana owns the checkout.", "Dana", "checkout", False)]
    second = [("Ben owns the tax table.", "Ben", "tax table", False)]
    converse_with_notes(small, mem, clock, [first, second])
    calls = small.services.mirrors.peek(mem.memory_id).note_calls
    assert len(calls) == 2
    everything = note_arguments(small.services.mirrors.peek(mem.memory_id))
    assert [json.loads(a)["notes"][0]["subject"] for a in everything.values()] == ["Dana", "Ben"]
    for seq, (call_id,) in calls.items():
        assert note_arguments(small.services.mirrors.peek(mem.memory_id), {seq}) == {
            (seq, call_id): everything[seq, call_id]
        }
    assert (
        note_arguments(small.services.mirrors.peek(mem.memory_id), {seq + 1 for seq in calls}) == {}
    )


def test_a_notes_facts_are_judged_against_the_episodes_remembered_when_it_was_written(small, clock):
    """The lane may run late: a day's silence seals and forgets the note's episodes before the
    score job runs, and the facts are still judged against every episode remembered when they
    were written (spec: "every time facts are written, each new fact is judged against every
    episode still remembered")."""
    from helpers import note_call

    mem = small.memory("m")
    history: list = []
    req, _ = _until_asked(mem, small, clock, history)
    reply = chat_reply(
        None, tool_calls=[note_call("n1", [("Dana owns w1_1.", "Dana", "w1_1", False)])]
    )
    mem.report(req, reply)
    history.append(reply["choices"][0]["message"])
    remembered = {n for n, s in _states(mem).items() if s != "forgotten"}
    clock.advance(25 * 3600)  # the lane has not run; the next turn sleeps
    history.append(_user(200))
    mem.decorate({"model": "gpt-4.1", "messages": history})
    assert remembered - {n for n, s in _states(mem).items() if s != "forgotten"}
    small.drain()
    doc = mem.export()
    [fact] = doc.facts
    judged = {t.episode for t in doc.traces if t.kind == "fact" and t.fact == fact.n}
    assert judged == remembered


def _talk_with_long_turns(eng, mem, clock, turns, check) -> list:
    """`turns` turns of a 40-word message and a 30-word reply, each one long sentence (the
    offline writer keeps a sentence whole: its notes are as large as the turns), the lane
    drained after each; `check(t, states before the decorate, request)` runs after each
    decorate. Returns the history sent."""
    history: list = []
    for t in range(turns):
        clock.advance(60)
        history.append(_user(t))
        before = _states(mem)
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        check(t, before, req)
        reply = chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)))
        mem.report(req, reply)
        history.append(reply["choices"][0]["message"])
        eng.drain()
    return history


def test_a_facts_block_too_large_for_the_current_turn_is_forgotten_down_to_fit(tmp_path, clock):
    """Notes as large as the turns they replace (the offline writer keeps a sentence whole, and
    these turns are one long sentence each): sealing frees nothing, the facts block outgrows
    the ceiling, and the landing stops at the current turn. The fade then forgets sealed
    episodes (their facts leave the block) until the request fits: every request that does not
    start a fade stands within the ceiling."""
    eng = open_small(tmp_path / "b.db", clock, note_writer="offline")
    mem = eng.memory("m")
    over = []

    def check(t, before, req):
        leaving = {n for n, s in before.items() if s == "leaving"}
        starts = {n for n, s in _states(mem).items() if s == "leaving"} - leaving
        if mem.measure(req) > CEILING and not starts:
            over.append((t, mem.measure(req)))

    history = _talk_with_long_turns(eng, mem, clock, 45, check)
    assert not over
    states = list(_states(mem).values())
    assert states.count("forgotten") > states.count("sealed") > 0
    assert len(mem.export().messages) == len(history)  # forgotten is not deleted
    eng.close()


def test_a_fade_below_its_landing_leaves_two_typical_turns_free(tmp_path, clock):
    """Notes as large as the turns they replace fill the facts block until the landing stops
    at the current turn. Stopping there, each fade left no room for the next turn: every turn
    faded again and cut its one closed turn into an episode of its own, whose note grew the
    block again. The landing promises two typical turns before the next trigger, so the fade
    goes on down the order (forgetting sealed episodes, whose facts leave the block) until
    they fit: most turns start no fade, and none stands over the ceiling."""
    eng = open_small(tmp_path / "b.db", clock, note_writer="offline")
    mem = eng.memory("m")
    faded = []

    def check(t, before, req):
        picked = {n for n, s in _states(mem).items() if s in ("leaving", "forgotten")}
        if picked - {n for n, s in before.items() if s in ("leaving", "forgotten")}:
            faded.append(t)  # a fade picked episodes (a seal alone is no fade)
        assert mem.measure(req) <= CEILING

    history = _talk_with_long_turns(eng, mem, clock, 60, check)
    late = [t for t in faded if t >= 30]  # the block has long filled by then
    # Stopping at the landing, 29 of these 30 turns faded; a seal's note (as large as its
    # turns) may still take the room back before two turns pass.
    assert len(late) <= 15, f"fades at turns {faded}"
    states_now = list(_states(mem).values())
    assert states_now.count("forgotten") > 0
    assert len(mem.export().messages) == len(history)  # forgotten is not deleted
    eng.close()


def test_a_facts_block_stays_bounded_when_the_room_for_the_next_call_is_large(small, clock):
    """A large tool output every fifth turn (half the ceiling) makes the room for the next call
    so large that no current turn fits beside it and the fixed part, even with an empty facts
    block. The block still gives way, as far as the room allows: it does not grow with every
    note, and a request that starts no fade stands within the ceiling."""
    from helpers import call, note_call

    mem = small.memory("m")
    history: list = []
    over, largest_block = [], 0
    for t in range(90):
        clock.advance(60)
        history.append(_user(t))
        while True:
            leaving = {n for n, s in _states(mem).items() if s == "leaving"}
            req = mem.decorate({"model": "gpt-4.1", "messages": history})
            starts = {n for n, s in _states(mem).items() if s == "leaving"} - leaving
            if mem.measure(req) > CEILING and not starts:
                over.append((t, mem.measure(req)))
            block = req["messages"][0]["content"] if req["messages"][0]["role"] == "system" else ""
            largest_block = max(largest_block, len(block))
            made = (
                [
                    note_call(
                        f"n{t}_{len(history)}",
                        [
                            (
                                f"Dana{t}x{k} met Lee about item {k}.",
                                f"Dana{t}x{k}",
                                f"item {k}",
                                False,
                            )
                            for k in range(4)
                        ],
                    )
                ]
                if _asks(req)
                else []
            )
            if t % 5 == 0 and history[-1]["role"] == "user":
                made.append(call(f"read_{t}", "read_file", '{"path": "big.txt"}'))
            reply = chat_reply(
                f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)), tool_calls=made or None
            )
            result = mem.report(req, reply)
            history.append(reply["choices"][0]["message"])
            history += [
                {
                    "role": "tool",
                    "tool_call_id": c["id"],
                    "content": " ".join(["alpha beta gamma delta"] * 375) + f" t{t}",
                }
                for c in result.tool_calls
            ]
            small.drain()
            if not result.tool_calls:
                break
    assert not over
    assert "forgotten" in _states(mem).values()
    assert largest_block < 4 * CEILING  # characters: the block never outgrows the ceiling
    assert len(mem.export().messages) == len(history)  # forgotten is not deleted


def test_a_facts_block_gives_way_when_only_the_current_turn_is_in_view(small, clock):
    """An agent turn runs long after the earlier turns sealed: the view holds only that turn,
    which fits under the ceiling on its own but not beside a large facts block. The block gives
    way (sealed episodes are forgotten) though the history stands at the landing; a turn that
    could not fit even beside an empty block is the next test."""
    from helpers import call, note_call

    mem = small.memory("m")
    history: list = []
    for t in range(200):
        clock.advance(60)
        words = 150 if t >= 25 else 40
        history.append(_user(t, words))
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        if t >= 25 and _asks(req):
            break
        notes = [note_call(f"n{t}", [(f"Dana owns item {t}.", "Dana", f"item {t}", False)])]
        reply = chat_reply(f"answer {t}", tool_calls=notes if _asks(req) else None)
        mem.report(req, reply)
        history.append(reply["choices"][0]["message"])
        small.drain()
    long = [
        (
            f"Fact {t}.{j}: " + " ".join(f"d{t}x{j}x{i}" for i in range(20)) + ".",
            "Dana",
            f"item {t}.{j}",
            False,
        )
        for j in range(8)
    ]
    reply = chat_reply(None, tool_calls=[note_call("nbig", long), call("c0")])
    mem.report(req, reply)
    history.append(reply["choices"][0]["message"])
    small.drain()
    for r in range(4):
        history.append({"role": "tool", "tool_call_id": f"c{r}", "content": "done"})
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        assert sum(m["role"] == "user" for m in req["messages"]) == 1  # the current turn only
        assert mem.measure(req) <= CEILING, f"round {r}: the block did not give way"
        reply = chat_reply(None, tool_calls=[call(f"c{r + 1}")])
        mem.report(req, reply)
        history.append(reply["choices"][0]["message"])
        small.drain()


def test_a_turn_too_large_for_any_facts_block_does_not_empty_the_block(small, clock):
    """A user message larger than the ceiling cannot fit beside any facts block: forgetting the
    sealed episodes' facts would gain nothing, so the fade stops at the landing as before."""
    from helpers import converse_with_notes

    mem = small.memory("m")
    notes = [[(f"Fact {k}: Dana owns item {k}.", "Dana", f"item {k}", False)] for k in range(3)]
    history = converse_with_notes(small, mem, clock, notes, turns=200)
    clock.advance(60)
    history.append({"role": "user", "content": "Read: " + " ".join(f"z{i}" for i in range(1500))})
    req = mem.decorate({"model": "gpt-4.1", "messages": history})
    assert mem.measure(req) > CEILING
    assert "sealed" in _states(mem).values()
    assert any((m["content"] or "").startswith("Recorded facts") for m in req["messages"])
