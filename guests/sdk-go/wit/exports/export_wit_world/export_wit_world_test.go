package export_wit_world

import (
	"errors"
	"testing"

	"wasmop/sdk"
	t "wasmop/sdk/wit/imports/wasmop_plugin_types"
)

type fake struct{ plan *wasmop.Plan }

func (fake) Info() wasmop.PluginInfo {
	sel := "app=web"
	return wasmop.PluginInfo{Name: "fake", Version: "1", CRD: []byte(`{}`), Relations: []wasmop.Relation{
		{Name: "pods", Selection: wasmop.Namespace, LabelSelector: &sel},
	}, Permissions: []wasmop.Permission{{Verbs: []wasmop.Verb{wasmop.Create, wasmop.Adopt}}}}
}

func (f fake) Reconcile(o *wasmop.Observed) (*wasmop.Plan, error) {
	if o.Primary["fail"] == "spec" {
		return nil, wasmop.InvalidSpec("bad %s", "spec")
	}
	if o.Primary["fail"] == "other" {
		return nil, errors.New("boom")
	}
	return f.plan, nil
}

func (fake) Cleanup(*wasmop.Observed) (*wasmop.Plan, error) { return nil, wasmop.Transient("later") }

func TestGlue(tt *testing.T) {
	ns := "default"
	Register(fake{new(wasmop.Plan).Apply(map[string]any{"a": "<b>"}).
		Delete(wasmop.ObjectRef{APIVersion: "v1", Kind: "Pod", Name: "p", Namespace: &ns}).
		SetStatus(map[string]any{"n": 1}).Warning("R", "m").RequeueAfter(5)})

	info := Info()
	if info.Crd.Some() != "{}" || info.Relations[0].Selection != t.Selection_Namespace ||
		info.Relations[0].LabelSelector.Some() != "app=web" || info.Relations[0].Fields.IsSome() ||
		info.Permissions[0].Verbs[1] != t.Verb_Adopt || info.Finalizer.IsSome() {
		tt.Errorf("info: %+v", info)
	}

	obs := t.Observed{Primary: `{"x":1}`, Related: []t.RelatedObjects{{Relation: "pods", Objects: []string{`{}`}}}}
	plan := Reconcile(obs).Ok()
	if len(plan.Actions) != 2 || plan.Actions[0].Apply() != `{"a":"<b>"}` ||
		plan.Actions[1].Delete().Namespace.Some() != "default" || plan.Actions[1].Delete().Uid.IsSome() ||
		plan.Status.Some() != `{"n":1}` || plan.Events[0].EventType != t.EventType_Warning ||
		plan.RequeueAfterMs.Some() != 5 {
		tt.Errorf("plan: %+v", plan)
	}

	for primary, tag := range map[string]uint8{
		`{"fail":"spec"}`:  t.ReconcileError_InvalidSpec,
		`{"fail":"other"}`: t.ReconcileError_Other,
		`not json`:         t.ReconcileError_Other,
	} {
		if got := Reconcile(t.Observed{Primary: primary}).Err().Tag(); got != tag {
			tt.Errorf("%s: error tag %d, want %d", primary, got, tag)
		}
	}
	if got := Cleanup(obs).Err().Tag(); got != t.ReconcileError_Transient {
		tt.Errorf("cleanup: error tag %d", got)
	}
}
