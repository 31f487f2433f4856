//! The PodReplica conformance suite: every implementation (Rust, Python, TypeScript, Go) passes
//! the same hand-written cases (`guests/conformance/podreplica`) through `wasmop test`, and
//! declares the same plugin (name, kinds, relations, permissions, the same CRD).

#[path = "support/mod.rs"]
mod support;

use std::process::Command;

use serde_json::Value;
use wasmop::runtime::{Limits, Sandbox};

/// The implementations: the component file and the version suffix each declares.
const IMPLEMENTATIONS: [(&str, &str); 4] = [
    ("podreplica.wasm", ""),
    ("podreplica_py.wasm", "-py"),
    ("podreplica_ts.wasm", "-ts"),
    ("podreplica_go.wasm", "-go"),
];

fn cases() -> std::path::PathBuf {
    support::repo().join("guests/conformance/podreplica")
}

#[test]
fn every_implementation_passes_every_case() {
    let count = std::fs::read_dir(cases())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "yaml")
        })
        .count();
    assert!(count >= 17, "{count} cases");
    for (file, _) in IMPLEMENTATIONS {
        let wasm = support::plugin_dir().join(file);
        assert!(
            wasm.is_file(),
            "{}: build it with `make polyglot`",
            wasm.display()
        );
        let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .arg("test")
            .arg(&wasm)
            .arg(cases())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{file}:\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("golden: {count} passed, 0 failed")),
            "{file}: {stdout}"
        );
    }
}

/// JSON with every number as a float: a CRD's `minimum: 0` is the same in any language.
fn numbers_as_floats(v: Value) -> Value {
    match v {
        Value::Number(n) => serde_json::json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.into_iter().map(numbers_as_floats).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| (k, numbers_as_floats(v)))
                .collect(),
        ),
        other => other,
    }
}

#[test]
fn every_implementation_declares_the_same_plugin() {
    let sandbox = Sandbox::new(1).unwrap();
    let mut declared = Vec::new();
    for (file, suffix) in IMPLEMENTATIONS {
        let plugin = sandbox
            .load(&support::plugin_bytes(file), Limits::default())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let mut info = plugin.info.clone();
        assert_eq!(info.version, format!("0.1.0{suffix}"), "{file}");
        let crd = info.crd.take().expect("a CRD");
        info.version.clear();
        declared.push((file, info, numbers_as_floats(crd)));
    }
    let (rust, rust_info, rust_crd) = &declared[0];
    for (file, info, crd) in &declared[1..] {
        assert_eq!(info, rust_info, "{file} declares otherwise than {rust}");
        assert_eq!(crd, rust_crd, "{file}'s CRD differs from {rust}'s");
    }
}

/// Every call slot busy with the largest component (CPython: 14 core instances in one
/// component instance), the active calls and the candidates' share at once: the pooling
/// allocator has room for all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_call_slot_fits_the_largest_component_at_once() {
    let slots = 8;
    let sandbox = Sandbox::new(slots).unwrap();
    let python = std::sync::Arc::new(
        sandbox
            .load(
                &support::plugin_bytes("podreplica_py.wasm"),
                Limits::default(),
            )
            .unwrap(),
    );
    let observed = wasmop::runtime::Observed::new(serde_json::json!({
        "apiVersion": "app.example.com/v1alpha1", "kind": "PodReplica",
        "metadata": {"name": "p", "namespace": "default", "uid": "u", "generation": 1},
        "spec": {"size": 3}}));
    let mut calls = Vec::new();
    for round in 0..4 {
        for i in 0..slots + wasmop::runtime::candidate_share(slots) {
            let (sandbox, python, observed) = (sandbox.clone(), python.clone(), observed.clone());
            calls.push(tokio::spawn(async move {
                let entry = wasmop::runtime::Entry::Reconcile;
                let object = format!("{round}-{i}");
                if i < slots {
                    sandbox.decide(python, entry, observed, object).await
                } else {
                    sandbox
                        .decide_candidate(python, entry, observed, object)
                        .await
                }
            }));
        }
    }
    for call in calls {
        let plan = call.await.unwrap().expect("the call ran").expect("a plan");
        assert_eq!(plan.actions.len(), 3);
    }
}
