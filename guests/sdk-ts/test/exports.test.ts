// The component's exports natively: the conversions to and from the world's values, and the
// defaults of the optional methods (contract 0.4.0).
/// <reference path="../wit/plugin.d.ts" />
import assert from "node:assert/strict";
import { test } from "node:test";

import type * as wit from "wasmop:plugin/types@0.4.0";

import { exportsOf } from "../src/glue.js";
import {
  type AdmissionRequest,
  Answer,
  InvalidSpec,
  type K8sObject,
  type Observed,
  OutboundRequest,
  Plan,
  type Plugin,
  type PluginInfo,
  Refused,
  Response,
  Verdict,
  podKind,
} from "../src/index.js";

const INFO: PluginInfo = {
  name: "p",
  version: "0.1.0",
  primary: { group: "example.com", version: "v1", kind: "Thing", plural: "things", namespaced: true },
  relations: [{ name: "pods", kind: podKind(), selection: "owned" }],
  permissions: [{ kind: podKind(), verbs: ["create"] }],
};

/** A plugin with only the required methods, deciding with `decide`. */
const minimal = (decide: (o: Observed) => Plan = () => new Plan()): Plugin => ({
  info: () => INFO,
  reconcile: decide,
});

const OBSERVED: wit.Observed = {
  primary: JSON.stringify({ metadata: { name: "a" } }),
  related: [{ relation: "pods", objects: [JSON.stringify({ metadata: { name: "p1" } })] }],
  nowUnixMs: 1000n,
  seed: 7n,
  required: [{ relation: "config", objects: [JSON.stringify({ data: { x: "1" } })] }],
  answers: [
    {
      key: "create",
      outcome: {
        tag: "response",
        val: { status: 201, headers: [{ name: "Location", value: "/t/1" }], body: new TextEncoder().encode("{}"), truncated: false },
      },
      atUnixMs: 900n,
    },
    { key: "denied", outcome: { tag: "refused", val: "host not granted" }, atUnixMs: 950n },
  ],
};

const request = (operation: wit.Operation, object?: K8sObject, oldObject?: string): wit.AdmissionRequest => ({
  operation,
  object: object && JSON.stringify(object),
  oldObject,
  user: "alice",
  dryRun: false,
});

/** The `err` of a `result` export: the payload of what it throws. */
function payload(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return (e as { payload?: unknown }).payload;
  }
  assert.fail("expected an error");
}

test("info: no webhooks and no outbound hosts unless declared", () => {
  const i = exportsOf(minimal()).info();
  assert.deepEqual(i.webhooks, { validate: false, default: false, convert: false });
  assert.deepEqual(i.outboundHosts, []);
  assert.deepEqual(i.relations[0]?.selection, { tag: "owned" });
});

test("info: webhooks, outbound hosts and a referenced relation", () => {
  const declared: Plugin = {
    ...minimal(),
    info: () => ({
      ...INFO,
      relations: [
        { name: "config", kind: podKind(), selection: { referenced: { namePath: "spec.configRef.name" } } },
        { name: "all", kind: podKind(), selection: "namespace", labelSelector: "app=x" },
      ],
      webhooks: { validate: true },
      outboundHosts: ["https://api.example.com"],
    }),
  };
  const i = exportsOf(declared).info();
  assert.deepEqual(i.webhooks, { validate: true, default: false, convert: false });
  assert.deepEqual(i.outboundHosts, ["https://api.example.com"]);
  assert.deepEqual(i.relations[0]?.selection, { tag: "referenced", val: { namePath: "spec.configRef.name" } });
  assert.deepEqual(i.relations[1]?.selection, { tag: "namespace" });
  assert.equal(i.relations[1]?.labelSelector, "app=x");
});

