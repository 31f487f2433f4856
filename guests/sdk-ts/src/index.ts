/**
 * The wasmop guest SDK for TypeScript: write a Kubernetes operator's decisions as plain
 * functions, run them sandboxed in the wasmop host.
 *
 * A plugin implements {@link Plugin}: `info()` declares the primary kind and its CRD, the
 * relations the host watches and the permissions its plans need; `reconcile(observed)` turns
 * an {@link Observed} state into a {@link Plan} or throws {@link InvalidSpec},
 * {@link Transient} or {@link ReconcileFailed}; a plan may ask for more objects
 * ({@link Plan.require}) and send requests outside the cluster ({@link Plan.request} of
 * `OutboundRequest.post(key, url)` and the like), whose answers later decisions observe
 * (`Answer.success`, `Response.json`). Optional `validate`, `default` and `convert`, declared in
 * `info().webhooks`, serve the primary kind's admission and conversion. All are plain
 * functions over plain values: test them with node's test runner. `exportPlugin` (from
 * `@wasmop/sdk/component`) turns a plugin into the component's exports.
 */

export * from "./admission.js";
export * from "./conditions.js";
export * from "./effect.js";
export * from "./k8s.js";
export * from "./log.js";
export * from "./types.js";
