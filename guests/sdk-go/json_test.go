package wasmop

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestParseObservedGroupsRequiredObjectsAndKeysAnswers(t *testing.T) {
	answer := Answer{Key: "k", Response: &Response{Status: 200, Body: []byte("ok")}, AtUnixMs: 7}
	o, err := ParseObserved(ObservedJSON{
		Primary:   `{"n":1}`,
		Related:   []RelatedJSON{{Relation: "pods", Objects: []string{`{"a":1}`}}},
		NowUnixMs: 5, Seed: 9,
		Required: []RelatedJSON{{Relation: "config", Objects: []string{`{"b":2}`}}, {Relation: "none"}},
		Answers:  []Answer{answer, {Key: "r", Refused: "not granted"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.Primary["n"] != json.Number("1") || len(o.Objects("pods")) != 1 || o.NowUnixMs != 5 || o.Seed != 9 {
		t.Errorf("observed: %+v", o)
	}
	if cfg, ok := o.RequiredObjects("config"); !ok || !reflect.DeepEqual(cfg, []Object{{"b": json.Number("2")}}) {
		t.Errorf("config: %v, %v", cfg, ok)
	}
	if none, ok := o.RequiredObjects("none"); !ok || none == nil || len(none) != 0 {
		t.Errorf("none: %#v, %v", none, ok)
	}
	if got, ok := o.Answer("k"); !ok || !reflect.DeepEqual(got, answer) {
		t.Errorf("answer k: %+v, %v", got, ok)
	}
	if got, _ := o.Answer("r"); got.Refused != "not granted" || got.Response != nil {
		t.Errorf("answer r: %+v", got)
	}
}

func TestParseObservedRefusesMalformedRequiredObjects(t *testing.T) {
	_, err := ParseObserved(ObservedJSON{Primary: `{}`, Required: []RelatedJSON{{Relation: "x", Objects: []string{`[1]`}}}})
	var e *ReconcileError
	if !errors.As(err, &e) || e.Kind != KindFailed {
		t.Errorf("error: %v", err)
	}
}
