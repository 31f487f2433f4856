/** The component's exports: `exportPlugin(plugin)` converts between the `wasmop:plugin`
 * world's values (types generated from the WIT by `jco guest-types`, in `wit/`) and the SDK's
 * plain ones. Only a component imports this module. */

/// <reference path="../wit/plugin.d.ts" />
import { log as hostLog } from "wasmop:plugin/host@0.3.0";
import type * as wit from "wasmop:plugin/types@0.3.0";

import { setLogSink } from "./log.js";
import {
  type Action,
  InvalidSpec,
  type K8sObject,
  Observed,
  Plan,
  type Plugin,
  type PluginInfo,
  ReconcileError,
  Transient,
} from "./types.js";

/** How the host reads a thrown error of a `result` export: the variant in `payload`. */
class ComponentError extends Error {
  constructor(readonly payload: wit.ReconcileError) {
    super(payload.val);
  }
}

function info(i: PluginInfo): wit.PluginInfo {
  return {
    name: i.name,
    version: i.version,
    primary: i.primary,
    crd: i.crd === undefined ? undefined : JSON.stringify(i.crd),
    relations: i.relations.map((r) => ({ ...r })),
    permissions: i.permissions.map((p) => ({ kind: p.kind, verbs: [...p.verbs] })),
    finalizer: i.finalizer,
  };
}

function observed(o: wit.Observed): Observed {
  const related: Record<string, K8sObject[]> = {};
  let primary: K8sObject;
  try {
    primary = JSON.parse(o.primary);
    for (const g of o.related) related[g.relation] = g.objects.map((s) => JSON.parse(s));
  } catch (e) {
    throw new ComponentError({ tag: "other", val: `host sent malformed JSON: ${e}` });
  }
  return new Observed(primary, related, Number(o.nowUnixMs), o.seed);
}

function action(a: Action): wit.Action {
  return "apply" in a
    ? { tag: "apply", val: JSON.stringify(a.apply) }
    : { tag: "delete", val: { ...a.delete } };
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

/** The component's exports for `plugin`. In the plugin's entry module:
 * `export const { info, reconcile, cleanup } = exportPlugin(new MyPlugin());` */
export function exportPlugin(p: Plugin): {
  info: () => wit.PluginInfo;
  reconcile: (o: wit.Observed) => wit.Plan;
  cleanup: (o: wit.Observed) => wit.Plan;
} {
  setLogSink((level, message) => hostLog(level, message));
  return {
    info: () => info(p.info()),
    reconcile: (o) => decide((x) => p.reconcile(x), o),
    cleanup: (o) => decide((x) => (p.cleanup ? p.cleanup(x) : new Plan()), o),
  };
}
