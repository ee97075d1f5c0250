"""Judges: the judgment model behind one interface (offline default, scripted for tests)."""

from __future__ import annotations

from .base import Boundaries, FactText, Judge, JudgeTimeout, Relation, UnitText
from .offline import OfflineJudge
from .scripted import ScriptedJudge

__all__ = ["Boundaries", "FactText", "Judge", "Relation", "JudgeTimeout", "OfflineJudge", "ScriptedJudge", "UnitText"]
