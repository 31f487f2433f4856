// The component's entry point (componentize-js builds it, bundled, with the SDK).
import { exportPlugin } from "@wasmop/sdk/component";

import { PodReplica } from "./plugin.js";

export const { info, reconcile, cleanup } = exportPlugin(new PodReplica());
