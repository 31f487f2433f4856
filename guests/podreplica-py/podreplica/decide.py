"""The PodReplica decision: compare owned live pods with ``spec.size``, create or delete the
difference, replace finished pods, and report the live pods in the status (once no pod is
missing: a plan that creates pods leaves the status to the decision that sees them)."""

from __future__ import annotations

from typing import Any, Optional

from wasmop_sdk import InvalidSpec, Observed, Plan
from wasmop_sdk.conditions import condition, set_condition
from wasmop_sdk.k8s import Identity, delete_ref, is_terminating, rfc3339

from .pods import Pod, classify, is_ready, name, new_pod, removal_order

#: The largest ``spec.size`` accepted (the CRD's schema says so too).
MAX_SIZE = 100


def reconcile(observed: Observed) -> Plan:
    """Decides what to do about one PodReplica."""
    pr = observed.primary
    owner = Identity.of(pr)
    spec = pr.get("spec")
    if not isinstance(spec, dict) or not _is_int(spec.get("size")):
        raise InvalidSpec("spec.size must be an integer")
    size: int = spec["size"]
    if not 0 <= size <= MAX_SIZE:
        raise InvalidSpec(f"spec.size is {size}, it must be between 0 and {MAX_SIZE}")
    if is_terminating(pr):
        # The garbage collector removes the pods with their owner.
        return Plan()
    owned = classify(observed.objects("pods"), owner.uid)
    plan = Plan()

    for pod in owned.finished:
        plan.delete(delete_ref("v1", "Pod", pod))
    if owned.finished:
        plan.normal("ReplacingFinishedPods", f"removing {len(owned.finished)} finished pod(s)")

    live = len(owned.live)
    if live > size:
        removal_order(owned.live)
        surplus, owned.live = owned.live[: live - size], owned.live[live - size :]
        for pod in surplus:
            plan.delete(delete_ref("v1", "Pod", pod))
        names = ", ".join(name(p) for p in surplus)
        plan.normal("ScaledDown", f"deleting {len(surplus)} pod(s): {names}")
    elif live < size:
        missing = size - live
        for _ in range(missing):
            plan.apply(new_pod(owner, spec))
        plan.normal("ScaledUp", f"creating {missing} pod(s)")
        # The creates bring the next decision, whose status lists the new pods.
        return plan

    status = status_for(pr, owned.live, size, observed.now_unix_ms)
    if _current_status(pr) != status:
        plan.set_status(status)
    return plan


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def status_for(pr: dict[str, Any], live: list[Pod], size: int, now_ms: int) -> dict[str, Any]:
    """The status describing the live pods that remain after this plan's deletions."""
    pods = sorted(name(p) for p in live)
    ready = sum(1 for p in live if is_ready(p))
    replicas = len(pods)
    generation: Optional[int] = (pr.get("metadata") or {}).get("generation")
    if replicas == size and ready == size:
        ok, reason, message = True, "AllPodsReady", f"{ready}/{size} pods ready"
    elif replicas != size:
        ok, reason, message = False, "Scaling", f"{replicas} live pods, {size} desired"
    else:
        ok, reason, message = False, "PodsNotReady", f"{ready}/{size} pods ready"
    previous = (pr.get("status") or {}).get("conditions") or []
    conditions: list[dict[str, Any]] = []
    set_condition(
        conditions,
        previous,
        condition("Ready", ok, reason, message, rfc3339(now_ms), generation),
    )
    status: dict[str, Any] = {
        "pods": pods,
        "replicas": replicas,
        "readyReplicas": ready,
        "conditions": conditions,
    }
    if generation is not None:
        status["observedGeneration"] = generation
    return status


def _current_status(pr: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The object's status in the shape ``status_for`` writes (absent fields at their
    defaults), so that a status already right is not written again."""
    s = pr.get("status")
    if not isinstance(s, dict):
        return None
    out: dict[str, Any] = {
        "pods": s.get("pods") or [],
        "replicas": s.get("replicas") or 0,
        "readyReplicas": s.get("readyReplicas") or 0,
        "conditions": [
            {k: v for k, v in {**{"message": ""}, **c}.items()} for c in s.get("conditions") or []
        ],
    }
    if s.get("observedGeneration") is not None:
        out["observedGeneration"] = s["observedGeneration"]
    return out
