"""decorate + report overhead per call, with the full history resent each time, on SQLite and
on PostgreSQL (a fresh database on `$FADEWAY_TEST_POSTGRES`, else on a throwaway cluster of the
machine's PostgreSQL, `tests/pg.py`; skipped, saying why, when there is none).

Run: python -m pytest benches/bench_decorate.py --benchmark-enable
Goal (issue 2): under 5 ms at 1k stored messages and under 50 ms at 10k (measured below the
ceiling: recognising, storing, measuring and assembling, without a fade), on SQLite; PostgreSQL
beside it (issue 30), each call's statements being round trips to the server.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

import fadeway
import pg

SYSTEM = {"role": "system", "content": "You help the web team ship the pricing page. Be brief."}


def _history(n: int) -> list[dict]:
    """A realistic chat history of n messages: questions, tool calls, outputs and answers."""
    out: list[dict] = []
    for i in itertools.count():
        if len(out) >= n:
            break
        out.append(
            {
                "role": "user",
                "content": f"Step {i}: check ticket LEG-{400 + i} and tell "
                "me where the refund line review stands.",
            }
        )
        if i % 3 == 0:
            out.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call_{i}",
                            "type": "function",
                            "function": {
                                "name": "search_tickets",
                                "arguments": f'{{"query": "LEG-{400 + i}"}}',
                            },
                        }
                    ],
                }
            )
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": f"call_{i}",
                    "content": f'[{{"id": "LEG-{400 + i}", "status": "open"}}]',
                }
            )
        out.append(
            {
                "role": "assistant",
                "content": f"LEG-{400 + i} is still open; legal has "
                "not answered the refund line review yet.",
                "refusal": None,
            }
        )
    return out[:n]


def _reply(text: str, prompt_tokens: int) -> dict:
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4.1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": text, "refusal": None},
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 9,
            "total_tokens": prompt_tokens + 9,
        },
    }


@pytest.fixture(scope="module")
def pg_server() -> Iterator[str]:
    with pg.server_or_skip() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "bench.db")
        return
    with pg.fresh_database(request.getfixturevalue("pg_server")) as url:
        yield url


@pytest.mark.parametrize("stored", [1_000, 10_000])
def test_decorate_report_full_history(benchmark, db, stored):
    # Defaults (SQLite: WAL, synchronous=FULL), with a ceiling the 10k history stays under: this
    # measures the per-call overhead of recognising and storing, not a fade.
    engine = fadeway.open(db, ceiling=10_000_000)
    mem = engine.memory("bench")
    history = _history(stored)
    mem.decorate({"model": "gpt-4.1", "messages": [SYSTEM, *history]})
    turn = itertools.count()

    def one_call():
        i = next(turn)
        history.append({"role": "user", "content": f"And ticket {i}?"})
        request = mem.decorate({"model": "gpt-4.1", "messages": [SYSTEM, *history]})
        mem.report(request, _reply(f"Ticket {i} is open.", 1000))
        history.append({"role": "assistant", "content": f"Ticket {i} is open.", "refusal": None})
        return request

    request = one_call()  # assert before timing: the full history was recognised, not re-stored
    assert len(request["messages"]) == len(history)
    assert len(mem.messages()) == len(history)
    benchmark.pedantic(one_call, rounds=20, iterations=1)
    assert len(mem.messages()) == len(history)
    engine.close()
