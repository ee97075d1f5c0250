"""Calls waiting for their outputs: providers require each call's output right after the reply
that made it, and refuse an output no call waits for."""

from __future__ import annotations

from collections.abc import Container, Sequence

from .responses import CLIENT_CALL_TYPES

__all__ = ["PendingCalls"]


class PendingCalls:
    """Calls waiting for their outputs, which providers require right after the reply that
    made them: each Chat Completions tool call on its own, each Responses call item the caller
    runs as one call (a `local_shell_call` names itself by two ids, either answers it). Items the
    caller may answer or not (an MCP approval request, a tool search) and fadeway's own note
    calls wait for nothing; an answer to them is still taken once."""

    def __init__(self) -> None:
        self._by_id: dict[str, tuple[str, str]] = {}  # id -> (the call's first id, where made)
        self._optional: set[str] = set()  # ids of items that may be answered, once, or not

    def __bool__(self) -> bool:
        return bool(self._by_id)

    def copy(self) -> PendingCalls:
        out = PendingCalls()
        out._by_id, out._optional = dict(self._by_id), set(self._optional)
        return out

    def made(self, kind: str, calls: Sequence[str], where: str, own: Container[str]) -> None:
        """A message (`kind` "message") or Responses item made `calls`, none of them `own`."""
        groups: list[tuple[str, ...]]
        if kind == "message":
            groups = [(c,) for c in calls if c not in own]
        elif kind in CLIENT_CALL_TYPES and not any(c in own for c in calls):
            groups = [tuple(calls)]
        else:  # an MCP approval request, a tool search: an answer is allowed, not required
            groups = []
            self._optional.update(c for c in calls if c not in own)
        for group in groups:
            for call_id in group:
                self._by_id[call_id] = (group[0], where)

    def answer(self, call_id: str) -> bool:
        """An output answers `call_id`; whether its call was waiting (or allowed an answer)."""
        hit = self._by_id.get(call_id)
        if hit is None:
            if call_id in self._optional:
                self._optional.discard(call_id)
                return True
            return False
        for other in [c for c, (first, _) in self._by_id.items() if first == hit[0]]:
            del self._by_id[other]
        return True

    def waiting(self) -> dict[str, str]:
        """Each waiting call (by its first id) and where it was made."""
        return {first: where for first, where in self._by_id.values()}
