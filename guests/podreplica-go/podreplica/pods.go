package podreplica

import (
	"sort"

	"wasmop/sdk"
	"wasmop/sdk/k8s"
)

// NameLabel is put on every pod, with the PodReplica's name as value.
const NameLabel = "app.example.com/podreplica"

// ReadFields is what PodReplica reads of a pod besides its metadata, declared in its relation.
var ReadFields = []string{"status.phase", "status.conditions"}

// DefaultImage is the image of the pods when spec.image is not set.
const DefaultImage = "busybox"

// DefaultCommand is the command of the pods when spec.command is not set.
var DefaultCommand = []string{"sleep", "3600"}

// Pod is a pod as the host sends it.
type Pod = wasmop.Object

func status(p Pod) wasmop.Object {
	s, _ := p["status"].(wasmop.Object)
	return s
}

// Phase is the pod's phase; Pending until it has one.
func Phase(p Pod) string {
	if s, _ := status(p)["phase"].(string); s != "" {
		return s
	}
	return "Pending"
}

// IsReady says whether the pod's Ready condition is True.
func IsReady(p Pod) bool {
	conds, _ := status(p)["conditions"].([]any)
	for _, c := range conds {
		m, _ := c.(wasmop.Object)
		if m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// OwnedPods are the owned pods of one PodReplica, sorted into what the decision needs.
type OwnedPods struct {
	Live, Finished []Pod
	Terminating    int
}

// Classify sorts pods into live (pending or running, by name), finished (succeeded or
// failed) and terminating, keeping only those whose controller is the PodReplica with
// ownerUID (a pod that merely carries the label is not ours).
func Classify(pods []Pod, ownerUID string) OwnedPods {
	var out OwnedPods
	for _, p := range pods {
		if !k8s.IsControlledBy(p, ownerUID) {
			continue
		}
		switch {
		case k8s.IsTerminating(p):
			out.Terminating++
		case Phase(p) == "Succeeded" || Phase(p) == "Failed":
			out.Finished = append(out.Finished, p)
		default:
			out.Live = append(out.Live, p)
		}
	}
	sort.SliceStable(out.Live, func(i, j int) bool { return k8s.Name(out.Live[i]) < k8s.Name(out.Live[j]) })
	return out
}

// created is the pod's creation time in ms since the epoch, -1 when unknown.
func created(p Pod) int64 {
	text, ok := k8s.Metadata(p)["creationTimestamp"].(string)
	if !ok {
		return -1
	}
	if ms, ok := k8s.ParseRFC3339(text); ok && ms != 0 {
		return ms
	}
	return -1
}

// RemovalOrder orders live pods so that the first ones are the ones to remove when scaling
// down: not-ready before ready, then newest first (name, descending, breaks ties).
func RemovalOrder(live []Pod) {
	sort.SliceStable(live, func(i, j int) bool {
		if ri, rj := IsReady(live[i]), IsReady(live[j]); ri != rj {
			return !ri
		}
		if ci, cj := created(live[i]), created(live[j]); ci != cj {
			return ci > cj
		}
		return k8s.Name(live[i]) > k8s.Name(live[j])
	})
}

// NewPod is the pod a PodReplica creates: a generated name <name>-pod-…, the selecting label
// and a controller ownerReference, so the pod goes away with its owner.
func NewPod(owner k8s.Identity, spec wasmop.Object) Pod {
	meta := wasmop.Object{
		"generateName":    owner.Name + "-pod-",
		"labels":          wasmop.Object{NameLabel: owner.Name},
		"ownerReferences": []any{owner.ControllerReference()},
	}
	if owner.Namespace != nil {
		meta["namespace"] = *owner.Namespace
	}
	return Pod{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   meta,
		"spec": wasmop.Object{"containers": []any{wasmop.Object{
			"name":    "busybox",
			"image":   orDefault(spec["image"], DefaultImage),
			"command": orDefault(spec["command"], DefaultCommand),
		}}},
	}
}

// orDefault is v, or def when v is absent or null.
func orDefault(v, def any) any {
	if v == nil {
		return def
	}
	return v
}
