package podreplica

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"wasmop/sdk"
	"wasmop/sdk/conditions"
	"wasmop/sdk/k8s"
)

// MaxSize is the largest spec.size accepted (the CRD's schema says so too).
const MaxSize = 100

// Reconcile compares the owned live pods with spec.size, creates or deletes the difference,
// replaces finished pods, and reports the live pods in the status (once no pod is missing: a
// plan that creates pods leaves the status to the decision that sees them).
func Reconcile(o *wasmop.Observed) (*wasmop.Plan, error) {
	pr := o.Primary
	owner, err := k8s.IdentityOf(pr)
	if err != nil {
		return nil, err
	}
	spec, _ := pr["spec"].(wasmop.Object)
	n, ok := integer(spec["size"])
	if !ok {
		return nil, wasmop.InvalidSpec("spec.size must be an integer")
	}
	if n.Sign() < 0 || n.Cmp(big.NewInt(MaxSize)) > 0 {
		return nil, wasmop.InvalidSpec("spec.size is %s, it must be between 0 and %d", n, MaxSize)
	}
	size := int(n.Int64())
	plan := &wasmop.Plan{}
	if k8s.IsTerminating(pr) {
		// The garbage collector removes the pods with their owner.
		return plan, nil
	}
	owned := Classify(o.Objects("pods"), owner.UID)

	for _, p := range owned.Finished {
		plan.Delete(k8s.DeleteRef("v1", "Pod", p))
	}
	if len(owned.Finished) > 0 {
		plan.Normal("ReplacingFinishedPods", fmt.Sprintf("removing %d finished pod(s)", len(owned.Finished)))
	}

	switch live := len(owned.Live); {
	case live > size:
		RemovalOrder(owned.Live)
		surplus := owned.Live[:live-size]
		owned.Live = owned.Live[live-size:]
		names := make([]string, len(surplus))
		for i, p := range surplus {
			plan.Delete(k8s.DeleteRef("v1", "Pod", p))
			names[i] = k8s.Name(p)
		}
		plan.Normal("ScaledDown", fmt.Sprintf("deleting %d pod(s): %s", len(surplus), strings.Join(names, ", ")))
	case live < size:
		missing := size - live
		for range missing {
			plan.Apply(NewPod(owner, spec))
		}
		plan.Normal("ScaledUp", fmt.Sprintf("creating %d pod(s)", missing))
		// The creates bring the next decision, whose status lists the new pods.
		return plan, nil
	}

	status := StatusFor(pr, owned.Live, size, o.NowUnixMs)
	if current := currentStatus(pr); current == nil || !jsonEqual(current, normalize(status)) {
		plan.SetStatus(status)
	}
	return plan, nil
}

// integer is v as an integer, if it is a JSON integer (not 1.0, not 1e2, not a string).
func integer(v any) (*big.Int, bool) {
	n, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return nil, false
	}
	return new(big.Int).SetString(string(n), 10)
}

// StatusFor is the status describing the live pods that remain after this plan's deletions.
func StatusFor(pr wasmop.Object, live []Pod, size int, nowUnixMs int64) wasmop.Object {
	pods := make([]string, 0, len(live))
	ready := 0
	for _, p := range live {
		pods = append(pods, k8s.Name(p))
		if IsReady(p) {
			ready++
		}
	}
	sort.Strings(pods)
	replicas := len(pods)
	generation := k8s.Metadata(pr)["generation"]
	var ok bool
	var reason, message string
	switch {
	case replicas == size && ready == size:
		ok, reason, message = true, "AllPodsReady", fmt.Sprintf("%d/%d pods ready", ready, size)
	case replicas != size:
		reason, message = "Scaling", fmt.Sprintf("%d live pods, %d desired", replicas, size)
	default:
		reason, message = "PodsNotReady", fmt.Sprintf("%d/%d pods ready", ready, size)
	}
	prStatus, _ := pr["status"].(wasmop.Object)
	previous, _ := prStatus["conditions"].([]any)
	cond := conditions.New("Ready", ok, reason, message, k8s.RFC3339(nowUnixMs), generation)
	status := wasmop.Object{
		"pods":          pods,
		"replicas":      replicas,
		"readyReplicas": ready,
		"conditions":    conditions.Set(nil, previous, cond),
	}
	if generation != nil {
		status["observedGeneration"] = generation
	}
	return status
}

// currentStatus is the object's status in the shape StatusFor writes (absent fields at their
// defaults), so that a status already right is not written again; nil without a status.
func currentStatus(pr wasmop.Object) any {
	s, ok := pr["status"].(wasmop.Object)
	if !ok {
		return nil
	}
	conds := []any{}
	for _, c := range list(s["conditions"]) {
		m := wasmop.Object{"message": ""}
		cm, _ := c.(wasmop.Object)
		for k, v := range cm {
			m[k] = v
		}
		conds = append(conds, m)
	}
	out := wasmop.Object{
		"pods":          or(s["pods"], []any{}),
		"replicas":      or(s["replicas"], json.Number("0")),
		"readyReplicas": or(s["readyReplicas"], json.Number("0")),
		"conditions":    conds,
	}
	if s["observedGeneration"] != nil {
		out["observedGeneration"] = s["observedGeneration"]
	}
	return out
}

// normalize is v as Decode would give it back (numbers as json.Number, slices as []any).
func normalize(v any) any {
	text, err := wasmop.Encode(v)
	if err != nil {
		panic(err) // a status of strings, numbers and what the host sent always encodes
	}
	out, err := wasmop.Decode(text)
	if err != nil {
		panic(err)
	}
	return out
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// truthy is the truth value of a JSON value as the other PodReplicas see it (Python's:
// null, false, 0, "", [] and {} are false).
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case json.Number:
		r, ok := new(big.Rat).SetString(string(x))
		return !ok || r.Sign() != 0
	case []any:
		return len(x) > 0
	case wasmop.Object:
		return len(x) > 0
	}
	return true
}

// or is v when truthy, else def.
func or(v, def any) any {
	if truthy(v) {
		return v
	}
	return def
}

// jsonEqual compares decoded JSON values, numbers by value (1 equals 1.0).
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, ok1 := new(big.Rat).SetString(string(x))
		ry, ok2 := new(big.Rat).SetString(string(y))
		return ok1 && ok2 && rx.Cmp(ry) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case wasmop.Object:
		y, ok := b.(wasmop.Object)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, has := y[k]; !has || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}
