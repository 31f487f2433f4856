/// <reference path="./interfaces/wasmop-plugin-host.d.ts" />
/// <reference path="./interfaces/wasmop-plugin-types.d.ts" />
declare module 'wasmop:plugin/plugin@0.3.0' {
  export type PluginInfo = import('wasmop:plugin/types@0.3.0').PluginInfo;
  export type Observed = import('wasmop:plugin/types@0.3.0').Observed;
  export type Plan = import('wasmop:plugin/types@0.3.0').Plan;
  export type ReconcileError = import('wasmop:plugin/types@0.3.0').ReconcileError;
  export type * as WasmopPluginHost030 from 'wasmop:plugin/host@0.3.0'; // import wasmop:plugin/host@0.3.0
  export type * as WasmopPluginTypes030 from 'wasmop:plugin/types@0.3.0'; // import wasmop:plugin/types@0.3.0
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
  * with no actions left to do.
  */
  export function cleanup(observed: Observed): Plan;
  export type Result<T, E> = { tag: 'ok', val: T } | { tag: 'err', val: E };
}
