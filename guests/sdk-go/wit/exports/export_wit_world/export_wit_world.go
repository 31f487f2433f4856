// Package export_wit_world implements the world's exports for the generated
// wit/exports/wit_exports (which calls Info, Reconcile, Cleanup, Validate, Default and
// Convert here): it converts between the generated bindings and the SDK's plain values, and
// calls the plugin that wasmop/sdk/component registered. Not generated: wit-bindgen go only
// writes the other packages under wit/.
package export_wit_world

import (
	"errors"
	"fmt"

	witTypes "go.bytecodealliance.org/pkg/wit/types"

	"wasmop/sdk"
	t "wasmop/sdk/wit/imports/wasmop_plugin_types"
)

var plugin wasmop.Plugin

// Register makes p the plugin the exports call.
func Register(p wasmop.Plugin) { plugin = p }

func get() wasmop.Plugin {
	if plugin == nil {
		panic("wasmop: no plugin registered: call component.Export in an init function")
	}
	return plugin
}

type result = witTypes.Result[t.Plan, t.ReconcileError]

// Info is the world's info export.
func Info() t.PluginInfo { return toInfo(get().Info()) }

// Reconcile is the world's reconcile export.
func Reconcile(o t.Observed) result { return decide(get().Reconcile, o) }

// Cleanup is the world's cleanup export.
func Cleanup(o t.Observed) result { return decide(get().Cleanup, o) }

// Validate is the world's validate export: the plugin's [wasmop.Validator.Validate], or
// allowed. A request the host sent malformed is refused.
func Validate(r t.AdmissionRequest) t.Verdict {
	v, ok := get().(wasmop.Validator)
	if !ok {
		return toVerdict(wasmop.Allow())
	}
	req, err := fromAdmission(r)
	if err != nil {
		return toVerdict(wasmop.Deny("%v", err))
	}
	return toVerdict(v.Validate(req))
}

// Default is the world's default export: the plugin's [wasmop.Defaulter.Default], or the
// object unchanged.
func Default(object string) witTypes.Result[string, string] {
	d, ok := get().(wasmop.Defaulter)
	if !ok {
		return witTypes.Ok[string, string](object)
	}
	return transform(object, d.Default)
}

// Convert is the world's convert export: the plugin's [wasmop.Converter.Convert], or a
// refusal.
func Convert(object, toVersion string) witTypes.Result[string, string] {
	c, ok := get().(wasmop.Converter)
	if !ok {
		return witTypes.Err[string](fmt.Sprintf("this plugin does not convert (asked for %s)", toVersion))
	}
	return transform(object, func(o wasmop.Object) (wasmop.Object, error) { return c.Convert(o, toVersion) })
}

// decide runs f on the parsed observed state. A panic in f is not recovered: it traps the
// instance, and the host counts a fault (as for a Rust plugin's panic).
func decide(f func(*wasmop.Observed) (*wasmop.Plan, error), o t.Observed) result {
	answers := make([]wasmop.Answer, len(o.Answers))
	for i, a := range o.Answers {
		answers[i] = fromAnswer(a)
	}
	obs, err := wasmop.ParseObserved(wasmop.ObservedJSON{
		Primary: o.Primary, Related: groups(o.Related), NowUnixMs: o.NowUnixMs, Seed: o.Seed,
		Required: groups(o.Required), Answers: answers,
	})
	var plan *wasmop.Plan
	if err == nil {
		plan, err = f(obs)
	}
	var out t.Plan
	if err == nil {
		out, err = toPlan(plan)
	}
	if err != nil {
		return witTypes.Err[t.Plan](toError(err))
	}
	return witTypes.Ok[t.Plan, t.ReconcileError](out)
}

// transform runs f on a JSON object in and out; its error is the refusal's message.
func transform(object string, f func(wasmop.Object) (wasmop.Object, error)) witTypes.Result[string, string] {
	in, err := wasmop.DecodeObject(object)
	if err != nil {
		return witTypes.Err[string](fmt.Sprintf("host sent malformed JSON: %v", err))
	}
	out, err := f(in)
	if err != nil {
		return witTypes.Err[string](err.Error())
	}
	text, err := wasmop.Encode(out)
	if err != nil {
		return witTypes.Err[string](fmt.Sprintf("encoding the object: %v", err))
	}
	return witTypes.Ok[string, string](text)
}

