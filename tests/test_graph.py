"""The knowledge graph: entity resolution, merged restatements, retired facts, and the facts
block showing only current facts (MECHANISM: "The note ask and sealing")."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fadeway
from conftest import open_small
from fadeway.graph.held import Graph, normalise_name
from fadeway.judge import FactText, OfflineJudge, ScriptedJudge
from fadeway.judge.offline import relate_offline
from fadeway.records import EdgeRecord, EntityRecord, RetirementRecord
from helpers import NOTE_ASKING, chat_reply, converse_with_notes, note_call

# The spec's pricing-page facts, then a second note that restates two of them under other names,
# moves the launch date, and adds an unrelated fact.
FIRST = [
    (
        "Pricing page copy v3 awaits legal review of its refund line.",
        "pricing page copy v3",
        "refund line",
        False,
    ),
    ("The pricing page launches on 2026-03-14.", "pricing page", "launch date", False),
    ("Pricing page copy v3 was approved by the user.", "user", "pricing page copy v3", True),
]
SECOND = [
    (
        "The Pricing-Page Copy V3 was approved by the user.",
        "User",
        "the Pricing-Page Copy V3",
        True,
    ),
    ("The pricing page launches on 2026-03-21.", "pricing page", "launch date", False),
    (
        "Copy v3 of the pricing page awaits legal review of its refund line.",
        "copy v3 of the pricing page",
        "refund line",
        False,
    ),
    ("Dana owns the checkout migration.", "Dana", "checkout migration", False),
]
#: A fact written under other names than the graph's: shown under the canonical ones.
ALIASED = ("The User wants a shorter refund wording.", "User", "the Refund Line", False)


def test_resolution_merge_and_retirement_on_the_spec_example(small, clock):
    mem = small.memory("pricing")
    history = converse_with_notes(small, mem, clock, [FIRST, [*SECOND, ALIASED]])
    export = mem.export()
    text = {f.n: f.text for f in export.facts}
    number = {t: n for n, t in text.items()}

    names = {e.name for e in export.entities}
    assert names == {
        "pricing page copy v3",
        "refund line",
        "pricing page",
        "launch date",
        "user",
        "Dana",
        "checkout migration",
    }
    entity = {e.n: e.name for e in export.entities}
    aliases: dict[str, set[str]] = {}
    for a in export.aliases:
        aliases.setdefault(entity[a.entity], set()).add(a.name)
    assert aliases["pricing page copy v3"] == {
        "pricing page copy v3",
        "the Pricing-Page Copy V3",
        "copy v3 of the pricing page",
    }
    assert aliases["user"] == {"user", "User"}

    merged = {e.fact: e.merged_into for e in export.edges if e.merged_into is not None}
    assert merged == {
        number[SECOND[0][0]]: number[FIRST[2][0]],
        number[SECOND[2][0]]: number[FIRST[0][0]],
    }
    [retired] = export.retirements
    assert (retired.fact, retired.by) == (number[FIRST[1][0]], number[SECOND[1][0]])
    assert retired.at == next(f.at for f in export.facts if f.n == retired.by)
    # Forgotten is not deleted: every fact written is kept, retired and merged ones too.
    assert len(export.facts) == len(FIRST) + len(SECOND) + 1

    block = mem.decorate({"model": "gpt-4.1", "messages": history})["messages"][0]["content"]
    assert block.startswith("Recorded facts from compacted history")
    assert "2026-03-21" in block and "2026-03-14" not in block
    assert block.count("awaits legal review") == 1
    assert block.count("approved by the user") == 1
    assert "[pricing page copy v3, refund line]" in block
    assert "Copy v3 of the pricing page" not in block
    # A fact the note wrote under other names is shown under the graph's canonical ones.
    assert "- The User wants a shorter refund wording. [user, refund line]" in block
    assert "the Refund Line" not in block


def _facts_block(request) -> str:
    first = request["messages"][0]
    return first["content"] if first["content"].startswith("Recorded facts") else ""


def _launch_moves(new, held):
    """A scripted relation: the later launch date contradicts the earlier one."""
    if "launches on" in new.text and "launches on" in held.text and new.text != held.text:
        return "contradicts"
    return relate_offline(new, held)


@pytest.mark.parametrize("background", [False, True])
def test_a_retired_fact_leaves_the_facts_block_and_never_stands_beside_its_successor(
    tmp_path, clock, background
):
    """The later note moves the launch to 2026-03-21 and its episodes seal at the next call,
    whether or not the graph has taken its facts yet. No request shows both dates in the facts
    block; once the graph has taken the note, the next request shows the new date alone, under
    the entities' canonical names. (Lane off: the seal finds the graph job pending; lane on: the
    worker runs it when it may.)"""
    eng = open_small(
        tmp_path / "g.db", clock, judge=ScriptedJudge(relate=_launch_moves), background=background
    )
    with eng:
        mem = eng.memory("pricing")
        history = converse_with_notes(eng, mem, clock, [FIRST])
        seen = []
        given = False
        for t in range(80):
            clock.advance(60)
            history.append({"role": "user", "content": f"Later {t}: " + " w" * 40})
            request = mem.decorate({"model": "gpt-4.1", "messages": history})
            seen.append(_facts_block(request))
            if given:
                break  # the call after the note: its episodes sealed here
            asked = any(x["function"]["name"] == "note" for x in request.get("tools") or [])
            calls = [note_call(f"n{t}", SECOND)] if asked else None
            reply = chat_reply(f"answer {t}", tool_calls=calls)
            mem.report(request, reply)
            history.append(reply["choices"][0]["message"])
            given = calls is not None
            if not given and not background:
                eng.drain()  # the lane runs between turns, but not after the note
        assert given, "the second note was never asked for"
        sealed = mem.export()
        assert any(e.state == "sealed" for e in sealed.episodes if e.last_turn > 10)
        if not background:  # sealed with its graph job pending: its facts wait for it
            assert "2026-03-21" not in seen[-1]
        eng.drain()
        history += [
            chat_reply("ok")["choices"][0]["message"],
            {"role": "user", "content": "And now?"},
        ]
        block = _facts_block(mem.decorate({"model": "gpt-4.1", "messages": history}))
    assert not any("2026-03-14" in b and "2026-03-21" in b for b in seen)
    assert "2026-03-21" in block and "2026-03-14" not in block
    assert "Dana owns the checkout migration. [Dana, checkout migration]" in block
    assert "Copy v3 of the pricing page" not in block  # merged into the fact held


def test_a_fact_the_graph_retires_while_in_the_facts_block_leaves_it_at_the_next_request(
    small, clock
):
    """The block is kept byte for byte between seals and fades, but not past a retirement: a
    note the model writes unasked (its facts belong to no episode) moves the launch date, and
    once the graph has taken it the next request's block no longer shows the old date."""
    mem = small.memory("pricing")
    history = converse_with_notes(small, mem, clock, [FIRST])
    history.append({"role": "user", "content": "When does the pricing page launch?"})
    before = _facts_block(mem.decorate({"model": "gpt-4.1", "messages": history}))
    assert "2026-03-14" in before
    moved = [("The pricing page launches on 2026-03-21.", "pricing page", "launch date", False)]
    reply = chat_reply("It moved.", tool_calls=[note_call("unasked", moved)])
    mem.report(mem.decorate({"model": "gpt-4.1", "messages": history}), reply)
    history += [reply["choices"][0]["message"], {"role": "user", "content": "Thanks."}]
    pending = _facts_block(mem.decorate({"model": "gpt-4.1", "messages": history}))
    assert pending == before  # nothing retired yet: the block as it was
    small.drain()
    history.append({"role": "user", "content": "Anything else?"})
    after = _facts_block(mem.decorate({"model": "gpt-4.1", "messages": history}))
    assert "2026-03-14" not in after and "2026-03-21" not in after  # its note sealed nothing
    assert after == before.replace(
        next(line + "\n" for line in before.splitlines() if "2026-03-14" in line), ""
    )
    [retired] = mem.export().retirements
    assert retired.fact in {f.n for f in mem.export().facts if "2026-03-14" in f.text}


