// The SDK's own behaviour, natively (the same functions a component runs).
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Answer,
  type Header,
  Identity,
  InvalidSpec,
  Observed,
  OutboundRequest,
  Plan,
  ReconcileError,
  ReconcileFailed,
  condition,
  controllerUid,
  deleteRef,
  isControlledBy,
  isTerminating,
  parseRfc3339,
  RequestBuilder,
  Response,
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

test("the request builder sets every member", () => {
  const r = OutboundRequest.post("create", "https://dns.example.com/zones/z/records")
    .header("X-Trace", "t1")
    .json({ name: "www", ttl: 300, note: "é" })
    .setIdempotencyKey("u-1-create-0")
    .setRetry()
    .keepHeader("ETag")
    .keepHeader("Location")
    .setCredential("Authorization", "Bearer ", "dns-token", "token");
  assert.ok(r instanceof RequestBuilder);
  assert.deepEqual([r.key, r.method, r.url], ["create", "POST", "https://dns.example.com/zones/z/records"]);
  assert.deepEqual(r.body, new TextEncoder().encode('{"name":"www","ttl":300,"note":"é"}'));
  assert.deepEqual(r.headers, [
    { name: "X-Trace", value: "t1" },
    { name: "content-type", value: "application/json" },
  ]);
  assert.equal(r.idempotencyKey, "u-1-create-0");
  assert.equal(r.retry, true);
  assert.deepEqual(r.keepHeaders, ["ETag", "Location"]);
  assert.deepEqual(r.credential, { header: "Authorization", prefix: "Bearer ", secret: "dns-token", key: "token" });
  assert.deepEqual(new Plan().request(r).requests, [r]);
});

test("the request builder: shorthands and defaults", () => {
  assert.equal(OutboundRequest.new("k", "patch", "https://a.example.com").method, "PATCH");
  const made = [
    OutboundRequest.get("g", "https://a.example.com/1"),
    OutboundRequest.put("p", "https://a.example.com/2"),
    OutboundRequest.delete("d", "https://a.example.com/3"),
  ];
  assert.deepEqual(
    made.map((r) => [r.key, r.method, r.url]),
    [
      ["g", "GET", "https://a.example.com/1"],
      ["p", "PUT", "https://a.example.com/2"],
      ["d", "DELETE", "https://a.example.com/3"],
    ],
  );
  const bare = OutboundRequest.get("g", "https://a.example.com");
  assert.deepEqual(
    [bare.headers, bare.body, bare.credential, bare.idempotencyKey, bare.retry, bare.keepHeaders],
    [[], undefined, undefined, undefined, false, []],
  );
  assert.notEqual(OutboundRequest.get("a", "u").headers, OutboundRequest.get("b", "u").headers);
  assert.equal(bare.setRetry().setRetry(false).retry, false);
  // A second JSON body replaces the first, and its Content-Type any set before.
  const twice = bare.header("Content-Type", "text/plain").json([1]).json(null);
  assert.deepEqual(twice.body, new TextEncoder().encode("null"));
  assert.deepEqual(twice.headers, [{ name: "content-type", value: "application/json" }]);
  assert.throws(() => OutboundRequest.post("k", "u").json(undefined), TypeError);
});

/** A response with `status`, `body` (text or bytes) and `headers`. */
const response = (status: number, body: string | Uint8Array = "", headers: Header[] = []): Response => ({
  status,
  headers,
  body: typeof body === "string" ? new TextEncoder().encode(body) : body,
  truncated: false,
});
const answer = (key: string, outcome: Answer["outcome"]): Answer => ({ key, outcome, atUnixMs: 1 });
const ANSWERS: Record<string, Answer> = {
  created: answer("created", { response: response(201, '{"id": "r-1"}', [{ name: "ETag", value: '"v1"' }]) }),
  missing: answer("missing", { response: response(404, "no such record") }),
  busy: answer("busy", { response: response(429) }),
  down: answer("down", { response: response(503, Uint8Array.of(0xff, 0x64)) }),
  refused: answer("refused", { refused: "not-granted: https://dns.example.com" }),
  failed: answer("failed", { failed: "timeout" }),
};
const each = <T>(f: (a: Answer) => T): Record<string, T> =>
  Object.fromEntries(Object.entries(ANSWERS).map(([k, a]) => [k, f(a)]));
const status = (s: number): Answer => answer("s", { response: response(s) });

test("answer helpers tell success, refusal and retry", () => {
  assert.deepEqual(
    each((a) => Answer.response(a)?.status),
    { created: 201, missing: 404, busy: 429, down: 503, refused: undefined, failed: undefined },
  );
  assert.deepEqual(
    each((a) => Answer.success(a)?.status),
    { created: 201, missing: undefined, busy: undefined, down: undefined, refused: undefined, failed: undefined },
  );
  assert.deepEqual(
    each((a) => Answer.refused(a)),
    {
      created: undefined,
      missing: undefined,
      busy: undefined,
      down: undefined,
      refused: "not-granted: https://dns.example.com",
      failed: undefined,
    },
  );
  assert.deepEqual(
    each((a) => Answer.retryable(a)),
    { created: false, missing: false, busy: true, down: true, refused: false, failed: true },
  );
  assert.deepEqual([200, 299, 300].map((s) => Answer.success(status(s)) !== undefined), [true, true, false]);
  assert.deepEqual([499, 500].map((s) => Answer.retryable(status(s))), [false, true]);
  const none = new Observed({}).answer("create");
  assert.deepEqual(
    [Answer.response(none), Answer.success(none), Answer.refused(none), Answer.retryable(none)],
    [undefined, undefined, undefined, false],
  );
});

test("response helpers read JSON, text and headers", () => {
  const created = Answer.success(ANSWERS.created);
  assert.ok(created);
  assert.deepEqual(Response.json<{ id: string }>(created), { id: "r-1" });
  assert.equal(Response.json<{ id: string }>(created).id, "r-1");
  assert.equal(Response.text(created), '{"id": "r-1"}');
  assert.equal(Response.header(created, "etag"), '"v1"');
  assert.equal(Response.header(created, "ETAG"), '"v1"');
  assert.equal(Response.header(created, "Location"), undefined);
  const missing = Answer.response(ANSWERS.missing);
  assert.ok(missing);
  assert.equal(Response.text(missing), "no such record");
  assert.throws(
    () => Response.json(missing),
    (e: unknown) => e instanceof ReconcileFailed && /the answer's body/.test(e.message),
  );
  const down = Answer.response(ANSWERS.down);
  assert.ok(down);
  assert.equal(Response.text(down), "\ufffdd");
  const both = response(200, "", [
    { name: "ETag", value: "1" },
    { name: "etag", value: "2" },
  ]);
  assert.equal(Response.header(both, "Etag"), "1");
});
