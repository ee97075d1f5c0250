"""The offline judge against hand labels (benches/labels/, benches/offline_judgments.py), with
floors a little under what it measures, and the rules behind those figures one by one.

The LoCoMo labels are references into shared/data/locomo (CC BY-NC 4.0, never copied here):
without the file those floors are skipped. The agent-sample labels quote the bundled sample and
always run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fadeway import _constants as C
from fadeway.graph.update import entity_candidate
from fadeway.judge import FactText, OfflineJudge
from fadeway.judge.offline import (
    distill_offline,
    levels_offline,
    may_have_drawn_on,
    relate_offline,
    same_entity_offline,
)
from helpers import converse_with_notes, shared_data

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))

import offline_judgments as bench  # noqa: E402
from offline_labels import Agent, Locomo  # noqa: E402


@pytest.fixture(scope="module")
def locomo():
    path = shared_data("locomo/locomo10.json")
    if path is None:
        pytest.skip("LoCoMo is not in shared/data ($FADEWAY_SHARED_DATA): its label floors skip")
    return bench.locomo_sets(Locomo.from_path(path))


@pytest.fixture(scope="module")
def agent():
    return bench.agent_sets(Agent())


def relate_scores(pairs, cls):
    answers = [
        relate_offline(bench.fact_text(p.new), bench.fact_text(p.held))
        if p.new is not None and p.held is not None
        else "unrelated"
        for p in pairs
    ]
    return bench.precision_recall([a == cls for a in answers], [p.label == cls for p in pairs])


def entity_scores(pairs):
    passed = bench.gate(pairs)
    judged = [g and same_entity_offline(p.a, p.b) for g, p in zip(passed, pairs, strict=True)]
    truth = [p.same for p in pairs]
    return bench.precision_recall(judged, truth), bench.precision_recall(passed, truth)[1]


# -- floors ---------------------------------------------------------------------------------------


def test_relate_on_locomo_retires_nothing_true(locomo):
    relate, _, _ = locomo
    # Measured: contradicts 1.00 (nothing wrongly retired; 0 found), same 1.00 / 0.13.
    assert relate_scores(relate, "contradicts")[0] >= 0.9
    precision, recall = relate_scores(relate, "same")
    assert precision >= 0.9 and recall >= 0.1
    assert bench.wrong_retirements(relate) == []


def test_relate_on_the_agent_sample(agent):
    relate, _, _ = agent
    # Measured: contradicts 1.00 / 0.20, same 1.00 / 0.14.
    precision, recall = relate_scores(relate, "contradicts")
    assert precision >= 0.9 and recall >= 0.15
    assert relate_scores(relate, "same")[0] >= 0.9
    assert bench.wrong_retirements(relate) == []


def test_same_entity_on_locomo(locomo):
    _, names, _ = locomo
    (precision, recall), gate_recall = entity_scores(names)
    # Measured: the gate passes 0.79 of the same pairs; gate then judge 0.96 / 0.61.
    assert gate_recall >= 0.75
    assert precision >= 0.9 and recall >= 0.55


def test_same_entity_on_the_agent_sample(agent):
    _, names, _ = agent
    (precision, recall), gate_recall = entity_scores(names)
    # Measured: the gate passes every same pair; gate then judge 1.00 / 0.94.
    assert gate_recall >= 0.95
    assert precision >= 0.9 and recall >= 0.85


# -- the rules ------------------------------------------------------------------------------------


def F(text, subject, obj):
    return FactText(text, subject, obj)


@pytest.mark.parametrize(
    ("new", "held", "relation"),
    [
        # A number after a reference word is a label: another turn is another thing.
        (
            F("Dana's pricing question was discussed at turn 16.", "Dana", "pricing question"),
            F("Dana's pricing question was discussed at turn 13.", "Dana", "pricing question"),
            "unrelated",
        ),
        # A changed count of the same thing.
        (
            F("Dana has 3 direct reports.", "Dana", "3 direct reports"),
            F("Dana has 2 direct reports.", "Dana", "2 direct reports"),
            "contradicts",
        ),
        # Two events on two dates are two events.
        (
            F("Ines went to a street parade on 12 August.", "Ines", "street parade"),
            F("Ines went to a street parade on 5 May.", "Ines", "street parade"),
            "unrelated",
        ),
        # ... but a moved date is a changed value ("moved", "now").
        (
            F("The launch moved to Thursday 16 April.", "launch", "16 April"),
            F("The launch is on Tuesday 14 April.", "launch", "14 April"),
            "contradicts",
        ),
        (
            F("ENG-2271 is now due Friday 17 April.", "ENG-2271", "17 April"),
            F("ENG-2271 is due this Friday, 10 April.", "ENG-2271", "10 April"),
            "contradicts",
        ),
        # A value the newer fact takes back.
        (
            F("Business is $25 per seat/month, not $24.", "Business", "$25"),
            F("So Business at $24 is Priya's number in the copy.", "Business", "$24"),
            "contradicts",
        ),
        # "$36.6k" is "$36,612" rounded; a value said beside the held ones changes nothing.
        (
            F("The window defers $43,842, up from the ~$36.6k of last week.", "window", "$43,842"),
            F("The extra months cost $36,612 of uplift.", "window", "$36,612"),
            "contradicts",
        ),
        (
            F(
                "Business at $25: grandfathering defers $7.3k (was $6.1k at $24).",
                "Business",
                "$25",
            ),
            F("Business at $25: grandfathering defers $7.3k instead of $6.1k.", "Business", "$25"),
            "unrelated",
        ),
        # Two rows of a tool's output with different names are other rows, not other values.
        (
            F("query_metrics: type m6i.large, count 6, since 2026-04-13.", "query_metrics", "6"),
            F("query_metrics: type m6i.2xlarge, count 6, since 2026-02-11.", "query_metrics", "6"),
            "unrelated",
        ),
        # A negation counts through the word it negates: a restatement with "won't give up" in
        # it is not a denial, nor is "never give up" one of "give the dog a home".
        (
            F("Your notes really keep me going.", "Ravi", "notes"),
            F("I won't give up - your notes keep me going!", "Ravi", "notes"),
            "unrelated",
        ),
        (
            F("These letters remind me to never give up!", "Ines", "letters"),
            F("My plan is to give the old dog a quiet home.", "Ines", "plan"),
            "unrelated",
        ),
        (
            F("Checkout migration is no longer blocked on the tax table.", "checkout", "tax table"),
            F("Checkout migration is blocked on the tax table.", "checkout", "tax table"),
            "contradicts",
        ),
        # A date is a day of a year: another year is another value (it was once "same", and
        # the newer year merged away), a date without one neither differs nor matches.
        (
            F("The pricing page launches on 2027-03-14.", "pricing page", "launch date"),
            F("The pricing page launches on 2026-03-14.", "pricing page", "launch date"),
            "contradicts",
        ),
        (
            F("The pricing page launches on March 14.", "pricing page", "launch date"),
            F("The pricing page launches on 2026-03-14.", "pricing page", "launch date"),
            "unrelated",
        ),
        (
            F("Dana filed the tax return on 2026-04-14.", "Dana", "tax return"),
            F("Dana filed the tax return on 2025-04-14.", "Dana", "tax return"),
            "unrelated",  # two filings: a past action on two dates is two occurrences
        ),
        # What is said of every occasion is not denied by one.
        (
            F("I miss not being at practice.", "Ravi", "practice"),
            F("I push hard every time I'm at practice.", "Ravi", "practice"),
            "unrelated",
        ),
        (
            F("Back at practice, I'm getting faster.", "Ravi", "practice"),
            F("I miss not being at practice.", "Ravi", "practice"),
            "unrelated",  # too few shared words to read as the same claim denied
        ),
    ],
)
def test_what_a_contradiction_is(new, held, relation):
    assert relate_offline(new, held) == relation


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("Dana", "Dana Whitfield", True),
        ("Whitfield", "Dana Whitfield", True),
        ("Biscuit's", "Biscuit", True),
        ("The Wolves", "Minnesota Wolves", True),
        ("NYC", "New York City", True),
        ("C&F", "Calloway & Finch", True),
        ("spiderman", "Spider-Man", True),
        ("climbing club", "Lisbon climbing club", True),
        ("my dance studio", "dance studio", True),
        ("priya.raman", "Priya", True),
        # Not one entity: a name is not the event named for it, two people share no name, the
        # start of a description is not the thing it describes.
        ("Harry Potter", "Harry Potter conference", False),
        ("Jonas", "Jonas and Ben", False),
        ("Dana", "Omar", False),
        ("pricing page", "pricing page copy v3", False),
        ("pricing page", "copy v3 of the pricing page", False),
        ("LEG-429", "LEG-427", False),
        ("dog shelter", "homeless shelter", False),
        ("got", "Game of Thrones", False),
    ],
)
def test_what_a_name_is(a, b, same):
    assert same_entity_offline(a, b) is same
    assert same_entity_offline(b, a) is same


def test_a_first_name_reaches_the_judgment_with_the_full_name():
    from fadeway.embed.hashing import HashingEmbedder

    a, b = HashingEmbedder().embed_sync(["Dana", "Dana Whitfield"])
    cosine = float(a @ b)
    assert cosine < 0.6  # the embedding alone would never ask
    assert entity_candidate("Dana", "Dana Whitfield", cosine)
    assert entity_candidate("NYC", "New York City", 0.0)
    assert not entity_candidate("Dana", "Omar", 0.0)


def test_the_graph_makes_one_entity_of_a_first_name_and_the_full_name(small, clock):
    mem = small.memory("people")
    notes = [
        [("Dana Whitfield owns the checkout migration.", "Dana Whitfield", "checkout", False)],
        [("Dana moved the launch to Thursday.", "Dana", "launch", False)],
    ]
    converse_with_notes(small, mem, clock, notes)
    export = mem.export()
    entity = {e.n: e.name for e in export.entities}
    assert "Dana" not in entity.values()
    dana = next(a for a in export.aliases if a.name == "Dana")
    assert entity[dana.entity] == "Dana Whitfield"


def test_the_offline_judge_answers_the_same_as_its_functions():
    import asyncio

    judge = OfflineJudge()
    assert asyncio.run(judge.same_entity([("Dana", "Dana Whitfield")])) == [True]
    pair = (F("Dana has 3 reports.", "Dana", "3 reports"), F("Dana has 2 reports.", "Dana", "x"))
    assert asyncio.run(judge.relate([pair])) == ["contradicts"]


def test_a_shared_name_alone_does_not_make_a_fact_relevant():
    """In a conversation of two people every fact names one of them: a fact about the question
    outranks those that only name its person, and the talk before the question counts less
    than the question."""
    facts = [
        F("Caroline: I just joined a new LGBTQ activist group last Tuesday.", "Caroline", "group"),
        F("Caroline: I'm so lucky to have such a great support system.", "Caroline", "support"),
        F("Caroline: Painting helps me be my true self.", "Caroline", "painting"),
        F("Melanie: I'm proud of you for being your true self.", "Melanie", "true self"),
        F("Melanie: My kids loved the museum.", "Melanie", "museum"),
    ]
    dialogue = (
        "Melanie: It's so freeing to be your true self and live honestly.\n"
        "Caroline: When did I join the activist group?"
    )
    activist, support, painting, proud, museum = levels_offline(facts, dialogue)
    assert activist >= C.LEAD_LEVEL
    assert activist > max(support, painting, proud, museum)
    assert museum < C.KEEP_LEVEL and support < C.KEEP_LEVEL  # only a name or nothing in common
    # What the talk before says still counts, at less weight than the question.
    alone = levels_offline(facts, "Caroline: When did I join the activist group?")
    assert proud >= alone[3] and proud <= activist


def test_distill_keeps_what_the_reply_drew_on():
    """Recall found every fact through the message's words: what followed the message decides
    which the turn drew on; a fact the conversation restates is said already."""
    facts = [
        F("Dana owns the checkout migration since the March reorg.", "Dana", "checkout"),
        F("Legal reviews every refund term.", "legal", "refund term"),
        F("The checkout migration is blocked on the tax table.", "checkout", "tax table"),
        F("Dana owns the checkout migration.", "Dana", "checkout"),
    ]
    question = "Who owns the checkout migration?"
    reply = "Dana does; she took it over after the reorg."
    assert distill_offline(facts, f"{question}\n{reply}") == [True, False, False, False]
    assert distill_offline(facts, question) == [False] * 4  # nothing followed: nothing drawn on


def test_distill_lets_go_of_what_the_reply_only_thanked_or_named():
    """A reply that shares only thanks, cheer and the speakers' names with a recalled excerpt
    drew on nothing of it: the excerpt goes (before, "Thanks, Gina! Your support means a lot"
    stayed in every later request beside replies that thank and support). One that shares a
    word of its content keeps it."""
    items = [
        F("Jon: Thanks, Gina! Your support really means a lot to me.", "Jon", "Gina"),
        F("Jon: Bye!", "Jon", "Gina"),
        F("Jon: I signed the lease for the dance studio on Main Street.", "Jon", "dance studio"),
    ]
    message = "Jon: Guess what happened this week?"
    thanked = f"{message}\nGina: Thanks Jon, your support means a lot, bye for now!"
    assert distill_offline(items, thanked) == [False, False, False]
    assert may_have_drawn_on([f.text for f in items], thanked) == [False, False, False]
    studio = f"{message}\nGina: Congrats on the studio lease, Jon! Main Street is perfect."
    assert distill_offline(items, studio) == [False, False, True]
    assert may_have_drawn_on([f.text for f in items], studio) == [False, False, True]


def test_an_item_the_turn_shares_one_word_with_is_not_asked_about():
    """What followed the message must carry what an item adds to it (half of its own content
    words, two at most) for the item to be one the turn may have drawn on: a tool output or a
    reply that shares a single word with most of a block (an agent's turn) no longer has the
    LLM judge reread the whole block (distill read about 60% of it on the bundled sample)."""
    items = [
        F("The checkout migration moved to the new tax table after the review.", "checkout", "tax"),
        F("Dana reviews refunds on Thursdays.", "Dana", "refunds"),
    ]
    message = "What is left for this week?"
    one_word = f"{message}\nThe tax report is due on Friday."
    assert may_have_drawn_on([f.text for f in items], one_word) == [False, False]
    two_words = f"{message}\nThe tax table is done; refunds wait for Dana on Thursdays."
    assert may_have_drawn_on([f.text for f in items], two_words) == [True, True]
