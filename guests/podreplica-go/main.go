// The PodReplica plugin component: `guests/toolchains/go/plugin build` builds this package
// for GOOS=wasip1 as a reactor (-buildmode=c-shared); the decision is in package podreplica.
package main

import (
	"wasmop/podreplica-go/podreplica"
	"wasmop/sdk/component"
)

func init() { component.Export(podreplica.PodReplica{}) }

// main is never called: a reactor only runs its package inits, then the exports.
func main() {}
