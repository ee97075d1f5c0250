"""The extension's stub (`fadeway/_core.pyi`) matches what the extension exports: every name,
parameter, default and kind, checked by mypy's stubtest against the built module."""

from __future__ import annotations

import subprocess
import sys


def test_the_stub_matches_the_extension():
    run = subprocess.run([sys.executable, "-m", "mypy.stubtest", "fadeway._core"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
