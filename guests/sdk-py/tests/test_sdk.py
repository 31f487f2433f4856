"""The SDK's own behaviour, natively (the same functions a component runs)."""

import json

import pytest

from wasmop_sdk import (
    Answer,
    ByLabels,
    ByName,
    Failed,
    FieldError,
    InvalidSpec,
    KindRef,
    Observed,
    OutboundRequest,
    Plan,
    PluginInfo,
    ReconcileFailed,
    Reference,
    Refused,
    Relation,
    Requirement,
    Response,
    Selection,
    Verdict,
    Webhooks,
)
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


SECRET = KindRef("", "v1", "Secret", "secrets", True)


def test_plugin_info_declares_no_webhook_and_no_host_by_default():
    info = PluginInfo("p", "1", SECRET)
    assert info.webhooks == Webhooks(validate=False, default=False, convert=False)
    assert info.outbound_hosts == []
    assert PluginInfo("q", "1", SECRET).webhooks is not info.webhooks


def test_a_referenced_relation_names_its_paths():
    r = Relation("config", SECRET, Selection.referenced("spec.configRef.name"))
    assert r.selection == Reference("spec.configRef.name", None)
    assert Selection.referenced("a.name", "a.namespace").namespace_path == "a.namespace"
    assert Relation("pods", SECRET).selection is Selection.OWNED
    assert [s.name for s in Selection] == ["OWNED", "NAMESPACE"]  # `referenced` is no member


def test_plan_builder_carries_requirements_and_requests_in_order():
    plan = (
        Plan()
        .require(Requirement("config", SECRET, ByName("c")))
        .request(OutboundRequest("k1", "GET", "https://api.example.com/a"))
        .require(Requirement("all", SECRET, ByLabels("app=web"), namespace="other"))
        .request(OutboundRequest("k2", "POST", "https://api.example.com/b", body=b"{}"))
    )
    assert [(r.name, r.matching, r.namespace) for r in plan.requires] == [
        ("config", ByName("c"), None),
        ("all", ByLabels("app=web"), "other"),
    ]
    assert [(r.key, r.method, r.body) for r in plan.requests] == [
        ("k1", "GET", None),
        ("k2", "POST", b"{}"),
    ]
    first = plan.requests[0]
    assert (first.headers, first.credential, first.idempotency_key) == ([], None, None)
    assert (first.retry, first.keep_headers) == (False, [])
    assert Plan().requires == [] and Plan().requests == []


def test_observed_holds_required_objects_and_answers_by_key():
    ok = Answer("a", Response(200, body=b"{}"), 5)
    o = Observed.from_json(
        "{}",
        [],
        0,
        0,
        required=[("config", ['{"kind": "Secret"}'])],
        answers=[ok, Answer("b", Refused("not granted"))],
    )
    assert o.required == {"config": [{"kind": "Secret"}]}
    assert o.answer("a") is ok and o.answer("b").outcome == Refused("not granted")
    assert o.answer("c") is None
    bare = Observed({"kind": "K"})
    assert bare.required == {} and bare.answers == [] and bare.answer("a") is None
    with pytest.raises(ReconcileFailed, match="malformed JSON"):
        Observed.from_json("{}", [], 0, 0, required=[("config", ["{"])])
    assert Failed("timeout") != Refused("timeout")


def test_verdicts_allow_deny_or_blame_fields_with_warnings():
    assert Verdict.allow() == Verdict(True, [], None, [])
    denied = Verdict.deny("no").warn("careful").warn("really")
    assert (denied.allowed, denied.message, denied.warnings) == (False, "no", ["careful", "really"])
    blamed = Verdict.invalid(FieldError("spec.a", "too big", 7), FieldError("spec.b", "missing"))
    assert not blamed.allowed and blamed.message is None
    assert [(f.path, f.value) for f in blamed.fields] == [("spec.a", 7), ("spec.b", None)]
    assert Verdict.allow().warnings is not Verdict.allow().warnings
