"""How good the offline judge and the offline note writer are, against hand labels.

Three judgments every user runs first, with no model (`benches/labels/README.md` says how the
labels were made; LoCoMo text is never stored, only references):

- relate: a later fact against an earlier one, *same* / *contradicts* / *unrelated*, each fact
  as the offline note writer writes it from its turn (its session as the leaving turns). A pair
  the writer does not write is never judged in the graph: it counts as *unrelated* in the "all
  pairs" rows, and is left out of the "written pairs" rows.
- same entity, as the graph asks it: the embedding gate (the default hashing embedder's cosine
  against `ENTITY_CANDIDATE_THRESHOLD`, `fadeway.graph.update.entity_candidate`), then the
  judge. The gate's recall, the judge alone and the end result are reported.
- the note writer's subject and object of a sentence against an annotator's, exact after the
  graph's normal form (`normalise_name`) and "contains" (either holds the other, on word
  boundaries); a sentence the writer leaves out is a miss. Plus, over every fact it writes, the
  share whose subject or object is no entity: a wire role, a calendar word, a bare number, a
  common word (one the turns write in lower case and never capitalise inside a sentence).

Baselines: always *unrelated* / *not same*; BM25 (a held fact or name scoring at least half of
the query's own score is *same*); the graph's normal form alone; the speaker (or wire role) as
the subject with the first capitalised word after the opening as the object; the first and
second capitalised words.

    python benches/offline_judgments.py          # prints the tables (about 10 s)
    python benches/offline_judgments.py --out    # writes benches/RESULTS-offline-judgments.md

The tables are written above "## History" in the RESULTS file, which is kept as it is. LoCoMo is
read from shared/data (or $FADEWAY_SHARED_DATA), tuning split only; without it the LoCoMo rows
are skipped with a note. Maharana et al., "Evaluating Very Long-Term Conversational Memory of
LLM Agents", ACL 2024, CC BY-NC 4.0.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from offline_labels import Agent, Locomo, contains, exact, load_labels  # noqa: E402

from fadeway import _constants as C  # noqa: E402
from fadeway._core import Bm25Index  # noqa: E402
from fadeway.embed.hashing import HashingEmbedder  # noqa: E402
from fadeway.graph import update as graph_update  # noqa: E402
from fadeway.graph.held import normalise_name  # noqa: E402
from fadeway.judge.base import FactText  # noqa: E402
from fadeway.judge.offline import relate_offline, same_entity_offline  # noqa: E402
from fadeway.notes.tool import NoteEntry  # noqa: E402
from fadeway.notes.writers.base import WIRE_ROLES  # noqa: E402
from helpers import shared_data  # noqa: E402

RESULTS = HERE / "RESULTS-offline-judgments.md"
CLASSES = ("same", "contradicts")


# -- the labelled sets, resolved ------------------------------------------------------------------


@dataclass(frozen=True)
class RelatePair:
    new: NoteEntry | None
    held: NoteEntry | None
    label: str
    kind: str
    group: str  # what BM25 indexes together (a conversation, or the agent sample)


@dataclass(frozen=True)
class NamePair:
    a: str
    b: str
    same: bool
    kind: str
    group: str


@dataclass(frozen=True)
class Sentence:
    text: str
    speaker: str
    fact: NoteEntry | None
    subject: tuple[str, ...]
    object: tuple[str, ...]


def locomo_sets(locomo: Locomo) -> tuple[list[RelatePair], list[NamePair], list[Sentence]]:
    relate = [
        RelatePair(
            locomo.fact(p["conv"], p["new"]["dia"], p["new"]["span"]),
            locomo.fact(p["conv"], p["held"]["dia"], p["held"]["span"]),
            p["label"],
            p["kind"],
            p["conv"],
        )
        for p in load_labels("locomo-relate.json")["pairs"]
    ]
    names = [
        NamePair(
            locomo.entity(p["conv"], p["a"]["dia"], p["a"]["span"]),
            locomo.entity(p["conv"], p["b"]["dia"], p["b"]["span"]),
            p["same"],
            p["kind"],
            p["conv"],
        )
        for p in load_labels("locomo-names.json")["pairs"]
    ]
    sentences = []
    for s in load_labels("locomo-triples.json")["sentences"]:
        conv, dia = s["conv"], s["dia"]
        sentences.append(
            Sentence(
                locomo.text(conv, dia, s["span"]),
                locomo.turns[conv, dia].speaker,
                locomo.fact(conv, dia, s["span"]),
                tuple(locomo.entity(conv, dia, r) for r in s["subject"]),
                tuple(locomo.entity(conv, dia, r) for r in s["object"]),
            )
        )
    return relate, names, sentences


def agent_sets(agent: Agent) -> tuple[list[RelatePair], list[NamePair], list[Sentence]]:
    relate = [
        RelatePair(
            agent.fact(p["new"]["day"], p["new"]["sentence"]),
            agent.fact(p["held"]["day"], p["held"]["sentence"]),
            p["label"],
            p["kind"],
            "agent",
        )
        for p in load_labels("agent-relate.json")["pairs"]
    ]
    names = [
        NamePair(p["a"], p["b"], p["same"], p["kind"], "agent")
        for p in load_labels("agent-names.json")["pairs"]
    ]
    sentences = [
        Sentence(
            s["sentence"],
            agent.speaker(s["day"], s["sentence"]),
            agent.fact(s["day"], s["sentence"]),
            tuple(s["subject"]),
            tuple(s["object"]),
        )
        for s in load_labels("agent-triples.json")["sentences"]
    ]
    return relate, names, sentences


# -- scoring --------------------------------------------------------------------------------------


def precision_recall(predicted: Sequence[bool], truth: Sequence[bool]) -> tuple[float, float]:
    """Precision (1.0 when nothing is predicted: no wrong answer given) and recall."""
    hits = sum(p and t for p, t in zip(predicted, truth, strict=True))
    said, true = sum(predicted), sum(truth)
    return (hits / said if said else 1.0), (hits / true if true else 1.0)


def fmt(p: float, r: float, n: int | None = None) -> str:
    return f"{p:.2f} / {r:.2f}" + (f" ({n})" if n is not None else "")


def fact_text(entry: NoteEntry) -> FactText:
    return FactText(entry.note, entry.subject, entry.object)


def bm25_ratios(groups: dict[str, list[str]], pairs: Sequence[tuple[str, str, str]]) -> list[float]:
    """For each (group, query, document): the document's BM25 score for the query, over the
    group's texts, as a share of the query's own score (the query is one of the texts)."""
    indexes: dict[str, tuple[Bm25Index, dict[str, int]]] = {}
    for group, texts in groups.items():
        ids = {t: i for i, t in enumerate(dict.fromkeys(texts))}
        index = Bm25Index(C.BM25_K1, C.BM25_B)
        index.add(np.arange(len(ids), dtype=np.int64), list(ids))
        indexes[group] = index, ids
    out = []
    for group, query, doc in pairs:
        index, ids = indexes[group]
        found, scores = index.search(query, len(ids))
        score = dict(zip(found.tolist(), scores.tolist(), strict=True))
        own = score.get(ids[query], 0.0)
        out.append(score.get(ids[doc], 0.0) / own if own > 0 else 0.0)
    return out


def relate_rows(pairs: Sequence[RelatePair]) -> list[tuple[str, str]]:
    """Per system: precision / recall of *same* and *contradicts*, over all pairs."""
    written = [p for p in pairs if p.new is not None and p.held is not None]
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for p in written:
        groups[p.group] += [p.new.note, p.held.note]
    ratios = iter(bm25_ratios(groups, [(p.group, p.new.note, p.held.note) for p in written]))
    systems: dict[str, Callable[[RelatePair], str]] = {
        "always unrelated": lambda p: "unrelated",
        "BM25 (score >= half the query's own: same)": lambda p: (
            "same" if next(ratios) >= 0.5 else "unrelated"
        ),
        "offline judge": lambda p: relate_offline(fact_text(p.new), fact_text(p.held)),
    }
    rows = []
    for name, system in systems.items():
        answers = [system(p) if p in written else "unrelated" for p in pairs]
        cells = []
        for cls in CLASSES:
            pr = precision_recall([a == cls for a in answers], [p.label == cls for p in pairs])
            on_written = precision_recall(
                [a == cls for a, p in zip(answers, pairs, strict=True) if p in written],
                [p.label == cls for p in written],
            )
            cells.append(f"{fmt(*pr)} ({fmt(*on_written)})")
        rows.append((name, " | ".join(cells)))
    return rows


def relate_table(title: str, pairs: Sequence[RelatePair]) -> list[str]:
    counts = collections.Counter(p.label for p in pairs)
    written = sum(p.new is not None and p.held is not None for p in pairs)
    lines = [
        f"### relate, {title}",
        "",
        f"{len(pairs)} pairs ({counts['same']} same, {counts['contradicts']} contradicts, "
        f"{counts['unrelated']} unrelated); the writer writes both facts of {written}.",
        "Precision / recall over all pairs (over the written pairs in brackets).",
        "",
        "| system | same | contradicts |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {name} | {cells} |" for name, cells in relate_rows(pairs)]
    return lines + [""]


def wrong_retirements(pairs: Sequence[RelatePair]) -> list[str]:
    """The pairs the judge says *contradicts* that are not: true facts it would hide."""
    out = []
    for p in pairs:
        if p.new is None or p.held is None or p.label == "contradicts":
            continue
        if relate_offline(fact_text(p.new), fact_text(p.held)) == "contradicts":
            out.append(f"{p.label}/{p.kind}")
    return out


_EMBEDDER = HashingEmbedder()


def gate(pairs: Sequence[NamePair]) -> list[bool]:
    """Whether the graph would ask the judge about each pair (its candidate gate)."""
    names = sorted({x for p in pairs for x in (p.a, p.b)})
    vectors = dict(zip(names, _EMBEDDER.embed_sync(names), strict=True))
    return [
        graph_update.entity_candidate(p.a, p.b, float(vectors[p.a] @ vectors[p.b])) for p in pairs
    ]


def names_table(title: str, pairs: Sequence[NamePair]) -> list[str]:
    truth = [p.same for p in pairs]
    passed = gate(pairs)
    judged = [same_entity_offline(p.a, p.b) for p in pairs]
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for p in pairs:
        groups[p.group] += [p.a, p.b]
    ratios = bm25_ratios(groups, [(p.group, p.a, p.b) for p in pairs])
    same_norm = [normalise_name(p.a) == normalise_name(p.b) for p in pairs]
    gate_recall = precision_recall(passed, truth)[1]
    false_pass = sum(g and not t for g, t in zip(passed, truth, strict=True))
    rows = [
        ("always not same", precision_recall([False] * len(pairs), truth)),
        ("normal form equal", precision_recall(same_norm, truth)),
        (
            "BM25 (score >= half the name's own)",
            precision_recall([r >= 0.5 for r in ratios], truth),
        ),
        ("offline judge alone (every pair asked)", precision_recall(judged, truth)),
        (
            "gate then offline judge (the graph)",
            precision_recall([g and j for g, j in zip(passed, judged, strict=True)], truth),
        ),
    ]
    lines = [
        f"### same entity, {title}",
        "",
        f"{len(pairs)} name pairs ({sum(truth)} same). The gate passes {gate_recall:.2f} of the "
        f"same pairs to the judge (and {false_pass} of the {len(pairs) - sum(truth)} others).",
        "",
        "| system | precision / recall |",
        "| --- | --- |",
    ]
    lines += [f"| {name} | {fmt(*pr)} |" for name, pr in rows]
    return lines + [""]


_CAPITALISED = re.compile(r"\b[A-Z][\w'&.-]*(?:\s+[A-Z][\w'&.-]*)*")


def first_capitalised(text: str, skip: int = 0) -> str | None:
    found = [m.group(0) for m in _CAPITALISED.finditer(text)]
    return found[skip] if len(found) > skip else None


def writer_rows(sentences: Sequence[Sentence]) -> list[tuple[str, str, str, int]]:
    systems: dict[str, Callable[[Sentence], tuple[str | None, str | None]]] = {
        "speaker; first capitalised word after the opening": lambda s: (
            s.speaker,
            first_capitalised(s.text[1:]),
        ),
        "first and second capitalised words": lambda s: (
            first_capitalised(s.text),
            first_capitalised(s.text, 1),
        ),
        "offline note writer": lambda s: (
            (s.fact.subject, s.fact.object) if s.fact else (None, None)
        ),
    }
    rows = []
    for name, system in systems.items():
        got = [system(s) for s in sentences]
        cells = [
            f"{_share(exact, got, sentences, side):.2f} / "
            f"{_share(contains, got, sentences, side):.2f}"
            for side in (0, 1)
        ]
        rows.append((name, *cells, sum(g != (None, None) for g in got)))
    return rows


def _share(match, got, sentences: Sequence[Sentence], side: int) -> float:
    """The share of sentences whose subject (side 0) or object (1) matches the annotator's."""
    field = ("subject", "object")[side]
    hits = sum(match(g[side], getattr(s, field)) for g, s in zip(got, sentences, strict=True))
    return hits / len(sentences)