test("observed: required objects and answers by key", () => {
  const calls: Observed[] = [];
  exportsOf(
    minimal((o) => {
      calls.push(o);
      return new Plan();
    }),
  ).reconcile(OBSERVED);
  const seen = calls[0];
  assert.ok(seen);
  assert.equal(seen.nowUnixMs, 1000);
  assert.deepEqual(seen.objects("pods"), [{ metadata: { name: "p1" } }]);
  assert.deepEqual(seen.requiredObjects("config"), [{ data: { x: "1" } }]);
  assert.equal(seen.requiredObjects("other"), undefined);
  const created = seen.answer("create");
  assert.equal(created?.atUnixMs, 900);
  const outcome = created?.outcome;
  assert.ok(outcome && "response" in outcome);
  assert.equal(outcome.response.status, 201);
  assert.deepEqual(outcome.response.headers, [{ name: "Location", value: "/t/1" }]);
  assert.equal(new TextDecoder().decode(outcome.response.body), "{}");
  assert.deepEqual(seen.answer("denied")?.outcome, { refused: "host not granted" });
  assert.equal(seen.answer("never"), undefined);
});

test("plan: requirements and requests in the world's form, with defaults", () => {
  const plan = exportsOf(
    minimal(() =>
      new Plan()
        .require({ name: "config", kind: podKind(), matching: { name: "cfg" } })
        .require({ name: "peers", kind: podKind(), namespace: "other", matching: { labels: "app=x" } })
        .request({ key: "get", method: "GET", url: "https://api.example.com/t" })
        .request({
          key: "create",
          method: "POST",
          url: "https://api.example.com/t",
          headers: [{ name: "Content-Type", value: "application/json" }],
          body: '{"a":"é"}',
          credential: { header: "Authorization", secret: "token", key: "value" },
          idempotencyKey: "k1",
          retry: true,
          keepHeaders: ["Location"],
        }),
    ),
  ).reconcile(OBSERVED);
  assert.deepEqual(
    plan.requires.map((r) => [r.name, r.namespace, r.matching]),
    [
      ["config", undefined, { tag: "name", val: "cfg" }],
      ["peers", "other", { tag: "labels", val: "app=x" }],
    ],
  );
  assert.deepEqual(plan.requests[0], {
    key: "get",
    method: "GET",
    url: "https://api.example.com/t",
    headers: [],
    body: undefined,
    credential: undefined,
    idempotencyKey: undefined,
    retry: false,
    keepHeaders: [],
  });
  const post = plan.requests[1];
  assert.deepEqual(post?.body, new TextEncoder().encode('{"a":"é"}'));
  assert.deepEqual(post?.credential, { header: "Authorization", prefix: "", secret: "token", key: "value" });
  assert.equal(post?.retry, true);
  assert.deepEqual(post?.keepHeaders, ["Location"]);
});

test("the request builder and the answer helpers, through the exports", () => {
  /** Creates a record outside once, then keeps its id. */
  const createOnce = exportsOf(
    minimal((o) => {
      const created = o.answer("create");
      if (!created) {
        return new Plan().request(
          OutboundRequest.post("create", "https://api.example.com/records")
            .json({ name: "www", value: "é" })
            .setIdempotencyKey("u-create")
            .setCredential("Authorization", "Bearer ", "token", "value")
            .keepHeader("Location")
            .setRetry(),
        );
      }
      const ok = Answer.success(created);
      if (!ok) return new Plan().setStatus({ retryable: Answer.retryable(created) }).requeueAfter(2000);
      return new Plan().setStatus({ id: Response.json<{ id: string }>(ok).id, at: Response.header(ok, "location") });
    }),
  );
  const first = createOnce.reconcile({ ...OBSERVED, answers: [] });
  assert.deepEqual(first.requests, [
    {
      key: "create",
      method: "POST",
      url: "https://api.example.com/records",
      headers: [{ name: "content-type", value: "application/json" }],
      body: new TextEncoder().encode('{"name":"www","value":"é"}'),
      credential: { header: "Authorization", prefix: "Bearer ", secret: "token", key: "value" },
      idempotencyKey: "u-create",
      retry: true,
      keepHeaders: ["Location"],
    },
  ]);
  const answered = (outcome: wit.Outcome) =>
    createOnce.reconcile({ ...OBSERVED, answers: [{ key: "create", outcome, atUnixMs: 1n }] });
  const body = new TextEncoder().encode('{"id": "r-1"}');
  const headers = [{ name: "Location", value: "/records/r-1" }];
  const done = answered({ tag: "response", val: { status: 201, headers, body, truncated: false } });
  assert.deepEqual([done.status && JSON.parse(done.status), done.requests], [{ id: "r-1", at: "/records/r-1" }, []]);
  const busy = answered({ tag: "response", val: { status: 503, headers: [], body, truncated: true } });
  assert.equal(busy.status, '{"retryable":true}');
  assert.equal(answered({ tag: "refused", val: "not-granted" }).status, '{"retryable":false}');
  assert.equal(answered({ tag: "failed", val: "timeout" }).status, '{"retryable":true}');
});

