"""PodReplica in Python: keep ``spec.size`` pods running per custom resource, list them in
the status, and let the garbage collector remove them with the resource (they carry a
controller ownerReference). The same plugin as the Rust PodReplica, passing the same
conformance cases (``guests/conformance/podreplica``)."""

from wasmop_sdk import KindRef, Observed, Permission, Plan, PluginInfo, Relation, Selection, Verb
from wasmop_sdk.k8s import pod_kind

from . import decide
from .crd import CRD
from .pods import READ_FIELDS

#: The plugin's version.
VERSION = "0.1.0"


def primary_kind() -> KindRef:
    """The primary kind."""
    return KindRef("app.example.com", "v1alpha1", "PodReplica", "podreplicas", True)


class PodReplica:
    """The plugin."""

    def info(self) -> PluginInfo:
        return PluginInfo(
            name="podreplica",
            version=f"{VERSION}-py",
            primary=primary_kind(),
            crd=CRD,
            relations=[
                Relation("pods", pod_kind(), Selection.OWNED, None, list(READ_FIELDS)),
            ],
            permissions=[Permission(pod_kind(), [Verb.CREATE, Verb.DELETE])],
        )

    def reconcile(self, observed: Observed) -> Plan:
        return decide.reconcile(observed)