def test_the_graph_survives_export_and_import(small, clock, tmp_path):
    mem = small.memory("pricing")
    converse_with_notes(small, mem, clock, [FIRST, SECOND])
    doc = fadeway.dumps(mem.export())
    with fadeway.open(tmp_path / "copy.db", clock=clock, background=False) as other:
        copy = other.import_memory(doc)
        assert fadeway.dumps(copy.export()) == doc
        other.drain()  # vectors are remade from the imported texts
        hits = copy.search("when does the pricing page launch", k=2)
        assert {h.text for h in hits} == {FIRST[1][0], SECOND[1][0]}
        assert [h.retired for h in hits if h.text == FIRST[1][0]] == [True]


def _graph(edges, retired=()):
    entities = [EntityRecord(n=n, name=f"e{n}", at=0.0) for n in range(1, 5)]
    return Graph(
        entities,
        [],
        [EdgeRecord(fact=f, subject=s, object=o, merged_into=m, at=0.0) for f, s, o, m in edges],
        [RetirementRecord(fact=f, by=b, at=0.0) for f, b in retired],
    )


def test_roots_and_what_is_shown():
    graph = _graph([(1, 1, 2, None), (2, 1, 2, 1), (3, 2, 3, 2), (4, 3, 4, None)], [(4, 1)])
    assert [graph.root(n) for n in (1, 2, 3, 4, 5)] == [1, 1, 1, 4, 5]
    assert graph.shown([3, 2, 4, 5, 1]) == [1, 5]
    assert graph.is_current(1) and not graph.is_current(2) and not graph.is_current(4)
    assert graph.is_current(9)  # not in the graph yet: shown as written
    assert sorted(graph.touching(2)) == [1]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The Pricing-Page copy V3", "pricing page copy v3"),
        ("  an  Apple ", "apple"),
        ("Straße", "STRASSE"),
        ("ＡＢＣ", "abc"),
    ],
)
def test_names_that_share_a_normal_form(a, b):
    assert normalise_name(a) == normalise_name(b)


