// Package conditions builds status conditions following Kubernetes conventions, with
// transition times that only move when the condition's status changes (so an unchanged world
// yields an unchanged status).
package conditions

import "wasmop/sdk"

// New builds a condition; observedGeneration is set only when generation is not nil.
func New(typ string, ok bool, reason, message, nowRFC3339 string, generation any) wasmop.Object {
	status := "False"
	if ok {
		status = "True"
	}
	c := wasmop.Object{
		"type":               typ,
		"status":             status,
		"reason":             reason,
		"message":            message,
		"lastTransitionTime": nowRFC3339,
	}
	if generation != nil {
		c["observedGeneration"] = generation
	}
	return c
}

// Set sets condition c in conditions (replacing one of the same type) and returns the
// result, keeping the lastTransitionTime of previous (the conditions the object had) when
// the status of c's type did not change.
func Set(conditions []any, previous []any, c wasmop.Object) []any {
	for _, p := range previous {
		old, _ := p.(wasmop.Object)
		if old["type"] == c["type"] && old["status"] == c["status"] {
			if t, ok := old["lastTransitionTime"]; ok {
				c["lastTransitionTime"] = t
			}
			break
		}
	}
	out := make([]any, 0, len(conditions)+1)
	for _, x := range conditions {
		if o, _ := x.(wasmop.Object); o["type"] != c["type"] {
			out = append(out, x)
		}
	}
	return append(out, c)
}
