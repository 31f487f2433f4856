// Package component turns a [wasmop.Plugin] into the exports of the wasmop:plugin world.
// Only a plugin's main package imports it (it pulls in the generated bindings, which build
// for GOOS=wasip1 only):
//
//	package main
//
//	import "wasmop/sdk/component"
//
//	func init() { component.Export(myplugin.Plugin{}) }
//
//	func main() {}
package component

import (
	"wasmop/sdk"
	"wasmop/sdk/wit/exports/export_wit_world"
	_ "wasmop/sdk/wit/exports/wit_exports" // the //go:wasmexport functions
	host "wasmop/sdk/wit/imports/wasmop_plugin_host"
)

// Export makes p the component's plugin, and points [wasmop.Log] at the host's log.
func Export(p wasmop.Plugin) {
	wasmop.SetLogger(func(level wasmop.Level, message string) { host.Log(host.Level(level), message) })
	export_wit_world.Register(p)
}
