package wasmop

import "strings"

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
