package podreplica

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"wasmop/sdk"
)

const now = 1_767_225_600_000 // 2026-01-01T00:00:00Z

// fromJSON is v as the host would send it (numbers as json.Number).
func fromJSON(t *testing.T, v any) wasmop.Object {
	t.Helper()
	text, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	o, err := wasmop.DecodeObject(string(text))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

type obj = map[string]any

func primary(size any, status any, meta obj) obj {
	m := obj{"name": "web", "namespace": "default", "uid": "uid-web", "generation": 1}
	for k, v := range meta {
		m[k] = v
	}
	o := obj{
		"apiVersion": "app.example.com/v1alpha1",
		"kind":       "PodReplica",
		"metadata":   m,
		"spec":       obj{"size": size},
	}
	if status != nil {
		o["status"] = status
	}
	return o
}

type podOpts struct {
	phase    string
	notReady bool
	owner    *string // nil: "uid-web"; "": no ownerReferences
	created  string
	deleting bool
}

func pod(name string, opts podOpts) obj {
	if opts.phase == "" {
		opts.phase = "Running"
	}
	if opts.created == "" {
		opts.created = "2025-12-31T23:00:00Z"
	}
	owner := "uid-web"
	if opts.owner != nil {
		owner = *opts.owner
	}
	meta := obj{"name": name, "namespace": "default", "uid": "uid-" + name,
		"creationTimestamp": opts.created, "labels": obj{NameLabel: "web"}}
	if owner != "" {
		meta["ownerReferences"] = []any{obj{"apiVersion": "app.example.com/v1alpha1",
			"kind": "PodReplica", "name": "web", "uid": owner, "controller": true}}
	}
	if opts.deleting {
		meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
	}
	ready := "True"
	if opts.notReady {
		ready = "False"
	}
	return obj{"apiVersion": "v1", "kind": "Pod", "metadata": meta,
		"status": obj{"phase": opts.phase, "conditions": []any{obj{"type": "Ready", "status": ready}}}}
}

func decide(t *testing.T, size any, pods []obj, status any, meta obj) (*wasmop.Plan, error) {
	t.Helper()
	related := make([]wasmop.Object, len(pods))
	for i, p := range pods {
		related[i] = fromJSON(t, p)
	}
	o := &wasmop.Observed{Primary: fromJSON(t, primary(size, status, meta)),
		Related: map[string][]wasmop.Object{"pods": related}, NowUnixMs: now}
	return Reconcile(o)
}

func mustDecide(t *testing.T, size any, pods []obj, status any, meta obj) *wasmop.Plan {
	t.Helper()
	plan, err := decide(t, size, pods, status, meta)
	if err != nil {
		t.Fatalf("reconcile failed: %v", err)
	}
	return plan
}

func deletedNames(p *wasmop.Plan) []string {
	var out []string
	for _, r := range p.Deleted() {
		out = append(out, r.Name)
	}
	return out
}

func reasons(p *wasmop.Plan) []string {
	var out []string
	for _, e := range p.Events {
		out = append(out, e.Reason)
	}
	return out
}

func statusPods(t *testing.T, p *wasmop.Plan) []string {
	t.Helper()
	s, ok := p.Status.(wasmop.Object)
	if !ok {
		t.Fatalf("no status: %#v", p.Status)
	}
	return s["pods"].([]string)
}

func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: got %#v, want %#v", what, got, want)
	}
}

func ptr(s string) *string { return &s }

func TestFirstReconcileCreatesEveryPodAndLeavesTheStatus(t *testing.T) {
	plan := mustDecide(t, 3, nil, nil, nil)
	eq(t, "applied", len(plan.Applied()), 3)
	eq(t, "status", plan.Status, nil)
	meta := plan.Applied()[0].(wasmop.Object)["metadata"].(wasmop.Object)
	eq(t, "generateName", meta["generateName"], "web-pod-")
	eq(t, "namespace", meta["namespace"], "default")
	eq(t, "owner uid", meta["ownerReferences"].([]any)[0].(wasmop.Object)["uid"], "uid-web")
	container := plan.Applied()[0].(wasmop.Object)["spec"].(wasmop.Object)["containers"].([]any)[0].(wasmop.Object)
	eq(t, "image", container["image"], "busybox")
	eq(t, "command", container["command"], []string{"sleep", "3600"})
	eq(t, "events", reasons(plan), []string{"ScaledUp"})
}

func TestScaleDownRemovesNotReadyThenNewest(t *testing.T) {
	pods := []obj{pod("a", podOpts{}), pod("b", podOpts{notReady: true}),
		pod("c", podOpts{created: "2025-12-31T23:30:00Z"})}
	plan := mustDecide(t, 1, pods, nil, nil)
	eq(t, "deleted", deletedNames(plan), []string{"b", "c"})
	eq(t, "status pods", statusPods(t, plan), []string{"a"})
	eq(t, "message", plan.Events[0].Message, "deleting 2 pod(s): b, c")
}

func TestRemovalOrderBreaksTiesByName(t *testing.T) {
	pods := []Pod{fromJSON(t, pod("a", podOpts{})), fromJSON(t, pod("b", podOpts{})), fromJSON(t, pod("c", podOpts{}))}
	RemovalOrder(pods)
	var names []string
	for _, p := range pods {
		names = append(names, p["metadata"].(wasmop.Object)["name"].(string))
	}
	eq(t, "order", names, []string{"c", "b", "a"})
}