func toError(err error) t.ReconcileError {
	var e *wasmop.ReconcileError
	if errors.As(err, &e) {
		switch e.Kind {
		case wasmop.KindInvalidSpec:
			return t.MakeReconcileErrorInvalidSpec(e.Message)
		case wasmop.KindTransient:
			return t.MakeReconcileErrorTransient(e.Message)
		}
	}
	return t.MakeReconcileErrorOther(err.Error())
}

func option[T any](p *T) witTypes.Option[T] {
	if p == nil {
		return witTypes.None[T]()
	}
	return witTypes.Some(*p)
}

// nonEmpty is the contract's option of a string the SDK leaves empty for none.
func nonEmpty(s string) witTypes.Option[string] {
	if s == "" {
		return witTypes.None[string]()
	}
	return witTypes.Some(s)
}

func groups(g []t.RelatedObjects) []wasmop.RelatedJSON {
	out := make([]wasmop.RelatedJSON, len(g))
	for i, r := range g {
		out[i] = wasmop.RelatedJSON{Relation: r.Relation, Objects: r.Objects}
	}
	return out
}

func toKind(k wasmop.KindRef) t.KindRef {
	return t.KindRef{Group: k.Group, Version: k.Version, Kind: k.Kind, Plural: k.Plural, Namespaced: k.Namespaced}
}

func toSelection(s wasmop.Selection) t.Selection {
	if ref, ok := s.Reference(); ok {
		return t.MakeSelectionReferenced(t.Reference{NamePath: ref.NamePath, NamespacePath: nonEmpty(ref.NamespacePath)})
	}
	if s == wasmop.Namespace {
		return t.MakeSelectionNamespace()
	}
	return t.MakeSelectionOwned()
}

func toInfo(i wasmop.PluginInfo) t.PluginInfo {
	out := t.PluginInfo{
		Name:          i.Name,
		Version:       i.Version,
		Primary:       toKind(i.Primary),
		Crd:           witTypes.None[string](),
		Relations:     make([]t.Relation, 0, len(i.Relations)),
		Permissions:   make([]t.Permission, 0, len(i.Permissions)),
		Finalizer:     option(i.Finalizer),
		Webhooks:      t.Webhooks{Validate: i.Webhooks.Validate, Default: i.Webhooks.Default, Convert: i.Webhooks.Convert},
		OutboundHosts: i.OutboundHosts,
	}
	if i.CRD != nil {
		out.Crd = witTypes.Some(string(i.CRD))
	}
	for _, r := range i.Relations {
		fields := witTypes.None[[]string]()
		if r.Fields != nil {
			fields = witTypes.Some(r.Fields)
		}
		out.Relations = append(out.Relations, t.Relation{
			Name: r.Name, Kind: toKind(r.Kind), Selection: toSelection(r.Selection),
			LabelSelector: option(r.LabelSelector), Fields: fields,
		})
	}
	for _, p := range i.Permissions {
		verbs := make([]t.Verb, len(p.Verbs))
		for j, v := range p.Verbs {
			verbs[j] = t.Verb(v)
		}
		out.Permissions = append(out.Permissions, t.Permission{Kind: toKind(p.Kind), Verbs: verbs})
	}
	return out
}

func fromHeaders(hs []t.Header) []wasmop.Header {
	out := make([]wasmop.Header, len(hs))
	for i, h := range hs {
		out[i] = wasmop.Header{Name: h.Name, Value: h.Value}
	}
	return out
}

func toHeaders(hs []wasmop.Header) []t.Header {
	out := make([]t.Header, len(hs))
	for i, h := range hs {
		out[i] = t.Header{Name: h.Name, Value: h.Value}
	}
	return out
}

func fromAnswer(a t.Answer) wasmop.Answer {
	out := wasmop.Answer{Key: a.Key, AtUnixMs: a.AtUnixMs}
	switch a.Outcome.Tag() {
	case t.Outcome_Response:
		r := a.Outcome.Response()
		out.Response = &wasmop.Response{Status: r.Status, Headers: fromHeaders(r.Headers), Body: r.Body, Truncated: r.Truncated}
	case t.Outcome_Refused:
		out.Refused = a.Outcome.Refused()
	case t.Outcome_Failed:
		out.Failed = a.Outcome.Failed()
	}
	return out
}

func toRequirement(r wasmop.Requirement) t.Requirement {
	return t.Requirement{Name: r.Name, Kind: toKind(r.Kind), Namespace: nonEmpty(r.Namespace), Matching: toMatching(r.Matching)}
}

