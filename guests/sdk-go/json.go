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

// RelatedJSON is the objects of one relation, or of one requirement, as the host sends
// them: JSON texts.
type RelatedJSON struct {
	Relation string
	Objects  []string
}

// ObservedJSON is the observed state as the host sends it: objects as JSON texts.
type ObservedJSON struct {
	Primary   string
	Related   []RelatedJSON
	NowUnixMs int64
	Seed      uint64
	Required  []RelatedJSON
	// Answers are typed already: they hold no JSON.
	Answers []Answer
}

// ParseObserved parses the JSON the host sends.
func ParseObserved(h ObservedJSON) (*Observed, error) {
	o := &Observed{NowUnixMs: h.NowUnixMs, Seed: h.Seed, Answers: make(map[string]Answer, len(h.Answers))}
	var err error
	if o.Primary, err = DecodeObject(h.Primary); err != nil {
		return nil, Failed("host sent malformed JSON: %v", err)
	}
	if o.Related, err = parseGroups(h.Related); err != nil {
		return nil, err
	}
	if o.Required, err = parseGroups(h.Required); err != nil {
		return nil, err
	}
	for _, a := range h.Answers {
		o.Answers[a.Key] = a
	}
	return o, nil
}

// parseGroups parses objects grouped by name; a group with no objects is kept, empty.
func parseGroups(groups []RelatedJSON) (map[string][]Object, error) {
	out := make(map[string][]Object, len(groups))
	for _, g := range groups {
		objs := make([]Object, 0, len(g.Objects))
		for _, text := range g.Objects {
			obj, err := DecodeObject(text)
			if err != nil {
				return nil, Failed("host sent malformed JSON: %v", err)
			}
			objs = append(objs, obj)
		}
		out[g.Relation] = objs
	}
	return out, nil
}
