"""The wasmop guest SDK for Python: write a Kubernetes operator's decisions as plain Python
functions, run them sandboxed in the wasmop host.

A plugin is a class with the methods of the contract a Rust plugin implements
(`wit/plugin.wit`):

- ``info()`` returns a :class:`PluginInfo`: the primary kind and its CRD, the relations the
  host watches for it, the permissions its plans need, the webhooks it serves and the hosts
  outside the cluster its plans may reach;
- ``reconcile(observed)`` turns an :class:`Observed` state into a :class:`Plan`, or raises
  :class:`InvalidSpec`, :class:`Transient` or :class:`ReconcileFailed`; a plan may send
  requests outside the cluster (``OutboundRequest.post(key, url)`` and the like), whose
  answers later decisions read (``observed.answer(key).success()``);
- ``cleanup(observed)`` (only with a finalizer) decides what to do before the object goes;
- ``validate(request)``, ``default(obj)`` and ``convert(obj, to_version)`` (only those
  declared in :class:`Webhooks`) answer the primary kind's admission and conversion webhooks:
  a :class:`Verdict`; the object with its defaults; the object in another version of the
  CRD. The last two raise :class:`Rejected` to refuse.

All are plain functions over plain values (objects are dicts, as parsed from JSON): test
them natively with pytest. ``wasmop_sdk.component.export(MyPlugin)`` turns the class into the
component's exports (the app module of ``componentize-py``); the methods a plugin leaves out
are exported too, doing nothing, allowing, changing nothing and refusing to convert.
"""

from .types import (
    Action,
    AdmissionRequest,
    Answer,
    Apply,
    ByLabels,
    ByName,
    Credential,
    Delete,
    Event,
    Failed,
    FieldError,
    Header,
    InvalidSpec,
    KindRef,
    Matching,
    ObjectRef,
    Observed,
    Operation,
    OutboundRequest,
    Outcome,
    Permission,
    Plan,
    PluginInfo,
    ReconcileError,
    ReconcileFailed,
    Reference,
    Refused,
    Rejected,
    Relation,
    Requirement,
    Response,
    Selection,
    Transient,
    Verb,
    Verdict,
    Webhooks,
)

__all__ = [
    "Action",
    "AdmissionRequest",
    "Answer",
    "Apply",
    "ByLabels",
    "ByName",
    "Credential",
    "Delete",
    "Event",
    "Failed",
    "FieldError",
    "Header",
    "InvalidSpec",
    "KindRef",
    "Matching",
    "ObjectRef",
    "Observed",
    "Operation",
    "OutboundRequest",
    "Outcome",
    "Permission",
    "Plan",
    "PluginInfo",
    "ReconcileError",
    "ReconcileFailed",
    "Reference",
    "Refused",
    "Rejected",
    "Relation",
    "Requirement",
    "Response",
    "Selection",
    "Transient",
    "Verb",
    "Verdict",
    "Webhooks",
]
