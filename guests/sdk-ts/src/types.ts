/**
 * The contract's values in plain TypeScript: what a plugin declares, what it observes, what
 * it decides. They mirror the records of `wit/plugin.wit`; Kubernetes objects are plain
 * objects as parsed from JSON.
 */

import type { AdmissionRequest, Verdict } from "./admission.js";
import type { Answer, OutboundRequest } from "./effect.js";

/** A Kubernetes object as the host sends it (parsed JSON). */
// biome-ignore lint: any JSON object
export type K8sObject = Record<string, any>;

/** A Kubernetes kind, enough to reach its API and to write RBAC rules for it. */
export interface KindRef {
  /** API group; empty for the core group. */
  group: string;
  /** API version inside the group, e.g. `v1alpha1`. */
  version: string;
  /** Kind, e.g. `Pod`. */
  kind: string;
  /** Plural resource name, e.g. `pods`. */
  plural: string;
  /** Whether objects of this kind live in a namespace. */
  namespaced: boolean;
}

/** Where a primary object names other objects: the dot-separated path of a field that holds
 * a name (`spec.configRef.name`); a path through a list names one object per item. */
export interface Reference {
  namePath: string;
  /** The path of a namespace beside it; absent: the primary's namespace. */
  namespacePath?: string;
}

/** How the related objects of one relation are chosen: `owned` (their controller is the
 * primary object), `namespace` (every object of the kind in its namespace) or
 * `{ referenced: { namePath } }` (the objects the primary names). */
export type Selection = "owned" | "namespace" | { referenced: Reference };

/** A kind the plugin wants to see next to each primary object, under `name`. */
export interface Relation {
  name: string;
  kind: KindRef;
  selection: Selection;
  /** Kubernetes label selector further restricting the objects. */
  labelSelector?: string;
  /** Paths the decision reads besides the metadata (the host sends only those); absent
   * sends whole objects. */
  fields?: string[];
}

/** A verb a plan may need (`adopt`: apply to an object another controller, or none, controls). */
export type Verb = "get" | "list" | "watch" | "create" | "update" | "patch" | "delete" | "adopt";

/** These verbs on this kind, for the plugin's plans; anything else is refused. */
export interface Permission {
  kind: KindRef;
  verbs: Verb[];
}

/** What a plugin declares about itself; the host validates it when loading. */
export interface PluginInfo {
  /** DNS-1123 label, stable across versions. */
  name: string;
  version: string;
  primary: KindRef;
  /** The CustomResourceDefinition of the primary kind, if it is a custom resource. */
  crd?: K8sObject;
  relations: Relation[];
  permissions: Permission[];
  /** With a finalizer, the host calls `cleanup` before the object goes. */
  finalizer?: string;
  /** Which of `validate`, `default` and `convert` the host serves as webhooks; absent: none. */
  webhooks?: Webhooks;
  /** Hosts outside the cluster the plans may send requests to, each `scheme://host[:port]`
   * (an admin grants them); absent: none. */
  outboundHosts?: string[];
}

/** The admission and conversion exports a plugin implements; an absent member is false. */
export interface Webhooks {
  /** `validate` decides every create, update and delete of the primary kind. */
  validate?: boolean;
  /** `default` fills in an object of the primary kind on create and update. */
  default?: boolean;
  /** `convert` converts the primary kind between the versions of the CRD. */
  convert?: boolean;
}

/** Which objects of a kind a requirement selects: one by name, or those with these labels
 * (Kubernetes selector syntax). */
export type Matching = { name: string } | { labels: string };

/** Objects a decision needs that no relation selects: the host reads them and decides again,
 * with them in `observed.required` under `name`. */
export interface Requirement {
  name: string;
  /** Their kind; the plugin needs `get` (by name) or `list` (by labels) on it. */
  kind: KindRef;
  /** Their namespace; absent: the primary's. */
  namespace?: string;
  matching: Matching;
}

/** One object to delete; with `uid` set, only an object with exactly that UID. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  uid?: string;
}

/** One change to the cluster. */
export type Action = { apply: K8sObject } | { delete: ObjectRef };

/** A Kubernetes Event recorded on the primary object. */
export interface Event {
  type: "Normal" | "Warning";
  reason: string;
  message: string;
}

/** The decision of one reconcile, built step by step:
 * `new Plan().apply(pod).normal("ScaledUp", "creating 1 pod(s)")`. */
export class Plan {
  actions: Action[] = [];
  status?: K8sObject;
  events: Event[] = [];
  requeueAfterMs?: number;
  /** Objects this decision needs (see `require`). */
  requires: Requirement[] = [];
  /** Requests outside the cluster (see `request`). */
  requests: OutboundRequest[] = [];

