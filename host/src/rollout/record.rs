//! Recording decisions as golden cases: what the plugin observed, exactly as it saw it, and
//! the outcome it returned, in the format `wasmop test` and `wasmop replay` read.
//!
//! Files go to `DIR/PLUGIN/NNNNNNNN.yaml`, numbered in order; each plugin keeps at most
//! `max` of them (the oldest is deleted), and a decision made while the writer is behind is
//! not recorded (a bounded sample, never a slower reconcile). A decision that observed a
//! Secret is never recorded, and neither is any Secret. Secrets are judged by the resource
//! as well as by the kind an object names: a plugin whose primary or relation is the
//! Secrets resource (core group, plural `secrets`, whatever kind name it declares; the
//! declaration was resolved through discovery when the version was offered) is never
//! recorded.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::cases::golden::Case;
use crate::cases::input::to_yaml;
use crate::runtime::{KindRef, Observed, Outcome, PluginInfo};

/// Decisions waiting for the writer; more are dropped.
pub const QUEUE: usize = 256;

/// One decision to record.
#[derive(Debug, Clone)]
pub struct Decision {
    /// Plugin name.
    pub plugin: String,
    /// Plugin version that decided.
    pub version: String,
    /// `namespace/name` of the primary.
    pub object: String,
    /// What the plugin observed.
    pub observed: Observed,
    /// What it returned.
    pub outcome: Outcome,
    /// Whether the plugin reads Secrets ([`reads_secrets`]): then nothing is recorded.
    pub reads_secrets: bool,
}

/// Whether `k` names the Secrets resource: the core group's `secrets`, or kind `Secret`.
pub fn is_secrets(k: &KindRef) -> bool {
    k.group.is_empty() && (k.plural == "secrets" || k.kind == "Secret")
}

/// Whether the plugin's primary or one of its relations is the Secrets resource, or it may
/// write Secrets (its plans would carry their data). A plugin that may only read Secrets
/// (a credential for its requests, or Secrets its plans ask for) is recorded, except the
/// decisions that observed one ([`case_of`]).
pub fn reads_secrets(info: &PluginInfo) -> bool {
    use crate::runtime::Verb;
    is_secrets(&info.primary)
        || info.relations.iter().any(|r| is_secrets(&r.kind))
        || info.permissions.iter().any(|p| {
            is_secrets(&p.kind)
                && p.verbs
                    .iter()
                    .any(|v| matches!(v, Verb::Create | Verb::Update | Verb::Patch))
        })
}

/// How recording goes for one plugin, as the writer last saw it: shown in the WasmPlugin's
/// `status.recording`, so that a directory the host cannot write (a read-only root file
/// system without a volume there) is seen where the recording was asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recording {
    /// Cases written since the host started.
    pub cases: u64,
    /// Why the last case could not be written; `None` once one is written again.
    pub error: Option<String>,
}

type Recordings = Arc<Mutex<BTreeMap<String, Recording>>>;

/// Writes recorded decisions on a thread of its own.
#[derive(Debug)]
pub struct CaseRecorder {
    dir: PathBuf,
    default_on: bool,
    tx: SyncSender<Decision>,
    recordings: Recordings,
}

impl CaseRecorder {
    /// A recorder writing under `dir`, at most `max` cases per plugin and `max_bytes` for
    /// all of them (the least recently written go first). `default_on`: whether plugins
    /// whose WasmPlugin says nothing are recorded (`wasmop run --record DIR`).
    pub fn start(dir: PathBuf, (max, max_bytes): (usize, u64), default_on: bool) -> Self {
        let (tx, rx) = sync_channel(QUEUE);
        let writer_dir = dir.clone();
        let recordings = Recordings::default();
        let written = recordings.clone();
        std::thread::Builder::new()
            .name("wasmop-record".into())
            .spawn(move || write_loop(&writer_dir, (max.max(1), max_bytes), rx, &written))
            .expect("spawning the recorder thread");
        CaseRecorder {
            dir,
            default_on,
            tx,
            recordings,
        }
    }

    /// How recording goes for `plugin`; `None` before its first decision reached the writer.
    pub fn recording(&self, plugin: &str) -> Option<Recording> {
        self.recordings
            .lock()
            .expect("recordings lock")
            .get(plugin)
            .cloned()
    }

    /// Where the cases go.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether a plugin is recorded: its WasmPlugin's `record`, else the host's default.
    pub fn records(&self, switch: Option<bool>) -> bool {
        switch.unwrap_or(self.default_on)
    }

