// Package export_wit_world implements the world's exports for the generated
// wit/exports/wit_exports (which calls Info, Reconcile and Cleanup here): it converts between
// the generated bindings and the SDK's plain values, and calls the plugin that
// wasmop/sdk/component registered. Not generated: wit-bindgen go only writes the other
// packages under wit/.
package export_wit_world

import (
	"errors"

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

// decide runs f on the parsed observed state. A panic in f is not recovered: it traps the
// instance, and the host counts a fault (as for a Rust plugin's panic).
func decide(f func(*wasmop.Observed) (*wasmop.Plan, error), o t.Observed) result {
	related := make([]wasmop.RelatedJSON, len(o.Related))
	for i, r := range o.Related {
		related[i] = wasmop.RelatedJSON{Relation: r.Relation, Objects: r.Objects}
	}
	obs, err := wasmop.ParseObserved(o.Primary, related, o.NowUnixMs, o.Seed)
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

func toKind(k wasmop.KindRef) t.KindRef {
	return t.KindRef{Group: k.Group, Version: k.Version, Kind: k.Kind, Plural: k.Plural, Namespaced: k.Namespaced}
}

func toInfo(i wasmop.PluginInfo) t.PluginInfo {
	out := t.PluginInfo{
		Name:        i.Name,
		Version:     i.Version,
		Primary:     toKind(i.Primary),
		Crd:         witTypes.None[string](),
		Relations:   make([]t.Relation, 0, len(i.Relations)),
		Permissions: make([]t.Permission, 0, len(i.Permissions)),
		Finalizer:   option(i.Finalizer),
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
			Name: r.Name, Kind: toKind(r.Kind), Selection: t.Selection(r.Selection),
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

func toPlan(p *wasmop.Plan) (t.Plan, error) {
	if p == nil {
		p = &wasmop.Plan{}
	}
	out := t.Plan{
		Actions:        make([]t.Action, 0, len(p.Actions)),
		Status:         witTypes.None[string](),
		Events:         make([]t.Event, 0, len(p.Events)),
		RequeueAfterMs: option(p.RequeueAfterMs),
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
	return out, nil
}
