"""The wheel as users install it (issue 31, item 4): `maturin build --release` makes one abi3
wheel that passes maturin's manylinux audit, and that wheel, installed into a fresh virtual
environment with no Rust toolchain on PATH, runs the demo.

The new environment reads fadeway's dependencies from this one's site-packages (a test never
reaches the network), after its own, where the wheel is installed: the test checks that
`import fadeway` finds the wheel's copy, not this checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The release wheel, built from this checkout (cargo offline: CI fetched the crates)."""
    maturin = shutil.which("maturin") or str(Path(sys.executable).with_name("maturin"))
    if not Path(maturin).exists() or shutil.which("cargo") is None:
        pytest.skip("building the wheel needs maturin (the dev extra) and cargo on PATH")
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [maturin, "build", "--release", "--offline", "--auditwheel", "check", "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1_200,
    )
    assert built.returncode == 0, built.stderr[-3_000:]
    (path,) = out.glob("fadeway-*.whl")
    return path


def test_the_wheel_is_one_abi3_manylinux_wheel(wheel):
    name = wheel.name
    assert "-abi3-" in name and "manylinux" in name, name


def test_the_wheel_installs_and_runs_the_demo_without_rust(wheel, tmp_path):
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # The dependencies, from this environment's site-packages, after the new one's own (a path
    # a .pth file adds is not a site directory: the editable checkout's .pth there is not read).
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()]
    Path(own, "dependencies.pth").write_text("".join(f"{p}\n" for p in deps))
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr
    # No Rust toolchain: PATH holds the environment and the system's own directories only.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "CARGO", "RUST"))}
    env["PATH"] = os.pathsep.join([str(env_dir / "bin"), "/usr/bin", "/bin"])
    assert shutil.which("cargo", path=env["PATH"]) is None
    assert shutil.which("rustc", path=env["PATH"]) is None
    where = subprocess.run(
        [str(python), "-c", "import fadeway; print(fadeway.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(env_dir), where.stdout
    demo = subprocess.run(
        [str(python), "-m", "fadeway", "demo", "--db", str(tmp_path / "demo.db"), "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stderr[-3_000:]
    shown = json.loads(demo.stdout)["inspect"]
    assert (shown["memory_id"], shown["messages"]) == ("launch-week", 999)
    assert shown["facts_block"], "the demo's memory forgot, and its facts stand in the block"
