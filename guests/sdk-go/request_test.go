package wasmop

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestRequestBuilderSetsEveryField(t *testing.T) {
	r := PostRequest("create", "https://dns.example.com/zones/z/records").
		Header("X-Trace", "t1").
		JSON(map[string]any{"name": "www", "ttl": 300, "note": "<é>"}).
		WithIdempotencyKey("u-1-create-0").
		WithRetry().
		KeepHeader("ETag").
		KeepHeader("Location").
		WithCredential("Authorization", "Bearer ", "dns-token", "token")
	want := OutboundRequest{
		Key:            "create",
		Method:         "POST",
		URL:            "https://dns.example.com/zones/z/records",
		Headers:        []Header{{"X-Trace", "t1"}, {"content-type", "application/json"}},
		Body:           []byte(`{"name":"www","note":"<é>","ttl":300}`),
		Credential:     &Credential{Header: "Authorization", Prefix: "Bearer ", Secret: "dns-token", Key: "token"},
		IdempotencyKey: "u-1-create-0",
		Retry:          true,
		KeepHeaders:    []string{"ETag", "Location"},
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("built:\n%+v\nwant:\n%+v", r, want)
	}
	if p := new(Plan).Request(r); !reflect.DeepEqual(p.Requests, []OutboundRequest{want}) {
		t.Errorf("plan: %+v", p.Requests)
	}
}

func TestRequestBuilderShorthandsAndDefaults(t *testing.T) {
	if m := NewRequest("k", "patch", "https://a.example.com").Method; m != "PATCH" {
		t.Errorf("method: %q", m)
	}
	for _, c := range []struct {
		r      OutboundRequest
		method string
	}{
		{GetRequest("k", "https://a.example.com/x"), "GET"},
		{PostRequest("k", "https://a.example.com/x"), "POST"},
		{PutRequest("k", "https://a.example.com/x"), "PUT"},
		{DeleteRequest("k", "https://a.example.com/x"), "DELETE"},
	} {
		want := OutboundRequest{Key: "k", Method: c.method, URL: "https://a.example.com/x"}
		if !reflect.DeepEqual(c.r, want) {
			t.Errorf("%s: %+v", c.method, c.r)
		}
	}
	// A second JSON body replaces the first, and its Content-Type any set before.
	twice := GetRequest("k", "u").Header("Content-Type", "text/plain").JSON([]int{1}).JSON(nil)
	if string(twice.Body) != "null" || !reflect.DeepEqual(twice.Headers, []Header{{"content-type", "application/json"}}) {
		t.Errorf("twice: %q %+v", twice.Body, twice.Headers)
	}
}

func TestRequestBuilderCopiesShareNothing(t *testing.T) {
	base := GetRequest("k", "u").Header("A", "1").KeepHeader("ETag")
	// Room to grow in place: a builder appending into it would let a and b share.
	base.Headers = append(make([]Header, 0, 8), base.Headers...)
	base.KeepHeaders = append(make([]string, 0, 8), base.KeepHeaders...)
	a := base.Header("B", "2").KeepHeader("X").WithRetry()
	b := base.Header("C", "3").KeepHeader("Y")
	if len(base.Headers) != 1 || base.Retry || a.Headers[1].Name != "B" || b.Headers[1].Name != "C" {
		t.Errorf("headers: base %+v, a %+v, b %+v", base.Headers, a.Headers, b.Headers)
	}
	if a.KeepHeaders[1] != "X" || b.KeepHeaders[1] != "Y" || b.Retry {
		t.Errorf("keep: a %+v, b %+v", a.KeepHeaders, b.KeepHeaders)
	}
}

func TestRequestJSONPanicsOnAValueWithNoJSONForm(t *testing.T) {
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "request k") {
			t.Errorf("panic: %v", p)
		}
	}()
	GetRequest("k", "u").JSON(make(chan int))
}

// answers holds one answer of each kind, by name.
var answers = map[string]Answer{
	"created": {Key: "created", Response: &Response{Status: 201, Headers: []Header{{"ETag", `"v1"`}}, Body: []byte(`{"id": "r-1", "ttl": 300}`)}},
	"missing": {Key: "missing", Response: &Response{Status: 404, Body: []byte("no such record")}},
	"busy":    {Key: "busy", Response: &Response{Status: 429}},
	"down":    {Key: "down", Response: &Response{Status: 503, Body: []byte("\xffdown")}},
	"refused": {Key: "refused", Refused: "not-granted: https://dns.example.com"},
	"failed":  {Key: "failed", Failed: "timeout"},
}

func TestAnswerHelpersTellSuccessRefusalAndRetry(t *testing.T) {
	for name, want := range map[string]struct {
		response, success, refused, retryable bool
	}{
		"created": {true, true, false, false},
		"missing": {true, false, false, false},
		"busy":    {true, false, false, true},
		"down":    {true, false, false, true},
		"refused": {false, false, true, false},
		"failed":  {false, false, false, true},
	} {
		a := answers[name]
		got := struct{ response, success, refused, retryable bool }{
			a.Response != nil, a.Success() != nil, a.Refused != "", a.Retryable(),
		}
		if got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	if s := answers["created"].Success(); s != answers["created"].Response {
		t.Errorf("success: %+v", s)
	}
	for status, want := range map[uint16][2]bool{200: {true, false}, 299: {true, false}, 300: {false, false}, 499: {false, false}, 500: {false, true}} {
		a := Answer{Response: &Response{Status: status}}
		if got := [2]bool{a.Success() != nil, a.Retryable()}; got != want {
			t.Errorf("%d: success, retryable %v, want %v", status, got, want)
		}
	}
	if (Answer{}).Retryable() || (Answer{}).Success() != nil {
		t.Error("the zero answer: retryable or a success")
	}
}

func TestResponseReadsJSONTextAndHeaders(t *testing.T) {
	created := answers["created"].Success()
	var typed struct {
		ID  string `json:"id"`
		TTL int    `json:"ttl"`
	}
	if err := created.JSON(&typed); err != nil || typed.ID != "r-1" || typed.TTL != 300 {
		t.Errorf("typed: %+v, %v", typed, err)
	}
	var loose any
	if err := created.JSON(&loose); err != nil || loose.(map[string]any)["ttl"] != json.Number("300") {
		t.Errorf("loose: %#v, %v", loose, err)
	}
	if got := created.Text(); got != `{"id": "r-1", "ttl": 300}` {
		t.Errorf("text: %q", got)
	}
	if v, ok := created.Header("etag"); !ok || v != `"v1"` {
		t.Errorf("etag: %q, %v", v, ok)
	}
	missing := answers["missing"].Response
	if err := missing.JSON(&loose); err == nil || !strings.HasPrefix(err.Error(), "the answer's body: ") {
		t.Errorf("not JSON: %v", err)
	}
	trailing := &Response{Status: 200, Body: []byte(`{} {}`)}
	if err := trailing.JSON(&loose); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Errorf("trailing: %v", err)
	}
	if got := missing.Text(); got != "no such record" {
		t.Errorf("text: %q", got)
	}
	if got := answers["down"].Response.Text(); got != "\uFFFDdown" {
		t.Errorf("text: %q", got)
	}
}
