/** How PodReplica sees pods: which ones it owns, which are live, which go first, and the
 * pod it creates. */

import { type Identity, type K8sObject, isControlledBy, isTerminating, metadata, parseRfc3339 } from "@wasmop/sdk";

/** Label put on every pod, with the PodReplica's name as value. */
export const NAME_LABEL = "app.example.com/podreplica";
/** What PodReplica reads of a pod besides its metadata, declared in its relation. */
export const READ_FIELDS = ["status.phase", "status.conditions"];
/** Image of the pods when `spec.image` is not set. */
export const DEFAULT_IMAGE = "busybox";
/** Command of the pods when `spec.command` is not set. */
export const DEFAULT_COMMAND = ["sleep", "3600"];

export type Pod = K8sObject;

/** The pod's phase; `Pending` until it has one. */
export function phase(pod: Pod): string {
  return pod.status?.phase ?? "Pending";
}

/** Whether the pod's `Ready` condition is `True`. */
export function isReady(pod: Pod): boolean {
  const conditions: K8sObject[] = pod.status?.conditions ?? [];
  return conditions.some((c) => c.type === "Ready" && c.status === "True");
}

/** The pod's name. */
export function nameOf(pod: Pod): string {
  return metadata(pod).name ?? "";
}

/** The owned pods of one PodReplica, sorted into what the decision needs. */
export interface OwnedPods {
  /** Pending or running, not terminating: these count towards `size`. */
  live: Pod[];
  /** Succeeded or Failed, not terminating: replaced and removed. */
  finished: Pod[];
  /** Already being deleted: neither counted nor deleted again. */
  terminating: number;
}

const byName = (a: Pod, b: Pod) => (nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0);

/** Sorts `pods` into live, finished and terminating, keeping only those whose controller is
 * the PodReplica with `ownerUid` (a pod that merely carries the label is not ours). */
export function classify(pods: Pod[], ownerUid: string): OwnedPods {
  const out: OwnedPods = { live: [], finished: [], terminating: 0 };
  for (const pod of pods) {
    if (!isControlledBy(pod, ownerUid)) continue;
    if (isTerminating(pod)) out.terminating += 1;
    else if (phase(pod) === "Succeeded" || phase(pod) === "Failed") out.finished.push(pod);
    else out.live.push(pod);
  }
  out.live.sort(byName);
  return out;
}

/** Orders live pods so that the first ones are the ones to remove when scaling down:
 * not-ready before ready, then newest first (name breaks ties, for determinism). */
export function removalOrder(live: Pod[]): void {
  const created = (pod: Pod): number => {
    const text = metadata(pod).creationTimestamp;
    return typeof text === "string" ? (parseRfc3339(text) ?? -1) : -1;
  };
  live.sort(
    (a, b) =>
      Number(isReady(a)) - Number(isReady(b)) || created(b) - created(a) || byName(b, a),
  );
}

/** The pod a PodReplica creates: a generated name `<name>-pod-…`, the selecting label and a
 * controller ownerReference, so the pod goes away with its owner. */
export function newPod(owner: Identity, spec: K8sObject): Pod {
  const pod: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      generateName: `${owner.name}-pod-`,
      labels: { [NAME_LABEL]: owner.name },
      ownerReferences: [owner.controllerReference()],
    },
    spec: {
      containers: [
        {
          name: "busybox",
          image: spec.image ?? DEFAULT_IMAGE,
          command: spec.command ?? DEFAULT_COMMAND,
        },
      ],
    },
  };
  if (owner.namespace !== undefined) pod.metadata.namespace = owner.namespace;
  return pod;
}
