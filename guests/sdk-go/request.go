package wasmop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Header is one HTTP header.
type Header struct {
	Name, Value string
}

// Credential is a header the host fills from a Secret the plugin never sees.
type Credential struct {
	// Header is the header's name, e.g. Authorization.
	Header string
	// Prefix is the text before the secret value, e.g. "Bearer ".
	Prefix string
	// Secret is the Secret, in the primary's namespace; the plugin must be granted get on
	// it.
	Secret string
	// Key is the Secret's key holding the value.
	Key string
}

// OutboundRequest is a request to a host outside the cluster, sent by the host after the
// plan's Kubernetes writes. Its answer comes back in [Observed.Answers] under Key.
type OutboundRequest struct {
	// Key is the plugin's key for it. While an answer is held under a key, a request with
	// the same key is not sent again; a plan that no longer carries the key lets it go.
	Key string
	// Method is GET, POST, PUT, PATCH or DELETE.
	Method string
	// URL is an absolute URL on a host the plugin declared (PluginInfo.OutboundHosts) and
	// an admin granted.
	URL string
	// Headers are sent with it.
	Headers []Header
	// Body is the body; nil for none.
	Body []byte
	// Credential is a header filled from a Secret; nil for none.
	Credential *Credential
	// IdempotencyKey is sent as Idempotency-Key, for an API that honours it; empty for
	// none.
	IdempotencyKey string
	// Retry lets the host send it again after a failure (with backoff).
	Retry bool
	// KeepHeaders names the response headers the answer keeps; the others are dropped.
	KeepHeaders []string
}

// NewRequest returns a request under key: method (GET, POST, PUT, PATCH or DELETE, in any
// case; sent uppercase) to url. Its methods return a changed copy, so a request is built in
// one expression:
//
//	wasmop.PostRequest("create", url).JSON(record).WithIdempotencyKey(uid + "-create").WithRetry()
//
// The steps that set a field of the same name are WithIdempotencyKey, WithRetry and
// WithCredential.
func NewRequest(key, method, url string) OutboundRequest {
	return OutboundRequest{Key: key, Method: strings.ToUpper(method), URL: url}
}

// GetRequest returns GET url under key.
func GetRequest(key, url string) OutboundRequest { return NewRequest(key, "GET", url) }

// PostRequest returns POST url under key.
func PostRequest(key, url string) OutboundRequest { return NewRequest(key, "POST", url) }

// PutRequest returns PUT url under key.
func PutRequest(key, url string) OutboundRequest { return NewRequest(key, "PUT", url) }

// DeleteRequest returns DELETE url under key.
func DeleteRequest(key, url string) OutboundRequest { return NewRequest(key, "DELETE", url) }

// Header returns r with a header added.
func (r OutboundRequest) Header(name, value string) OutboundRequest {
	// A new array: r and the copies made from it before never share their headers.
	r.Headers = append(r.Headers[:len(r.Headers):len(r.Headers)], Header{name, value})
	return r
}

// JSON returns r with v as the body, encoded as [Encode] does (compact, <, > and & not
// escaped), and content-type: application/json (replacing a Content-Type added before).
// It panics when v has no JSON form (a channel, a function, a cycle), as encoding a plan's
// objects would fail.
func (r OutboundRequest) JSON(v any) OutboundRequest {
	text, err := Encode(v)
	if err != nil {
		panic(fmt.Sprintf("request %s: the body is no JSON value: %v", r.Key, err))
	}
	r.Body = []byte(text)
	headers := make([]Header, 0, len(r.Headers)+1)
	for _, h := range r.Headers {
		if !strings.EqualFold(h.Name, "content-type") {
			headers = append(headers, h)
		}
	}
	r.Headers = append(headers, Header{"content-type", "application/json"})
	return r
}

// WithIdempotencyKey returns r sending key as Idempotency-Key, for an API that honours it.
func (r OutboundRequest) WithIdempotencyKey(key string) OutboundRequest {
	r.IdempotencyKey = key
	return r
}

// WithRetry returns r that the host may send again after a failure, a 429 or a 5xx (with
// backoff).
func (r OutboundRequest) WithRetry() OutboundRequest {
	r.Retry = true
	return r
}

// KeepHeader returns r keeping the response header name in the answer.
func (r OutboundRequest) KeepHeader(name string) OutboundRequest {
	r.KeepHeaders = append(r.KeepHeaders[:len(r.KeepHeaders):len(r.KeepHeaders)], name)
	return r
}

// WithCredential returns r with header filled from key key of Secret secret (the primary's
// namespace), after prefix: WithCredential("Authorization", "Bearer ", "dns-token",
// "token"). The plugin never sees the value.
func (r OutboundRequest) WithCredential(header, prefix, secret, key string) OutboundRequest {
	r.Credential = &Credential{Header: header, Prefix: prefix, Secret: secret, Key: key}
	return r
}

// Response is a response from outside the cluster.
type Response struct {
	// Status is the HTTP status.
	Status uint16
	// Headers are those the request asked to keep.
	Headers []Header
	// Body is the body, at most the host's cap.
	Body []byte
	// Truncated says that the body was cut at the cap.
	Truncated bool
}

// JSON decodes the body into v, as [encoding/json.Unmarshal] does but with numbers as
// [encoding/json.Number] when v holds any (as [Decode]); an error when the body is not one
// JSON value (a body cut at the cap seldom is).
func (r *Response) JSON(v any) error {
	d := json.NewDecoder(bytes.NewReader(r.Body))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("the answer's body: %w", err)
	}
	if d.More() {
		return errors.New("the answer's body: trailing data after the JSON value")
	}
	return nil
}

// Text returns the body as text; what is not UTF-8 is replaced with U+FFFD.
func (r *Response) Text() string {
	if utf8.Valid(r.Body) {
		return string(r.Body)
	}
	return strings.ToValidUTF8(string(r.Body), "\uFFFD")
}

// Header returns the value of the first header named name (in any case), if there is one.
func (r *Response) Header(name string) (string, bool) {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Value, true
		}
	}
	return "", false
}

// Answer is what came of a request, under its key: exactly one of Response, Refused and
// Failed is set.
type Answer struct {
	Key string
	// Response is the response, if one came.
	Response *Response
	// Refused is the rule by which the host refused to send the request.
	Refused string
	// Failed says why the request failed once sent, or tried: timeout, connection, TLS.
	Failed string
	// AtUnixMs is when the answer came, milliseconds since the Unix epoch.
	AtUnixMs int64
}

// Success returns the response when one came with a 2xx status, nil otherwise.
func (a Answer) Success() *Response {
	if a.Response != nil && a.Response.Status >= 200 && a.Response.Status < 300 {
		return a.Response
	}
	return nil
}

// Retryable says whether asking again may help: the request failed (timeout, connection,
// TLS) or the answer was 429 or 5xx. A refusal or a 4xx stays as it is until the request
// changes.
func (a Answer) Retryable() bool {
	if a.Response != nil {
		return a.Response.Status == 429 || a.Response.Status >= 500
	}
	return a.Failed != ""
}
