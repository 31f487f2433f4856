"""The SDK's own behaviour, natively (the same functions a component runs)."""

import json

import pytest

from wasmop_sdk import InvalidSpec, Observed, Plan, ReconcileFailed
from wasmop_sdk.conditions import condition, set_condition
from wasmop_sdk.k8s import (
    Identity,
    controller_uid,
    delete_ref,
    is_controlled_by,
    is_terminating,
    parse_rfc3339,
    rfc3339,
)

OWNED = {
    "metadata": {
        "name": "p",
        "namespace": "ns",
        "uid": "u-p",
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "other"},
            {"apiVersion": "v1", "kind": "Y", "name": "y", "uid": "owner", "controller": True},
        ],
    }
}


def test_ownership_and_termination():
    assert controller_uid(OWNED) == "owner"
    assert is_controlled_by(OWNED, "owner")
    assert not is_controlled_by(OWNED, "other")
    assert not is_controlled_by({"metadata": {}}, "owner")
    assert not is_terminating(OWNED)
    assert is_terminating({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})


def test_identity_and_controller_reference():
    me = Identity.of(
        {"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "n", "namespace": "d", "uid": "u"}}
    )
    assert me.controller_reference() == {
        "apiVersion": "a/v1",
        "kind": "K",
        "name": "n",
        "uid": "u",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    with pytest.raises(ReconcileFailed, match="metadata.uid"):
        Identity.of({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "n"}})


def test_delete_ref_carries_the_uid_precondition():
    ref = delete_ref("v1", "Pod", OWNED)
    assert (ref.name, ref.namespace, ref.uid) == ("p", "ns", "u-p")


def test_time_is_kubernetes_style_with_second_precision():
    assert rfc3339(1_767_225_600_999) == "2026-01-01T00:00:00Z"
    assert parse_rfc3339("2026-01-01T00:00:00Z") == 1_767_225_600_000
    assert parse_rfc3339("yesterday") is None
    assert parse_rfc3339("2026-01-01T00:00:00") is None  # no zone: not RFC 3339


def test_transition_time_moves_only_on_status_change():
    prev = [condition("Ready", True, "Ok", "", "t1", 1)]
    out: list = []
    set_condition(out, prev, condition("Ready", True, "Ok", "", "t2", 2))
    assert out[0]["lastTransitionTime"] == "t1"
    out = []
    set_condition(out, prev, condition("Ready", False, "Scaling", "", "t3", 2))
    assert out[0]["lastTransitionTime"] == "t3"
    assert "observedGeneration" not in condition("Ready", True, "Ok", "", "t", None)


def test_plan_builder_keeps_order():
    plan = (
        Plan()
        .apply({"kind": "Pod"})
        .delete(delete_ref("v1", "Pod", OWNED))
        .normal("A", "a")
        .warning("B", "b")
        .set_status({"x": 1})
        .requeue_after(5000)
    )
    assert plan.applied() == [{"kind": "Pod"}]
    assert [r.name for r in plan.deleted()] == ["p"]
    assert [(e.type, e.reason) for e in plan.events] == [("Normal", "A"), ("Warning", "B")]
    assert plan.status == {"x": 1} and plan.requeue_after_ms == 5000


def test_observed_parses_what_the_host_sends():
    o = Observed.from_json(json.dumps({"kind": "K"}), [("pods", ['{"a": 1}'])], 7, 9)
    assert o.primary == {"kind": "K"} and o.objects("pods") == [{"a": 1}]
    assert o.objects("other") == [] and (o.now_unix_ms, o.seed) == (7, 9)
    with pytest.raises(ReconcileFailed, match="malformed JSON"):
        Observed.from_json("{", [], 0, 0)


def test_errors_are_exceptions_of_one_family():
    assert issubclass(InvalidSpec, Exception)
