//! Plain Rust types of the wasmop plugin contract (`wit/plugin.wit`).
//!
//! The host and the guest SDK both work with these types, never with generated bindings.
//! Objects that cross the boundary as JSON strings appear here as parsed
//! [`serde_json::Value`]s; the conversions live next to each side's bindings. Their serde
//! form (camelCase YAML/JSON) is what `wasmop plan` prints and golden cases compare.
//!
//! A decision reads an [`Observed`] state and answers a [`Plan`], built step by step:
//!
//! ```
//! use serde_json::json;
//! use wasmop_contract::{Observed, Plan};
//!
//! let observed = Observed::new(json!({"apiVersion": "example.com/v1", "kind": "Web",
//!     "metadata": {"name": "web", "namespace": "default", "uid": "u1"}}))
//!     .with_related("pods", vec![json!({"metadata": {"name": "web-1"}})]);
//! let pods = observed.related_values("pods").unwrap();
//!
//! let plan = Plan::new()
//!     .apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
//!         "metadata": {"name": "web"}, "data": {"pods": pods.len().to_string()}}))
//!     .normal("Counted", "1 pod")
//!     .status(&json!({"pods": pods.len()}))
//!     .requeue_after_ms(60_000);
//! assert_eq!(plan.applied().count(), 1);
//! // What `wasmop plan` prints and a golden case holds:
//! let printed = serde_json::to_value(&plan).unwrap();
//! assert_eq!(printed["requeueAfterMs"], 60_000);
//! assert_eq!(printed["events"][0]["reason"], "Counted");
//! ```

mod admission;
mod builder;
mod condition;
mod effect;
mod observed;
mod requirement;

pub use admission::{AdmissionRequest, FieldError, Operation, Verdict};
pub use condition::Condition;
pub use effect::{Answer, Credential, Header, OriginPattern, OutboundRequest, Outcome, Response};
pub use observed::Observed;
pub use requirement::{Matching, Requirement};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A Kubernetes kind with what is needed to reach its API and name it in RBAC rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KindRef {
    /// API group; empty for the core group.
    pub group: String,
    /// API version inside the group.
    pub version: String,
    /// Kind name.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
    /// Whether objects of this kind are namespaced.
    pub namespaced: bool,
}

impl KindRef {
    /// The `apiVersion` string of this kind (`v1`, `apps/v1`, ...).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The core `v1` Pod kind, as plugins declare it in relations and permissions.
    pub fn pod() -> KindRef {
        KindRef {
            group: String::new(),
            version: "v1".into(),
            kind: "Pod".into(),
            plural: "pods".into(),
            namespaced: true,
        }
    }

    /// Whether an object's `apiVersion` and `kind` name this kind.
    pub fn matches(&self, api_version: &str, kind: &str) -> bool {
        self.kind == kind && self.api_version() == api_version
    }
}

/// Where a primary object names other objects: the path of a field that holds a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reference {
    /// Dot-separated path of the name (`spec.configRef.name`); a path through a list names
    /// one object per item.
    pub name_path: String,
    /// Path of a namespace beside it; `None`: the primary's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_path: Option<String>,
}

/// How the related objects of a relation are chosen.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Selection {
    /// Objects controlled by the primary object (controller ownerReference).
    Owned,
    /// Every object of the kind in the primary object's namespace.
    Namespace,
    /// The objects the primary names (contract 0.4.0).
    Referenced(Reference),
}

/// A related kind a plugin watches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Relation {
    /// Relation name; observed objects are grouped under it.
    pub name: String,
    /// The related kind.
    pub kind: KindRef,
    /// How objects are chosen.
    pub selection: Selection,
    /// Optional label selector restricting the objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
    /// The parts of each object the plugin reads, as dot-separated paths (`status.phase`;
    /// a path through a list applies to each item). The host sends `apiVersion`, `kind`,
    /// `metadata` and these paths; `Some(vec![])` sends the metadata only, `None` whole
    /// objects. Declaring what a decision reads makes every call cheaper: the guest parses
    /// only that, and the host caches only that. The host may send more (another plugin
    /// asked for it), never less.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<String>>,
}

/// A Kubernetes API verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Verb {
    /// get
    Get,
    /// list
    List,
    /// watch
    Watch,
    /// create
    Create,
    /// update
    Update,
    /// patch
    Patch,
    /// delete
    Delete,
    /// Not an API verb: applying to an existing object of the kind that no controller, or
    /// another one, controls (adoption) is allowed. Never part of an RBAC rule.
    Adopt,
}

impl Verb {
    /// The verb as Kubernetes RBAC spells it (`adopt` is the host's own).
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::Adopt => "adopt",
        }
    }
}

/// Verbs a plan may use on a kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permission {
    /// The kind.
    pub kind: KindRef,
    /// The verbs.
    pub verbs: Vec<Verb>,
}

/// What a plugin declares about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginInfo {
    /// Plugin name (DNS-1123 label).
    pub name: String,
    /// Plugin version.
    pub version: String,
    /// The reconciled kind.
    pub primary: KindRef,
    /// The CRD the plugin defines, parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crd: Option<Value>,
    /// Related kinds.
    pub relations: Vec<Relation>,
    /// Kinds and verbs the plans need.
    pub permissions: Vec<Permission>,
    /// Finalizer name, for plugins that clean up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizer: Option<String>,
    /// The admission and conversion exports the plugin implements (contract 0.4.0).
    #[serde(default, skip_serializing_if = "Webhooks::is_none")]
    pub webhooks: Webhooks,
    /// Hosts outside the cluster its plans may send requests to (contract 0.4.0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outbound_hosts: Vec<String>,
}

/// Which of `validate`, `default` and `convert` a plugin implements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Webhooks {
    /// `validate`: every create, update and delete of the primary kind.
    #[serde(default)]
    pub validate: bool,
    /// `default`: fills in an object of the primary kind on create and update.
    #[serde(default)]
    pub default: bool,
    /// `convert`: between the versions of the plugin's CRD.
    #[serde(default)]
    pub convert: bool,
}

impl Webhooks {
    /// Whether none is declared.
    pub fn is_none(&self) -> bool {
        !(self.validate || self.default || self.convert)
    }
}

impl PluginInfo {
    /// Whether the plugin declared `verb` on the kind named by `api_version` and `kind`.
    pub fn allows(&self, api_version: &str, kind: &str, verb: Verb) -> bool {
        self.permissions
            .iter()
            .any(|p| p.kind.matches(api_version, kind) && p.verbs.contains(&verb))
    }
}

/// Reference to an object to delete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `apiVersion` of the object.
    pub api_version: String,
    /// Kind of the object.
    pub kind: String,
    /// Namespace, absent for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// UID precondition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// One change a plan asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// Server-side apply of this object.
    Apply(Value),
    /// Deletion of this object.
    Delete(ObjectRef),
}

/// Event severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventType {
    /// A normal event.
    Normal,
    /// A warning.
    Warning,
}

/// An Event to record on the primary object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Severity.
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// CamelCase reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

/// The decision of one reconcile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Changes, in order.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// Desired status of the primary object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    /// Events to record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
    /// Requeue delay in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_after_ms: Option<u64>,
    /// Objects the decision needs; when they are not those observed, the host reads them
    /// and decides again (contract 0.4.0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<Requirement>,
    /// Requests outside the cluster, sent after the writes (contract 0.4.0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<OutboundRequest>,
}

/// Why a plugin produced no plan (the plugin's own answer, not a sandbox fault).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
pub enum ReconcileError {
    /// The spec is invalid; retrying will not help.
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// A temporary problem; retried with backoff.
    #[error("transient error: {0}")]
    Transient(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}