def test_names_that_do_not():
    assert normalise_name("pricing page") != normalise_name("pricing page copy v3")
    assert normalise_name("The") == "the"  # an article alone is the name


@given(st.text())
def test_normalising_is_idempotent(name):
    assert normalise_name(normalise_name(name)) == normalise_name(name)


def F(text, subject, obj):
    return FactText(text, subject, obj)


@pytest.mark.parametrize(
    ("new", "held", "relation"),
    [
        (
            F("The pricing page launches on 2026-03-21.", "pricing page", "launch date"),
            F("The pricing page launches on 2026-03-14.", "pricing page", "launch date"),
            "contradicts",
        ),
        (
            F("The user approved pricing page copy v3.", "user", "pricing page copy v3"),
            F("Pricing page copy v3 was approved by the user.", "user", "pricing page copy v3"),
            "same",
        ),
        (
            F(
                "Checkout migration is no longer blocked on the tax rate table.",
                "checkout migration",
                "tax rate table",
            ),
            F(
                "Checkout migration is blocked on the tax rate table.",
                "checkout migration",
                "tax rate table",
            ),
            "contradicts",
        ),
        (
            F("Invoice INV-12 was sent on 2026-03-02.", "invoice INV-12", "2026-03-02"),
            F("Invoice INV-12 totals 400 dollars.", "invoice INV-12", "400 dollars"),
            "unrelated",
        ),
        (
            F("Omar owns the checkout migration.", "Omar", "checkout migration"),
            F("Dana owns the checkout migration.", "Dana", "checkout migration"),
            "unrelated",
        ),
        (
            F("Legal reviews every refund term.", "legal", "refund term"),
            F("Dana owns the checkout migration.", "Dana", "checkout migration"),
            "unrelated",
        ),
    ],
)
def test_offline_relations(new, held, relation):
    assert asyncio.run(OfflineJudge().relate([(new, held)])) == [relation]


def test_offline_entity_confirmation():
    pairs = [
        ("copy v3 of the pricing page", "Pricing page copy v3"),
        ("pricing page", "pricing page copy v3"),
        ("Refund lines", "refund line"),
        ("copy v3", "copy v4"),
        ("", ""),
    ]
    assert asyncio.run(OfflineJudge().same_entity(pairs)) == [True, False, True, False, False]


