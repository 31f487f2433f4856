"""Status conditions following Kubernetes conventions, with transition times that only move
when the condition's status changes (so an unchanged world yields an unchanged status)."""

from __future__ import annotations

from typing import Any, Optional


def condition(
    type_: str,
    ok: bool,
    reason: str,
    message: str,
    now_rfc3339: str,
    generation: Optional[int],
) -> dict[str, Any]:
    """Builds a condition (``observedGeneration`` only when ``generation`` is known)."""
    c: dict[str, Any] = {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now_rfc3339,
    }
    if generation is not None:
        c["observedGeneration"] = generation
    return c


def set_condition(
    conditions: list[dict[str, Any]], previous: list[dict[str, Any]], new: dict[str, Any]
) -> None:
    """Sets condition ``new`` in ``conditions``, keeping the old transition time from
    ``previous`` when the status did not change."""
    for old in previous:
        if old.get("type") == new["type"] and old.get("status") == new["status"]:
            new["lastTransitionTime"] = old.get("lastTransitionTime", new["lastTransitionTime"])
            break
    conditions[:] = [c for c in conditions if c.get("type") != new["type"]]
    conditions.append(new)
