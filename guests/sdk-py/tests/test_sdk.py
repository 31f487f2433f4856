"""The SDK's own behaviour, natively (the same functions a component runs)."""

import json

import pytest

from wasmop_sdk import (
    Answer,
    ByLabels,
    ByName,
    Credential,
    Failed,
    FieldError,
    Header,
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


def test_the_request_builder_sets_every_field():
    r = (
        OutboundRequest.post("create", "https://dns.example.com/zones/z/records")
        .header("X-Trace", "t1")
        .json({"name": "www", "ttl": 300, "note": "é"})
        .set_idempotency_key("u-1-create-0")
        .set_retry()
        .keep_header("ETag")
        .keep_header("Location")
        .set_credential("Authorization", "Bearer ", "dns-token", "token")
    )
    assert (r.key, r.method, r.url) == ("create", "POST", "https://dns.example.com/zones/z/records")
    assert r.body == '{"name":"www","ttl":300,"note":"é"}'.encode()
    assert json.loads(r.body) == {"name": "www", "ttl": 300, "note": "é"}
    assert r.headers == [Header("X-Trace", "t1"), Header("content-type", "application/json")]
    assert (r.idempotency_key, r.retry) == ("u-1-create-0", True)
    assert r.keep_headers == ["ETag", "Location"]
    assert r.credential == Credential(
        header="Authorization", prefix="Bearer ", secret="dns-token", key="token"
    )
    plan = Plan().request(r)
    assert plan.requests == [r]


def test_the_request_builder_shorthands_and_defaults():
    assert OutboundRequest.new("k", "patch", "https://a.example.com").method == "PATCH"
    assert [
        (r.key, r.method, r.url)
        for r in (
            OutboundRequest.get("g", "https://a.example.com/1"),
            OutboundRequest.put("p", "https://a.example.com/2"),
            OutboundRequest.delete("d", "https://a.example.com/3"),
        )
    ] == [
        ("g", "GET", "https://a.example.com/1"),
        ("p", "PUT", "https://a.example.com/2"),
        ("d", "DELETE", "https://a.example.com/3"),
    ]
    bare = OutboundRequest.get("g", "https://a.example.com")
    assert bare == OutboundRequest("g", "GET", "https://a.example.com")
    assert (bare.body, bare.headers, bare.credential) == (None, [], None)
    assert (bare.idempotency_key, bare.retry, bare.keep_headers) == (None, False, [])
    assert OutboundRequest.get("a", "u").headers is not OutboundRequest.get("b", "u").headers
    assert not bare.set_retry().set_retry(False).retry
    # A second JSON body replaces the first, and its Content-Type any set before.
    twice = bare.header("Content-Type", "text/plain").json([1]).json(None)
    assert (twice.body, twice.headers) == (b"null", [Header("content-type", "application/json")])


def answers_of_each_kind() -> dict[str, Answer]:
    return {
        "created": Answer("created", Response(201, [Header("ETag", '"v1"')], b'{"id": "r-1"}')),
        "missing": Answer("missing", Response(404, body=b"no such record")),
        "busy": Answer("busy", Response(429)),
        "down": Answer("down", Response(503, body=b"\xffdown")),
        "refused": Answer("refused", Refused("not-granted: https://dns.example.com")),
        "failed": Answer("failed", Failed("timeout")),
    }


def test_answer_helpers_tell_success_refusal_and_retry():
    a = answers_of_each_kind()
    assert {k: v.response() is not None for k, v in a.items()} == {
        "created": True,
        "missing": True,
        "busy": True,
        "down": True,
        "refused": False,
        "failed": False,
    }
    assert a["created"].success() is a["created"].outcome
    assert [k for k, v in a.items() if v.success() is not None] == ["created"]
    assert a["missing"].response().status == 404 and a["missing"].success() is None
    assert a["refused"].refused() == "not-granted: https://dns.example.com"
    assert [k for k, v in a.items() if v.refused() is not None] == ["refused"]
    assert {k: v.retryable() for k, v in a.items()} == {
        "created": False,
        "missing": False,
        "busy": True,
        "down": True,
        "refused": False,
        "failed": True,
    }
    assert Answer("e", Response(500)).retryable() and not Answer("e", Response(499)).retryable()
    assert Answer("e", Response(200)).success() and not Answer("e", Response(300)).success()


def test_response_reads_json_text_and_headers():
    a = answers_of_each_kind()
    created = a["created"].success()
    assert created.json() == {"id": "r-1"}
    assert created.text() == '{"id": "r-1"}'
    assert created.header("etag") == created.header("ETAG") == '"v1"'
    assert created.header("Location") is None
    assert a["missing"].response().text() == "no such record"
    assert a["down"].response().text() == "\ufffddown"
    first = Response(200, [Header("ETag", "1"), Header("etag", "2")])
    assert first.header("Etag") == "1"
    with pytest.raises(ReconcileFailed, match="the answer's body"):
        a["missing"].response().json()
    with pytest.raises(ReconcileFailed, match="the answer's body"):
        Response(200, body=b'{"cut": "at the c', truncated=True).json()
