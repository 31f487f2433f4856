/** PodReplica in TypeScript: keep `spec.size` pods running per custom resource, list them
 * in the status, and let the garbage collector remove them with the resource. The same
 * plugin as the Rust PodReplica, passing the same conformance cases
 * (`guests/conformance/podreplica`). */

import { type KindRef, type Observed, type Plan, type Plugin, type PluginInfo, podKind } from "@wasmop/sdk";

import { CRD } from "./crd.js";
import { reconcile } from "./decide.js";
import { READ_FIELDS } from "./pods.js";

/** The plugin's version. */
export const VERSION = "0.1.0";

/** The primary kind. */
export function primaryKind(): KindRef {
  return { group: "app.example.com", version: "v1alpha1", kind: "PodReplica", plural: "podreplicas", namespaced: true };
}

/** The plugin. */
export class PodReplica implements Plugin {
  info(): PluginInfo {
    return {
      name: "podreplica",
      version: `${VERSION}-ts`,
      primary: primaryKind(),
      crd: CRD,
      relations: [{ name: "pods", kind: podKind(), selection: "owned", fields: [...READ_FIELDS] }],
      permissions: [{ kind: podKind(), verbs: ["create", "delete"] }],
    };
  }

  reconcile(observed: Observed): Plan {
    return reconcile(observed);
  }
}
