"""The contract's values in plain Python: what a plugin declares, what it observes, what it
decides. They mirror the records of ``wit/plugin.wit``; objects are dicts. A variant with
values is a union of dataclasses (:data:`Action`, :data:`Matching`, :data:`Outcome`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable, Optional, Union


@dataclass
class Reference:
    """Where a primary object names other objects: the dot-separated path of a field that
    holds a name (``spec.configRef.name``). A path through a list names one object per item;
    an empty or absent field names none. ``namespace_path`` is the path of a namespace beside
    it; ``None``: the primary's namespace."""

    name_path: str
    namespace_path: Optional[str] = None


class Selection(Enum):
    """How the related objects of one relation are chosen for a primary object:
    ``Selection.OWNED``, ``Selection.NAMESPACE``, or the objects the primary names (a
    :class:`Reference`, made by :meth:`Selection.referenced`)."""

    #: Objects whose controller ownerReference points at the primary object.
    OWNED = "owned"
    #: Every object of the kind in the primary object's namespace.
    NAMESPACE = "namespace"

    @staticmethod
    def referenced(name_path: str, namespace_path: Optional[str] = None) -> Reference:
        """The objects the primary names in the field at ``name_path`` (and, for another
        namespace, the one at ``namespace_path``). The host caches only objects some primary
        names."""
        return Reference(name_path, namespace_path)


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
    selection: Union[Selection, Reference] = Selection.OWNED
    label_selector: Optional[str] = None
    fields: Optional[list[str]] = None


@dataclass
class Permission:
    """These verbs on this kind, for the plugin's plans; anything else is refused."""

    kind: KindRef
    verbs: list[Verb]


@dataclass
class Webhooks:
    """Which of ``validate``, ``default`` and ``convert`` the plugin implements: the host
    serves each as a webhook of the primary kind, and only those declared."""

    validate: bool = False
    default: bool = False
    convert: bool = False


@dataclass
class PluginInfo:
    """What a plugin declares about itself; the host validates it when loading.

    ``outbound_hosts`` are the hosts outside the cluster its plans may send requests to,
    each ``scheme://host[:port]``; an admin still has to grant them."""

    name: str
    version: str
    primary: KindRef
    crd: Optional[dict[str, Any]] = None
    relations: list[Relation] = field(default_factory=list)
    permissions: list[Permission] = field(default_factory=list)
    finalizer: Optional[str] = None
    webhooks: Webhooks = field(default_factory=Webhooks)
    outbound_hosts: list[str] = field(default_factory=list)


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
class ByName:
    """A requirement's object of this name."""

    name: str


@dataclass
class ByLabels:
    """A requirement's objects with these labels (Kubernetes selector syntax)."""

    selector: str


Matching = Union[ByName, ByLabels]


@dataclass
class Requirement:
    """Objects a decision needs that no relation selects: the host reads them and decides
    again with them in ``observed.required[name]`` (read, not watched). The plugin needs
    ``get`` (by name) or ``list`` (by labels) on the kind; ``namespace`` ``None`` is the
    primary's."""

    name: str
    kind: KindRef
    matching: Matching
    namespace: Optional[str] = None


@dataclass
class Header:
    """One HTTP header."""

    name: str
    value: str


@dataclass
class Credential:
    """A header the host fills from key ``key`` of Secret ``secret`` (in the primary's
    namespace, which the plugin must be granted ``get`` on), after ``prefix``
    (``Bearer ``): the plugin never sees the value."""

    header: str
    secret: str
    key: str
    prefix: str = ""


