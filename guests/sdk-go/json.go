package wasmop

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// Object is a JSON object as the host sends it, parsed by [Decode]: nested objects are
// Object, arrays []any, numbers json.Number (integers stay exact), and so on.
type Object = map[string]any

// Decode parses one JSON value, numbers as json.Number.
func Decode(text string) (any, error) {
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// DecodeObject parses one JSON object, numbers as json.Number.
func DecodeObject(text string) (Object, error) {
	v, err := Decode(text)
	if err != nil {
		return nil, err
	}
	o, ok := v.(Object)
	if !ok {
		return nil, errors.New("expected a JSON object")
	}
	return o, nil
}

// Encode writes v as compact JSON, without escaping <, > and & (as Kubernetes does).
func Encode(v any) (string, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// RelatedJSON is the related objects of one relation as the host sends them: JSON texts.
type RelatedJSON struct {
	Relation string
	Objects  []string
}

// ParseObserved parses the JSON the host sends.
func ParseObserved(primary string, related []RelatedJSON, nowUnixMs int64, seed uint64) (*Observed, error) {
	o := &Observed{Related: make(map[string][]Object, len(related)), NowUnixMs: nowUnixMs, Seed: seed}
	var err error
	if o.Primary, err = DecodeObject(primary); err != nil {
		return nil, Failed("host sent malformed JSON: %v", err)
	}
	for _, r := range related {
		objs := make([]Object, 0, len(r.Objects))
		for _, text := range r.Objects {
			obj, err := DecodeObject(text)
			if err != nil {
				return nil, Failed("host sent malformed JSON: %v", err)
			}
			objs = append(objs, obj)
		}
		o.Related[r.Relation] = objs
	}
	return o, nil
}