    /// Queues `d` for writing; false when the writer is behind (the decision is not recorded).
    pub fn record(&self, d: Decision) -> bool {
        match self.tx.try_send(d) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

fn is_secret(o: &Value) -> bool {
    o.get("kind").and_then(Value::as_str) == Some("Secret")
        && o.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

/// The golden case of a decision; `None` when it observed a Secret or its plugin reads
/// Secrets.
pub fn case_of(d: &Decision) -> Option<Case> {
    if d.reads_secrets {
        return None;
    }
    let o = &d.observed;
    let mut seen = HashSet::new();
    let mut objects = Vec::new();
    let texts = o.related_json.values().flatten();
    let parsed = texts.filter_map(|t| serde_json::from_str::<Value>(t).ok());
    for obj in parsed.chain(o.related.values().flatten().cloned()) {
        if is_secret(&obj) {
            return None;
        }
        let uid = obj
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        // An object in two relations is one object of the namespace.
        if uid.is_some_and(|u| !seen.insert(u)) {
            continue;
        }
        objects.push(obj);
    }
    if is_secret(&o.primary) || o.required.values().flatten().any(is_secret) {
        return None;
    }
    let now = jiff::Timestamp::from_millisecond(o.now_unix_ms)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| o.now_unix_ms.to_string());
    Some(Case {
        description: format!(
            "recorded at {now}: {} {} on {}",
            d.plugin, d.version, d.object
        ),
        now: Some(now),
        seed: Some(o.seed),
        object: o.primary.clone(),
        objects,
        given: crate::cases::decision::Given {
            required: o.required.clone(),
            answers: o.answers.values().cloned().collect(),
        },
        expect: d.outcome.clone(),
    })
}

/// The numbered case files already in a plugin's directory, oldest first.
fn existing(dir: &Path) -> VecDeque<u64> {
    let mut seqs: Vec<u64> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.strip_suffix(".yaml")?.parse().ok()
        })
        .collect();
    seqs.sort_unstable();
    seqs.into()
}

fn file(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:08}.yaml"))
}

