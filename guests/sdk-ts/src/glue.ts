/** Conversions between the `wasmop:plugin` world's values (types generated from the WIT by
 * `jco guest-types`, in `wit/`) and the SDK's plain ones, behind `exportPlugin`. Not part of
 * the public API; free of host imports, so tests run it natively. */

/// <reference path="../wit/plugin.d.ts" />
import type * as wit from "wasmop:plugin/types@0.4.0";

import { type AdmissionRequest, type Operation, Refused, Verdict } from "./admission.js";
import type { Answer, OutboundRequest } from "./effect.js";
import {
  type Action,
  InvalidSpec,
  type K8sObject,
  Observed,
  Plan,
  type Plugin,
  type PluginInfo,
  ReconcileError,
  type Requirement,
  type Selection,
  Transient,
} from "./types.js";

/** How the host reads a thrown error of a `result` export: the `err` value in `payload`. */
class ComponentError extends Error {
  constructor(readonly payload: wit.ReconcileError | string) {
    super(typeof payload === "string" ? payload : payload.val);
  }
}

/** Parses JSON the host sent; `fail` makes the error for malformed text. */
function parse(text: string, fail: (message: string) => Error): K8sObject {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw fail(`host sent malformed JSON: ${e}`);
  }
}

function selection(s: Selection): wit.Selection {
  return typeof s === "string" ? { tag: s } : { tag: "referenced", val: { ...s.referenced } };
}

function info(i: PluginInfo): wit.PluginInfo {
  return {
    name: i.name,
    version: i.version,
    primary: i.primary,
    crd: i.crd === undefined ? undefined : JSON.stringify(i.crd),
    relations: i.relations.map((r) => ({ ...r, selection: selection(r.selection) })),
    permissions: i.permissions.map((p) => ({ kind: p.kind, verbs: [...p.verbs] })),
    finalizer: i.finalizer,
    webhooks: {
      validate: i.webhooks?.validate ?? false,
      default: i.webhooks?.default ?? false,
      convert: i.webhooks?.convert ?? false,
    },
    outboundHosts: [...(i.outboundHosts ?? [])],
  };
}

function answer(a: wit.Answer): Answer {
  const o = a.outcome;
  return {
    key: a.key,
    outcome:
      o.tag === "response" ? { response: o.val } : o.tag === "refused" ? { refused: o.val } : { failed: o.val },
    atUnixMs: Number(a.atUnixMs),
  };
}

function observed(o: wit.Observed): Observed {
  const fail = (message: string) => new ComponentError({ tag: "other", val: message });
  const groups = (gs: wit.RelatedObjects[]): Record<string, K8sObject[]> =>
    Object.fromEntries(gs.map((g) => [g.relation, g.objects.map((s) => parse(s, fail))]));
  return new Observed(
    parse(o.primary, fail),
    groups(o.related),
    Number(o.nowUnixMs),
    o.seed,
    groups(o.required),
    o.answers.map(answer),
  );
}

function action(a: Action): wit.Action {
  return "apply" in a
    ? { tag: "apply", val: JSON.stringify(a.apply) }
    : { tag: "delete", val: { ...a.delete } };
}

function requirement(r: Requirement): wit.Requirement {
  const m = r.matching;
  return {
    name: r.name,
    kind: r.kind,
    namespace: r.namespace,
    matching: "name" in m ? { tag: "name", val: m.name } : { tag: "labels", val: m.labels },
  };
}

function request(r: OutboundRequest): wit.OutboundRequest {
  return {
    key: r.key,
    method: r.method,
    url: r.url,
    headers: [...(r.headers ?? [])],
    body: typeof r.body === "string" ? new TextEncoder().encode(r.body) : r.body,
    credential: r.credential && { ...r.credential, prefix: r.credential.prefix ?? "" },
    idempotencyKey: r.idempotencyKey,
    retry: r.retry ?? false,
    keepHeaders: [...(r.keepHeaders ?? [])],
  };
}

