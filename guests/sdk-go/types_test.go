package wasmop

import (
	"reflect"
	"testing"
)

func TestSelectionZeroValueIsOwnedAndReferencedCarriesItsReference(t *testing.T) {
	if (Relation{}).Selection != Owned || Owned == Namespace {
		t.Error("the zero selection must be Owned, and differ from Namespace")
	}
	if _, ok := Namespace.Reference(); ok {
		t.Error("Namespace has no reference")
	}
	want := Reference{NamePath: "spec.configRef.name", NamespacePath: "spec.configRef.namespace"}
	s := Referenced(want)
	if got, ok := s.Reference(); !ok || got != want || s == Owned || s == Namespace {
		t.Errorf("Referenced: %+v, %v", got, ok)
	}
}

func TestMatchingIsByNameOrByLabels(t *testing.T) {
	if name, ok := ByName("cfg").Name(); !ok || name != "cfg" {
		t.Errorf("ByName: %q, %v", name, ok)
	}
	if _, ok := ByName("cfg").Labels(); ok {
		t.Error("ByName has no labels")
	}
	if sel, ok := ByLabels("app=web").Labels(); !ok || sel != "app=web" {
		t.Errorf("ByLabels: %q, %v", sel, ok)
	}
	if _, ok := ByLabels("app=web").Name(); ok {
		t.Error("ByLabels has no name")
	}
}

func TestRequiredTellsUnreadFromNoneFound(t *testing.T) {
	o := &Observed{Required: map[string][]Object{"none": {}}}
	if objs, ok := o.RequiredObjects("none"); !ok || len(objs) != 0 {
		t.Errorf("read, none found: %v, %v", objs, ok)
	}
	if _, ok := o.RequiredObjects("unread"); ok {
		t.Error("unread: reported read")
	}
	if _, ok := (&Observed{}).Answer("k"); ok {
		t.Error("no answers: reported one")
	}
}

func TestResponseHeaderIgnoresCase(t *testing.T) {
	r := &Response{Headers: []Header{{"ETag", `"1"`}, {"etag", `"2"`}}}
	if v, ok := r.Header("etag"); !ok || v != `"1"` {
		t.Errorf("etag: %q, %v", v, ok)
	}
	if _, ok := r.Header("Location"); ok {
		t.Error("Location: found")
	}
}

func TestPlanRequiresAndRequestsInOrder(t *testing.T) {
	cfg := Requirement{Name: "config", Kind: KindRef{Version: "v1", Kind: "ConfigMap"}, Matching: ByName("cfg")}
	pods := Requirement{Name: "pods", Namespace: "other", Matching: ByLabels("app=web")}
	get := OutboundRequest{Key: "get", Method: "GET", URL: "https://api.example.com/a"}
	post := OutboundRequest{Key: "post", Method: "POST", URL: "https://api.example.com/b", Body: []byte(`{}`), Retry: true}
	p := new(Plan).Require(cfg).Request(get).Require(pods).Request(post).Normal("R", "m")
	if !reflect.DeepEqual(p.Requires, []Requirement{cfg, pods}) {
		t.Errorf("requires: %+v", p.Requires)
	}
	if !reflect.DeepEqual(p.Requests, []OutboundRequest{get, post}) {
		t.Errorf("requests: %+v", p.Requests)
	}
	if len(p.Events) != 1 || len(p.Actions) != 0 {
		t.Errorf("the rest of the plan: %+v", p)
	}
}