  /** Adds a server-side apply of `object`. */
  apply(object: K8sObject): this {
    this.actions.push({ apply: object });
    return this;
  }

  /** Adds a deletion. */
  delete(target: ObjectRef): this {
    this.actions.push({ delete: target });
    return this;
  }

  /** Sets the desired status of the primary object. */
  setStatus(status: K8sObject): this {
    this.status = status;
    return this;
  }

  /** Adds a Normal Event. */
  normal(reason: string, message: string): this {
    this.events.push({ type: "Normal", reason, message });
    return this;
  }

  /** Adds a Warning Event. */
  warning(reason: string, message: string): this {
    this.events.push({ type: "Warning", reason, message });
    return this;
  }

  /** Asks for another reconcile after `ms` milliseconds. */
  requeueAfter(ms: number): this {
    this.requeueAfterMs = ms;
    return this;
  }

  /** Asks for objects no relation selects; the host reads them and decides again. */
  require(requirement: Requirement): this {
    this.requires.push(requirement);
    return this;
  }

  /** Sends a request outside the cluster after the writes; its answer comes back under its
   * key. */
  request(request: OutboundRequest): this {
    this.requests.push(request);
    return this;
  }

  /** The objects this plan applies, in order (for tests). */
  applied(): K8sObject[] {
    return this.actions.flatMap((a) => ("apply" in a ? [a.apply] : []));
  }

  /** The objects this plan deletes, in order (for tests). */
  deleted(): ObjectRef[] {
    return this.actions.flatMap((a) => ("delete" in a ? [a.delete] : []));
  }
}

/** Why a reconcile produced no plan (throw one of the subclasses). */
export class ReconcileError extends Error {}

/** The primary object's spec is invalid; retrying will not help until it changes. */
export class InvalidSpec extends ReconcileError {}

/** A temporary problem; the host retries with backoff. */
export class Transient extends ReconcileError {}

/** Anything else; retried with backoff. */
export class ReconcileFailed extends ReconcileError {}

/** Everything a decision may depend on. */
export class Observed {
  constructor(
    /** The primary object. */
    readonly primary: K8sObject,
    /** Related objects by relation name. */
    readonly related: Record<string, K8sObject[]> = {},
    /** The host's time, milliseconds since the epoch. */
    readonly nowUnixMs = 0,
    /** A seed chosen by the host; the same seed must give the same decision. */
    readonly seed = 0n,
    /** The objects the plan's `requires` asked for, by requirement name. */
    readonly required: Record<string, K8sObject[]> = {},
    /** The answers to the requests earlier plans sent. */
    readonly answers: Answer[] = [],
  ) {}

  /** The related objects of `relation` (none when the host sent none). */
  objects(relation: string): K8sObject[] {
    return this.related[relation] ?? [];
  }

  /** The objects `requirement` brought; undefined before the host read them. */
  requiredObjects(requirement: string): K8sObject[] | undefined {
    return this.required[requirement];
  }

  /** The answer held under `key`, if any. */
  answer(key: string): Answer | undefined {
    return this.answers.find((a) => a.key === key);
  }
}

/** A plugin: what it is (`info`) and its decisions. */
export interface Plugin {
  info(): PluginInfo;
  reconcile(observed: Observed): Plan;
  /** Only for plugins that declare a finalizer; absent: an empty plan. */
  cleanup?(observed: Observed): Plan;
  /** Allows or refuses a create, update or delete of the primary kind; called only with
   * `webhooks.validate`. Absent: allows. */
  validate?(request: AdmissionRequest): Verdict;
  /** Fills in the defaults of an object of the primary kind (throw `Refused` to refuse);
   * called only with `webhooks.default`. Absent: the object unchanged. */
  default?(object: K8sObject): K8sObject;
  /** Converts an object of the primary kind to `toVersion` of its CRD (throw
   * `Refused` to refuse); called only with `webhooks.convert`. Absent: refuses. */
  convert?(object: K8sObject, toVersion: string): K8sObject;
}

/** Whether two JSON values are equal (object keys in any order). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  }
  const ka = Object.keys(a as object).filter((k) => (a as K8sObject)[k] !== undefined);
  const kb = Object.keys(b as object).filter((k) => (b as K8sObject)[k] !== undefined);
  return (
    ka.length === kb.length &&
    ka.every((k) => Object.hasOwn(b as object, k) && sameJson((a as K8sObject)[k], (b as K8sObject)[k]))
  );
}
