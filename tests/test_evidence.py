"""The strict evidence count (fadeway.evaluate.evidence): what surfaces a turn and what does not."""

import unicodedata

from fadeway.evaluate.evidence import evidence_ids, normalise, runs, surfaced, turn_key, words


def test_normalise_and_words() -> None:
    assert normalise("  Ｆｕｌｌ\u00a0width\n\tTEXT, kept! ") == "full width text, kept!"
    assert normalise("Straße") == "strasse"  # casefold, not lower
    assert words("It's 9-5, OK?") == ["it", "s", "9", "5", "ok"]
    assert runs(["a", "b", "c"], 2) == {("a", "b"), ("b", "c")} and runs(["a"], 2) == set()


def test_what_surfaces_a_turn() -> None:
    turn = (
        "Hey Gina! Good to see you too. Lost my job as a banker yesterday, so I'm gonna take "
        "a shot at starting my own business."
    )
    keys = {"D1:2": turn_key(turn), "D9:9": turn_key("Thanks!"), "D0:0": turn_key("")}
    # Quoted whole, with the speaker and a caption around it, on other lines, other case.
    block = f"- [Turn 1 · User · Jan 20]\nJon:   {turn.upper()} [image: a desk]"
    assert surfaced(block, keys, ["D1:2"]) == {"D1:2"}
    # Only a later sentence, 10+ words long, quoted (a fact): the run of words finds it.
    fact = "- [2023-01-20, turn 1] Jon: Lost my job as a banker yesterday, so I'm gonna take a shot"
    assert surfaced(fact, keys, ["D1:2"]) == {"D1:2"}
    # Nine words of it are not enough, nor the same words out of order.
    assert surfaced("my job as a banker yesterday, so i'm", keys, ["D1:2"]) == set()  # 9: i, m
    assert surfaced("yesterday banker a as job my lost so i'm gonna take", keys, ["D1:2"]) == set()
    # The head is the turn's whole first 60 characters: a shorter opening is not enough.
    assert surfaced("Jon: Hey Gina! Good to see you too. Lost my", keys, ["D1:2"]) == set()
    # A short turn is found whole; an empty one never; no text surfaces nothing.
    assert surfaced("Gina: Thanks! See you.", keys, ["D9:9", "D0:0"]) == {"D9:9"}
    assert surfaced(None, keys, ["D1:2"]) == set()
    # Unicode look-alikes fold: a fullwidth quote of the head still counts.
    wide = unicodedata.normalize("NFKC", turn[:70]).translate(
        {c: c + 0xFEE0 for c in range(0x21, 0x7F)}
    )
    assert surfaced(wide, keys, ["D1:2"]) == {"D1:2"}


def test_evidence_ids_are_repaired_and_limited() -> None:
    known = {"D8:6", "D9:17", "D11:26", "D30:5"}
    raw = ["D8:6; D9:17", "D:11:26", "D30:05", "D", "D99:1", "D8:6"]
    assert evidence_ids(raw, known) == ["D8:6", "D9:17", "D11:26", "D30:5"]
