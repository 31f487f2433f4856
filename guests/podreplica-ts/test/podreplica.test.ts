// PodReplica's decision, natively: the article's rules, one test each.
import assert from "node:assert/strict";
import { test } from "node:test";

import { InvalidSpec, type K8sObject, Observed } from "@wasmop/sdk";

import { reconcile } from "../src/decide.js";
import { NAME_LABEL, removalOrder } from "../src/pods.js";
import { PodReplica } from "../src/plugin.js";

const NOW = 1_767_225_600_000; // 2026-01-01T00:00:00Z

function primary(size: unknown, status?: K8sObject, meta: K8sObject = {}): K8sObject {
  const obj: K8sObject = {
    apiVersion: "app.example.com/v1alpha1",
    kind: "PodReplica",
    metadata: { name: "web", namespace: "default", uid: "uid-web", generation: 1, ...meta },
    spec: { size },
  };
  if (status) obj.status = status;
  return obj;
}

interface PodOpts {
  phase?: string;
  ready?: boolean;
  owner?: string | null;
  created?: string;
  deleting?: boolean;
}

function pod(name: string, o: PodOpts = {}): K8sObject {
  const meta: K8sObject = {
    name,
    namespace: "default",
    uid: `uid-${name}`,
    creationTimestamp: o.created ?? "2025-12-31T23:00:00Z",
    labels: { [NAME_LABEL]: "web" },
  };
  const owner = o.owner === undefined ? "uid-web" : o.owner;
  if (owner) {
    meta.ownerReferences = [
      { apiVersion: "app.example.com/v1alpha1", kind: "PodReplica", name: "web", uid: owner, controller: true },
    ];
  }
  if (o.deleting) meta.deletionTimestamp = "2026-01-01T00:00:00Z";
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta,
    status: { phase: o.phase ?? "Running", conditions: [{ type: "Ready", status: o.ready === false ? "False" : "True" }] },
  };
}

const decide = (size: unknown, pods: K8sObject[], status?: K8sObject, meta?: K8sObject) =>
  reconcile(new Observed(primary(size, status, meta), { pods }, NOW));

test("first reconcile creates every pod and leaves the status", () => {
  const plan = decide(3, []);
  assert.equal(plan.applied().length, 3);
  assert.equal(plan.status, undefined);
  const created = plan.applied()[0] as K8sObject;
  assert.equal(created.metadata.generateName, "web-pod-");
  assert.equal(created.metadata.ownerReferences[0].uid, "uid-web");
  assert.equal(created.spec.containers[0].image, "busybox");
  assert.deepEqual(plan.events.map((e) => e.reason), ["ScaledUp"]);
});

test("scale down removes not-ready, then newest", () => {
  const plan = decide(1, [pod("a"), pod("b", { ready: false }), pod("c", { created: "2025-12-31T23:30:00Z" })]);
  assert.deepEqual(plan.deleted().map((r) => r.name), ["b", "c"]);
  assert.deepEqual(plan.status?.pods, ["a"]);
  assert.equal(plan.events[0]?.message, "deleting 2 pod(s): b, c");
});

test("removal order breaks ties by name", () => {
  const pods = [pod("a"), pod("b"), pod("c")];
  removalOrder(pods);
  assert.deepEqual(pods.map((p) => p.metadata.name), ["c", "b", "a"]);
});

test("finished pods are replaced, terminating ones left alone", () => {
  const plan = decide(2, [pod("f", { phase: "Failed" }), pod("s", { phase: "Succeeded" }), pod("t", { deleting: true }), pod("a")]);
  assert.deepEqual(plan.deleted().map((r) => r.name), ["f", "s"]);
  assert.equal(plan.applied().length, 1);
  assert.deepEqual(plan.events.map((e) => e.reason), ["ReplacingFinishedPods", "ScaledUp"]);
});

test("foreign pods with the label are not ours", () => {
  const plan = decide(1, [pod("mine"), pod("theirs", { owner: "uid-other" }), pod("orphan", { owner: null })]);
  assert.deepEqual(plan.actions, []);
  assert.deepEqual(plan.status?.pods, ["mine"]);
});

test("a status already right is not written again", () => {
  const first = decide(1, [pod("a")]);
  assert.ok(first.status);
  const again = decide(1, [pod("a")], JSON.parse(JSON.stringify(first.status)));
  assert.equal(again.status, undefined);
  assert.deepEqual(again.actions, []);
});

for (const size of [-1, 101, "3", null, true, 1.5]) {
  test(`size ${JSON.stringify(size)} is an invalid spec`, () => {
    assert.throws(() => decide(size, []), InvalidSpec);
  });
}

test("a deleted primary leaves its pods to the garbage collector", () => {
  const plan = decide(3, [pod("a")], undefined, { deletionTimestamp: "2026-01-01T00:00:00Z" });
  assert.deepEqual(plan.actions, []);
  assert.equal(plan.status, undefined);
});

test("info declares owned pods and only create and delete", () => {
  const info = new PodReplica().info();
  assert.equal(info.name, "podreplica");
  assert.deepEqual(info.relations[0]?.fields, ["status.phase", "status.conditions"]);
  assert.deepEqual(info.permissions[0]?.verbs, ["create", "delete"]);
  assert.deepEqual(info.crd?.spec.names.shortNames, ["pr"]);
});
