"""The extension's stub (`fadeway/_core.pyi`) matches what the extension exports: every name,
parameter, default and kind, checked by mypy's stubtest against the built module; and the
package type-checks with mypy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "fadeway"


def test_the_stub_matches_the_extension():
    run = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "fadeway._core"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_package_type_checks():
    run = subprocess.run(
        [sys.executable, "-m", "mypy", str(PACKAGE)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=PACKAGE.parent.parent,
    )
    assert run.returncode == 0, run.stdout + run.stderr
