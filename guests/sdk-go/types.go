package wasmop

// Plugin is what a plugin implements; see the package documentation.
type Plugin interface {
	Info() PluginInfo
	Reconcile(o *Observed) (*Plan, error)
	// Cleanup is called only for a plugin that declares a finalizer.
	Cleanup(o *Observed) (*Plan, error)
}

// Selection says how the related objects of one relation are chosen for a primary object.
type Selection int

const (
	// Owned: objects whose controller ownerReference points at the primary object.
	Owned Selection = iota
	// Namespace: every object of the kind in the primary object's namespace.
	Namespace
)

// Verb is a Kubernetes API verb a plan may need, or Adopt (apply to an object another
// controller, or none, controls).
type Verb int

const (
	Get Verb = iota
	List
	Watch
	Create
	Update
	Patch
	Delete
	Adopt
)

// KindRef is a Kubernetes kind, enough to reach its API and to write RBAC rules for it.
type KindRef struct {
	Group, Version, Kind, Plural string
	Namespaced                   bool
}

// APIVersion is group/version, or version for the core group.
func (k KindRef) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// Relation is a kind the plugin wants to see next to each primary object, under Name.
type Relation struct {
	Name      string
	Kind      KindRef
	Selection Selection
	// LabelSelector narrows the objects; nil for none.
	LabelSelector *string
	// Fields lists the dot-separated paths the decision reads besides the metadata (the
	// host sends only those); nil sends whole objects.
	Fields []string
}

// Permission grants these verbs on this kind to the plugin's plans; anything else is refused.
type Permission struct {
	Kind  KindRef
	Verbs []Verb
}

// PluginInfo is what a plugin declares about itself; the host validates it when loading.
type PluginInfo struct {
	Name, Version string
	Primary       KindRef
	// CRD is the primary kind's CustomResourceDefinition as JSON; nil for none.
	CRD         []byte
	Relations   []Relation
	Permissions []Permission
	// Finalizer is the finalizer the host manages for the plugin's Cleanup; nil for none.
	Finalizer *string
}

// Observed is everything a decision may depend on: the primary object, the related objects
// by relation name, the host's time (ms since the epoch) and a seed.
type Observed struct {
	Primary   Object
	Related   map[string][]Object
	NowUnixMs int64
	Seed      uint64
}

// Objects returns the related objects of relation (none when the host sent none).
func (o *Observed) Objects(relation string) []Object { return o.Related[relation] }
