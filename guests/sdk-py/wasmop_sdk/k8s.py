"""Helpers for Kubernetes objects that most plugins need: ownership, termination, time,
references for deletion. Objects are dicts as the host sends them (parsed JSON)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

from .types import KindRef, ObjectRef, ReconcileFailed


def pod_kind() -> KindRef:
    """The core ``v1`` Pod kind, as plugins declare it in relations and permissions."""
    return KindRef(group="", version="v1", kind="Pod", plural="pods", namespaced=True)


def metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """The object's metadata (empty when it has none)."""
    return obj.get("metadata") or {}


def controller_uid(obj: dict[str, Any]) -> Optional[str]:
    """The UID of the object's controller, if it has one."""
    for ref in metadata(obj).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return ref.get("uid")
    return None


def is_controlled_by(obj: dict[str, Any], uid: str) -> bool:
    """Whether the object's controller ownerReference points at the object with ``uid``."""
    return controller_uid(obj) == uid


def is_terminating(obj: dict[str, Any]) -> bool:
    """Whether the object is being deleted (it has a deletion timestamp)."""
    return metadata(obj).get("deletionTimestamp") is not None


@dataclass(frozen=True)
class Identity:
    """The identity of an object: apiVersion, kind, name, namespace, uid."""

    api_version: str
    kind: str
    name: str
    namespace: Optional[str]
    uid: str

    @staticmethod
    def of(obj: dict[str, Any]) -> "Identity":
        """Reads the identity of an object. The host always sends objects that have one."""
        meta = metadata(obj)

        def need(value: Any, what: str) -> str:
            if not isinstance(value, str):
                raise ReconcileFailed(f"object has no {what}")
            return value

        return Identity(
            api_version=need(obj.get("apiVersion"), "apiVersion"),
            kind=need(obj.get("kind"), "kind"),
            name=need(meta.get("name"), "metadata.name"),
            namespace=meta.get("namespace"),
            uid=need(meta.get("uid"), "metadata.uid"),
        )

    def controller_reference(self) -> dict[str, Any]:
        """A controller ownerReference to this object (blocking owner deletion)."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def delete_ref(api_version: str, kind: str, obj: dict[str, Any]) -> ObjectRef:
    """A deletion reference with a UID precondition for ``obj``, of the given kind."""
    meta = metadata(obj)
    return ObjectRef(
        api_version=api_version,
        kind=kind,
        name=meta.get("name") or "",
        namespace=meta.get("namespace"),
        uid=meta.get("uid"),
    )


def rfc3339(now_unix_ms: int) -> str:
    """The host's ``now`` as an RFC 3339 string with second precision, the way Kubernetes
    writes times."""
    secs = now_unix_ms // 1000
    return datetime.fromtimestamp(secs, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> Optional[int]:
    """Milliseconds since the Unix epoch of an RFC 3339 string, if it parses."""
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        return None
    return int(t.timestamp() * 1000)
