"""Power-loss images (issue 33, "The suite"): a live conversation on a SQLite store in WAL mode,
its files copied after every acknowledged call as a machine losing power would leave them, then
each copy damaged as a lost write leaves a WAL: its tail truncated at a random offset, or a run
of it zeroed. Every image must open, pass `PRAGMA integrity_check`, hold a byte-exact prefix of
the conversation (no partial write: a transaction is there whole or not at all), search without
error (the saved indexes, ahead of the store now, are caches it must not trust blindly), and go
on: the caller's whole history sent again stores what was lost, and the memory answers.
"""

from __future__ import annotations

import logging
import random
import shutil
from pathlib import Path

import pytest

import fadeway

from .children import CEILING, MODEL, reply_message, stored_form, user_message
from .test_kill import integrity, stored_bodies
from .tiers import TIERS, figure, scaled

#: Turns of the conversation imaged (each turn's decorate and report, then the lane drained).
TURNS = 24


def _image(db: Path, into: Path) -> Path:
    """The store's files as they are now (the engine still open: nothing checkpointed)."""
    into.mkdir(parents=True)
    for suffix in ("", "-wal"):
        source = db.with_name(db.name + suffix)
        if source.exists():
            shutil.copy2(source, into / (db.name + suffix))
    indexes = db.with_name(db.name + ".indexes")
    if indexes.exists():
        shutil.copytree(indexes, into / (db.name + ".indexes"))
    return into / db.name


def _converse(db: Path, images: Path) -> tuple[list[Path], list[dict]]:
    """A conversation that forgets (a small ceiling, the offline note writer in the lane), an
    image after each turn; returns the images and the history."""
    history: list[dict] = []
    taken = []
    with fadeway.open(db, background=False, ceiling=CEILING, note_writer="offline") as engine:
        memory = engine.memory("m")
        for turn in range(TURNS):
            history.append(user_message(turn))
            request = memory.decorate({"model": MODEL, "messages": history})
            memory.report(request, {"choices": [{"index": 0, "message": reply_message(turn)}]})
            history.append(reply_message(turn))
            engine.drain()
            taken.append(_image(db, images / f"t{turn}"))
    return taken, history


def _damage(db: Path, rng: random.Random) -> str:
    """Truncate the image's WAL at a random offset, or zero a random run of it; says which."""
    wal = db.with_name(db.name + "-wal")
    data = bytearray(wal.read_bytes()) if wal.exists() else bytearray()
    if not data:
        return "no WAL"
    at = rng.randrange(len(data))
    if rng.random() < 0.5:
        wal.write_bytes(bytes(data[:at]))
        return f"WAL truncated at {at} of {len(data)}"
    end = min(len(data), at + rng.randint(1, 64 * 1024))
    data[at:end] = bytes(end - at)
    wal.write_bytes(bytes(data))
    return f"WAL zeroed {at}-{end} of {len(data)}"


def _goes_on(db: Path, history: list[dict]) -> None:
    """The whole history sent again: the memory stores what it lacks and answers; search runs."""
    with fadeway.open(db, background=False, ceiling=CEILING, note_writer="offline") as engine:
        memory = engine.memory("m")
        for kind in ("fact", "passage"):
            memory.search("Turn answer", kind=kind, k=3)
        message = user_message(TURNS)
        request = memory.decorate({"model": MODEL, "messages": [*history, message]})
        memory.report(request, {"choices": [{"index": 0, "message": reply_message(TURNS)}]})
        engine.drain()
        for kind in ("fact", "passage"):
            memory.search("Turn answer", kind=kind, k=3)
    expected = [stored_form(m) for m in [*history, message, reply_message(TURNS)]]
    assert stored_bodies(db, "m") == expected
    assert integrity(db) == "ok"


@pytest.mark.parametrize("tier", TIERS)
def test_power_loss_images_open_whole_and_go_on(tier, tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="fadeway")  # over the small ceiling is expected
    images, history = _converse(tmp_path / "live.db", tmp_path / "images")
    rng = random.Random(20261203)
    wanted = scaled(tier, 40, 1_000)
    kinds: dict[str, int] = {}
    lost = 0  # images that lost acknowledged messages (the damage reached their commits)
    for i in range(wanted):
        turn = rng.randrange(len(images))
        image = _image(images[turn], tmp_path / "damaged" / str(i))
        how = _damage(image, rng)
        kind = next((k for k in ("truncated", "zeroed") if k in how), "no WAL")
        kinds[kind] = kinds.get(kind, 0) + 1
        with fadeway.open(image, background=False) as engine:  # fadeway opens it first
            engine.memory_ids()
        assert integrity(image) == "ok", how
        kept = stored_bodies(image, "m")
        assert kept == [stored_form(m) for m in history[: len(kept)]], how  # a prefix, whole
        lost += len(kept) < 2 * (turn + 1)
        _goes_on(image, history)
        shutil.rmtree(image.parent)
    assert lost > wanted // 4, "the damage should reach committed transactions often"
    figure(
        f"{wanted} power-loss images ({kinds}; {lost} lost acknowledged messages): every one "
        "opened, integrity ok, a byte-exact prefix of the conversation, and went on"
    )
