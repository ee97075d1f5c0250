"""The offline note writer on an agent conversation: whose facts it writes.

LoCoMo measures what the writer keeps (`recall_locomo.py`), but its every message opens with a
named speaker, so it cannot see how the writer treats a conversation whose speakers are only
wire roles: an agent's transcript, with tool calls and outputs and an assistant that answers in
labelled lines ("Numbers: ...", "Final: ..."). This replays the bundled `launch-week` sample
(999 messages over ten days: calendar, docs, tickets, metrics) with the offline judge and note
writer, at a ceiling low enough that most of it is noted, and reads the facts the notes wrote:

- role subjects: facts whose subject is a wire role ("assistant", "tool", "system",
  "developer"), which is no entity of the conversation and, shared by every fact without one,
  becomes a hub that joins unrelated facts in the graph. "user" is counted apart: the user is a
  person, and a first-person sentence of theirs is a fact about them;
- subject in note / object in note: facts whose subject (object) is written in the fact's own
  text, which an extractive writer's triples should always be;
- largest hub: the share of facts held by the commonest subject, and the graph's entity count;
- numbers cut short: facts whose object is a bare number that the text writes with its
  currency or as part of a date ("1,200" of "$1,200", "18" of "18 May"): not verbatim, and a
  poor entity, which joins every fact that happens to hold the same number.

Run: python benches/notes_agent.py [--ceiling 8000] [--out benches/RESULTS-notes-agent.md]
"""

from __future__ import annotations

import argparse
import collections
import re
import tempfile
import time
from importlib import resources
from pathlib import Path

import fadeway
from fadeway.notes.writers import OfflineNoteWriter
from fadeway.replay.lines import read_replay
from fadeway.replay.runner import replay

ROLES = ("assistant", "tool", "system", "developer")
USER = "user"
MONTHS = (
    "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|January|February|March|April|"
    "June|July|August|September|October|November|December"
)


def cut_short(fact) -> bool:
    """Whether the fact's object is a bare number its text writes with a currency or a month."""
    if not re.fullmatch(r"[\d,.]+", fact.object):
        return False
    number = re.escape(fact.object)
    return (
        re.search(
            rf"[$£€¥]{number}(?![\d,.]*\d)|(?<![\d,.]){number}\s(?:{MONTHS})\b"
            rf"|\b(?:{MONTHS})\s{number}(?![\d,.]*\d)",
            fact.text,
        )
        is not None
    )


def facts_of_sample(ceiling: int) -> tuple[list, int, int]:
    """(facts, notes, entities) of the launch-week sample replayed at `ceiling`."""
    sample = resources.files("fadeway") / "samples" / "launch-week.jsonl"
    with resources.as_file(sample) as path:
        lines = list(read_replay(str(path)))
    with (
        tempfile.TemporaryDirectory() as tmp,
        fadeway.open(Path(tmp) / "notes.db", background=False, ceiling=ceiling) as engine,
    ):
        memory = engine.memory(lines[0].memory_id)
        replay(memory, lines, note_writer=OfflineNoteWriter())
        engine.drain()
        export = memory.export()
    return export.facts, len(export.notes), len(export.entities)


def table(ceiling: int) -> tuple[str, list]:
    start = time.perf_counter()
    facts, notes, entities = facts_of_sample(ceiling)
    elapsed = time.perf_counter() - start
    n = len(facts) or 1
    subjects = collections.Counter(f.subject for f in facts)
    hub, hub_count = subjects.most_common(1)[0] if subjects else ("", 0)
    rows = [
        ("facts (notes)", f"{len(facts)} ({notes})"),
        ("role subjects (assistant, tool, ...)", _share(sum(subjects[r] for r in ROLES), n)),
        ('"user" subjects', _share(subjects[USER], n)),
        ("subject in note", _share(sum(1 for f in facts if f.subject in f.text), n)),
        ("object in note", _share(sum(1 for f in facts if f.object in f.text), n)),
        ("largest hub", f"{hub!r}, {_share(hub_count, n)}"),
        (
            "numbers cut short (a currency or date's number alone)",
            _share(sum(1 for f in facts if cut_short(f)), n),
        ),
        ("distinct subjects / entities", f"{len(subjects)} / {entities}"),
    ]
    lines = [
        f"Ceiling {ceiling:,} tokens, offline judge and note writer; {elapsed:.1f} s.",
        "",
        "| measure | value |",
        "| --- | --- |",
    ]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines), facts


def _share(count: int, total: int) -> str:
    return f"{count} ({100 * count / total:.1f}%)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ceiling", type=int, default=8000)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--show",
        type=int,
        default=0,
        metavar="N",
        help="also print N facts (subject | object | text)",
    )
    args = parser.parse_args()
    text, facts = table(args.ceiling)
    print(text)
    for f in facts[: args.show]:
        print(f"{f.subject!r:28} | {f.object!r:20} | {f.text[:90]}")
    if args.out:
        args.out.write_text(
            "# The offline note writer on an agent conversation\n\n"
            "`python benches/notes_agent.py --out "
            "benches/RESULTS-notes-agent.md`\n\n" + text + "\n"
        )


if __name__ == "__main__":
    main()
