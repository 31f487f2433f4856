// Package wasmop is the wasmop guest SDK for Go: write a Kubernetes operator's decisions as
// plain Go functions, run them sandboxed in the wasmop host.
//
// A plugin implements [Plugin], the same contract as a Rust plugin's (wit/plugin.wit):
//
//   - Info returns a [PluginInfo]: the primary kind and its CRD, the relations the host
//     watches for it, the permissions its plans need;
//   - Reconcile turns an [Observed] state into a [Plan], or fails with [InvalidSpec],
//     [Transient] or [Failed];
//   - Cleanup (only with a finalizer) decides what to do before the object goes.
//
// A plan may also require objects no relation selects ([Plan.Require]: the host reads them
// and decides again, [Observed.Required]) and send requests outside the cluster
// ([Plan.Request] of a request built by [PostRequest] and the like: the answers come back in
// [Observed.Answers], read by [Answer.Success], [Answer.Retryable] and [Response.JSON]).
//
// A plugin that declares webhooks in PluginInfo.Webhooks also implements the matching
// optional interfaces: [Validator] (admission: a [Verdict]), [Defaulter] and [Converter].
// The component exports all three either way; one the plugin does not implement allows
// everything, changes nothing or refuses every conversion.
//
// All are plain functions over plain values (objects are [Object], parsed from JSON with
// numbers as [encoding/json.Number]): test them natively with `go test`. The package
// wasmop/sdk/component exports a Plugin as the component's world; only the plugin's main
// package imports it:
//
//	func init() { component.Export(MyPlugin{}) }
//	func main() {}
//
// The packages k8s and conditions hold helpers most plugins need.
package wasmop
