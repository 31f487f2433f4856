"""How PodReplica sees pods: which ones it owns, which are live, which go first, and the
pod it creates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wasmop_sdk.k8s import Identity, is_controlled_by, is_terminating, metadata, parse_rfc3339

#: Label put on every pod, with the PodReplica's name as value.
NAME_LABEL = "app.example.com/podreplica"
#: What PodReplica reads of a pod besides its metadata, declared in its relation.
READ_FIELDS = ["status.phase", "status.conditions"]
#: Image of the pods when ``spec.image`` is not set.
DEFAULT_IMAGE = "busybox"
#: Command of the pods when ``spec.command`` is not set.
DEFAULT_COMMAND = ["sleep", "3600"]

Pod = dict[str, Any]


def phase(pod: Pod) -> str:
    """The pod's phase; ``Pending`` until it has one."""
    return (pod.get("status") or {}).get("phase") or "Pending"


def is_ready(pod: Pod) -> bool:
    """Whether the pod's ``Ready`` condition is ``True``."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def name(pod: Pod) -> str:
    """The pod's name."""
    return metadata(pod).get("name") or ""


@dataclass
class OwnedPods:
    """The owned pods of one PodReplica, sorted into what the decision needs."""

    live: list[Pod] = field(default_factory=list)
    finished: list[Pod] = field(default_factory=list)
    terminating: int = 0


def classify(pods: list[Pod], owner_uid: str) -> OwnedPods:
    """Sorts ``pods`` into live (pending or running), finished (succeeded or failed) and
    terminating, keeping only those whose controller is the PodReplica with ``owner_uid``
    (a pod that merely carries the label is not ours)."""
    out = OwnedPods()
    for pod in pods:
        if not is_controlled_by(pod, owner_uid):
            continue
        if is_terminating(pod):
            out.terminating += 1
        elif phase(pod) in ("Succeeded", "Failed"):
            out.finished.append(pod)
        else:
            out.live.append(pod)
    out.live.sort(key=name)
    return out


def removal_order(live: list[Pod]) -> None:
    """Orders live pods so that the first ones are the ones to remove when scaling down:
    not-ready before ready, then newest first (name breaks ties, for determinism)."""

    def created(pod: Pod) -> int:
        text = metadata(pod).get("creationTimestamp")
        return -1 if text is None else (parse_rfc3339(text) or -1)

    live.sort(key=name, reverse=True)
    live.sort(key=created, reverse=True)
    live.sort(key=is_ready)


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def new_pod(owner: Identity, spec: dict[str, Any]) -> Pod:
    """The pod a PodReplica creates: a generated name ``<name>-pod-…``, the selecting label
    and a controller ownerReference, so the pod goes away with its owner."""
    pod: Pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{owner.name}-pod-",
            "labels": {NAME_LABEL: owner.name},
            "ownerReferences": [owner.controller_reference()],
        },
        "spec": {
            "containers": [
                {
                    "name": "busybox",
                    "image": _or(spec.get("image"), DEFAULT_IMAGE),
                    "command": _or(spec.get("command"), DEFAULT_COMMAND),
                }
            ]
        },
    }
    if owner.namespace is not None:
        pod["metadata"]["namespace"] = owner.namespace
    return pod
