"""The README's examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_has_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})


def test_readme_opens_with_the_ci_test_command():
    head = README.read_text(encoding="utf-8").splitlines()[:6]
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    test_command = next(line for line in head if "pytest" in line)
    assert test_command in ci
    assert any("fadeway demo" in line for line in head)