def test_a_judge_that_says_no_keeps_entities_and_facts_apart(tmp_path, clock):
    judge = ScriptedJudge(relate=lambda new, held: "unrelated", same_entity=lambda a, b: False)
    with fadeway.open(
        tmp_path / "n.db",
        clock=clock,
        background=False,
        judge=judge,
        **NOTE_ASKING,
    ) as eng:
        mem = eng.memory("m")
        converse_with_notes(eng, mem, clock, [FIRST, SECOND])
        export = mem.export()
    assert not export.retirements
    assert all(e.merged_into is None for e in export.edges)
    # Names with one normal form are one entity without asking; "copy v3 of the pricing page"
    # needed the judge's yes, and did not get it.
    assert {e.name for e in export.entities} >= {
        "pricing page copy v3",
        "copy v3 of the pricing page",
    }
    assert any(kind == "same_entity" for kind, _ in judge.calls)


def test_a_graph_job_run_late_retires_its_older_fact_not_the_newer_one_held(clock, tmp_path):
    """A parked graph job may run after later notes' jobs: the newer fact still retires the
    older, whichever of them the graph took first."""
    from fadeway.graph.update import plan_graph
    from fadeway.records import AliasRecord, FactRecord

    older = FactRecord(
        n=1, note=1, text=FIRST[1][0], subject="pricing page", object="launch date",
        milestone=False, at=100.0,
    )  # fmt: skip
    newer = FactRecord(
        n=2, note=2, text=SECOND[1][0], subject="pricing page", object="launch date",
        milestone=False, at=200.0,
    )  # fmt: skip
    graph = Graph(
        [
            EntityRecord(n=1, name="pricing page", at=200.0),
            EntityRecord(n=2, name="launch date", at=200.0),
        ],
        [
            AliasRecord(norm=normalise_name(n), entity=e, name=n, at=200.0)
            for e, n in ((1, "pricing page"), (2, "launch date"))
        ],
        [EdgeRecord(fact=2, subject=1, object=2, merged_into=None, at=200.0)],
        [],
    )
    judge = ScriptedJudge(relate=_launch_moves)
    with fadeway.open(tmp_path / "g.db", clock=clock, background=False) as engine:
        update = asyncio.run(plan_graph(judge, engine.embedder, graph, [older, newer], [older], {}))
    assert [(r.fact, r.by, r.at) for r in update.retirements] == [(1, 2, 200.0)]
    assert [e.fact for e in update.edges] == [1]


def test_a_new_fact_is_weighed_against_the_held_facts_most_like_it_not_an_entitys_oldest(
    clock, tmp_path
):
    """A speaker touches many facts: the held fact a new one restates is the ninth about her,
    past the RELATE_CANDIDATES an entity's facts in the graph's order gave, and is weighed (and
    merged) all the same; the pairs judged are the held facts most like the new one."""
    from fadeway import _constants as C
    from fadeway.graph.update import plan_graph
    from fadeway.records import AliasRecord, FactRecord

    objects = [f"report {i}" for i in range(C.RELATE_CANDIDATES)] + ["checkout migration"]
    held = [
        FactRecord(
            n=i + 1, note=1, text=f"Dana reviewed the {name}." if i < len(objects) - 1
            else "Dana owns the checkout migration.", subject="Dana", object=name,
            milestone=False, at=100.0 + i,
        )
        for i, name in enumerate(objects)
    ]  # fmt: skip
    names = ["Dana", *objects]
    graph = Graph(
        [EntityRecord(n=e + 1, name=name, at=100.0) for e, name in enumerate(names)],
        [
            AliasRecord(norm=normalise_name(name), entity=e + 1, name=name, at=100.0)
            for e, name in enumerate(names)
        ],
        [EdgeRecord(fact=f.n, subject=1, object=f.n + 1, merged_into=None, at=f.at) for f in held],
        [],
    )
    new = FactRecord(
        n=len(held) + 1, note=2, text="Dana owns the checkout migration now.", subject="Dana",
        object="checkout migration", milestone=False, at=200.0,
    )  # fmt: skip
    weighed: list[str] = []

    def relate(new_fact: FactText, held_fact: FactText) -> str:
        weighed.append(held_fact.text)
        return "same" if held_fact.text == held[-1].text else "unrelated"

    judge = ScriptedJudge(relate=relate)
    with fadeway.open(tmp_path / "g.db", clock=clock, background=False) as engine:
        update = asyncio.run(plan_graph(judge, engine.embedder, graph, [*held, new], [new], {}))
    assert weighed[0] == held[-1].text  # the most like it first
    assert len(weighed) == C.RELATE_CANDIDATES
    assert [(e.fact, e.merged_into) for e in update.edges] == [(new.n, held[-1].n)]
