"""The contract's values in plain Python: what a plugin declares, what it observes, what it
decides. They mirror the records of ``wit/plugin.wit``; objects are dicts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional, Union


class Selection(Enum):
    """How the related objects of one relation are chosen for a primary object."""

    #: Objects whose controller ownerReference points at the primary object.
    OWNED = "owned"
    #: Every object of the kind in the primary object's namespace.
    NAMESPACE = "namespace"


class Verb(Enum):
    """A Kubernetes API verb a plan may need, and ``ADOPT`` (apply to an object another
    controller, or none, controls)."""

    GET = "get"
    LIST = "list"
    WATCH = "watch"
    CREATE = "create"
    UPDATE = "update"
    PATCH = "patch"
    DELETE = "delete"
    ADOPT = "adopt"


@dataclass(frozen=True)
class KindRef:
    """A Kubernetes kind, enough to reach its API and to write RBAC rules for it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """``group/version``, or ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass
class Relation:
    """A kind the plugin wants to see next to each primary object, under ``name``.

    ``fields`` lists the dot-separated paths the decision reads besides the metadata (the
    host sends only those); ``None`` sends whole objects."""

    name: str
    kind: KindRef
    selection: Selection = Selection.OWNED
    label_selector: Optional[str] = None
    fields: Optional[list[str]] = None


@dataclass
class Permission:
    """These verbs on this kind, for the plugin's plans; anything else is refused."""

    kind: KindRef
    verbs: list[Verb]


@dataclass
class PluginInfo:
    """What a plugin declares about itself; the host validates it when loading."""

    name: str
    version: str
    primary: KindRef
    crd: Optional[dict[str, Any]] = None
    relations: list[Relation] = field(default_factory=list)
    permissions: list[Permission] = field(default_factory=list)
    finalizer: Optional[str] = None


@dataclass
class ObjectRef:
    """One object to delete; with ``uid`` set, only an object with exactly that UID."""

    api_version: str
    kind: str
    name: str
    namespace: Optional[str] = None
    uid: Optional[str] = None


@dataclass
class Apply:
    """Create or update this object by server-side apply."""

    object: dict[str, Any]


@dataclass
class Delete:
    """Delete this object."""

    target: ObjectRef


Action = Union[Apply, Delete]


@dataclass
class Event:
    """A Kubernetes Event recorded on the primary object."""

    type: str  # "Normal" or "Warning"
    reason: str
    message: str


@dataclass
class Plan:
    """The decision of one reconcile, built step by step::

        Plan().apply(pod).normal("ScaledUp", "creating 1 pod(s)").set_status({...})
    """

    actions: list[Action] = field(default_factory=list)
    status: Optional[dict[str, Any]] = None
    events: list[Event] = field(default_factory=list)
    requeue_after_ms: Optional[int] = None

    def apply(self, obj: dict[str, Any]) -> "Plan":
        """Adds a server-side apply of ``obj``."""
        self.actions.append(Apply(obj))
        return self

    def delete(self, target: ObjectRef) -> "Plan":
        """Adds a deletion."""
        self.actions.append(Delete(target))
        return self

    def set_status(self, status: dict[str, Any]) -> "Plan":
        """Sets the desired status of the primary object."""
        self.status = status
        return self

    def normal(self, reason: str, message: str) -> "Plan":
        """Adds a Normal Event."""
        self.events.append(Event("Normal", reason, message))
        return self

    def warning(self, reason: str, message: str) -> "Plan":
        """Adds a Warning Event."""
        self.events.append(Event("Warning", reason, message))
        return self

    def requeue_after(self, ms: int) -> "Plan":
        """Asks for another reconcile after ``ms`` milliseconds."""
        self.requeue_after_ms = ms
        return self

    def applied(self) -> list[dict[str, Any]]:
        """The objects this plan applies, in order (for tests)."""
        return [a.object for a in self.actions if isinstance(a, Apply)]

    def deleted(self) -> list[ObjectRef]:
        """The objects this plan deletes, in order (for tests)."""
        return [a.target for a in self.actions if isinstance(a, Delete)]


class ReconcileError(Exception):
    """Why a reconcile produced no plan (raise one of the subclasses)."""


class InvalidSpec(ReconcileError):
    """The primary object's spec is invalid; retrying will not help until it changes."""


class Transient(ReconcileError):
    """A temporary problem; the host retries with backoff."""


class ReconcileFailed(ReconcileError):
    """Anything else; retried with backoff."""


@dataclass
class Observed:
    """Everything a decision may depend on: the primary object, the related objects by
    relation name, the host's time (ms since the epoch) and a seed."""

    primary: dict[str, Any]
    related: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    now_unix_ms: int = 0
    seed: int = 0

    def objects(self, relation: str) -> list[dict[str, Any]]:
        """The related objects of ``relation`` (none when the host sent none)."""
        return self.related.get(relation, [])

    @staticmethod
    def from_json(
        primary: str, related: list[tuple[str, list[str]]], now_unix_ms: int, seed: int
    ) -> "Observed":
        """Parses the JSON the host sends."""
        try:
            return Observed(
                primary=json.loads(primary),
                related={name: [json.loads(o) for o in objs] for name, objs in related},
                now_unix_ms=now_unix_ms,
                seed=seed,
            )
        except ValueError as e:
            raise ReconcileFailed(f"host sent malformed JSON: {e}") from e
