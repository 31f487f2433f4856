/** The component's exports: `exportPlugin(plugin)` turns a plugin into the functions of the
 * `wasmop:plugin` world (the conversions are in `glue.ts`). Only a component imports this
 * module. */

/// <reference path="../wit/plugin.d.ts" />
import { log as hostLog } from "wasmop:plugin/host@0.4.0";

import { type Exports, exportsOf } from "./glue.js";
import { setLogSink } from "./log.js";
import type { Plugin } from "./types.js";

/** The component's exports for `plugin`, its log lines sent to the host. The entry module
 * exports each, `default` as the module's default export (a reserved word in JavaScript):
 * ```ts
 * const component = exportPlugin(new MyPlugin());
 * export const { info, reconcile, cleanup, validate, convert } = component;
 * export default component.default;
 * ``` */
export function exportPlugin(p: Plugin): Exports {
  setLogSink((level, message) => hostLog(level, message));
  return exportsOf(p);
}
