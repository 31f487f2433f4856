"""The component's exports, natively: ``export`` against the bindings componentize-py
generates for ``wit/plugin.wit`` (the same ones a component is built with)."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from wasmop_sdk import (
    ByLabels,
    ByName,
    Credential,
    Failed,
    FieldError,
    Header,
    KindRef,
    Observed,
    Operation,
    OutboundRequest,
    Plan,
    PluginInfo,
    Refused,
    Rejected,
    Relation,
    Requirement,
    Response,
    Selection,
    Verdict,
    Webhooks,
)

WIT = Path(__file__).resolve().parents[3] / "wit"
PRIMARY = KindRef("example.com", "v1", "Thing", "things", True)
SECRET = KindRef("", "v1", "Secret", "secrets", True)


@pytest.fixture(scope="session")
def bindings(tmp_path_factory):
    """``(wit_world.imports.types, Err, export)``, from bindings generated for this run."""
    tool = Path(sys.executable).with_name("componentize-py")
    if not tool.exists():
        pytest.skip("no componentize-py beside this Python (guests/toolchains/plugin test)")
    out = tmp_path_factory.mktemp("bindings")
    subprocess.run([tool, "-d", WIT, "-w", "plugin", "bindings", out], check=True)
    sys.path.insert(0, str(out))
    component = importlib.import_module("wasmop_sdk.component")
    wit = importlib.import_module("wit_world.imports.types")
    err = importlib.import_module("componentize_py_types").Err
    return wit, err, component.export


class Bare:
    """A plugin with only ``info`` and ``reconcile``, as every plugin before 0.4.0."""

    def info(self):
        return PluginInfo(
            "bare",
            "1",
            PRIMARY,
            relations=[
                Relation("owned", SECRET),
                Relation("all", SECRET, Selection.NAMESPACE, "app=web", ["data"]),
                Relation("named", SECRET, Selection.referenced("spec.ref.name", "spec.ref.ns")),
            ],
        )

    def reconcile(self, observed):
        return Plan()


class Full(Bare):
    """A plugin with every hook."""

    seen = None

    def info(self):
        return PluginInfo(
            "full",
            "1",
            PRIMARY,
            webhooks=Webhooks(validate=True, default=True, convert=True),
            outbound_hosts=["https://api.example.com"],
        )

    def reconcile(self, observed):
        Full.seen = observed
        return (
            Plan()
            .require(Requirement("one", SECRET, ByName("s"), namespace="other"))
            .require(Requirement("some", SECRET, ByLabels("app=web")))
            .request(
                OutboundRequest(
                    "k",
                    "POST",
                    "https://api.example.com/x",
                    headers=[Header("Content-Type", "application/json")],
                    body=b'{"a":1}',
                    credential=Credential("Authorization", "token", "value", "Bearer "),
                    idempotency_key="i-1",
                    retry=True,
                    keep_headers=["ETag"],
                )
            )
        )

    def validate(self, request):
        Full.seen = request
        if request.object["spec"]["size"] > 3:
            return Verdict.invalid(FieldError("spec.size", "at most 3", 4)).warn("big")
        return Verdict.allow()

    def default(self, obj):
        obj["spec"].setdefault("size", 1)
        return obj

    def convert(self, obj, to_version):
        if to_version != "v2":
            raise Rejected(f"no version {to_version}")
        return {**obj, "apiVersion": f"example.com/{to_version}"}


def observed(wit, **more):
    fields = dict(primary="{}", related=[], now_unix_ms=1, seed=2, required=[], answers=[])
    return wit.Observed(**{**fields, **more})


def test_info_declares_selections_and_no_webhook_or_host_by_default(bindings):
    wit, _, export = bindings
    info = export(Bare)().info()
    assert info.webhooks == wit.Webhooks(validate=False, default=False, convert=False)
    assert info.outbound_hosts == []
    assert [r.selection for r in info.relations] == [
        wit.Selection_Owned(),
        wit.Selection_Namespace(),
        wit.Selection_Referenced(
            wit.Reference(name_path="spec.ref.name", namespace_path="spec.ref.ns")
        ),
    ]
    assert (info.relations[1].label_selector, info.relations[1].fields) == ("app=web", ["data"])


def test_info_declares_webhooks_and_hosts(bindings):
    wit, _, export = bindings
    info = export(Full)().info()
    assert info.webhooks == wit.Webhooks(validate=True, default=True, convert=True)
    assert info.outbound_hosts == ["https://api.example.com"]

    class DefaultOnly(Bare):
        def info(self):
            return PluginInfo("one", "1", PRIMARY, webhooks=Webhooks(default=True))

    only = wit.Webhooks(validate=False, default=True, convert=False)
    assert export(DefaultOnly)().info().webhooks == only


def test_reconcile_sees_required_objects_and_answers_and_plans_requirements_and_requests(
    bindings,
):
    wit, _, export = bindings
    answers = [
        wit.Answer(
            key="ok",
            outcome=wit.Outcome_Response(
                wit.Response(
                    status=201,
                    headers=[wit.Header(name="ETag", value="e1")],
                    body=b"{}",
                    truncated=True,
                )
            ),
            at_unix_ms=7,
        ),
        wit.Answer(key="no", outcome=wit.Outcome_Refused("not granted"), at_unix_ms=8),
        wit.Answer(key="down", outcome=wit.Outcome_Failed("timeout"), at_unix_ms=9),
    ]
    required = [wit.RelatedObjects(relation="one", objects=['{"kind": "Secret"}'])]
    plan = export(Full)().reconcile(observed(wit, required=required, answers=answers))

    seen: Observed = Full.seen
    assert seen.required == {"one": [{"kind": "Secret"}]}
    assert seen.answer("ok").outcome == Response(201, [Header("ETag", "e1")], b"{}", True)
    assert seen.answer("ok").at_unix_ms == 7
    assert seen.answer("no").outcome == Refused("not granted")
    assert seen.answer("down").outcome == Failed("timeout")

    secret = wit.KindRef(group="", version="v1", kind="Secret", plural="secrets", namespaced=True)
    assert plan.requires == [
        wit.Requirement(
            name="one", kind=secret, namespace="other", matching=wit.Matching_Name("s")
        ),
        wit.Requirement(
            name="some", kind=secret, namespace=None, matching=wit.Matching_Labels("app=web")
        ),
    ]
    assert plan.requests == [
        wit.OutboundRequest(
            key="k",
            method="POST",
            url="https://api.example.com/x",
            headers=[wit.Header(name="Content-Type", value="application/json")],
            body=b'{"a":1}',
            credential=wit.Credential(
                header="Authorization", prefix="Bearer ", secret="token", key="value"
            ),
            idempotency_key="i-1",
            retry=True,
            keep_headers=["ETag"],
        )
    ]


class CreateOnce(Bare):
    """Creates a record outside once, then keeps its id: the builder and the answer helpers."""

    def reconcile(self, observed):
        created = observed.answer("create")
        if created is None:
            return Plan().request(
                OutboundRequest.post("create", "https://api.example.com/records")
                .json({"name": "www", "value": "é"})
                .set_idempotency_key("u-create")
                .set_credential("Authorization", "Bearer ", "token", "value")
                .keep_header("Location")
                .set_retry()
            )
        ok = created.success()
        if ok is None:
            return Plan().set_status({"retryable": created.retryable()}).requeue_after(2000)
        return Plan().set_status({"id": ok.json()["id"], "at": ok.header("location")})


def test_the_request_builder_and_answer_helpers_through_the_component(bindings):
    wit, _, export = bindings
    world = export(CreateOnce)()
    plan = world.reconcile(observed(wit))
    assert plan.requests == [
        wit.OutboundRequest(
            key="create",
            method="POST",
            url="https://api.example.com/records",
            headers=[wit.Header(name="content-type", value="application/json")],
            body='{"name":"www","value":"é"}'.encode(),
            credential=wit.Credential(
                header="Authorization", prefix="Bearer ", secret="token", key="value"
            ),
            idempotency_key="u-create",
            retry=True,
            keep_headers=["Location"],
        )
    ]

    def answered(outcome):
        answer = wit.Answer(key="create", outcome=outcome, at_unix_ms=1)
        return world.reconcile(observed(wit, answers=[answer]))

    response = wit.Response(
        status=201,
        headers=[wit.Header(name="Location", value="/records/r-1")],
        body=b'{"id": "r-1"}',
        truncated=False,
    )
    done = answered(wit.Outcome_Response(response))
    assert (json.loads(done.status), done.requests) == ({"id": "r-1", "at": "/records/r-1"}, [])
    busy = wit.Response(status=503, headers=[], body=b"", truncated=False)
    assert json.loads(answered(wit.Outcome_Response(busy)).status) == {"retryable": True}
    assert json.loads(answered(wit.Outcome_Refused("not-granted")).status) == {"retryable": False}
    assert json.loads(answered(wit.Outcome_Failed("timeout")).status) == {"retryable": True}


def test_a_plugin_without_hooks_allows_keeps_and_refuses_to_convert(bindings):
    wit, err, export = bindings
    world = export(Bare)()
    request = wit.AdmissionRequest(
        operation=wit.Operation.DELETE, object=None, old_object="{}", user="u", dry_run=False
    )
    allowed = wit.Verdict(allowed=True, fields=[], message=None, warnings=[])
    assert world.validate(request) == allowed
    assert json.loads(world.default('{"spec": {}}')) == {"spec": {}}
    with pytest.raises(err) as refused:
        world.convert("{}", "v2")
    assert refused.value.value == "this plugin does not convert (asked for v2)"
    assert world.cleanup(observed(wit)).requires == []


def test_validate_reads_the_request_and_words_the_verdict(bindings):
    wit, _, export = bindings
    world = export(Full)()
    verdict = world.validate(
        wit.AdmissionRequest(
            operation=wit.Operation.UPDATE,
            object='{"spec": {"size": 4}}',
            old_object='{"spec": {"size": 2}}',
            user="alice",
            dry_run=True,
        )
    )
    assert (Full.seen.operation, Full.seen.old_object) == (Operation.UPDATE, {"spec": {"size": 2}})
    assert (Full.seen.user, Full.seen.dry_run) == ("alice", True)
    assert verdict == wit.Verdict(
        allowed=False,
        fields=[wit.FieldError(path="spec.size", value="4", detail="at most 3")],
        message=None,
        warnings=["big"],
    )
    malformed = world.validate(
        wit.AdmissionRequest(
            operation=wit.Operation.CREATE, object="{", old_object=None, user="", dry_run=False
        )
    )
    assert not malformed.allowed and "malformed JSON" in malformed.message


def test_default_and_convert_answer_json_or_refuse_with_the_message(bindings):
    _, err, export = bindings
    world = export(Full)()
    assert json.loads(world.default('{"spec": {}}')) == {"spec": {"size": 1}}
    assert json.loads(world.convert('{"apiVersion": "example.com/v1"}', "v2")) == {
        "apiVersion": "example.com/v2"
    }
    with pytest.raises(err) as refused:
        world.convert("{}", "v3")
    assert refused.value.value == "no version v3"
    with pytest.raises(err) as malformed:
        world.default("{")
    assert "malformed JSON" in malformed.value.value
