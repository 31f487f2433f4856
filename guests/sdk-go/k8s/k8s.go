// Package k8s holds helpers for Kubernetes objects that most plugins need: ownership,
// termination, time, references for deletion. Objects are [wasmop.Object] values as the
// host sends them.
package k8s

import (
	"time"

	"wasmop/sdk"
)

// PodKind is the core v1 Pod kind, as plugins declare it in relations and permissions.
func PodKind() wasmop.KindRef {
	return wasmop.KindRef{Group: "", Version: "v1", Kind: "Pod", Plural: "pods", Namespaced: true}
}

// Metadata returns the object's metadata (empty when it has none).
func Metadata(obj wasmop.Object) wasmop.Object {
	if m, ok := obj["metadata"].(wasmop.Object); ok {
		return m
	}
	return wasmop.Object{}
}

// Name returns metadata.name, or "".
func Name(obj wasmop.Object) string {
	s, _ := Metadata(obj)["name"].(string)
	return s
}

// ControllerUID returns the UID of the object's controller: that of its first
// ownerReference with controller: true, if there is one and it has a UID.
func ControllerUID(obj wasmop.Object) (string, bool) {
	refs, _ := Metadata(obj)["ownerReferences"].([]any)
	for _, r := range refs {
		ref, _ := r.(wasmop.Object)
		if c, _ := ref["controller"].(bool); c {
			uid, ok := ref["uid"].(string)
			return uid, ok
		}
	}
	return "", false
}

// IsControlledBy says whether the object's controller ownerReference points at the object
// with uid.
func IsControlledBy(obj wasmop.Object, uid string) bool {
	c, ok := ControllerUID(obj)
	return ok && c == uid
}

// IsTerminating says whether the object is being deleted (it has a deletion timestamp).
func IsTerminating(obj wasmop.Object) bool { return Metadata(obj)["deletionTimestamp"] != nil }

// Identity is the identity of an object.
type Identity struct {
	APIVersion, Kind, Name string
	// Namespace is nil for a cluster-scoped object.
	Namespace *string
	UID       string
}

// IdentityOf reads the identity of an object. The host always sends objects that have one;
// without it the error is a [wasmop.Failed].
func IdentityOf(obj wasmop.Object) (Identity, error) {
	meta := Metadata(obj)
	var id Identity
	for _, f := range []struct {
		dst  *string
		v    any
		what string
	}{
		{&id.APIVersion, obj["apiVersion"], "apiVersion"},
		{&id.Kind, obj["kind"], "kind"},
		{&id.Name, meta["name"], "metadata.name"},
		{&id.UID, meta["uid"], "metadata.uid"},
	} {
		s, ok := f.v.(string)
		if !ok {
			return Identity{}, wasmop.Failed("object has no %s", f.what)
		}
		*f.dst = s
	}
	if ns, ok := meta["namespace"].(string); ok {
		id.Namespace = &ns
	}
	return id, nil
}

// ControllerReference is a controller ownerReference to this object (blocking owner
// deletion).
func (id Identity) ControllerReference() wasmop.Object {
	return wasmop.Object{
		"apiVersion":         id.APIVersion,
		"kind":               id.Kind,
		"name":               id.Name,
		"uid":                id.UID,
		"controller":         true,
		"blockOwnerDeletion": true,
	}
}

// DeleteRef is a deletion reference with a UID precondition for obj, of the given kind.
func DeleteRef(apiVersion, kind string, obj wasmop.Object) wasmop.ObjectRef {
	meta := Metadata(obj)
	ref := wasmop.ObjectRef{APIVersion: apiVersion, Kind: kind, Name: Name(obj)}
	if ns, ok := meta["namespace"].(string); ok {
		ref.Namespace = &ns
	}
	if uid, ok := meta["uid"].(string); ok {
		ref.UID = &uid
	}
	return ref
}

// RFC3339 formats the host's now (ms since the epoch) as an RFC 3339 string with second
// precision, the way Kubernetes writes times.
func RFC3339(nowUnixMs int64) string {
	return time.UnixMilli(nowUnixMs).Truncate(time.Second).UTC().Format("2006-01-02T15:04:05Z")
}

// ParseRFC3339 returns the milliseconds since the epoch of an RFC 3339 string, if it parses.
func ParseRFC3339(text string) (int64, bool) {
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return 0, false
	}
	return t.UnixMilli(), true
}