@dataclass
class OutboundRequest:
    """A request to a host outside the cluster, sent after the plan's writes; its answer
    comes back in ``observed.answers`` under ``key``. While an answer is held under a key,
    a request with that key is not sent again; a plan without the key lets the answer go.

    ``retry`` lets the host send it again after a failure; ``keep_headers`` names the
    response headers the answer keeps.

    Built step by step, as :class:`Plan` is (each step changes the request and returns it)::

        OutboundRequest.post("create", f"{api}/records").json(record).set_retry()

    The steps that set a field of the same name are ``set_idempotency_key``, ``set_retry``
    and ``set_credential``, as ``Plan.set_status`` sets ``status``."""

    key: str
    method: str
    url: str
    headers: list[Header] = field(default_factory=list)
    body: Optional[bytes] = None
    credential: Optional[Credential] = None
    idempotency_key: Optional[str] = None
    retry: bool = False
    keep_headers: list[str] = field(default_factory=list)

    @staticmethod
    def new(key: str, method: str, url: str) -> "OutboundRequest":
        """A request under ``key``: ``method`` (``GET``, ``POST``, ``PUT``, ``PATCH`` or
        ``DELETE``, in any case; sent uppercase) to ``url``."""
        return OutboundRequest(key, method.upper(), url)

    @staticmethod
    def get(key: str, url: str) -> "OutboundRequest":
        """``GET url`` under ``key``."""
        return OutboundRequest.new(key, "GET", url)

    @staticmethod
    def post(key: str, url: str) -> "OutboundRequest":
        """``POST url`` under ``key``."""
        return OutboundRequest.new(key, "POST", url)

    @staticmethod
    def put(key: str, url: str) -> "OutboundRequest":
        """``PUT url`` under ``key``."""
        return OutboundRequest.new(key, "PUT", url)

    @staticmethod
    def delete(key: str, url: str) -> "OutboundRequest":
        """``DELETE url`` under ``key``."""
        return OutboundRequest.new(key, "DELETE", url)

    def header(self, name: str, value: str) -> "OutboundRequest":
        """Adds a header."""
        self.headers.append(Header(name, value))
        return self

    def json(self, value: Any) -> "OutboundRequest":
        """``value`` as the body, compact JSON in UTF-8, with ``content-type:
        application/json`` (replacing a Content-Type added before)."""
        self.body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        self.headers = [h for h in self.headers if h.name.lower() != "content-type"]
        return self.header("content-type", "application/json")

    def set_idempotency_key(self, key: str) -> "OutboundRequest":
        """Sends ``key`` as ``Idempotency-Key``, for an API that honours it."""
        self.idempotency_key = key
        return self

    def set_retry(self, retry: bool = True) -> "OutboundRequest":
        """Lets the host send it again after a failure, a 429 or a 5xx (with backoff)."""
        self.retry = retry
        return self

    def keep_header(self, name: str) -> "OutboundRequest":
        """Keeps the response header ``name`` in the answer (the others are dropped)."""
        self.keep_headers.append(name)
        return self

    def set_credential(self, header: str, prefix: str, secret: str, key: str) -> "OutboundRequest":
        """Fills ``header`` from key ``key`` of Secret ``secret`` (the primary's namespace),
        after ``prefix``: ``.set_credential("Authorization", "Bearer ", "dns-token",
        "token")``. The plugin never sees the value."""
        self.credential = Credential(header=header, prefix=prefix, secret=secret, key=key)
        return self


@dataclass
class Plan:
    """The decision of one reconcile, built step by step::

        Plan().apply(pod).normal("ScaledUp", "creating 1 pod(s)").set_status({...})
    """

    actions: list[Action] = field(default_factory=list)
    status: Optional[dict[str, Any]] = None
    events: list[Event] = field(default_factory=list)
    requeue_after_ms: Optional[int] = None
    requires: list[Requirement] = field(default_factory=list)
    requests: list[OutboundRequest] = field(default_factory=list)

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

    def require(self, requirement: Requirement) -> "Plan":
        """Asks for objects no relation selects. When they are not those observed, the host
        reads them and decides again, this plan unused."""
        self.requires.append(requirement)
        return self

    def request(self, request: OutboundRequest) -> "Plan":
        """Adds a request outside the cluster, sent after the writes."""
        self.requests.append(request)
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
class Response:
    """A response from outside the cluster: the status, the headers asked for in
    ``keep_headers``, the body (at most the host's cap; ``truncated`` if cut)."""

    status: int
    headers: list[Header] = field(default_factory=list)
    body: bytes = b""
    truncated: bool = False

    def json(self) -> Any:
        """The body parsed as JSON; raises :class:`ReconcileFailed` when it is not JSON (a
        body cut at the cap seldom is)."""
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise ReconcileFailed(f"the answer's body: {e}") from e

    def text(self) -> str:
        """The body as text (UTF-8; what does not decode is replaced with U+FFFD)."""
        return bytes(self.body).decode("utf-8", errors="replace")

    def header(self, name: str) -> Optional[str]:
        """The value of the first kept header named ``name`` (any case), if any."""
        name = name.lower()
        return next((h.value for h in self.headers if h.name.lower() == name), None)


@dataclass
class Refused:
    """The host refused to send a request: the rule that refused it."""

    reason: str


@dataclass
class Failed:
    """A request was sent, or tried, and failed: timeout, connection, TLS."""

    reason: str


