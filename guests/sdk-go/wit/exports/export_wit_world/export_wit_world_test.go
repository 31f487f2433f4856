package export_wit_world

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	witTypes "go.bytecodealliance.org/pkg/wit/types"

	"wasmop/sdk"
	t "wasmop/sdk/wit/imports/wasmop_plugin_types"
)

// fake is a plugin with none of the optional interfaces; Reconcile keeps what it observed.
type fake struct {
	plan *wasmop.Plan
	seen *wasmop.Observed
}

func (fake) Info() wasmop.PluginInfo {
	sel := "app=web"
	return wasmop.PluginInfo{Name: "fake", Version: "1", CRD: []byte(`{}`), Relations: []wasmop.Relation{
		{Name: "pods", Selection: wasmop.Namespace, LabelSelector: &sel},
		{Name: "owned"},
		{Name: "config", Selection: wasmop.Referenced(wasmop.Reference{NamePath: "spec.configRef.name"})},
		{Name: "secrets", Selection: wasmop.Referenced(wasmop.Reference{NamePath: "spec.s.name", NamespacePath: "spec.s.namespace"})},
	}, Permissions: []wasmop.Permission{{Verbs: []wasmop.Verb{wasmop.Create, wasmop.Adopt}}},
		Webhooks:      wasmop.Webhooks{Default: true},
		OutboundHosts: []string{"https://api.example.com"},
	}
}

func (f fake) Reconcile(o *wasmop.Observed) (*wasmop.Plan, error) {
	if o.Primary["fail"] == "spec" {
		return nil, wasmop.InvalidSpec("bad %s", "spec")
	}
	if o.Primary["fail"] == "other" {
		return nil, errors.New("boom")
	}
	if f.seen != nil {
		*f.seen = *o
	}
	return f.plan, nil
}

func (fake) Cleanup(*wasmop.Observed) (*wasmop.Plan, error) { return nil, wasmop.Transient("later") }

