package wasmop

import (
	"reflect"
	"testing"
)

func TestVerdicts(t *testing.T) {
	if v := Allow(); !v.Allowed || v.Message != "" || v.Fields != nil {
		t.Errorf("Allow: %+v", v)
	}
	if v := Deny("no %s", "way"); v.Allowed || v.Message != "no way" {
		t.Errorf("Deny: %+v", v)
	}
	field := FieldError{Path: "spec.size", Value: 101, Detail: "at most 100"}
	if v := Invalid(field); v.Allowed || v.Message != "" || !reflect.DeepEqual(v.Fields, []FieldError{field}) {
		t.Errorf("Invalid: %+v", v)
	}
}

func TestWarnAddsWithoutChangingTheVerdictItCameFrom(t *testing.T) {
	base := Allow().Warn("a")
	base.Warnings = append(make([]string, 0, 4), base.Warnings...) // room to grow in place
	b, c := base.Warn("b"), base.Warn("c")
	if !reflect.DeepEqual(base.Warnings, []string{"a"}) || !reflect.DeepEqual(b.Warnings, []string{"a", "b"}) ||
		!reflect.DeepEqual(c.Warnings, []string{"a", "c"}) || !b.Allowed {
		t.Errorf("warnings: %v, %v, %v", base.Warnings, b.Warnings, c.Warnings)
	}
}
