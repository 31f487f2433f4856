// The component's entry point (componentize-js builds it, bundled, with the SDK): one export
// per export of the world, `default` as the module's default export.
import { exportPlugin } from "@wasmop/sdk/component";

import { PodReplica } from "./plugin.js";

const component = exportPlugin(new PodReplica());
export const { info, reconcile, cleanup, validate, convert } = component;
export default component.default;
