"""PodReplica's decision, natively: the article's rules, one test each."""

import pytest

from podreplica import PodReplica
from podreplica.decide import reconcile
from podreplica.pods import NAME_LABEL, removal_order
from wasmop_sdk import InvalidSpec, Observed, Verb, Webhooks

NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def primary(size, status=None, **meta):
    obj = {
        "apiVersion": "app.example.com/v1alpha1",
        "kind": "PodReplica",
        "metadata": {"name": "web", "namespace": "default", "uid": "uid-web", "generation": 1,
                     **meta},
        "spec": {"size": size},
    }
    if status is not None:
        obj["status"] = status
    return obj


def pod(name, phase="Running", ready=True, owner="uid-web", created="2025-12-31T23:00:00Z",
        deleting=False):
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}",
            "creationTimestamp": created, "labels": {NAME_LABEL: "web"}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "app.example.com/v1alpha1",
                                    "kind": "PodReplica", "name": "web", "uid": owner,
                                    "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "status": {"phase": phase,
                       "conditions": [{"type": "Ready", "status": str(ready)}]}}


def decide(size, pods, status=None, **meta):
    return reconcile(Observed(primary(size, status, **meta), {"pods": pods}, NOW, 0))


def test_first_reconcile_creates_every_pod_and_leaves_the_status():
    plan = decide(3, [])
    assert len(plan.applied()) == 3 and plan.status is None
    new = plan.applied()[0]
    assert new["metadata"]["generateName"] == "web-pod-"
    assert new["metadata"]["ownerReferences"][0]["uid"] == "uid-web"
    assert new["spec"]["containers"][0]["image"] == "busybox"
    assert [e.reason for e in plan.events] == ["ScaledUp"]


def test_scale_down_removes_not_ready_then_newest():
    pods = [pod("a"), pod("b", ready=False), pod("c", created="2025-12-31T23:30:00Z")]
    plan = decide(1, pods)
    assert [r.name for r in plan.deleted()] == ["b", "c"]
    assert plan.status["pods"] == ["a"]
    assert plan.events[0].message == "deleting 2 pod(s): b, c"


def test_removal_order_breaks_ties_by_name():
    pods = [pod("a"), pod("b"), pod("c")]
    removal_order(pods)
    assert [p["metadata"]["name"] for p in pods] == ["c", "b", "a"]


def test_finished_pods_are_replaced_and_terminating_ones_left_alone():
    pods = [pod("f", phase="Failed"), pod("s", phase="Succeeded"), pod("t", deleting=True),
            pod("a")]
    plan = decide(2, pods)
    assert [r.name for r in plan.deleted()] == ["f", "s"]
    assert len(plan.applied()) == 1
    assert [e.reason for e in plan.events] == ["ReplacingFinishedPods", "ScaledUp"]


def test_foreign_pods_with_the_label_are_not_ours():
    plan = decide(1, [pod("mine"), pod("theirs", owner="uid-other"), pod("orphan", owner=None)])
    assert plan.actions == [] and plan.status["pods"] == ["mine"]


def test_status_already_right_is_not_written_again():
    first = decide(1, [pod("a")])
    again = decide(1, [pod("a")], status=first.status)
    assert first.status is not None and again.status is None and again.actions == []


@pytest.mark.parametrize("size", [-1, 101, "3", None, True])
def test_invalid_sizes_are_an_invalid_spec(size):
    with pytest.raises(InvalidSpec):
        decide(size, [])


def test_a_deleted_primary_leaves_its_pods_to_the_garbage_collector():
    plan = decide(3, [pod("a")], deletionTimestamp="2026-01-01T00:00:00Z")
    assert plan.actions == [] and plan.status is None


def test_info_declares_owned_pods_and_only_create_delete():
    info = PodReplica().info()
    assert info.name == "podreplica" and info.primary.kind == "PodReplica"
    assert info.relations[0].fields == ["status.phase", "status.conditions"]
    assert info.permissions[0].verbs == [Verb.CREATE, Verb.DELETE]
    assert info.crd["spec"]["names"]["shortNames"] == ["pr"]
    assert info.webhooks == Webhooks() and info.outbound_hosts == []
