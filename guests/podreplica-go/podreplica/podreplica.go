// Package podreplica is PodReplica in Go: keep spec.size pods running per custom resource,
// list them in the status, and let the garbage collector remove them with the resource (they
// carry a controller ownerReference). The same plugin as the Rust PodReplica, passing the
// same conformance cases (guests/conformance/podreplica). It does not depend on the
// generated bindings: `go test` runs it natively.
package podreplica

import (
	_ "embed"

	"wasmop/sdk"
	"wasmop/sdk/k8s"
)

// Version is the plugin's version.
const Version = "0.1.0"

// CRD is the PodReplica CustomResourceDefinition, the same one the Rust PodReplica declares
// (deploy/crds/podreplica.yaml, as JSON; the conformance test compares them).
//
//go:embed crd.json
var CRD []byte

// PrimaryKind is the primary kind.
func PrimaryKind() wasmop.KindRef {
	return wasmop.KindRef{Group: "app.example.com", Version: "v1alpha1", Kind: "PodReplica", Plural: "podreplicas", Namespaced: true}
}

// PodReplica is the plugin.
type PodReplica struct{}

// Info declares the plugin: PodReplica as primary kind, its owned pods, create and delete.
func (PodReplica) Info() wasmop.PluginInfo {
	return wasmop.PluginInfo{
		Name:    "podreplica",
		Version: Version + "-go",
		Primary: PrimaryKind(),
		CRD:     CRD,
		Relations: []wasmop.Relation{{
			Name: "pods", Kind: k8s.PodKind(), Selection: wasmop.Owned,
			Fields: append([]string(nil), ReadFields...),
		}},
		Permissions: []wasmop.Permission{{Kind: k8s.PodKind(), Verbs: []wasmop.Verb{wasmop.Create, wasmop.Delete}}},
	}
}

// Reconcile decides what to do about one PodReplica.
func (PodReplica) Reconcile(o *wasmop.Observed) (*wasmop.Plan, error) { return Reconcile(o) }

// Cleanup is never called: the plugin declares no finalizer. It answers an empty plan.
func (PodReplica) Cleanup(*wasmop.Observed) (*wasmop.Plan, error) { return &wasmop.Plan{}, nil }
