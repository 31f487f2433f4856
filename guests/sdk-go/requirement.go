package wasmop

// Requirement asks for objects a decision needs that no relation selects: the host reads
// them and decides again with them in [Observed.Required] under Name. They are read, not
// watched: a change to them does not wake the primary.
type Requirement struct {
	// Name is the key under which they come back.
	Name string
	// Kind is their kind; the plugin needs get (by name) or list (by labels) on it.
	Kind KindRef
	// Namespace is their namespace; empty: the primary's. Ignored for a cluster-scoped
	// kind.
	Namespace string
	// Matching says which objects: [ByName] or [ByLabels].
	Matching Matching
}

// Matching says which objects of a kind a [Requirement] selects.
type Matching struct {
	byLabels bool
	value    string
}

// ByName selects the object named name.
func ByName(name string) Matching { return Matching{value: name} }

// ByLabels selects the objects with these labels (Kubernetes selector syntax).
func ByLabels(selector string) Matching { return Matching{byLabels: true, value: selector} }

// Name returns the name m selects, if it selects by name.
func (m Matching) Name() (string, bool) { return m.value, !m.byLabels }

// Labels returns the label selector of m, if it selects by labels.
func (m Matching) Labels() (string, bool) { return m.value, m.byLabels }
