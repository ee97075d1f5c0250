"""`fadeway inspect MEMORY --html FILE`: the page shows every section, escapes every stored text,
refers to nothing on the network, and renders in headless Chromium without a console message."""

from __future__ import annotations

import html
import re
import shutil
import subprocess

import pytest

import fadeway
from conftest import Clock, open_small
from fadeway.cli.main import main
from fadeway.cli.page import build_page, gather_page
from fadeway.cli.plot import BEFORE
from helpers import chat_reply, converse_with_notes
from test_graph import FIRST, SECOND
from test_usage import MeteredJudge

#: Untrusted text as a message, a fact and a memory id could hold it.
HOSTILE = "</pre><script>alert(1)</script>"
HOSTILE_ID = 'pricing"><img src=x onerror=alert(2)>'
HOSTILE_FACT = (f"Legal wrote {HOSTILE} on the refund line.", "refund line", "legal", False)

QUESTIONS = [
    "When does the pricing page launch?",
    f"Who approved the pricing page copy v3? {HOSTILE}",
    *(f"Unrelated talk {i}: " + " ".join(f"x{i}_{j}" for j in range(40)) for i in range(30)),
    "What did legal write on the refund line of the pricing page copy?",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A store whose memory has forgotten, sealed, leaving and live episodes, notes, recall
    blocks and model calls, with hostile text in a message, a fact and its id."""
    db = tmp_path_factory.mktemp("page") / "page.db"
    clock = Clock()
    with open_small(db, clock, judge=MeteredJudge()) as engine:
        mem = engine.memory(HOSTILE_ID)
        history = converse_with_notes(
            engine, mem, clock, [[*FIRST, HOSTILE_FACT], SECOND], opening=[HOSTILE]
        )
        for question in QUESTIONS:
            clock.advance(60)
            history.append({"role": "user", "content": question})
            request = mem.decorate({"model": "gpt-4.1", "messages": history})
            mem.report(request, chat_reply(f"ok: {question}"))
            history.append({"role": "assistant", "content": f"ok: {question}"})
            engine.drain()
        at = clock() + 3_600
        data = gather_page(engine.store, HOSTILE_ID, at, plot_end=at)
    return db, data, build_page(data)


def test_the_memory_has_every_state_recall_blocks_and_model_calls(built):
    _, data, _ = built
    assert {"live", "leaving", "sealed", "forgotten"} <= {e["state"] for e in data.view["episodes"]}
    assert data.recalls and data.groups and data.view["facts_block"]
    assert {"judge:boundaries", "judge:about", "judge:levels"} <= {
        r["kind"] for r in data.usage["rows"]
    }


def test_the_page_shows_every_section(built):
    _, data, page = built
    view = data.view
    # The facts block as the model sees it, preformatted.
    assert f"<pre>{html.escape(view['facts_block'])}</pre>" in page
    # Every episode: a table row with its state, and a line of the plot.
    for e in view["episodes"]:
        n, state = e["n"], e["state"]
        row = re.search(rf'<tr class="episode" data-episode="{n}">(.*?)</tr>', page)
        assert row is not None, f"no row for episode {n}"
        assert f'<td class="text state-{state}">{state}</td>' in row.group(1)
        assert f"<td>{e['activation']:.4f}</td>" in row.group(1)
        assert len(re.findall(rf'<path class="episode" data-episode="{n}" [^>]*d="M', page)) == 1
    assert page.count("<svg") == 1 and page.count('<path class="episode"') == len(view["episodes"])
    # Each turn's recall block, and what it became.
    for turn in data.recalls:
        assert f'data-turn="{turn.record.turn}"' in page
        assert f"<pre>{html.escape(turn.record.text)}</pre>" in page
    assert any(t.final is not None for t in data.recalls) and "final: " in page
    # The graph's neighbourhoods, named for their entities, with their facts.
    for group in data.groups:
        assert f"<h3>{html.escape(group.name)}</h3>" in page
        for fact in group.facts:
            assert html.escape(fact.text) in page
    assert "<h3>pricing page copy v3</h3>" in page
    # The model calls, by kind, as `fadeway usage` shows them.
    for r in data.usage["rows"]:
        assert f'<td class="text">{r["kind"]}</td><td class="text">{r["model"]}</td>' in page
        assert f"<td>{r['calls']:,}</td>" in page
    assert '<tr class="total"><td class="text">total</td>' in page


def test_the_activation_plot_ends_at_the_inspect_view_and_jumps_at_traces(built):
    db, data, _ = built
    history = data.history
    assert history is not None and history.end == data.view["at"]
    for e in data.view["episodes"]:
        points = history.points[e["n"]]
        assert [t for t, _ in points] == sorted(t for t, _ in points)
        t, activation = points[-1]
        assert t == history.end and activation == pytest.approx(e["activation"], rel=1e-9)
    # Each counted trace is drawn where it happens: the activation jumps by its score there.
    with fadeway.open(db, background=False) as engine, engine.store.read(HOSTILE_ID) as tx:
        traces = [t for t in tx.traces() if t.counted and t.score > 0]
    later = [t for t in traces if t.at > min(u.at for u in traces if u.episode == t.episode)]
    assert later  # notes and recalls traced episodes after their encoding
    for trace in later:
        at = dict(history.points[trace.episode])
        assert at[trace.at] - at[trace.at - BEFORE] >= trace.score * 0.999


def test_stored_text_is_escaped(built):
    _, data, page = built
    assert HOSTILE not in page and "<script" not in page.lower()
    assert "onerror=alert(2)>" not in page
    assert html.escape(HOSTILE) in page  # shown, as text
    assert f"<h1>memory {html.escape(HOSTILE_ID)}</h1>" in page
    assert any(HOSTILE in t.record.text for t in data.recalls)  # recall quoted the message
    assert any(HOSTILE in f.text for g in data.groups for f in g.facts)  # and the graph holds it


def test_the_page_refers_to_nothing_on_the_network(built):
    _, _, page = built
    assert not re.search(r"""(src|href|action|poster|srcset)\s*=\s*["']?\s*(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page
    assert "http://" not in page and "https://" not in page
    assert "<link" not in page and "<iframe" not in page
    assert (
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
    ) in page


def test_an_early_memory_shows_what_it_lacks_yet(tmp_path, clock):
    with fadeway.open(tmp_path / "e.db", clock=clock, background=False) as engine:
        engine.memory("new").decorate(
            {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hello"}]}
        )
        page = build_page(gather_page(engine.store, "new", clock()))
    assert "no episodes yet" in page and "(empty: no episode has sealed yet)" in page
    assert "no held facts yet" in page and "no recall blocks yet" in page
    assert "no model calls recorded" in page and "<svg" not in page


def test_the_cli_writes_the_page(built, tmp_path, capsys):
    db, _, _ = built
    target = tmp_path / "report.html"
    assert main(["inspect", HOSTILE_ID, "--db", str(db), "--html", str(target)]) == 0
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and '<path class="episode"' in page
    assert "wrote" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary file left


def test_the_cli_refuses_an_unknown_memory_and_writes_nothing(built, tmp_path, capsys):
    db, _, _ = built
    target = tmp_path / "report.html"
    assert main(["inspect", "nobody", "--db", str(db), "--html", str(target)]) == 2
    assert "no memory 'nobody'" in capsys.readouterr().err
    missing = tmp_path / "missing" / "report.html"
    assert main(["inspect", HOSTILE_ID, "--db", str(db), "--html", str(missing)]) == 2
    assert "--html" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # one output at a time
        main(["inspect", HOSTILE_ID, "--db", str(db), "--html", str(target), "--json"])
    assert exited.value.code == 2
    assert list(tmp_path.iterdir()) == []


def test_export_shares_the_write_beside_and_rename(built, tmp_path):
    db, _, _ = built
    target = tmp_path / "m.jsonl"
    assert main(["export", HOSTILE_ID, "--db", str(db), "-o", str(target)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["m.jsonl"] and target.stat().st_size > 0


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _render(page, out, *flags):
    """Headless Chromium on the file `page`; returns the run (stderr holds its log, console
    messages as `INFO:CONSOLE` lines)."""
    return subprocess.run(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            f"--user-data-dir={out / 'profile'}",
            "--window-size=1280,2000",
            *flags,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _console(run) -> list[str]:
    return [line for line in run.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


@pytest.mark.chromium
@pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary on PATH (Debian: apt-get install chromium)"
)
def test_the_page_renders_in_headless_chromium_without_a_console_message(built, tmp_path):
    _, _, page = built
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    # The capture works: a page with a failing script and a blocked load logs both.
    bad = tmp_path / "bad.html"
    bad.write_text(
        page.replace("</body>", "<script>undefinedFunction()</script></body>"), encoding="utf-8"
    )
    logged = _console(_render(bad, tmp_path, "--dump-dom"))
    assert any("inline script" in line for line in logged), logged  # refused by the CSP
    # The page: a screenshot, and no console message at all (it runs no script).
    shot = tmp_path / "page.png"
    run = _render(path, tmp_path, f"--screenshot={shot}")
    assert run.returncode == 0, run.stderr[-2000:]
    assert _console(run) == []
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 20_000
    assert int.from_bytes(png[16:20], "big") == 1280  # the width asked for
    # The document as Chromium built it: hostile text stayed text, every section is there.
    dom = _render(path, tmp_path, "--dump-dom")
    assert dom.returncode == 0 and _console(dom) == []
    assert "<script" not in dom.stdout.lower() and html.escape(HOSTILE) in dom.stdout
    for section in ("activation", "episodes", "facts-block", "graph", "recall", "usage"):
        assert f'<section id="{section}">' in dom.stdout