func TestGlue(tt *testing.T) {
	ns := "default"
	Register(fake{plan: new(wasmop.Plan).Apply(map[string]any{"a": "<b>"}).
		Delete(wasmop.ObjectRef{APIVersion: "v1", Kind: "Pod", Name: "p", Namespace: &ns}).
		SetStatus(map[string]any{"n": 1}).Warning("R", "m").RequeueAfter(5)})

	info := Info()
	if info.Crd.Some() != "{}" || info.Relations[0].Selection.Tag() != t.Selection_Namespace ||
		info.Relations[0].LabelSelector.Some() != "app=web" || info.Relations[0].Fields.IsSome() ||
		info.Permissions[0].Verbs[1] != t.Verb_Adopt || info.Finalizer.IsSome() {
		tt.Errorf("info: %+v", info)
	}
	if info.Webhooks != (t.Webhooks{Default: true}) || !reflect.DeepEqual(info.OutboundHosts, []string{"https://api.example.com"}) {
		tt.Errorf("webhooks and hosts: %+v, %v", info.Webhooks, info.OutboundHosts)
	}
	if info.Relations[1].Selection.Tag() != t.Selection_Owned {
		tt.Errorf("owned: %+v", info.Relations[1].Selection)
	}
	config, secrets := info.Relations[2].Selection, info.Relations[3].Selection
	if config.Tag() != t.Selection_Referenced || config.Referenced().NamePath != "spec.configRef.name" ||
		config.Referenced().NamespacePath.IsSome() || secrets.Referenced().NamespacePath.Some() != "spec.s.namespace" {
		tt.Errorf("referenced: %+v, %+v", config, secrets)
	}

	obs := t.Observed{Primary: `{"x":1}`, Related: []t.RelatedObjects{{Relation: "pods", Objects: []string{`{}`}}}}
	plan := Reconcile(obs).Ok()
	if len(plan.Actions) != 2 || plan.Actions[0].Apply() != `{"a":"<b>"}` ||
		plan.Actions[1].Delete().Namespace.Some() != "default" || plan.Actions[1].Delete().Uid.IsSome() ||
		plan.Status.Some() != `{"n":1}` || plan.Events[0].EventType != t.EventType_Warning ||
		plan.RequeueAfterMs.Some() != 5 || len(plan.Requires) != 0 || len(plan.Requests) != 0 {
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

func TestGlueRequiredAnswersRequirementsAndRequests(tt *testing.T) {
	var seen wasmop.Observed
	Register(fake{seen: &seen, plan: new(wasmop.Plan).
		Require(wasmop.Requirement{Name: "config", Kind: wasmop.KindRef{Version: "v1", Kind: "ConfigMap"}, Matching: wasmop.ByName("cfg")}).
		Require(wasmop.Requirement{Name: "pods", Namespace: "other", Matching: wasmop.ByLabels("app=web")}).
		Request(wasmop.OutboundRequest{Key: "get", Method: "GET", URL: "https://api.example.com/a"}).
		Request(wasmop.OutboundRequest{
			Key: "post", Method: "POST", URL: "https://api.example.com/b", Headers: []wasmop.Header{{Name: "Content-Type", Value: "application/json"}},
			Body: []byte{}, Credential: &wasmop.Credential{Header: "Authorization", Prefix: "Bearer ", Secret: "token", Key: "t"},
			IdempotencyKey: "id-1", Retry: true, KeepHeaders: []string{"ETag"},
		})})

	plan := Reconcile(t.Observed{
		Primary:  `{}`,
		Required: []t.RelatedObjects{{Relation: "config", Objects: []string{`{"data":{"k":"v"}}`}}, {Relation: "none", Objects: []string{}}},
		Answers: []t.Answer{
			{Key: "get", Outcome: t.MakeOutcomeResponse(t.Response{Status: 201, Headers: []t.Header{{Name: "ETag", Value: "1"}}, Body: []uint8("hi"), Truncated: true}), AtUnixMs: 3},
			{Key: "refused", Outcome: t.MakeOutcomeRefused("not granted")},
			{Key: "failed", Outcome: t.MakeOutcomeFailed("timeout")},
		},
	}).Ok()

	if cfg, ok := seen.RequiredObjects("config"); !ok || cfg[0]["data"].(wasmop.Object)["k"] != "v" {
		tt.Errorf("required config: %v, %v", cfg, ok)
	}
	if none, ok := seen.RequiredObjects("none"); !ok || len(none) != 0 {
		tt.Errorf("required none: %v, %v", none, ok)
	}
	want := wasmop.Answer{Key: "get", Response: &wasmop.Response{Status: 201, Headers: []wasmop.Header{{Name: "ETag", Value: "1"}}, Body: []byte("hi"), Truncated: true}, AtUnixMs: 3}
	if got, _ := seen.Answer("get"); !reflect.DeepEqual(got, want) {
		tt.Errorf("answer get: %+v", got)
	}
	if got, _ := seen.Answer("refused"); got.Refused != "not granted" || got.Response != nil || got.Failed != "" {
		tt.Errorf("answer refused: %+v", got)
	}
	if got, _ := seen.Answer("failed"); got.Failed != "timeout" || got.Response != nil || got.Refused != "" {
		tt.Errorf("answer failed: %+v", got)
	}

	if len(plan.Requires) != 2 || len(plan.Requests) != 2 {
		tt.Fatalf("plan: %+v", plan)
	}
	config, pods := plan.Requires[0], plan.Requires[1]
	if config.Name != "config" || config.Kind.Kind != "ConfigMap" || config.Namespace.IsSome() ||
		config.Matching.Tag() != t.Matching_Name || config.Matching.Name() != "cfg" ||
		pods.Namespace.Some() != "other" || pods.Matching.Tag() != t.Matching_Labels || pods.Matching.Labels() != "app=web" {
		tt.Errorf("requires: %+v", plan.Requires)
	}
	get, post := plan.Requests[0], plan.Requests[1]
	if get.Key != "get" || get.Method != "GET" || get.Url != "https://api.example.com/a" ||
		get.Body.IsSome() || get.Credential.IsSome() || get.IdempotencyKey.IsSome() || get.Retry || len(get.Headers) != 0 {
		tt.Errorf("request get: %+v", get)
	}
	if !reflect.DeepEqual(post.Headers, []t.Header{{Name: "Content-Type", Value: "application/json"}}) ||
		!post.Body.IsSome() || len(post.Body.Some()) != 0 ||
		post.Credential.Some() != (t.Credential{Header: "Authorization", Prefix: "Bearer ", Secret: "token", Key: "t"}) ||
		post.IdempotencyKey.Some() != "id-1" || !post.Retry || !reflect.DeepEqual(post.KeepHeaders, []string{"ETag"}) {
		tt.Errorf("request post: %+v", post)
	}

	bad := t.Observed{Primary: `{}`, Required: []t.RelatedObjects{{Relation: "x", Objects: []string{`nope`}}}}
	if got := Reconcile(bad).Err().Tag(); got != t.ReconcileError_Other {
		tt.Errorf("malformed required object: error tag %d", got)
	}
}

func some(s string) witTypes.Option[string] { return witTypes.Some(s) }

func TestWebhookDefaultsWithoutTheOptionalInterfaces(tt *testing.T) {
	Register(fake{})
	v := Validate(t.AdmissionRequest{Operation: t.Operation_Create, Object: some(`{"a":1}`)})
	if !v.Allowed || len(v.Fields) != 0 || v.Message.IsSome() || len(v.Warnings) != 0 {
		tt.Errorf("validate: %+v", v)
	}
	if got := Default(`{"b": 2, "a": 1}`); got.Ok() != `{"b": 2, "a": 1}` {
		tt.Errorf("default: %+v", got)
	}
	if got := Convert(`{}`, "v2"); got.Err() != "this plugin does not convert (asked for v2)" {
		tt.Errorf("convert: %+v", got)
	}
}

// hooks implements the optional interfaces.
type hooks struct{ fake }

func (hooks) Validate(r *wasmop.AdmissionRequest) wasmop.Verdict {
	if r.Operation == wasmop.OperationDelete {
		if r.OldObject["keep"] == true {
			return wasmop.Deny("%s may not delete it", r.User)
		}
		return wasmop.Allow()
	}
	v := wasmop.Allow()
	if size, ok := r.Object["size"]; ok {
		v = wasmop.Invalid(wasmop.FieldError{Path: "size", Value: size, Detail: "must not be set"},
			wasmop.FieldError{Path: "other", Detail: "also wrong"})
	}
	if r.DryRun && r.Operation == wasmop.OperationUpdate && r.OldObject != nil {
		v = v.Warn("dry run")
	}
	return v
}

func (hooks) Default(o wasmop.Object) (wasmop.Object, error) {
	if o["fail"] == true {
		return nil, errors.New("cannot default")
	}
	o["size"] = 1
	return o, nil
}

func (hooks) Convert(o wasmop.Object, toVersion string) (wasmop.Object, error) {
	o["apiVersion"] = "example.com/" + toVersion
	return o, nil
}

func TestWebhooksCallTheOptionalInterfaces(tt *testing.T) {
	Register(hooks{})
	refused := Validate(t.AdmissionRequest{Operation: t.Operation_Create, Object: some(`{"size":12345678901234567890}`)})
	if refused.Allowed || len(refused.Fields) != 2 || refused.Fields[0].Path != "size" ||
		refused.Fields[0].Value.Some() != "12345678901234567890" || refused.Fields[0].Detail != "must not be set" ||
		refused.Fields[1].Value.IsSome() || refused.Message.IsSome() {
		tt.Errorf("refused: %+v", refused)
	}
	warned := Validate(t.AdmissionRequest{Operation: t.Operation_Update, Object: some(`{}`), OldObject: some(`{}`), DryRun: true})
	if !warned.Allowed || !reflect.DeepEqual(warned.Warnings, []string{"dry run"}) {
		tt.Errorf("warned: %+v", warned)
	}
	denied := Validate(t.AdmissionRequest{Operation: t.Operation_Delete, OldObject: some(`{"keep":true}`), User: "alice"})
	if denied.Allowed || denied.Message.Some() != "alice may not delete it" {
		tt.Errorf("denied: %+v", denied)
	}
	malformed := Validate(t.AdmissionRequest{Operation: t.Operation_Update, Object: some(`{}`), OldObject: some(`{`)})
	if malformed.Allowed || !strings.HasPrefix(malformed.Message.Some(), "host sent malformed JSON") {
		tt.Errorf("malformed: %+v", malformed)
	}

	if got := Default(`{"a":"<b>"}`); got.Ok() != `{"a":"<b>","size":1}` {
		tt.Errorf("default: %+v", got)
	}
	if got := Default(`{"fail":true}`); got.Err() != "cannot default" {
		tt.Errorf("default refused: %+v", got)
	}
	if got := Default(`[]`); !strings.HasPrefix(got.Err(), "host sent malformed JSON") {
		tt.Errorf("default of malformed JSON: %+v", got)
	}
	if got := Convert(`{"apiVersion":"example.com/v1","n":1}`, "v2"); got.Ok() != `{"apiVersion":"example.com/v2","n":1}` {
		tt.Errorf("convert: %+v", got)
	}
}