func TestFinishedPodsAreReplacedAndTerminatingOnesLeftAlone(t *testing.T) {
	pods := []obj{pod("f", podOpts{phase: "Failed"}), pod("s", podOpts{phase: "Succeeded"}),
		pod("t", podOpts{deleting: true}), pod("a", podOpts{})}
	plan := mustDecide(t, 2, pods, nil, nil)
	eq(t, "deleted", deletedNames(plan), []string{"f", "s"})
	eq(t, "applied", len(plan.Applied()), 1)
	eq(t, "events", reasons(plan), []string{"ReplacingFinishedPods", "ScaledUp"})
}

func TestForeignPodsWithTheLabelAreNotOurs(t *testing.T) {
	pods := []obj{pod("mine", podOpts{}), pod("theirs", podOpts{owner: ptr("uid-other")}),
		pod("orphan", podOpts{owner: ptr("")})}
	plan := mustDecide(t, 1, pods, nil, nil)
	eq(t, "actions", len(plan.Actions), 0)
	eq(t, "status pods", statusPods(t, plan), []string{"mine"})
}

func TestStatusAlreadyRightIsNotWrittenAgain(t *testing.T) {
	first := mustDecide(t, 1, []obj{pod("a", podOpts{})}, nil, nil)
	if first.Status == nil {
		t.Fatal("the first decision writes no status")
	}
	// An hour later: the condition keeps its transition time, so nothing changed.
	o := &wasmop.Observed{Primary: fromJSON(t, primary(1, first.Status, nil)),
		Related: map[string][]wasmop.Object{"pods": {fromJSON(t, pod("a", podOpts{}))}}, NowUnixMs: now + 3_600_000}
	again, err := Reconcile(o)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "status", again.Status, nil)
	eq(t, "actions", len(again.Actions), 0)
}

func TestConditionKeepsItsTransitionTimeUntilItsStatusChanges(t *testing.T) {
	old := obj{"pods": []string{"a"}, "replicas": 1, "readyReplicas": 1, "conditions": []any{
		obj{"type": "Ready", "status": "True", "reason": "AllPodsReady", "message": "1/1 pods ready",
			"lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 1}}}
	// The pod is no longer ready: the condition turns False, at the time of this decision.
	plan := mustDecide(t, 1, []obj{pod("a", podOpts{notReady: true})}, old, nil)
	cond := plan.Status.(wasmop.Object)["conditions"].([]any)[0].(wasmop.Object)
	eq(t, "status", cond["status"], "False")
	eq(t, "reason", cond["reason"], "PodsNotReady")
	eq(t, "lastTransitionTime", cond["lastTransitionTime"], "2026-01-01T00:00:00Z")
}

func TestInvalidSizesAreAnInvalidSpec(t *testing.T) {
	for _, size := range []any{-1, 101, "3", nil, true, 1.5, json.RawMessage("1e2"), json.RawMessage("1000000000000000000000")} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			_, err := decide(t, size, nil, nil, nil)
			var e *wasmop.ReconcileError
			if !errors.As(err, &e) || e.Kind != wasmop.KindInvalidSpec {
				t.Fatalf("got %v, want an invalid spec", err)
			}
		})
	}
}

func TestSizeRangeMessage(t *testing.T) {
	_, err := decide(t, 101, nil, nil, nil)
	eq(t, "message", fmt.Sprint(err), "spec.size is 101, it must be between 0 and 100")
}

func TestADeletedPrimaryLeavesItsPodsToTheGarbageCollector(t *testing.T) {
	plan := mustDecide(t, 3, []obj{pod("a", podOpts{})}, nil, obj{"deletionTimestamp": "2026-01-01T00:00:00Z"})
	eq(t, "actions", len(plan.Actions), 0)
	eq(t, "status", plan.Status, nil)
}

func TestInfoDeclaresOwnedPodsAndOnlyCreateDelete(t *testing.T) {
	info := PodReplica{}.Info()
	eq(t, "name", info.Name, "podreplica")
	eq(t, "version", info.Version, "0.1.0-go")
	eq(t, "primary", info.Primary.Kind, "PodReplica")
	eq(t, "relation", info.Relations[0].Name, "pods")
	eq(t, "selection", info.Relations[0].Selection, wasmop.Owned)
	eq(t, "fields", info.Relations[0].Fields, []string{"status.phase", "status.conditions"})
	eq(t, "verbs", info.Permissions[0].Verbs, []wasmop.Verb{wasmop.Create, wasmop.Delete})
	var crd struct {
		Spec struct {
			Names struct {
				ShortNames []string `json:"shortNames"`
			} `json:"names"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(info.CRD, &crd); err != nil {
		t.Fatal(err)
	}
	eq(t, "shortNames", crd.Spec.Names.ShortNames, []string{"pr"})
}

func TestAHundredPodsScaleToZero(t *testing.T) {
	var pods []obj
	for i := range 100 {
		pods = append(pods, pod(fmt.Sprintf("p%03d", i), podOpts{}))
	}
	plan := mustDecide(t, 0, pods, nil, nil)
	eq(t, "deleted", len(plan.Deleted()), 100)
	eq(t, "first deleted", plan.Deleted()[0].Name, "p099")
	eq(t, "status pods", statusPods(t, plan), []string{})
}
