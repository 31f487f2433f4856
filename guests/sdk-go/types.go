package wasmop

// Plugin is what a plugin implements; see the package documentation. A plugin may also
// implement [Validator], [Defaulter] and [Converter].
type Plugin interface {
	Info() PluginInfo
	Reconcile(o *Observed) (*Plan, error)
	// Cleanup is called only for a plugin that declares a finalizer.
	Cleanup(o *Observed) (*Plan, error)
}

// Validator is a [Plugin] that allows or refuses the creates, updates and deletes of its
// primary kind. Validate is called only when Info().Webhooks.Validate is set; a plugin that
// is no Validator allows everything.
type Validator interface {
	Validate(r *AdmissionRequest) Verdict
}

// Defaulter is a [Plugin] that fills in the defaults of an object of its primary kind on
// create and update. Default is called only when Info().Webhooks.Default is set; an error
// refuses the operation with its message. A plugin that is no Defaulter changes nothing.
type Defaulter interface {
	Default(obj Object) (Object, error)
}

// Converter is a [Plugin] that converts an object of its primary kind to another version of
// its CRD (apiVersion group/toVersion). Convert is called only when Info().Webhooks.Convert
// is set; an error fails the conversion with its message. A plugin that is no Converter
// refuses every conversion.
type Converter interface {
	Convert(obj Object, toVersion string) (Object, error)
}

// Selection says how the related objects of one relation are chosen for a primary object:
// [Owned] (the zero value), [Namespace] or [Referenced].
type Selection struct {
	kind selectionKind
	ref  Reference
}

type selectionKind int

const (
	owned selectionKind = iota
	namespace
	referenced
)

var (
	// Owned selects the objects whose controller ownerReference points at the primary
	// object.
	Owned = Selection{kind: owned}
	// Namespace selects every object of the kind in the primary object's namespace.
	Namespace = Selection{kind: namespace}
)

// Referenced selects the objects the primary object names at ref. The host caches only
// objects some primary names: a reference to one Secret does not cache every Secret of
// the namespace.
func Referenced(ref Reference) Selection { return Selection{kind: referenced, ref: ref} }

// Reference returns where the primary names the objects, if s is [Referenced].
func (s Selection) Reference() (Reference, bool) { return s.ref, s.kind == referenced }

// Reference is where a primary object names other objects.
type Reference struct {
	// NamePath is the dot-separated path of a field that holds a name
	// (spec.configRef.name). A path through a list names one object per item
	// (spec.volumes.secret.secretName); an empty or absent field names none.
	NamePath string
	// NamespacePath is the path of a namespace beside it (spec.configRef.namespace), for
	// a namespaced kind in another namespace than the primary's; empty: the primary's
	// namespace.
	NamespacePath string
}

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
	// Webhooks says which of [Validator], [Defaulter] and [Converter] the plugin implements:
	// the host serves each declared one as a webhook of the primary kind. None by default.
	Webhooks Webhooks
	// OutboundHosts are the hosts outside the cluster the plugin's plans may send requests
	// to, each scheme://host[:port] (https://api.example.com, https://*.example.com:8443).
	// A declaration alone reaches nothing: an admin grants hosts to the plugin.
	OutboundHosts []string
}

// Webhooks says which admission and conversion calls the host makes to a plugin.
type Webhooks struct {
	// Validate: [Validator.Validate] decides every create, update and delete of the
	// primary kind.
	Validate bool
	// Default: [Defaulter.Default] fills in an object of the primary kind on create and
	// update, before any validation.
	Default bool
	// Convert: [Converter.Convert] converts the primary kind between the versions of the
	// plugin's CRD (which must declare more than one).
	Convert bool
}

// Observed is everything a decision may depend on: the primary object, the related objects
// by relation name, the host's time (ms since the epoch) and a seed; the objects the plan's
// requirements brought and the answers to the requests earlier plans sent.
type Observed struct {
	Primary   Object
	Related   map[string][]Object
	NowUnixMs int64
	Seed      uint64
	// Required holds the objects of each [Requirement] by its name; a requirement the host
	// has not read yet is absent (not an empty list).
	Required map[string][]Object
	// Answers holds the answer to each [OutboundRequest] by its key.
	Answers map[string]Answer
}

// Objects returns the related objects of relation (none when the host sent none).
func (o *Observed) Objects(relation string) []Object { return o.Related[relation] }

// RequiredObjects returns the objects the requirement name brought, and whether the host
// has read them (false: the plan must require them, and the host decides again).
func (o *Observed) RequiredObjects(name string) ([]Object, bool) {
	objs, ok := o.Required[name]
	return objs, ok
}

// Answer returns the answer to the request with key, if one came.
func (o *Observed) Answer(key string) (Answer, bool) {
	a, ok := o.Answers[key]
	return a, ok
}