func toMatching(m wasmop.Matching) t.Matching {
	if labels, ok := m.Labels(); ok {
		return t.MakeMatchingLabels(labels)
	}
	name, _ := m.Name()
	return t.MakeMatchingName(name)
}

func toRequest(r wasmop.OutboundRequest) t.OutboundRequest {
	body := witTypes.None[[]uint8]()
	if r.Body != nil {
		body = witTypes.Some(r.Body)
	}
	credential := witTypes.None[t.Credential]()
	if c := r.Credential; c != nil {
		credential = witTypes.Some(t.Credential{Header: c.Header, Prefix: c.Prefix, Secret: c.Secret, Key: c.Key})
	}
	return t.OutboundRequest{
		Key: r.Key, Method: r.Method, Url: r.URL, Headers: toHeaders(r.Headers), Body: body,
		Credential: credential, IdempotencyKey: nonEmpty(r.IdempotencyKey), Retry: r.Retry,
		KeepHeaders: r.KeepHeaders,
	}
}

func toPlan(p *wasmop.Plan) (t.Plan, error) {
	if p == nil {
		p = &wasmop.Plan{}
	}
	out := t.Plan{
		Actions:        make([]t.Action, 0, len(p.Actions)),
		Status:         witTypes.None[string](),
		Events:         make([]t.Event, 0, len(p.Events)),
		RequeueAfterMs: option(p.RequeueAfterMs),
		Requires:       make([]t.Requirement, len(p.Requires)),
		Requests:       make([]t.OutboundRequest, len(p.Requests)),
	}
	for _, a := range p.Actions {
		if d := a.Delete; d != nil {
			out.Actions = append(out.Actions, t.MakeActionDelete(t.ObjectRef{
				ApiVersion: d.APIVersion, Kind: d.Kind, Name: d.Name,
				Namespace: option(d.Namespace), Uid: option(d.UID),
			}))
			continue
		}
		text, err := wasmop.Encode(a.Apply)
		if err != nil {
			return t.Plan{}, wasmop.Failed("encoding an applied object: %v", err)
		}
		out.Actions = append(out.Actions, t.MakeActionApply(text))
	}
	if p.Status != nil {
		text, err := wasmop.Encode(p.Status)
		if err != nil {
			return t.Plan{}, wasmop.Failed("encoding the status: %v", err)
		}
		out.Status = witTypes.Some(text)
	}
	for _, e := range p.Events {
		out.Events = append(out.Events, t.Event{EventType: t.EventType(e.Type), Reason: e.Reason, Message: e.Message})
	}
	for i, r := range p.Requires {
		out.Requires[i] = toRequirement(r)
	}
	for i, r := range p.Requests {
		out.Requests[i] = toRequest(r)
	}
	return out, nil
}

func fromAdmission(r t.AdmissionRequest) (*wasmop.AdmissionRequest, error) {
	out := &wasmop.AdmissionRequest{Operation: wasmop.Operation(r.Operation), User: r.User, DryRun: r.DryRun}
	var err error
	if out.Object, err = optionalObject(r.Object); err == nil {
		out.OldObject, err = optionalObject(r.OldObject)
	}
	return out, err
}

func optionalObject(text witTypes.Option[string]) (wasmop.Object, error) {
	if text.IsNone() {
		return nil, nil
	}
	obj, err := wasmop.DecodeObject(text.Some())
	if err != nil {
		return nil, fmt.Errorf("host sent malformed JSON: %v", err)
	}
	return obj, nil
}

func toVerdict(v wasmop.Verdict) t.Verdict {
	out := t.Verdict{
		Allowed: v.Allowed, Fields: make([]t.FieldError, len(v.Fields)),
		Message: nonEmpty(v.Message), Warnings: v.Warnings,
	}
	for i, f := range v.Fields {
		value := witTypes.None[string]()
		if f.Value != nil {
			value = witTypes.Some(fieldValue(f.Value))
		}
		out.Fields[i] = t.FieldError{Path: f.Path, Value: value, Detail: f.Detail}
	}
	return out
}

// fieldValue is v as JSON; a value that does not encode (a plugin's bug) becomes its Go
// rendering as a JSON string, still shown in the refusal.
func fieldValue(v any) string {
	text, err := wasmop.Encode(v)
	if err != nil {
		text, _ = wasmop.Encode(fmt.Sprint(v))
	}
	return text
}
