declare module 'wasmop:plugin/types@0.4.0' {
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
   * Where a primary object names other objects: the dot-separated path of a field that
   * holds a name (`spec.configRef.name`). A path through a list names one object per item
   * (`spec.volumes.secret.secretName`); an empty or absent field names none.
   */
  export interface Reference {
    /**
     * The path of the name.
     */
    namePath: string,
    /**
     * The path of a namespace beside it (`spec.configRef.namespace`), for a namespaced
     * kind in another namespace than the primary's; absent: the primary's namespace.
     * Ignored for a cluster-scoped kind.
     */
    namespacePath?: string,
  }
  /**
   * How the related objects of one relation are chosen for a primary object.
   */
  export type Selection = SelectionOwned | SelectionNamespace | SelectionReferenced;
  /**
   * Objects whose controller ownerReference points at the primary object.
   */
  export interface SelectionOwned {
    tag: 'owned',
  }
  /**
   * Every object of the kind in the primary object's namespace.
   */
  export interface SelectionNamespace {
    tag: 'namespace',
  }
  /**
   * The objects the primary names. The host caches only objects some primary names
   * (and the metadata of the kind, to see them change): a reference to one Secret
   * does not cache every Secret of the namespace.
   */
  export interface SelectionReferenced {
    tag: 'referenced',
    val: Reference,
  }
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
   * The admission and conversion exports a plugin implements.
   */
  export interface Webhooks {
    /**
     * `validate` decides every create, update and delete of the primary kind.
     */
    validate: boolean,
    /**
     * `default` fills in an object of the primary kind on create and update, before
     * any validation.
     */
    'default': boolean,
    /**
     * `convert` converts the primary kind between the versions of the plugin's CRD
     * (which must declare more than one).
     */
    convert: boolean,
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
    /**
     * Which of `validate`, `default` and `convert` the plugin implements: the host serves
     * each as a webhook of the primary kind, and only those declared.
     */
    webhooks: Webhooks,
    /**
     * Hosts outside the cluster the plugin's plans may send requests to, each
     * `scheme://host[:port]` (`https://api.example.com`, `https://*.example.com:8443`).
     * A declaration alone reaches nothing: an admin grants hosts to the plugin.
     */
    outboundHosts: Array<string>,
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
   * Which objects of a kind a requirement selects.
   */
  export type Matching = MatchingName | MatchingLabels;
  /**
   * The object of this name.
   */
  export interface MatchingName {
    tag: 'name',
    val: string,
  }
  /**
   * The objects with these labels (Kubernetes selector syntax).
   */
  export interface MatchingLabels {
    tag: 'labels',
    val: string,
  }
  /**
   * Objects a decision needs that no relation selects. The host reads them and decides
   * again with them (read, not watched: a change to them does not wake the primary).
   */
  export interface Requirement {
    /**
     * The key under which they come back in `observed.required`.
     */
    name: string,
    /**
     * Their kind; the plugin needs `get` (by name) or `list` (by labels) on it.
     */
    kind: KindRef,
    /**
     * Their namespace; absent: the primary's. Ignored for a cluster-scoped kind.
     */
    namespace?: string,
    /**
     * Which objects.
     */
    matching: Matching,
  }
  /**
   * One HTTP header.
   */
  export interface Header {
    /**
     * Its name.
     */
    name: string,
    /**
     * Its value.
     */
    value: string,
  }
  /**
   * A header the host fills from a Secret the guest never sees.
   */
  export interface Credential {
    /**
     * The header's name, e.g. `Authorization`.
     */
    header: string,
    /**
     * Text before the secret value, e.g. `Bearer `.
     */
    prefix: string,
    /**
     * The Secret, in the primary's namespace; the plugin must be granted `get` on it.
     */
    secret: string,
    /**
     * Its key.
     */
    key: string,
  }
  /**
   * A request to a host outside the cluster, sent by the host after the plan's
   * Kubernetes writes. Its answer comes back in `observed.answers` under its key.
   */
  export interface OutboundRequest {
    /**
     * The plugin's key for it. While an answer is held under a key, a request with the
     * same key is not sent again; a plan that no longer carries the key lets it go.
     */
    key: string,
    /**
     * `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
     */
    method: string,
    /**
     * An absolute URL on a host the plugin declared and an admin granted.
     */
    url: string,
    /**
     * Headers to send.
     */
    headers: Array<Header>,
    /**
     * The body, if any.
     */
    body?: Uint8Array,
    /**
     * A header filled from a Secret.
     */
    credential?: Credential,
    /**
     * Sent as `Idempotency-Key`, for an API that honours it.
     */
    idempotencyKey?: string,
    /**
     * The request may be sent again after a failure (the host retries with backoff).
     */
    retry: boolean,
    /**
     * The response headers the answer keeps (by name); the others are dropped.
     */
    keepHeaders: Array<string>,
  }
  /**
   * A response from outside the cluster.
   */
  export interface Response {
    /**
     * The HTTP status.
     */
    status: number,
    /**
     * The headers asked for in `keep-headers`.
     */
    headers: Array<Header>,
    /**
     * The body, at most the host's cap.
     */
    body: Uint8Array,
    /**
     * Whether the body was cut at the cap.
     */
    truncated: boolean,
  }
  /**
   * What came of a request.
   */
  export type Outcome = OutcomeResponse | OutcomeRefused | OutcomeFailed;
  /**
   * An answer came.
   */
  export interface OutcomeResponse {
    tag: 'response',
    val: Response,
  }
  /**
   * The host refused to send it; the rule that refused it.
   */
  export interface OutcomeRefused {
    tag: 'refused',
    val: string,
  }
  /**
   * It was sent, or tried, and failed: timeout, connection, TLS.
   */
  export interface OutcomeFailed {
    tag: 'failed',
    val: string,
  }
  /**
   * The answer to a request, under the plugin's key.
   */
  export interface Answer {
    /**
     * The request's key.
     */
    key: string,
    /**
     * What came of it.
     */
    outcome: Outcome,
    /**
     * When it came, milliseconds since the Unix epoch.
     */
    atUnixMs: bigint,
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
    /**
     * The objects the plan's `requires` asked for, grouped by requirement name: absent
     * from the first decision of a reconcile that asks for new ones.
     */
    required: Array<RelatedObjects>,
    /**
     * The answers to the requests earlier plans sent for this object, one per key
     * still asked for.
     */
    answers: Array<Answer>,
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
    /**
     * Objects this decision needs. When they differ from those `observed.required`
     * holds, the host reads them and decides again, the plan unused; at most three
     * times in one reconcile (a fourth is an error).
     */
    requires: Array<Requirement>,
    /**
     * Requests outside the cluster, sent after the plan's writes.
     */
    requests: Array<OutboundRequest>,
  }
  /**
   * What is asked of the admission webhook.
   * # Variants
   * 
   * ## `"create"`
   * 
   * ## `"update"`
   * 
   * ## `"delete"`
   */
  export type Operation = 'create' | 'update' | 'delete';
  /**
   * A create, update or delete of an object of the primary kind, to be allowed or not.
   */
  export interface AdmissionRequest {
    /**
     * The operation.
     */
    operation: Operation,
    /**
     * The object as it would be stored (JSON); absent on delete.
     */
    object?: string,
    /**
     * The object before (JSON), on update and delete.
     */
    oldObject?: string,
    /**
     * The user asking.
     */
    user: string,
    /**
     * Whether nothing will be stored (`kubectl apply --dry-run=server`).
     */
    dryRun: boolean,
  }
  /**
   * What is wrong with one field.
   */
  export interface FieldError {
    /**
     * The field's path, e.g. `spec.schedule`.
     */
    path: string,
    /**
     * The value refused, as JSON; absent to leave it out of the message.
     */
    value?: string,
    /**
     * Why.
     */
    detail: string,
  }
  /**
   * The answer of `validate`.
   */
  export interface Verdict {
    /**
     * Whether the operation may go on.
     */
    allowed: boolean,
    /**
     * For a refusal: what is wrong with which field. The host words the refusal as the
     * API server words an invalid object (`… is invalid: spec.schedule: Invalid value:
     * "x": …`).
     */
    fields: Array<FieldError>,
    /**
     * For a refusal with no field to blame: the message.
     */
    message?: string,
    /**
     * Warnings shown to the client (`kubectl` prints them), allowed or not.
     */
    warnings: Array<string>,
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