fn write_loop(
    root: &Path,
    (max, max_bytes): (usize, u64),
    rx: Receiver<Decision>,
    recordings: &Recordings,
) {
    let cap = crate::runtime::disk::Cap {
        root: root.to_path_buf(),
        max_bytes,
    };
    let mut plugins: BTreeMap<String, VecDeque<u64>> = BTreeMap::new();
    let note = |plugin: &str, result: Result<(), String>| {
        let mut all = recordings.lock().expect("recordings lock");
        let r = all.entry(plugin.to_string()).or_default();
        match result {
            Ok(()) => {
                r.cases += 1;
                r.error = None;
            }
            Err(e) => r.error = Some(e),
        }
    };
    for d in rx {
        let Some(case) = case_of(&d) else { continue };
        let dir = root.join(&d.plugin);
        let files = plugins.entry(d.plugin.clone()).or_insert_with(|| {
            if let Err(e) = std::fs::create_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot record decisions");
            }
            tracing::info!(plugin = %d.plugin, dir = %dir.display(), "recording decisions");
            existing(&dir)
        });
        let seq = files.back().map_or(1, |s| s + 1);
        let text = match to_yaml(&case) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "cannot render a recorded decision");
                continue;
            }
        };
        let path = file(&dir, seq);
        if let Err(e) = cap.write(&path, text.as_bytes()) {
            // The directory may have gone, or never been made: made again next time.
            if std::fs::create_dir_all(&dir).is_err() {
                plugins.remove(&d.plugin);
            }
            let why = format!("cannot write {}: {e}", path.display());
            tracing::warn!(plugin = %d.plugin, error = %why, "cannot record a decision");
            note(&d.plugin, Err(why));
            continue;
        }
        note(&d.plugin, Ok(()));
        files.push_back(seq);
        while files.len() > max {
            if let Some(old) = files.pop_front() {
                let _ = std::fs::remove_file(file(&dir, old));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Plan;
    use serde_json::json;

    fn decision(seed: u64, related: Vec<Value>) -> Decision {
        let mut observed = Observed::new(json!({"apiVersion": "app.example.com/v1alpha1",
            "kind": "PodReplica", "metadata": {"name": "p", "namespace": "d", "uid": "u"}}));
        observed.seed = seed;
        observed.now_unix_ms = 1_767_225_600_123;
        let texts = related.iter().map(Value::to_string).collect();
        observed.related_json.insert("pods".into(), texts);
        observed.related_json.insert(
            "again".into(),
            related.iter().map(Value::to_string).collect(),
        );
        Decision {
            plugin: "podreplica".into(),
            version: "0.1.0".into(),
            object: "d/p".into(),
            observed,
            outcome: Outcome::Plan(Plan::new()),
            reads_secrets: false,
        }
    }

    fn pod(uid: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": uid, "uid": uid}})
    }

    #[test]
    fn a_case_holds_the_observed_value_once_and_no_secret() {
        let case = case_of(&decision(7, vec![pod("a"), pod("b")])).unwrap();
        assert_eq!(case.seed, Some(7));
        assert_eq!(case.now.as_deref(), Some("2026-01-01T00:00:00.123Z"));
        // Two relations showing the same objects: each object once.
        assert_eq!(case.objects, vec![pod("a"), pod("b")]);
        assert_eq!(case.object["metadata"]["name"], "p");
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
        assert!(case_of(&decision(7, vec![pod("a"), secret])).is_none());
    }

    /// A relation declared as `{kind: Blob, plural: secrets}` packs Secrets as `Blob`:
    /// judged by the resource, nothing of that plugin is recorded (issue #34).
    #[test]
    fn a_plugin_reading_secrets_under_another_kind_name_is_not_recorded() {
        use crate::runtime::{Relation, Selection};
        let blob = KindRef {
            kind: "Blob".into(),
            plural: "secrets".into(),
            ..KindRef::pod()
        };
        let mut info = PluginInfo {
            name: "podreplica".into(),
            version: "0.1.0".into(),
            primary: KindRef {
                group: "app.example.com".into(),
                version: "v1alpha1".into(),
                kind: "PodReplica".into(),
                plural: "podreplicas".into(),
                namespaced: true,
            },
            crd: None,
            relations: vec![],
            permissions: vec![],
            finalizer: None,
            webhooks: Default::default(),
            outbound_hosts: Vec::new(),
        };
        info.relations.push(Relation {
            name: "blobs".into(),
            kind: blob,
            selection: Selection::Namespace,
            label_selector: None,
            fields: None,
        });
        let packed = json!({"apiVersion": "v1", "kind": "Blob",
            "metadata": {"name": "s", "uid": "s"}, "data": {"password": "aHVudGVyMg=="}});
        let mut d = decision(7, vec![pod("a"), packed]);
        d.reads_secrets = reads_secrets(&info);
        assert!(case_of(&d).is_none());
        // Without such a relation, the same plugin is recorded.
        info.relations.pop();
        let mut d = decision(7, vec![pod("a")]);
        d.reads_secrets = reads_secrets(&info);
        assert!(case_of(&d).is_some());
        // Reading Secrets (a credential for its requests) is recorded; writing them is not.
        let secrets = KindRef {
            version: "v1".into(),
            kind: "Secret".into(),
            plural: "secrets".into(),
            ..KindRef::pod()
        };
        info.permissions = vec![crate::runtime::Permission {
            kind: secrets.clone(),
            verbs: vec![crate::runtime::Verb::Get],
        }];
        assert!(!reads_secrets(&info));
        info.permissions[0].verbs.push(crate::runtime::Verb::Create);
        assert!(reads_secrets(&info));
        // A decision that asked for a Secret and observed it is not recorded.
        let mut d = decision(7, vec![pod("a")]);
        d.observed.required.insert(
            "token".into(),
            vec![json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"}})],
        );
        assert!(case_of(&d).is_none());
    }

    #[test]
    fn files_rotate_keeping_the_newest() {
        let dir = std::env::temp_dir().join(format!("wasmop-record-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let recorder = CaseRecorder::start(dir.clone(), (3, 1 << 30), true);
        for seed in 1..=5 {
            assert!(recorder.record(decision(seed, vec![pod("a")])));
        }
        drop(recorder);
        let plugin_dir = dir.join("podreplica");
        let mut names = Vec::new();
        for _ in 0..100 {
            names = existing(&plugin_dir).into_iter().collect();
            if names == [3, 4, 5] {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(names, [3, 4, 5]);
        let text = std::fs::read_to_string(file(&plugin_dir, 5)).unwrap();
        let case: Case = crate::cases::input::from_yaml(&text).unwrap();
        assert_eq!(case.seed, Some(5));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Waits up to 10 s for `plugin`'s recording to be as `done` wants it.
    fn recording_once(
        r: &CaseRecorder,
        plugin: &str,
        done: impl Fn(&Recording) -> bool,
    ) -> Recording {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let now = r.recording(plugin).unwrap_or_default();
            if done(&now) || std::time::Instant::now() > deadline {
                return now;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// A directory the host cannot write is said where the recording was asked for (the
    /// WasmPlugin's status reads [`CaseRecorder::recording`]), and writing again clears it.
    #[test]
    fn a_directory_the_host_cannot_write_is_reported_per_plugin() {
        let base = std::env::temp_dir().join(format!("wasmop-record-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        // A regular file where the directory should be: nothing can be made under it.
        let blocked = base.join("blocked");
        std::fs::write(&blocked, "not a directory").unwrap();
        let r = CaseRecorder::start(blocked.clone(), (10, 1 << 30), true);
        assert!(r.record(decision(1, vec![pod("a")])));
        let failed = recording_once(&r, "podreplica", |r| r.error.is_some());
        assert_eq!(failed.cases, 0);
        let error = failed.error.expect("the failure is kept");
        assert!(
            error.starts_with(&format!(
                "cannot write {}",
                blocked.join("podreplica").display()
            )),
            "{error}"
        );
        assert!(r.recording("chaospod").is_none());
        // The obstacle goes: the next decision is written and the error cleared.
        std::fs::remove_file(&blocked).unwrap();
        assert!(r.record(decision(2, vec![pod("a")])));
        let fine = recording_once(&r, "podreplica", |r| r.cases > 0);
        assert_eq!(
            fine,
            Recording {
                cases: 1,
                error: None
            }
        );
        assert!(blocked.join("podreplica/00000001.yaml").is_file());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
