// The SDK's own behaviour, natively (the same functions a component runs).
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Identity,
  InvalidSpec,
  Observed,
  Plan,
  ReconcileError,
  ReconcileFailed,
  condition,
  controllerUid,
  deleteRef,
  isControlledBy,
  isTerminating,
  parseRfc3339,
  rfc3339,
  podKind,
  sameJson,
  setCondition,
  type Condition,
  Verdict,
} from "../src/index.js";

const OWNED = {
  metadata: {
    name: "p",
    namespace: "ns",
    uid: "u-p",
    ownerReferences: [
      { apiVersion: "v1", kind: "X", name: "x", uid: "other" },
      { apiVersion: "v1", kind: "Y", name: "y", uid: "owner", controller: true },
    ],
  },
};

test("ownership and termination", () => {
  assert.equal(controllerUid(OWNED), "owner");
  assert.ok(isControlledBy(OWNED, "owner"));
  assert.ok(!isControlledBy(OWNED, "other"));
  assert.ok(!isControlledBy({ metadata: {} }, "owner"));
  assert.ok(!isTerminating(OWNED));
  assert.ok(isTerminating({ metadata: { deletionTimestamp: "2026-01-01T00:00:00Z" } }));
});

test("identity and controller reference", () => {
  const me = Identity.of({ apiVersion: "a/v1", kind: "K", metadata: { name: "n", namespace: "d", uid: "u" } });
  assert.deepEqual(me.controllerReference(), {
    apiVersion: "a/v1",
    kind: "K",
    name: "n",
    uid: "u",
    controller: true,
    blockOwnerDeletion: true,
  });
  assert.throws(() => Identity.of({ apiVersion: "a/v1", kind: "K", metadata: { name: "n" } }), ReconcileFailed);
});

test("delete references carry the UID precondition", () => {
  assert.deepEqual(deleteRef("v1", "Pod", OWNED), {
    apiVersion: "v1",
    kind: "Pod",
    name: "p",
    namespace: "ns",
    uid: "u-p",
  });
});

test("time is Kubernetes style with second precision", () => {
  assert.equal(rfc3339(1_767_225_600_999), "2026-01-01T00:00:00Z");
  assert.equal(parseRfc3339("2026-01-01T00:00:00Z"), 1_767_225_600_000);
  assert.equal(parseRfc3339("yesterday"), undefined);
  assert.equal(parseRfc3339("2026-01-01T00:00:00"), undefined);
});

test("transition time moves only on status change", () => {
  const prev = [condition("Ready", true, "Ok", "", "t1", 1)];
  const out: Condition[] = [];
  setCondition(out, prev, condition("Ready", true, "Ok", "", "t2", 2));
  assert.equal(out[0]?.lastTransitionTime, "t1");
  const changed: Condition[] = [];
  setCondition(changed, prev, condition("Ready", false, "Scaling", "", "t3", 2));
  assert.equal(changed[0]?.lastTransitionTime, "t3");
  assert.ok(!("observedGeneration" in condition("Ready", true, "Ok", "", "t")));
});

test("the plan builder keeps order", () => {
  const plan = new Plan()
    .apply({ kind: "Pod" })
    .delete(deleteRef("v1", "Pod", OWNED))
    .normal("A", "a")
    .warning("B", "b")
    .setStatus({ x: 1 })
    .requeueAfter(5000);
  assert.deepEqual(plan.applied(), [{ kind: "Pod" }]);
  assert.deepEqual(plan.deleted().map((r) => r.name), ["p"]);
  assert.deepEqual(plan.events.map((e) => [e.type, e.reason]), [["Normal", "A"], ["Warning", "B"]]);
  assert.equal(plan.requeueAfterMs, 5000);
});

test("sameJson ignores key order and undefined members", () => {
  assert.ok(sameJson({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 }));
  assert.ok(sameJson({ a: 1, u: undefined }, { a: 1 }));
  assert.ok(!sameJson({ a: 1 }, { a: 2 }));
  assert.ok(!sameJson([1, 2], [2, 1]));
  assert.ok(!sameJson({ a: [] }, { a: {} }));
});

test("errors are one family", () => {
  assert.ok(new InvalidSpec("x") instanceof ReconcileError);
});

test("the plan builder collects requirements and requests in order", () => {
  const plan = new Plan()
    .require({ name: "config", kind: podKind(), matching: { name: "cfg" } })
    .request({ key: "a", method: "GET", url: "https://api.example.com/a" })
    .require({ name: "peers", kind: podKind(), matching: { labels: "app=x" } })
    .request({ key: "b", method: "DELETE", url: "https://api.example.com/b", retry: true });
  assert.deepEqual(plan.requires.map((r) => r.name), ["config", "peers"]);
  assert.deepEqual(plan.requests.map((r) => r.key), ["a", "b"]);
  assert.deepEqual(new Plan().requires, []);
  assert.deepEqual(new Plan().requests, []);
});

test("verdicts: allow, deny, invalid fields, warnings", () => {
  const allowed = Verdict.allow();
  assert.deepEqual([allowed.allowed, allowed.fields, allowed.message, allowed.warnings], [true, [], undefined, []]);
  const denied = Verdict.deny("no").warn("careful").warn("again");
  assert.equal(denied.allowed, false);
  assert.equal(denied.message, "no");
  assert.deepEqual(denied.warnings, ["careful", "again"]);
  const invalid = Verdict.invalid([{ path: "spec.size", value: 0, detail: "must be positive" }]);
  assert.equal(invalid.allowed, false);
  assert.equal(invalid.message, undefined);
  assert.deepEqual(invalid.fields.map((f) => f.path), ["spec.size"]);
});

test("observed: required objects and answers, none by default", () => {
  const answer = { key: "k", outcome: { failed: "timeout" }, atUnixMs: 5 };
  const o = new Observed({}, {}, 0, 0n, { config: [{ data: {} }], empty: [] }, [answer]);
  assert.deepEqual(o.requiredObjects("config"), [{ data: {} }]);
  assert.deepEqual(o.requiredObjects("empty"), []);
  assert.equal(o.requiredObjects("unread"), undefined);
  assert.equal(o.answer("k"), answer);
  assert.equal(o.answer("other"), undefined);
  const bare = new Observed({});
  assert.deepEqual([bare.required, bare.answers], [{}, []]);
});
