"""Judges: the judgment model behind one interface (offline default, scripted for tests)."""

from __future__ import annotations

from .base import Boundaries, Judge, JudgeTimeout, UnitText
from .offline import OfflineJudge
from .scripted import ScriptedJudge

__all__ = ["Boundaries", "Judge", "JudgeTimeout", "OfflineJudge", "ScriptedJudge", "UnitText"]
