//! A hostile plugin for the host's tests, written against the raw bindings so that it can
//! break the contract in ways the SDK would not allow. Its behaviour is chosen per call by
//! the primary object's `spec.mode`:
//!
//! - `ok`: an empty plan with status `{"mode": "ok"}` (a healthy answer);
//! - `spin`: loops forever;
//! - `bomb`: allocates without end;
//! - `panic`: panics with a known message;
//! - `badjson`: returns an apply action whose object is not JSON;
//! - `huge`: returns a plan of `spec.count` (default 1,000,000) actions;
//! - `invalid`: answers `invalid-spec`;
//! - `sleep`: sleeps for an hour (`std::thread::sleep`), then answers like `ok`;
//! - `sleep-loop`: sleeps a millisecond at a time, for ever;
//! - `wait`: waits for an hour to pass on the monotonic clock, checking without sleeping;
//! - `stdin`: reads stdin to its end, then answers like `ok`;
//! - `connect`: opens a TCP connection to 127.0.0.1:6443 (`std::net`), then answers like
//!   `ok` (it imports `wasi:sockets`, as language runtimes built on wasi-libc do);
//! - `events`: a plan of `spec.count` (default 1,000,000) empty Events;
//! - `long-error`: answers `other` with a message of `spec.count` bytes (default 50 MiB);
//! - `long-status`: a status of `spec.count` bytes (default 16 MiB);
//! - `amplify`: a status `[0,0,…]` of `spec.count` bytes (default 8,000,005): within the
//!   output budget as text, some 130 MiB once parsed; requeued every second;
//! - `remember`: counts its calls in a zero-initialised static and overwrites an initialised
//!   one, answering status `{"calls": N, "seed": S}`: from a fresh instance always
//!   `{"calls": 1, "seed": 1592651789}` (the statics as the module's image has them).
//!
//! - `attack-*`: one plan a multi-tenant host must refuse (see [`attacks`]): a pod in
//!   another namespace, a ClusterRoleBinding, a Secret, adoption of a foreign ConfigMap, an
//!   ownerReference to a foreign object, a privileged pod, a WasmPlugin.
//!
//! It declares `pods: create` (feature `more-permissions`: `configmaps: create, patch` too,
//! a version that asks for more than its ServiceAccount holds), a relation to the pods it
//! owns (feature `unwatchable`: to the namespace's `gadgets.missing.wasmop.dev` too, a kind
//! no CRD of the repository defines) and a finalizer; its `cleanup` records a `CleanedUp` event and lets go, except in
//! mode `stuck-cleanup`, where it answers `invalid-spec` for ever.
#![allow(unsafe_code)]

mod attacks;

use std::sync::atomic::{AtomicU64, Ordering};

mod bindings {
    #![allow(missing_docs, clippy::all)]
    wit_bindgen::generate!({ world: "plugin", path: "../../wit" });
}

use bindings::wasmop::plugin::types::{
    Action, KindRef, Observed, Permission, Plan, PluginInfo, ReconcileError, Relation, Selection,
    Verb,
};

struct Hostile;