test("reconcile errors and malformed JSON are the error variant", () => {
  const failing = exportsOf(
    minimal(() => {
      throw new InvalidSpec("size");
    }),
  );
  assert.deepEqual(payload(() => failing.reconcile(OBSERVED)), { tag: "invalid-spec", val: "size" });
  const malformed = { ...OBSERVED, required: [{ relation: "config", objects: ["{"] }] };
  const err = payload(() => exportsOf(minimal()).reconcile(malformed)) as wit.ReconcileError;
  assert.equal(err.tag, "other");
  assert.match(err.val, /^host sent malformed JSON/);
});

test("without the new methods: validate allows, default changes nothing, convert refuses", () => {
  const e = exportsOf(minimal());
  assert.deepEqual(e.validate(request("create", { a: 1 })), { allowed: true, fields: [], message: undefined, warnings: [] });
  assert.deepEqual(JSON.parse(e.default('{"spec": {"a": 1}}')), { spec: { a: 1 } });
  assert.equal(payload(() => e.convert("{}", "v2")), "this plugin does not convert (asked for v2)");
  assert.deepEqual(e.cleanup(OBSERVED).actions, []);
});

test("validate: the plugin's verdict, and a malformed request refused", () => {
  const asked: AdmissionRequest[] = [];
  const e = exportsOf({
    ...minimal(),
    validate: (r) => {
      asked.push(r);
      return Verdict.invalid([{ path: "spec.size", value: -1, detail: "must be positive" }]).warn("w");
    },
  });
  assert.deepEqual(e.validate(request("update", { spec: { size: -1 } }, '{"spec": {}}')), {
    allowed: false,
    fields: [{ path: "spec.size", value: "-1", detail: "must be positive" }],
    message: undefined,
    warnings: ["w"],
  });
  assert.deepEqual(asked, [
    { operation: "UPDATE", object: { spec: { size: -1 } }, oldObject: { spec: {} }, user: "alice", dryRun: false },
  ]);
  const refused = e.validate(request("delete", undefined, "{"));
  assert.equal(refused.allowed, false);
  assert.match(refused.message ?? "", /^host sent malformed JSON/);
});

test("default and convert: the plugin's object, or its refusal", () => {
  const e = exportsOf({
    ...minimal(),
    default: (o) => ({ ...o, spec: { size: 1, ...o.spec } }),
    convert: (o, to) => {
      if (to !== "v2") throw new Refused(`no ${to}`);
      return { ...o, apiVersion: `example.com/${to}` };
    },
  });
  assert.deepEqual(JSON.parse(e.default('{"spec": {}}')), { spec: { size: 1 } });
  assert.deepEqual(JSON.parse(e.convert('{"apiVersion": "example.com/v1"}', "v2")), { apiVersion: "example.com/v2" });
  assert.equal(payload(() => e.convert("{}", "v3")), "no v3");
  assert.match(String(payload(() => e.default("{"))), /^host sent malformed JSON/);
});

test("an error that is not a refusal is a fault, not an answer", () => {
  const e = exportsOf({
    ...minimal(),
    default: () => {
      throw new TypeError("bug");
    },
  });
  assert.throws(() => e.default("{}"), TypeError);
});
