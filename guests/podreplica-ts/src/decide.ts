/** The PodReplica decision: compare owned live pods with `spec.size`, create or delete the
 * difference, replace finished pods, and report the live pods in the status (once no pod is
 * missing: a plan that creates pods leaves the status to the decision that sees them). */

import {
  type Condition,
  Identity,
  InvalidSpec,
  type K8sObject,
  type Observed,
  Plan,
  condition,
  deleteRef,
  isTerminating,
  rfc3339,
  sameJson,
  setCondition,
} from "@wasmop/sdk";

import { type Pod, classify, isReady, nameOf, newPod, removalOrder } from "./pods.js";

/** The largest `spec.size` accepted (the CRD's schema says so too). */
export const MAX_SIZE = 100;

/** Decides what to do about one PodReplica. */
export function reconcile(observed: Observed): Plan {
  const pr = observed.primary;
  const owner = Identity.of(pr);
  const spec: K8sObject | undefined = pr.spec;
  if (typeof spec !== "object" || spec === null || !Number.isInteger(spec.size)) {
    throw new InvalidSpec("spec.size must be an integer");
  }
  const size: number = spec.size;
  if (size < 0 || size > MAX_SIZE) {
    throw new InvalidSpec(`spec.size is ${size}, it must be between 0 and ${MAX_SIZE}`);
  }
  if (isTerminating(pr)) {
    // The garbage collector removes the pods with their owner.
    return new Plan();
  }
  const owned = classify(observed.objects("pods"), owner.uid);
  const plan = new Plan();

  for (const pod of owned.finished) plan.delete(deleteRef("v1", "Pod", pod));
  if (owned.finished.length > 0) {
    plan.normal("ReplacingFinishedPods", `removing ${owned.finished.length} finished pod(s)`);
  }

  const live = owned.live.length;
  if (live > size) {
    removalOrder(owned.live);
    const surplus = owned.live.splice(0, live - size);
    for (const pod of surplus) plan.delete(deleteRef("v1", "Pod", pod));
    plan.normal("ScaledDown", `deleting ${surplus.length} pod(s): ${surplus.map(nameOf).join(", ")}`);
  } else if (live < size) {
    const missing = size - live;
    for (let i = 0; i < missing; i++) plan.apply(newPod(owner, spec));
    plan.normal("ScaledUp", `creating ${missing} pod(s)`);
    // The creates bring the next decision, whose status lists the new pods.
    return plan;
  }

  const status = statusFor(pr, owned.live, size, observed.nowUnixMs);
  if (!sameJson(currentStatus(pr), status)) plan.setStatus(status);
  return plan;
}

/** The status describing the live pods that remain after this plan's deletions. */
export function statusFor(pr: K8sObject, live: Pod[], size: number, nowMs: number): K8sObject {
  const pods = live.map(nameOf).sort();
  const ready = live.filter(isReady).length;
  const replicas = pods.length;
  const generation: number | undefined = pr.metadata?.generation ?? undefined;
  let [ok, reason, message] = [false, "PodsNotReady", `${ready}/${size} pods ready`];
  if (replicas === size && ready === size) [ok, reason] = [true, "AllPodsReady"];
  else if (replicas !== size) [reason, message] = ["Scaling", `${replicas} live pods, ${size} desired`];
  const previous: Condition[] = pr.status?.conditions ?? [];
  const conditions: Condition[] = [];
  setCondition(conditions, previous, condition("Ready", ok, reason, message, rfc3339(nowMs), generation));
  const status: K8sObject = { pods, replicas, readyReplicas: ready, conditions };
  if (generation !== undefined) status.observedGeneration = generation;
  return status;
}

/** The object's status in the shape `statusFor` writes (absent fields at their defaults),
 * so that a status already right is not written again. */
function currentStatus(pr: K8sObject): K8sObject | undefined {
  const s = pr.status;
  if (typeof s !== "object" || s === null) return undefined;
  const out: K8sObject = {
    pods: s.pods ?? [],
    replicas: s.replicas ?? 0,
    readyReplicas: s.readyReplicas ?? 0,
    conditions: (s.conditions ?? []).map((c: K8sObject) => ({ message: "", ...c })),
  };
  if (s.observedGeneration != null) out.observedGeneration = s.observedGeneration;
  return out;
}
