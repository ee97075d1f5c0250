"""Judges: the judgment model behind one interface (offline default, an LLM over any
OpenAI-compatible endpoint, scripted for tests)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..errors import JudgeTimeout
from .base import Answer, Boundaries, FactText, Judge, Relation, UnitText
from .llm import ENV_PREFIX, BatchSizes, LLMJudge
from .offline import OfflineJudge
from .scripted import ScriptedJudge

__all__ = [
    "Answer",
    "BatchSizes",
    "Boundaries",
    "FactText",
    "Judge",
    "JudgeTimeout",
    "LLMJudge",
    "OfflineJudge",
    "Relation",
    "ScriptedJudge",
    "UnitText",
    "judge_from",
]


def judge_from(
    spec: Judge | str | None = None,
    *,
    model: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Judge:
    """The judge `spec` names.

    - None or `"offline"`: the offline judge (no network, no key);
    - an `http://` or `https://` URL: the LLM judge at that OpenAI-compatible API root, `model`
      from the argument or FADEWAY_JUDGE_MODEL, key from FADEWAY_JUDGE_API_KEY;
    - a `Judge`: itself.
    """
    if isinstance(spec, Judge):
        return spec
    if spec is None or spec == "offline":
        return OfflineJudge()
    if not isinstance(spec, str):
        raise TypeError(f"a judge spec is a str, a Judge or None, not {type(spec).__name__}")
    if spec.startswith(("http://", "https://")):
        from ..http import Endpoint

        env = os.environ if environ is None else environ
        model = model or env.get(f"{ENV_PREFIX}_MODEL", "").strip() or None
        endpoint = Endpoint(
            spec, model=model, api_key=env.get(f"{ENV_PREFIX}_API_KEY", "").strip() or None
        )
        return LLMJudge(endpoint, model=model)
    raise ValueError(
        f"unknown judge {spec!r}; allowed: 'offline' (or None), an http(s):// URL "
        "of an OpenAI-compatible API, or a Judge"
    )