def writer_table(title: str, sentences: Sequence[Sentence]) -> list[str]:
    lines = [
        f"### note writer, {title}",
        "",
        f"{len(sentences)} sentences, {len({s.speaker for s in sentences})} speakers. "
        "Exact / contains, a sentence without a fact counting as a miss.",
        "",
        "| system | subject | object | sentences with a fact |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {name} | {s} | {o} | {n} |" for name, s, o, n in writer_rows(sentences)]
    return lines + [""]


# -- what is no entity ----------------------------------------------------------------------------

_CALENDAR = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri "
    "sat sun mondays tuesdays wednesdays thursdays fridays saturdays sundays today tomorrow "
    "yesterday tonight morning afternoon evening weekend week month year".split()
)
# A number, a clock time or an ordinal on its own; an amount, a share or a count of a noun
# ("$1,200", "40%", "40 points") measures something and is no bare number.
_NUMBER = re.compile(r"[\d.,:/×x+-]*\d[\d.,:/×x+-]*|\d+(?:st|nd|rd|th)")
_DATE = re.compile(r"\d{4}-\d\d-\d\d(?:T.*)?")


def no_entity(name: str, lowercase: set[str], capitalised: set[str]) -> str | None:
    """Why `name` names nothing the graph should hold, or None: a wire role, a bare number, a
    calendar word, or a common word (one word capitalised at its first letter only, which these
    turns otherwise write in lower case and never capitalise inside a sentence, a colon opening
    a clause: "By", "Take", "Looks"; "API" is a name by its shape)."""
    words = name.split()
    if name.lower() in WIRE_ROLES:
        return "role"
    if _NUMBER.fullmatch(name) and not _DATE.fullmatch(name):
        return "bare number"
    if all(w.lower().strip(".,").removesuffix("'s") in _CALENDAR for w in words):
        return "calendar word"
    if (
        len(words) == 1
        and name[:1].isupper()
        and name[1:].islower()
        and name.lower() in lowercase
        and name not in capitalised
    ):
        return "common word"
    return None


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def entity_audit(notes: dict[str, list[NoteEntry]], texts: dict[str, list[str]]) -> list[str]:
    """Over every fact written: the share with a subject or object that is no entity, by kind,
    and of notes that open with a wire role's label ("assistant: ..."). `texts` holds, for each
    group of notes, the conversation that tells which words are common."""
    kinds: collections.Counter[str] = collections.Counter()
    examples: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    total = role_notes = 0
    for group, entries in notes.items():
        lowercase, capitalised = set(), set()
        for text in texts[group]:
            for sentence in _SENTENCE_END.split(text):
                opens = True  # a capital where a clause opens (after a colon too) tells nothing
                for word in sentence.split():
                    after_colon = word.rstrip("\"'*").endswith(":")
                    word = word.strip(".,;:!?\"'()[]*")
                    if word[:1].islower():
                        lowercase.add(word.lower())
                    elif not opens and word[:1].isupper():
                        capitalised.add(word)
                    opens = after_colon
        for e in entries:
            total += 1
            label = e.note.split(":", 1)[0]
            role_notes += ":" in e.note and label.lower() in WIRE_ROLES
            bad = {}
            for name in (e.subject, e.object):
                kind = no_entity(name, lowercase, capitalised)
                if kind:
                    bad[name] = kind
            for name, kind in bad.items():
                kinds[kind] += 1
                examples[kind][name] += 1
            kinds["any"] += bool(bad)
    lines = [f"{total} facts; a role's label opens {role_notes} ({role_notes / total:.1%})."]
    for kind in ("any", "role", "calendar word", "bare number", "common word"):
        common = ", ".join(n for n, _ in examples[kind].most_common(6))
        lines.append(
            f"- {kind}: {kinds[kind]} ({kinds[kind] / total:.1%}){': ' + common if common else ''}"
        )
    return lines