function plan(p: Plan): wit.Plan {
  return {
    actions: p.actions.map(action),
    status: p.status === undefined ? undefined : JSON.stringify(p.status),
    events: p.events.map((e) => ({
      eventType: e.type === "Warning" ? "warning" : "normal",
      reason: e.reason,
      message: e.message,
    })),
    requeueAfterMs: p.requeueAfterMs === undefined ? undefined : BigInt(p.requeueAfterMs),
    requires: p.requires.map(requirement),
    requests: p.requests.map(request),
  };
}

function decide(f: (o: Observed) => Plan, o: wit.Observed): wit.Plan {
  try {
    return plan(f(observed(o)));
  } catch (e) {
    if (e instanceof ComponentError) throw e;
    if (e instanceof InvalidSpec) throw new ComponentError({ tag: "invalid-spec", val: e.message });
    if (e instanceof Transient) throw new ComponentError({ tag: "transient", val: e.message });
    if (e instanceof ReconcileError) throw new ComponentError({ tag: "other", val: e.message });
    throw e; // anything else is a fault of the call, as a panic is in Rust
  }
}

function admissionRequest(r: wit.AdmissionRequest): AdmissionRequest {
  const json = (text?: string) => (text === undefined ? undefined : parse(text, (m) => new Refused(m)));
  return {
    operation: r.operation.toUpperCase() as Operation,
    object: json(r.object),
    oldObject: json(r.oldObject),
    user: r.user,
    dryRun: r.dryRun,
  };
}

function verdict(v: Verdict): wit.Verdict {
  return {
    allowed: v.allowed,
    fields: v.fields.map((f) => ({
      path: f.path,
      value: f.value === undefined ? undefined : JSON.stringify(f.value),
      detail: f.detail,
    })),
    message: v.message,
    warnings: [...v.warnings],
  };
}

/** Runs `validate`; an admission request the host sent malformed is refused. */
function validate(f: (r: AdmissionRequest) => Verdict, r: wit.AdmissionRequest): wit.Verdict {
  let request: AdmissionRequest;
  try {
    request = admissionRequest(r);
  } catch (e) {
    if (!(e instanceof Refused)) throw e;
    return verdict(Verdict.deny(e.message));
  }
  return verdict(f(request));
}

/** Runs `default` or `convert` on a JSON object in and out; `Refused` is the `err`. */
function transform(f: (o: K8sObject) => K8sObject, object: string): string {
  try {
    return JSON.stringify(f(parse(object, (m) => new Refused(m))));
  } catch (e) {
    if (e instanceof Refused) throw new ComponentError(e.message);
    throw e;
  }
}

/** The component's exports for a plugin, one per export of the world, in the world's types. */
export interface Exports {
  info: () => wit.PluginInfo;
  reconcile: (o: wit.Observed) => wit.Plan;
  cleanup: (o: wit.Observed) => wit.Plan;
  validate: (r: wit.AdmissionRequest) => wit.Verdict;
  default: (object: string) => string;
  convert: (object: string, toVersion: string) => string;
}

/** The exports of `p`, with the defaults of the optional methods: `cleanup` plans nothing,
 * `validate` allows, `default` changes nothing, `convert` refuses. A `result` export throws
 * its `err` value as the `payload` of an error. */
export function exportsOf(p: Plugin): Exports {
  return {
    info: () => info(p.info()),
    reconcile: (o) => decide((x) => p.reconcile(x), o),
    cleanup: (o) => decide((x) => (p.cleanup ? p.cleanup(x) : new Plan()), o),
    validate: (r) => validate((x) => (p.validate ? p.validate(x) : Verdict.allow()), r),
    default: (object) => transform((x) => (p.default ? p.default(x) : x), object),
    convert: (object, toVersion) =>
      transform((x) => {
        if (!p.convert) throw new Refused(`this plugin does not convert (asked for ${toVersion})`);
        return p.convert(x, toVersion);
      }, object),
  };
}
