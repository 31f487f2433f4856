package wasmop

// ObjectRef is one object to delete; with UID set, only an object with exactly that UID.
type ObjectRef struct {
	APIVersion, Kind, Name string
	Namespace, UID         *string
}

// Action is one step of a plan: exactly one of Apply (an object, created or updated by
// server-side apply; encoded as JSON) and Delete is set.
type Action struct {
	Apply  any
	Delete *ObjectRef
}

// EventType is Normal or Warning.
type EventType int

const (
	Normal EventType = iota
	Warning
)

// Event is a Kubernetes Event recorded on the primary object.
type Event struct {
	Type            EventType
	Reason, Message string
}

// Plan is the decision of one reconcile, built step by step:
//
//	plan := new(wasmop.Plan).Apply(pod).Normal("ScaledUp", "creating 1 pod(s)")
type Plan struct {
	Actions []Action
	// Status is the desired status of the primary object (encoded as JSON); nil leaves it.
	Status any
	Events []Event
	// RequeueAfterMs asks for another reconcile after that many milliseconds; nil for none.
	RequeueAfterMs *uint64
	// Requires lists the objects this decision needs. When they differ from those
	// [Observed.Required] holds, the host reads them and decides again, the plan unused; at
	// most three times in one reconcile.
	Requires []Requirement
	// Requests are sent outside the cluster after the plan's writes.
	Requests []OutboundRequest
}

// Apply adds a server-side apply of obj.
func (p *Plan) Apply(obj any) *Plan {
	p.Actions = append(p.Actions, Action{Apply: obj})
	return p
}

// Delete adds a deletion.
func (p *Plan) Delete(target ObjectRef) *Plan {
	p.Actions = append(p.Actions, Action{Delete: &target})
	return p
}

// SetStatus sets the desired status of the primary object.
func (p *Plan) SetStatus(status any) *Plan {
	p.Status = status
	return p
}

// Normal adds a Normal Event.
func (p *Plan) Normal(reason, message string) *Plan {
	p.Events = append(p.Events, Event{Normal, reason, message})
	return p
}

// Warning adds a Warning Event.
func (p *Plan) Warning(reason, message string) *Plan {
	p.Events = append(p.Events, Event{Warning, reason, message})
	return p
}

// RequeueAfter asks for another reconcile after ms milliseconds.
func (p *Plan) RequeueAfter(ms uint64) *Plan {
	p.RequeueAfterMs = &ms
	return p
}

// Require adds a requirement: objects the decision needs that no relation selects.
func (p *Plan) Require(r Requirement) *Plan {
	p.Requires = append(p.Requires, r)
	return p
}

// Request adds a request outside the cluster; its answer comes back under its key.
func (p *Plan) Request(r OutboundRequest) *Plan {
	p.Requests = append(p.Requests, r)
	return p
}

// Applied returns the objects this plan applies, in order (for tests).
func (p *Plan) Applied() []any {
	var out []any
	for _, a := range p.Actions {
		if a.Delete == nil {
			out = append(out, a.Apply)
		}
	}
	return out
}

// Deleted returns the objects this plan deletes, in order (for tests).
func (p *Plan) Deleted() []ObjectRef {
	var out []ObjectRef
	for _, a := range p.Actions {
		if a.Delete != nil {
			out = append(out, *a.Delete)
		}
	}
	return out
}