fn kind() -> KindRef {
    KindRef {
        group: "test.wasmop.dev".into(),
        version: "v1".into(),
        kind: "Hostile".into(),
        plural: "hostiles".into(),
        namespaced: true,
    }
}

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"hostiles.test.wasmop.dev"},
"spec":{"group":"test.wasmop.dev","scope":"Namespaced",
"names":{"kind":"Hostile","plural":"hostiles","singular":"hostile","listKind":"HostileList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
"schema":{"openAPIV3Schema":{"type":"object","properties":{
"spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
"status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}}"#;

/// The version, marked for the builds that declare more.
const VERSION: &str = if cfg!(feature = "more-permissions") {
    "0.1.0-more"
} else if cfg!(feature = "unwatchable") {
    "0.1.0-unwatchable"
} else {
    "0.1.0"
};

fn core_kind(kind: &str, plural: &str) -> KindRef {
    KindRef {
        group: String::new(),
        version: "v1".into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced: true,
    }
}

fn permissions() -> Vec<Permission> {
    let mut p = vec![
        Permission {
            kind: kind(),
            verbs: vec![Verb::Get],
        },
        Permission {
            kind: core_kind("Pod", "pods"),
            verbs: vec![Verb::Create],
        },
    ];
    if cfg!(feature = "more-permissions") {
        p.push(Permission {
            kind: core_kind("ConfigMap", "configmaps"),
            verbs: vec![Verb::Create, Verb::Patch],
        });
    }
    p
}

/// Owned pods; with feature `unwatchable`, every Gadget of the namespace too.
fn relations() -> Vec<Relation> {
    let mut r = vec![Relation {
        name: "pods".into(),
        kind: core_kind("Pod", "pods"),
        selection: Selection::Owned,
        label_selector: None,
        fields: None,
    }];
    if cfg!(feature = "unwatchable") {
        r.push(Relation {
            name: "gadgets".into(),
            kind: KindRef {
                group: "missing.wasmop.dev".into(),
                version: "v1".into(),
                kind: "Gadget".into(),
                plural: "gadgets".into(),
                namespaced: true,
            },
            selection: Selection::Namespace,
            label_selector: None,
            fields: Some(vec![]),
        });
    }
    r
}

/// `spec.count` of the primary, or `default`.
fn count(primary: &serde_json::Value, default: usize) -> usize {
    primary
        .pointer("/spec/count")
        .and_then(|c| c.as_u64())
        .map_or(default, |c| c as usize)
}

/// Calls of mode `remember` in this instance: zero in the module's image (`.bss`).
static CALLS: AtomicU64 = AtomicU64::new(0);
/// Initialised in the module's image (`.data`); mode `remember` overwrites it.
static SEED: AtomicU64 = AtomicU64::new(0x5EED_F00D);

impl bindings::Guest for Hostile {
    fn info() -> PluginInfo {
        if cfg!(feature = "trap-info") {
            panic!("hostile plugin built to trap in info()");
        }
        PluginInfo {
            name: "hostile".into(),
            version: VERSION.into(),
            primary: kind(),
            crd: Some(CRD.into()),
            relations: relations(),
            permissions: permissions(),
            finalizer: Some("test.wasmop.dev/cleanup".into()),
            webhooks: bindings::wasmop::plugin::types::Webhooks {
                validate: true,
                default: false,
                convert: false,
            },
            outbound_hosts: Vec::new(),
        }
    }

    fn reconcile(observed: Observed) -> Result<Plan, ReconcileError> {
        let primary: serde_json::Value = serde_json::from_str(&observed.primary)
            .map_err(|e| ReconcileError::Other(e.to_string()))?;
        let mode = primary
            .pointer("/spec/mode")
            .and_then(|m| m.as_str())
            .unwrap_or("ok")
            .to_string();
        let empty = Plan {
            actions: vec![],
            status: Some(format!(r#"{{"mode":"{mode}","version":"{VERSION}"}}"#)),
            events: vec![],
            requeue_after_ms: None,
            requires: vec![],
            requests: vec![],
        };
        if let Some(action) = attacks::plan(&mode, &primary) {
            return Ok(Plan {
                actions: vec![action],
                ..empty
            });
        }
        match mode.as_str() {
            "spin" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "pollables" => {
                // Every pollable is an entry in the host's resource table: hold them all.
                let mut held = Vec::new();
                loop {
                    held.push(wasip2::clocks::monotonic_clock::subscribe_duration(
                        3_600_000_000_000,
                    ));
                    std::hint::black_box(&held);
                }
            }
            "panic" => panic!("hostile plugin panicked on purpose"),
            "badjson" => Ok(Plan {
                actions: vec![Action::Apply("{this is not json".into())],
                ..empty
            }),
            "huge" => {
                let actions = (0..count(&primary, 1_000_000))
                    .map(|_| Action::Apply(String::new()))
                    .collect();
                Ok(Plan { actions, ..empty })
            }
            "invalid" => Err(ReconcileError::InvalidSpec(
                "mode `invalid` asked for it".into(),
            )),
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(3600));
                Ok(empty)
            }
            "sleep-loop" => loop {
                std::thread::sleep(std::time::Duration::from_millis(1));
            },
            "wait" => {
                let start = std::time::Instant::now();
                while start.elapsed() < std::time::Duration::from_secs(3600) {
                    std::hint::spin_loop();
                }
                Ok(empty)
            }
            "connect" => {
                std::net::TcpStream::connect("127.0.0.1:6443")
                    .map_err(|e| ReconcileError::Other(format!("connect: {e}")))?;
                Ok(empty)
            }
            "stdin" => {
                let mut input = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut input)
                    .map_err(|e| ReconcileError::Other(e.to_string()))?;
                Ok(empty)
            }
            "events" => {
                let events = (0..count(&primary, 1_000_000))
                    .map(|_| bindings::wasmop::plugin::types::Event {
                        event_type: bindings::wasmop::plugin::types::EventType::Normal,
                        reason: String::new(),
                        message: String::new(),
                    })
                    .collect();
                Ok(Plan { events, ..empty })
            }
            "remember" => {
                let calls = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
                let seed = SEED.swap(0, Ordering::Relaxed);
                Ok(Plan {
                    status: Some(format!(r#"{{"calls":{calls},"seed":{seed}}}"#)),
                    ..empty
                })
            }
            "long-error" => Err(ReconcileError::Other("e".repeat(count(&primary, 50 << 20)))),
            "long-status" => Ok(Plan {
                status: Some(format!(
                    r#"{{"text":"{}"}}"#,
                    "s".repeat(count(&primary, 16 << 20))
                )),
                ..empty
            }),
            "amplify" => {
                // Small as text, huge parsed: `[0,0,…]` of `spec.count` bytes (default
                // 8,000,005, within the 8 MiB output budget), asked again every second.
                let elements = count(&primary, 8_000_005).saturating_sub(1) / 2;
                let mut text = String::with_capacity(2 * elements + 1);
                text.push('[');
                for i in 0..elements {
                    text.push_str(if i + 1 == elements { "0" } else { "0," });
                }
                text.push(']');
                Ok(Plan {
                    status: Some(text),
                    requeue_after_ms: Some(1000),
                    ..empty
                })
            }
            _ => Ok(empty),
        }
    }

    fn cleanup(observed: Observed) -> Result<Plan, ReconcileError> {
        if observed.primary.contains(r#""mode":"stuck-cleanup""#) {
            return Err(ReconcileError::InvalidSpec(
                "mode `stuck-cleanup`: this cleanup can never succeed".into(),
            ));
        }
        Ok(Plan {
            actions: vec![],
            status: None,
            events: vec![bindings::wasmop::plugin::types::Event {
                event_type: bindings::wasmop::plugin::types::EventType::Normal,
                reason: "CleanedUp".into(),
                message: "cleanup ran before deletion".into(),
            }],
            requeue_after_ms: None,
            requires: vec![],
            requests: vec![],
        })
    }

    /// Mode `trap-in-validate` panics, `spin-in-validate` never returns; others allow.
    fn validate(
        request: bindings::wasmop::plugin::types::AdmissionRequest,
    ) -> bindings::wasmop::plugin::types::Verdict {
        let object = request.object.unwrap_or_default();
        if object.contains(r#""mode":"trap-in-validate""#) {
            panic!("mode `trap-in-validate`: validate traps");
        }
        if object.contains(r#""mode":"spin-in-validate""#) {
            let mut x: u64 = 0;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        bindings::wasmop::plugin::types::Verdict {
            allowed: true,
            fields: vec![],
            message: None,
            warnings: vec![],
        }
    }

    fn default(object: String) -> Result<String, String> {
        Ok(object)
    }

    fn convert(_object: String, to_version: String) -> Result<String, String> {
        Err(format!(
            "the hostile plugin does not convert (asked for {to_version})"
        ))
    }
}

bindings::export!(Hostile with_types_in bindings);