# -- the report -----------------------------------------------------------------------------------


def report() -> str:
    start = time.perf_counter()
    out: list[str] = []
    agent = Agent()
    a_relate, a_names, a_sentences = agent_sets(agent)
    path = shared_data("locomo/locomo10.json")
    if path is None:
        out += ["LoCoMo is not in shared/data ($FADEWAY_SHARED_DATA): its rows are skipped.", ""]
        locomo = None
    else:
        locomo = Locomo.from_path(path)
        l_relate, l_names, l_sentences = locomo_sets(locomo)
        out += relate_table("LoCoMo tuning split", l_relate)
        wrong = wrong_retirements(l_relate)
        out += [f"Wrong retirements (labelled same or unrelated): {len(wrong)} {wrong}", ""]
    out += relate_table("agent sample", a_relate)
    wrong = wrong_retirements(a_relate)
    out += [f"Wrong retirements (labelled same or unrelated): {len(wrong)} {wrong}", ""]
    if locomo is not None:
        out += names_table("LoCoMo tuning split", l_names)
    out += names_table("agent sample", a_names)
    if locomo is not None:
        out += writer_table("LoCoMo tuning split", l_sentences)
    out += writer_table("agent sample", a_sentences)
    out += ["### entities that name nothing, over every fact written", ""]
    if locomo is not None:
        notes = {f"{c}/{n}": locomo.facts(c, n) for c, n in locomo.sessions}
        # What is a common word is told by the whole conversation, not the one session.
        by_conv = collections.defaultdict(list)
        for (c, _), ts in locomo.sessions.items():
            by_conv[c] += [t.text for t in ts]
        texts = {f"{c}/{n}": by_conv[c] for c, n in locomo.sessions}
        out += ["LoCoMo tuning split, each session as the leaving turns:", ""]
        out += entity_audit(notes, texts) + [""]
    notes = {day: agent.facts(day) for day in agent.days}
    every = [m.text for ms in agent.days.values() for m in ms]
    texts = {day: every for day in agent.days}
    out += ["Agent sample, each day as the leaving turns:", ""]
    out += entity_audit(notes, texts) + [""]
    out += [f"({time.perf_counter() - start:.1f} s)", ""]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", action="store_true", help=f"write {RESULTS.name}")
    args = parser.parse_args()
    text = report()
    print(text)
    if args.out:
        history = ""
        if RESULTS.exists() and "\n## History" in RESULTS.read_text(encoding="utf-8"):
            history = RESULTS.read_text(encoding="utf-8").split("\n## History", 1)[1]
        head = (
            "# The offline judge and note writer against hand labels\n\n"
            "`python benches/offline_judgments.py --out` (labels: `benches/labels/`)\n\n"
        )
        RESULTS.write_text(head + text + ("\n## History" + history if history else ""), "utf-8")


if __name__ == "__main__":
    main()
