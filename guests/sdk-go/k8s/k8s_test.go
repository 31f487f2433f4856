package k8s

import (
	"testing"

	"wasmop/sdk"
)

func mustDecode(t *testing.T, text string) wasmop.Object {
	t.Helper()
	o, err := wasmop.DecodeObject(text)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestRFC3339(t *testing.T) {
	for ms, want := range map[int64]string{
		1_767_225_600_999: "2026-01-01T00:00:00Z",
		0:                 "1970-01-01T00:00:00Z",
		-1:                "1969-12-31T23:59:59Z", // floor, as Kubernetes' seconds
	} {
		if got := RFC3339(ms); got != want {
			t.Errorf("RFC3339(%d) = %s, want %s", ms, got, want)
		}
	}
	if ms, ok := ParseRFC3339("2026-01-01T00:00:00.5+00:00"); !ok || ms != 1_767_225_600_500 {
		t.Errorf("ParseRFC3339 = %d, %v", ms, ok)
	}
	if _, ok := ParseRFC3339("yesterday"); ok {
		t.Error("ParseRFC3339 accepted yesterday")
	}
}

func TestControllerAndIdentity(t *testing.T) {
	pod := mustDecode(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u",
		"ownerReferences":[{"uid":"other"},{"uid":"owner","controller":true}]}}`)
	if !IsControlledBy(pod, "owner") || IsControlledBy(pod, "other") {
		t.Error("IsControlledBy")
	}
	id, err := IdentityOf(pod)
	if err != nil || id.Name != "p" || *id.Namespace != "ns" || id.UID != "u" {
		t.Fatalf("IdentityOf = %+v, %v", id, err)
	}
	if ref := id.ControllerReference(); ref["controller"] != true || ref["uid"] != "u" {
		t.Errorf("ControllerReference = %v", ref)
	}
	if d := DeleteRef("v1", "Pod", pod); d.Name != "p" || *d.UID != "u" || *d.Namespace != "ns" {
		t.Errorf("DeleteRef = %+v", d)
	}
	if _, err := IdentityOf(mustDecode(t, `{"kind":"Pod"}`)); err == nil {
		t.Error("IdentityOf accepted an object without apiVersion")
	}
	if IsTerminating(pod) || !IsTerminating(mustDecode(t, `{"metadata":{"deletionTimestamp":"x"}}`)) {
		t.Error("IsTerminating")
	}
}
