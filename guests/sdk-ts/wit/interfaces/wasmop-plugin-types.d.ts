declare module 'wasmop:plugin/types@0.3.0' {
  /**
   * A Kubernetes kind, enough to reach its API and to write RBAC rules for it.
   */
  export interface KindRef {
    /**
     * API group; empty for the core group (pods, config maps, ...).
     */
    group: string,
    /**
     * API version inside the group, for example `v1` or `v1alpha1`.
     */
    version: string,
    /**
     * Kind, for example `Pod`.
     */
    kind: string,
    /**
     * Plural resource name used in URLs and RBAC rules, for example `pods`.
     */
    plural: string,
    /**
     * Whether objects of this kind live in a namespace.
     */
    namespaced: boolean,
  }
  /**
   * How the related objects of one relation are chosen for a primary object.
   * # Variants
   * 
   * ## `"owned"`
   * 
   * Objects whose controller ownerReference points at the primary object.
   * ## `"namespace"`
   * 
   * Every object of the kind in the primary object's namespace.
   */
  export type Selection = 'owned' | 'namespace';
  /**
   * A kind the plugin wants to see next to each primary object.
   */
  export interface Relation {
    /**
     * Name of the relation; `observed.related` groups objects under this name.
     */
    name: string,
    /**
     * The related kind.
     */
    kind: KindRef,
    /**
     * How objects are chosen.
     */
    selection: Selection,
    /**
     * Optional label selector (Kubernetes syntax, e.g. `app=web,tier!=db`) that
     * further restricts the objects.
     */
    labelSelector?: string,
    /**
     * The parts of each related object the plugin reads, as dot-separated paths
     * (`status.phase`, `spec.containers`; a path through a list applies to each of
     * its items). The host sends `apiVersion`, `kind`, `metadata` and these paths,
     * nothing else: parsing what a decision never reads is most of its cost, and the
     * host caches the smaller objects. An empty list sends the metadata only; `none`
     * sends whole objects. The host may send more than declared (another plugin
     * relating to the kind asked for it), never less.
     */
    fields?: Array<string>,
  }
  /**
   * A Kubernetes API verb a plan may need, and `adopt`.
   * # Variants
   * 
   * ## `"get"`
   * 
   * ## `"list"`
   * 
   * ## `"watch"`
   * 
   * ## `"create"`
   * 
   * ## `"update"`
   * 
   * ## `"patch"`
   * 
   * ## `"delete"`
   * 
   * ## `"adopt"`
   * 
   * Not an API verb: the plan may apply to an existing object of this kind that no
   * controller, or another one, controls (adoption). Without it the host refuses such
   * an apply; with it the plugin also needs `patch` on the kind.
   */
  export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'adopt';
  /**
   * Permission for the plans of a plugin: these verbs on this kind.
   */
  export interface Permission {
    /**
     * The kind the verbs apply to.
     */
    kind: KindRef,
    /**
     * The verbs.
     */
    verbs: Array<Verb>,
  }
  /**
   * What a plugin declares about itself. The host validates it when loading.
   */
  export interface PluginInfo {
    /**
     * Plugin name: a DNS-1123 label, stable across versions.
     */
    name: string,
    /**
     * Plugin version (semantic version recommended).
     */
    version: string,
    /**
     * The kind this plugin reconciles; one reconcile per object of this kind.
     */
    primary: KindRef,
    /**
     * The CustomResourceDefinition (JSON) the plugin defines for its primary kind,
     * if the primary kind is a custom resource.
     */
    crd?: string,
    /**
     * Related kinds the host watches and hands to the plugin.
     */
    relations: Array<Relation>,
    /**
     * Kinds and verbs the plugin's plans need; anything else is refused by the host.
     */
    permissions: Array<Permission>,
    /**
     * A finalizer name. When set, the host adds it to every primary object and calls
     * `cleanup` when the object is being deleted, removing the finalizer afterwards.
     */
    finalizer?: string,
  }
  /**
   * The related objects of one relation.
   */
  export interface RelatedObjects {
    /**
     * The relation's name, as declared in `plugin-info.relations`.
     */
    relation: string,
    /**
     * The objects, one JSON document each.
     */
    objects: Array<string>,
  }
  /**
   * Everything a decision may depend on. A decision is a pure function of this value.
   */
  export interface Observed {
    /**
     * The primary object (JSON).
     */
    primary: string,
    /**
     * Related objects grouped by relation, in the order the relations were declared.
     */
    related: Array<RelatedObjects>,
    /**
     * The current time, milliseconds since the Unix epoch, chosen by the host.
     */
    nowUnixMs: bigint,
    /**
     * A random seed chosen by the host; the same seed must give the same decision.
     */
    seed: bigint,
  }
  /**
   * A reference to one object, used for deletions.
   */
  export interface ObjectRef {
    /**
     * `apiVersion` of the object, e.g. `v1` or `apps/v1`.
     */
    apiVersion: string,
    /**
     * Kind of the object.
     */
    kind: string,
    /**
     * Namespace; absent for cluster-scoped objects.
     */
    namespace?: string,
    /**
     * Name of the object.
     */
    name: string,
    /**
     * UID; when set, the host deletes only an object with exactly this UID.
     */
    uid?: string,
  }
  /**
   * One change to the cluster.
   */
  export type Action = ActionApply | ActionDelete;
  /**
   * Create or update this object (JSON) by server-side apply.
   */
  export interface ActionApply {
    tag: 'apply',
    val: string,
  }
  /**
   * Delete this object.
   */
  export interface ActionDelete {
    tag: 'delete',
    val: ObjectRef,
  }
  /**
   * Severity of an event.
   * # Variants
   * 
   * ## `"normal"`
   * 
   * ## `"warning"`
   */
  export type EventType = 'normal' | 'warning';
  /**
   * A Kubernetes Event to record on the primary object.
   */
  export interface Event {
    /**
     * Normal or Warning.
     */
    eventType: EventType,
    /**
     * Short CamelCase reason, e.g. `PodCreated`.
     */
    reason: string,
    /**
     * Human-readable message.
     */
    message: string,
  }
  /**
   * The decision of one reconcile.
   */
  export interface Plan {
    /**
     * Changes to make, in order; the host may send consecutive creates of one kind
     * (generated names) or consecutive deletes of one kind together, their order
     * among themselves not kept.
     */
    actions: Array<Action>,
    /**
     * Desired `status` of the primary object (JSON), written through the status
     * subresource; absent to leave the status alone.
     */
    status?: string,
    /**
     * Events to record on the primary object.
     */
    events: Array<Event>,
    /**
     * Reconcile again after this many milliseconds, even if nothing changes.
     */
    requeueAfterMs?: bigint,
  }
  /**
   * Why a reconcile produced no plan.
   */
  export type ReconcileError = ReconcileErrorInvalidSpec | ReconcileErrorTransient | ReconcileErrorOther;
  /**
   * The primary object's spec is invalid; retrying will not help until it changes.
   * Reported on the object as a status condition and an Event.
   */
  export interface ReconcileErrorInvalidSpec {
    tag: 'invalid-spec',
    val: string,
  }
  /**
   * A temporary problem; the host retries with backoff.
   */
  export interface ReconcileErrorTransient {
    tag: 'transient',
    val: string,
  }
  /**
   * Anything else; retried with backoff.
   */
  export interface ReconcileErrorOther {
    tag: 'other',
    val: string,
  }
}
