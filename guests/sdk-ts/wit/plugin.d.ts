/// <reference path="./interfaces/wasmop-plugin-host.d.ts" />
/// <reference path="./interfaces/wasmop-plugin-types.d.ts" />
declare module 'wasmop:plugin/plugin@0.4.0' {
  export type PluginInfo = import('wasmop:plugin/types@0.4.0').PluginInfo;
  export type Observed = import('wasmop:plugin/types@0.4.0').Observed;
  export type Plan = import('wasmop:plugin/types@0.4.0').Plan;
  export type ReconcileError = import('wasmop:plugin/types@0.4.0').ReconcileError;
  export type AdmissionRequest = import('wasmop:plugin/types@0.4.0').AdmissionRequest;
  export type Verdict = import('wasmop:plugin/types@0.4.0').Verdict;
  export type * as WasmopPluginHost040 from 'wasmop:plugin/host@0.4.0'; // import wasmop:plugin/host@0.4.0
  export type * as WasmopPluginTypes040 from 'wasmop:plugin/types@0.4.0'; // import wasmop:plugin/types@0.4.0
  /**
  * Describe the plugin. Called once when a version is loaded; must not fail.
  */
  export function info(): PluginInfo;
  /**
  * Decide what to do about one primary object.
  */
  export function reconcile(observed: Observed): Plan;
  /**
  * Decide how to clean up before a primary object is deleted. Called only for plugins
  * that declare a finalizer; the host removes the finalizer after a successful plan
  * with no actions, no requests and no requeue: a cleanup that asked outside the cluster
  * (deleting an external record) is called again with the answers, and one that must wait
  * (the outside API failed) says when to be called again, until it asks nothing more.
  */
  export function cleanup(observed: Observed): Plan;
  /**
  * Allow or refuse a create, update or delete of the primary kind. Called only when
  * `info().webhooks.validate`; a trap, a timeout or a malformed verdict refuses.
  */
  export function validate(request: AdmissionRequest): Verdict;
  /**
  * Fill in the defaults of an object of the primary kind (JSON in, JSON out); the host
  * sends the API server the difference as a JSON patch. Called only when
  * `info().webhooks.default`; an error refuses the operation with its message.
  */
  export { _default as default };
  function _default(object: string): string;
  /**
  * Convert an object of the primary kind to another version of the CRD (`apiVersion`
  * `group/to-version`). Called only when `info().webhooks.convert`.
  */
  export function convert(object: string, toVersion: string): string;
  export type Result<T, E> = { tag: 'ok', val: T } | { tag: 'err', val: E };
}
