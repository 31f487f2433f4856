package export_wit_world

import (
	"reflect"
	"testing"

	"wasmop/sdk"
	t "wasmop/sdk/wit/imports/wasmop_plugin_types"
)

// createOnce creates a record outside once, then keeps its id: the request builder and the
// answer helpers, through the exports.
type createOnce struct{ fake }

func (createOnce) Reconcile(o *wasmop.Observed) (*wasmop.Plan, error) {
	created, ok := o.Answer("create")
	if !ok {
		return new(wasmop.Plan).Request(wasmop.PostRequest("create", "https://api.example.com/records").
			JSON(map[string]string{"name": "www", "value": "é"}).
			WithIdempotencyKey("u-create").
			WithCredential("Authorization", "Bearer ", "token", "value").
			KeepHeader("Location").
			WithRetry()), nil
	}
	r := created.Success()
	if r == nil {
		return new(wasmop.Plan).SetStatus(map[string]bool{"retryable": created.Retryable()}).RequeueAfter(2000), nil
	}
	var body struct {
		ID string `json:"id"`
	}
	if err := r.JSON(&body); err != nil {
		return nil, wasmop.Transient("%v", err)
	}
	at, _ := r.Header("location")
	return new(wasmop.Plan).SetStatus(map[string]string{"id": body.ID, "at": at}), nil
}

func TestGlueRequestBuilderAndAnswerHelpers(tt *testing.T) {
	Register(createOnce{})
	plan := Reconcile(t.Observed{Primary: `{}`}).Ok()
	if len(plan.Requests) != 1 {
		tt.Fatalf("plan: %+v", plan)
	}
	r := plan.Requests[0]
	if r.Key != "create" || r.Method != "POST" || r.Url != "https://api.example.com/records" ||
		!reflect.DeepEqual(r.Headers, []t.Header{{Name: "content-type", Value: "application/json"}}) ||
		string(r.Body.Some()) != `{"name":"www","value":"é"}` ||
		r.Credential.Some() != (t.Credential{Header: "Authorization", Prefix: "Bearer ", Secret: "token", Key: "value"}) ||
		r.IdempotencyKey.Some() != "u-create" || !r.Retry || !reflect.DeepEqual(r.KeepHeaders, []string{"Location"}) {
		tt.Errorf("request: %+v", r)
	}

	answered := func(outcome t.Outcome) t.Plan {
		return Reconcile(t.Observed{Primary: `{}`, Answers: []t.Answer{{Key: "create", Outcome: outcome, AtUnixMs: 1}}}).Ok()
	}
	location := []t.Header{{Name: "Location", Value: "/records/r-1"}}
	done := answered(t.MakeOutcomeResponse(t.Response{Status: 201, Headers: location, Body: []uint8(`{"id": "r-1"}`)}))
	if done.Status.Some() != `{"at":"/records/r-1","id":"r-1"}` || len(done.Requests) != 0 {
		tt.Errorf("created: %+v", done)
	}
	for name, c := range map[string]struct {
		outcome t.Outcome
		status  string
	}{
		"503":     {t.MakeOutcomeResponse(t.Response{Status: 503}), `{"retryable":true}`},
		"404":     {t.MakeOutcomeResponse(t.Response{Status: 404}), `{"retryable":false}`},
		"refused": {t.MakeOutcomeRefused("not-granted"), `{"retryable":false}`},
		"failed":  {t.MakeOutcomeFailed("timeout"), `{"retryable":true}`},
	} {
		if got := answered(c.outcome).Status.Some(); got != c.status {
			tt.Errorf("%s: status %s, want %s", name, got, c.status)
		}
	}
	html := t.Answer{Key: "create", Outcome: t.MakeOutcomeResponse(t.Response{Status: 200, Body: []uint8("<html>")})}
	if got := Reconcile(t.Observed{Primary: `{}`, Answers: []t.Answer{html}}).Err(); got.Tag() != t.ReconcileError_Transient {
		tt.Errorf("a body that is not JSON: error %+v", got)
	}
}
