"""The wasmop guest SDK for Python: write a Kubernetes operator's decisions as plain Python
functions, run them sandboxed in the wasmop host.

A plugin is a class with three methods, the same contract as a Rust plugin's (`wit/plugin.wit`):

- ``info()`` returns a :class:`PluginInfo`: the primary kind and its CRD, the relations the
  host watches for it, the permissions its plans need;
- ``reconcile(observed)`` turns an :class:`Observed` state into a :class:`Plan`, or raises
  :class:`InvalidSpec`, :class:`Transient` or :class:`ReconcileFailed`;
- ``cleanup(observed)`` (only with a finalizer) decides what to do before the object goes.

All three are plain functions over plain values (objects are dicts, as parsed from JSON):
test them natively with pytest. ``wasmop_sdk.component.export(MyPlugin)`` turns the class into
the component's exports (the app module of ``componentize-py``).
"""

from .types import (
    Action,
    Apply,
    Delete,
    Event,
    InvalidSpec,
    KindRef,
    ObjectRef,
    Observed,
    Permission,
    Plan,
    PluginInfo,
    ReconcileError,
    ReconcileFailed,
    Relation,
    Selection,
    Transient,
    Verb,
)

__all__ = [
    "Action",
    "Apply",
    "Delete",
    "Event",
    "InvalidSpec",
    "KindRef",
    "ObjectRef",
    "Observed",
    "Permission",
    "Plan",
    "PluginInfo",
    "ReconcileError",
    "ReconcileFailed",
    "Relation",
    "Selection",
    "Transient",
    "Verb",
]