Outcome = Union[Response, Refused, Failed]


@dataclass
class Answer:
    """What came of the request under ``key``, and when (ms since the epoch)."""

    key: str
    outcome: Outcome
    at_unix_ms: int = 0

    def response(self) -> Optional[Response]:
        """The response, when one came (any status)."""
        return self.outcome if isinstance(self.outcome, Response) else None

    def success(self) -> Optional[Response]:
        """The response, when one came with a 2xx status."""
        r = self.response()
        return r if r is not None and 200 <= r.status < 300 else None

    def refused(self) -> Optional[str]:
        """The rule that refused it, when the host refused to send it."""
        return self.outcome.reason if isinstance(self.outcome, Refused) else None

    def retryable(self) -> bool:
        """Whether asking again may help: it failed (timeout, connection, TLS) or the answer
        was 429 or 5xx. A refusal or a 4xx stays as it is until the request changes."""
        o = self.outcome
        if isinstance(o, Failed):
            return True
        return isinstance(o, Response) and (o.status == 429 or o.status >= 500)


@dataclass
class Observed:
    """Everything a decision may depend on: the primary object, the related objects by
    relation name, the host's time (ms since the epoch) and a seed; the objects the plan's
    requirements brought, by requirement name (absent before the host read them), and the
    answers to the requests earlier plans sent."""

    primary: dict[str, Any]
    related: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    now_unix_ms: int = 0
    seed: int = 0
    required: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    answers: list[Answer] = field(default_factory=list)

    def objects(self, relation: str) -> list[dict[str, Any]]:
        """The related objects of ``relation`` (none when the host sent none)."""
        return self.related.get(relation, [])

    def answer(self, key: str) -> Optional[Answer]:
        """The answer held under ``key``, if any."""
        return next((a for a in self.answers if a.key == key), None)

    @staticmethod
    def from_json(
        primary: str,
        related: list[tuple[str, list[str]]],
        now_unix_ms: int,
        seed: int,
        required: Iterable[tuple[str, list[str]]] = (),
        answers: Iterable[Answer] = (),
    ) -> "Observed":
        """Parses the JSON the host sends."""
        try:
            return Observed(
                primary=json.loads(primary),
                related=_parse_groups(related),
                now_unix_ms=now_unix_ms,
                seed=seed,
                required=_parse_groups(required),
                answers=list(answers),
            )
        except ValueError as e:
            raise ReconcileFailed(f"host sent malformed JSON: {e}") from e


def _parse_groups(groups: Iterable[tuple[str, list[str]]]) -> dict[str, list[dict[str, Any]]]:
    return {name: [json.loads(o) for o in objs] for name, objs in groups}


class Operation(Enum):
    """What is asked of the admission webhook."""

    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"


@dataclass
class AdmissionRequest:
    """A create, update or delete of an object of the primary kind, to be allowed or not:
    the object as it would be stored (``None`` on delete), the object before (on update and
    delete), the user asking, and whether nothing will be stored (a dry run)."""

    operation: Operation
    object: Optional[dict[str, Any]] = None
    old_object: Optional[dict[str, Any]] = None
    user: str = ""
    dry_run: bool = False


@dataclass
class FieldError:
    """What is wrong with the field at ``path`` (``spec.schedule``): ``detail`` says why;
    ``value`` is the value refused, ``None`` to leave it out of the message."""

    path: str
    detail: str
    value: Any = None


@dataclass
class Verdict:
    """The answer of ``validate``: whether the operation may go on; for a refusal, what is
    wrong with which field, or a message; warnings shown to the client either way."""

    allowed: bool
    fields: list[FieldError] = field(default_factory=list)
    message: Optional[str] = None
    warnings: list[str] = field(default_factory=list)

    @staticmethod
    def allow() -> "Verdict":
        """Allowed."""
        return Verdict(True)

    @staticmethod
    def invalid(*fields: FieldError) -> "Verdict":
        """Refused for these fields (worded as the API server words an invalid object)."""
        return Verdict(False, fields=list(fields))

    @staticmethod
    def deny(message: str) -> "Verdict":
        """Refused with a message, no field to blame."""
        return Verdict(False, message=message)

    def warn(self, warning: str) -> "Verdict":
        """Adds a warning shown to the client."""
        self.warnings.append(warning)
        return self


class Rejected(Exception):
    """Raised by a plugin's ``default`` or ``convert``: the operation is refused with this
    message."""
