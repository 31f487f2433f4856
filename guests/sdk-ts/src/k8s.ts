/** Helpers for Kubernetes objects that most plugins need: ownership, termination, time,
 * references for deletion. */

import { type K8sObject, type KindRef, type ObjectRef, ReconcileFailed } from "./types.js";

/** The core `v1` Pod kind, as plugins declare it in relations and permissions. */
export function podKind(): KindRef {
  return { group: "", version: "v1", kind: "Pod", plural: "pods", namespaced: true };
}

/** The object's metadata (empty when it has none). */
export function metadata(object: K8sObject): K8sObject {
  return object.metadata ?? {};
}

/** The UID of the object's controller, if it has one. */
export function controllerUid(object: K8sObject): string | undefined {
  const refs: K8sObject[] = metadata(object).ownerReferences ?? [];
  return refs.find((r) => r.controller === true)?.uid;
}

/** Whether the object's controller ownerReference points at the object with `uid`. */
export function isControlledBy(object: K8sObject, uid: string): boolean {
  return controllerUid(object) === uid;
}

/** Whether the object is being deleted (it has a deletion timestamp). */
export function isTerminating(object: K8sObject): boolean {
  return metadata(object).deletionTimestamp != null;
}

/** The identity of an object: apiVersion, kind, name, namespace, uid. */
export class Identity {
  constructor(
    readonly apiVersion: string,
    readonly kind: string,
    readonly name: string,
    readonly namespace: string | undefined,
    readonly uid: string,
  ) {}

  /** Reads the identity of an object. The host always sends objects that have one. */
  static of(object: K8sObject): Identity {
    const meta = metadata(object);
    const need = (value: unknown, what: string): string => {
      if (typeof value !== "string") throw new ReconcileFailed(`object has no ${what}`);
      return value;
    };
    return new Identity(
      need(object.apiVersion, "apiVersion"),
      need(object.kind, "kind"),
      need(meta.name, "metadata.name"),
      typeof meta.namespace === "string" ? meta.namespace : undefined,
      need(meta.uid, "metadata.uid"),
    );
  }

  /** A controller ownerReference to this object (blocking owner deletion). */
  controllerReference(): K8sObject {
    return {
      apiVersion: this.apiVersion,
      kind: this.kind,
      name: this.name,
      uid: this.uid,
      controller: true,
      blockOwnerDeletion: true,
    };
  }
}

/** A deletion reference with a UID precondition for `object`, of the given kind. */
export function deleteRef(apiVersion: string, kind: string, object: K8sObject): ObjectRef {
  const meta = metadata(object);
  return {
    apiVersion,
    kind,
    name: meta.name ?? "",
    namespace: meta.namespace ?? undefined,
    uid: meta.uid ?? undefined,
  };
}

/** The host's `now` as an RFC 3339 string with second precision, as Kubernetes writes times. */
export function rfc3339(nowUnixMs: number): string {
  const secs = Math.floor(nowUnixMs / 1000);
  return `${new Date(secs * 1000).toISOString().slice(0, 19)}Z`;
}

/** Milliseconds since the Unix epoch of an RFC 3339 string, if it parses. */
export function parseRfc3339(text: string): number | undefined {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(text)) {
    return undefined;
  }
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : ms;
}
