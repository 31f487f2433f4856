//! The runtime's front door: load plugin versions (with a compile cache) and run calls off
//! the async executor with bounded concurrency.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;
use wasmtime::component::{Component, Linker};

use crate::runtime::bindings::{PluginBindingsPre, add_host_to_linker};
use crate::runtime::call::{self, Entry};
use crate::runtime::engine::{EngineConfig, SandboxEngine};
use crate::runtime::error::{CallError, LoadError};
use crate::runtime::limits::{Limits, Reservation};
use crate::runtime::plugin::{LoadedPlugin, check_header, digest_of};
use crate::runtime::store::{CallContext, StoreData};
use crate::runtime::types::{Observed, Plan, ReconcileError};
use crate::runtime::validate::validate_info;

/// Calls of candidates (shadow decisions) running at once: a quarter of the active calls,
/// at least one, on top of them.
pub fn candidate_share(max_concurrent_calls: usize) -> usize {
    (max_concurrent_calls / 4).max(1)
}

/// `total` bytes of guest memory split between `active` and `candidate` calls: the
/// candidates' part in proportion to their number of calls, at least a quarter (room for
/// one call of an interpreted language's candidate beside a Rust one); no budget
/// (`usize::MAX`) stays none for both.
pub fn split_memory(total: usize, active: usize, candidate: usize) -> (usize, usize) {
    if total == usize::MAX {
        return (usize::MAX, usize::MAX);
    }
    let calls = (active + candidate).max(1) as u128;
    let theirs = ((total as u128 * candidate as u128 / calls) as usize).max(total / 4);
    (total - theirs, theirs)
}

/// How [`Sandbox::with_guest_memory`] splits `total` for `max_concurrent_calls`: (the active
/// versions' part, the candidates').
pub fn memory_parts(total: usize, max_concurrent_calls: usize) -> (usize, usize) {
    split_memory(
        total,
        max_concurrent_calls,
        candidate_share(max_concurrent_calls),
    )
}

/// Compiled components kept for a version offered again (a restart of its controller, a
/// rollback, the same upload on another WasmPlugin); each holds its machine code.
pub const COMPILED_KEPT: usize = 8;

/// The compiled components, each with when it was last used.
#[derive(Default)]
struct Compiled {
    entries: HashMap<(String, u64), (Component, u64)>,
    clock: u64,
}

impl Compiled {
    fn get(&mut self, key: &(String, u64)) -> Option<Component> {
        self.clock += 1;
        let (component, used) = self.entries.get_mut(key)?;
        *used = self.clock;
        Some(component.clone())
    }

    fn keep(&mut self, key: (String, u64), component: Component) {
        self.clock += 1;
        self.entries.insert(key, (component, self.clock));
        while self.entries.len() > COMPILED_KEPT {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => self.entries.remove(&k),
                None => break,
            };
        }
    }
}

/// Loads plugins and runs their calls. Clone it freely: clones share the engine, the
/// linker, the compile cache and the concurrency bound.
#[derive(Clone)]
pub struct Sandbox {
    engine: SandboxEngine,
    linker: Arc<Linker<StoreData>>,
    /// Compiled components keyed by (wasm digest, engine fingerprint). The fingerprint
    /// covers the wasmtime version and the engine configuration. Only code this process
    /// compiled itself, of versions that loaded, is ever stored here; at most
    /// [`COMPILED_KEPT`], the least recently used going first.
    cache: Arc<Mutex<Compiled>>,
    /// Where compiled components are kept across restarts ([`Sandbox::with_compiled_dir`]).
    disk: Option<PathBuf>,
    /// Compiled components built with the image, read only ([`Sandbox::with_shelf`]).
    shelf: Option<PathBuf>,
    /// The byte cap of the cache directory `disk` is part of ([`Sandbox::with_disk_cap`]).
    disk_cap: Option<crate::runtime::disk::Cap>,
    permits: Arc<Semaphore>,
    /// The candidates' own share ([`Sandbox::decide_candidate`]).
    candidate_permits: Arc<Semaphore>,
}

impl Sandbox {
    /// A sandbox that runs at most `max_concurrent_calls` calls at once, each within its
    /// own memory cap only.
    pub fn new(max_concurrent_calls: usize) -> anyhow::Result<Self> {
        Self::with_guest_memory(max_concurrent_calls, usize::MAX)
    }

    /// A sandbox that runs at most `max_concurrent_calls` calls at once, whose guest
    /// memories together never exceed `guest_memory_bytes` ([`crate::runtime::limits::GuestMemory`]).
    /// The candidates' calls have their own part of it, in proportion to their share of the
    /// calls ([`candidate_share`]): the active versions' calls never fail for a
    /// candidate's memory.
    pub fn with_guest_memory(
        max_concurrent_calls: usize,
        guest_memory_bytes: usize,
    ) -> anyhow::Result<Self> {
        let candidates = candidate_share(max_concurrent_calls);
        let calls = max_concurrent_calls + candidates;
        let max_instances = (calls as u32 * 2 + 8).max(16);
        let (active, candidate) = memory_parts(guest_memory_bytes, max_concurrent_calls);
        let engine = SandboxEngine::new(EngineConfig {
            max_instances,
            guest_memory_bytes: active,
            candidate_memory_bytes: candidate,
        })
        .map_err(|e| anyhow::anyhow!("creating the wasmtime engine: {e:#}"))?;
        let mut linker = Linker::new(engine.engine());
        crate::runtime::wasi::add_to_linker(&mut linker)
            .map_err(|e| anyhow::anyhow!("linking WASI: {e:#}"))?;
        add_host_to_linker::<StoreData, wasmtime::component::HasSelf<StoreData>>(
            &mut linker,
            |d| d,
        )
        .map_err(|e| anyhow::anyhow!("linking the host interface: {e:#}"))?;
        crate::runtime::legacy::add_legacy_host_to_linker::<
            StoreData,
            wasmtime::component::HasSelf<StoreData>,
        >(&mut linker, |d| d)
        .map_err(|e| anyhow::anyhow!("linking the 0.3.0 host interface: {e:#}"))?;
        Ok(Sandbox {
            engine,
            linker: Arc::new(linker),
            cache: Arc::default(),
            disk: None,
            shelf: None,
            disk_cap: None,
            permits: Arc::new(Semaphore::new(max_concurrent_calls.max(1))),
            candidate_permits: Arc::new(Semaphore::new(candidate_share(max_concurrent_calls))),
        })
    }

    /// Keeps compiled components in `dir` too (`<digest>-<engine fingerprint>.cwasm`), so
    /// that a restart loads a version it compiled before without compiling: only files
    /// this host wrote are read (the directory is the host's own, an `emptyDir`), and
    /// wasmtime refuses a file of another version or engine configuration, which is then
    /// compiled again and replaced.
    pub fn with_compiled_dir(mut self, dir: &Path) -> Self {
        self.disk = Some(dir.to_path_buf());
        self
    }

    /// Reads compiled components from `dir` too, before compiling: a shelf built with the
    /// host's image (`wasmop compile`, the same file names as the compiled dir), so that a
    /// new pod, whose cache starts empty, starts its bundled plugins without compiling.
    /// Never written nor pruned; a file the engine refuses (another wasmtime, engine
    /// configuration or CPU) is passed over and the component compiled. Its machine code
    /// runs as is: only a directory as trusted as the host binary itself may be one (the
    /// image's own, read-only files).
    pub fn with_shelf(mut self, dir: &Path) -> Self {
        self.shelf = Some(dir.to_path_buf());
        self
    }

    /// Keeps every file under `root` (the compiled components and the pulled artifacts
    /// beside them) within `max_bytes`: after each write the least recently used go.
    pub fn with_disk_cap(mut self, root: &Path, max_bytes: u64) -> Self {
        self.disk_cap = Some(crate::runtime::disk::Cap {
            root: root.to_path_buf(),
            max_bytes,
        });
        self
    }

    /// The file name of the compiled component of `digest` for this engine.
    fn compiled_name(&self, digest: &str) -> Option<String> {
        let hex = digest.strip_prefix("sha256:")?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(format!("{hex}-{:016x}.cwasm", self.engine.fingerprint()))
    }

    fn compiled_path(&self, digest: &str) -> Option<PathBuf> {
        Some(self.disk.as_ref()?.join(self.compiled_name(digest)?))
    }

    fn shelf_path(&self, digest: &str) -> Option<PathBuf> {
        Some(self.shelf.as_ref()?.join(self.compiled_name(digest)?))
    }

    /// The compiled component of `digest` from the disk cache (if this host wrote one that
    /// the engine accepts; one it refuses is removed), else from the shelf.
    fn read_compiled(&self, digest: &str) -> Option<Component> {
        let cached = self
            .compiled_path(digest)
            .and_then(|path| self.read_file(&path, "the disk cache"));
        if cached.is_some() {
            return cached;
        }
        self.shelf_path(digest)
            .and_then(|path| self.read_file(&path, "the image's shelf"))
    }

    fn read_file(&self, path: &Path, from: &'static str) -> Option<Component> {
        if !path.is_file() {
            return None;
        }
        let started = std::time::Instant::now();
        // SAFETY: wasmtime runs the machine code in this file as is. Only the host writes
        // the cache directory (`write_compiled`: its own compilation, by digest, renamed
        // into place whole); the shelf is the image's own (`with_shelf`); nothing pulled
        // from a registry or uploaded is ever stored in either, and wasmtime checks the
        // file's engine and version header before using it.
        #[allow(unsafe_code)]
        let loaded = unsafe { Component::deserialize_file(self.engine.engine(), path) };
        let on_shelf = self.shelf.as_ref().is_some_and(|s| path.starts_with(s));
        match loaded {
            Ok(c) => {
                if !on_shelf {
                    crate::runtime::disk::Cap::used(path);
                }
                tracing::info!(path = %path.display(), ms = started.elapsed().as_millis(), "compiled component read from {from}");
                Some(c)
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %format!("{e:#}"), "a compiled component in {from} is unusable; compiling");
                if !on_shelf {
                    let _ = std::fs::remove_file(path);
                }
                None
            }
        }
    }

    /// Writes the compiled `component` of `digest` to the disk cache (a failure costs a
    /// compile at the next start, so it is only logged).
    fn write_compiled(&self, digest: &str, component: &Component) {
        let Some(path) = self.compiled_path(digest) else {
            return;
        };
        let write = || -> anyhow::Result<()> {
            let bytes = component.serialize()?;
            match &self.disk_cap {
                Some(cap) => cap.write(&path, &bytes)?,
                None => crate::runtime::disk::write_whole(&path, &bytes)?,
            }
            Ok(())
        };
        if let Err(e) = write() {
            tracing::warn!(path = %path.display(), error = %format!("{e:#}"), "could not keep the compiled component on disk");
        }
    }

    /// The engine (for tools that run other components, like the test runner).
    pub fn engine(&self) -> &SandboxEngine {
        &self.engine
    }

    /// The compiled component of `bytes`: kept from an earlier load, read from the disk
    /// cache or the shelf, or compiled now (then `true`: kept on disk by [`Sandbox::load`]
    /// only once the version has loaded).
    fn compile(&self, bytes: &[u8], digest: &str) -> Result<(Component, bool), LoadError> {
        let key = (digest.to_string(), self.engine.fingerprint());
        if let Some(c) = self.cache.lock().expect("cache lock").get(&key) {
            return Ok((c, false));
        }
        if let Some(c) = self.read_compiled(digest) {
            return Ok((c, false));
        }
        let started = std::time::Instant::now();
        let (hits, misses) = self.engine.functions().hits_and_misses();
        let component = Component::new(self.engine.engine(), bytes)
            .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        let (hits_after, misses_after) = self.engine.functions().hits_and_misses();
        // The compiler's own memory is free now: the new entries move out of its way.
        self.engine.functions().pack();
        tracing::info!(
            %digest,
            ms = started.elapsed().as_millis(),
            reused = hits_after - hits,
            compiled = misses_after - misses,
            cache_kib = self.engine.functions().bytes() / 1024,
            "compiled (functions reused from earlier versions, or compiled)"
        );
        Ok((component, true))
    }

    /// The names the component `bytes` imports and exports (for an artifact's config).
    pub fn world_of(&self, bytes: &[u8]) -> Result<(Vec<String>, Vec<String>), LoadError> {
        check_header(bytes)?;
        let (component, _) = self.compile(bytes, &digest_of(bytes))?;
        let ty = component.component_type();
        let engine = self.engine.engine();
        let imports = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
        let exports = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
        Ok((imports, exports))
    }

    /// Type-checks `component` against the host's world. Imports the host does not link are
    /// refused by name, but for those [`crate::runtime::wasi::stubbed`] allows: the
    /// component gets them as functions that trap when called.
    fn instantiate_pre(
        &self,
        component: &Component,
    ) -> Result<wasmtime::component::InstancePre<StoreData>, LoadError> {
        let world = |e: wasmtime::Error| LoadError::World(format!("{e:#}"));
        let engine = self.engine.engine();
        let stubs: Vec<String> = component
            .component_type()
            .imports(engine)
            .map(|(name, _)| name.to_string())
            .filter(|name| crate::runtime::wasi::stubbed(name))
            .collect();
        if stubs.is_empty() {
            return self.linker.instantiate_pre(component).map_err(world);
        }
        // The stubs go on a copy of the shared linker, which only ever links real imports.
        let mut linker = (*self.linker).clone();
        crate::runtime::wasi::add_trapping_stubs(&mut linker, component, &stubs).map_err(world)?;
        linker.instantiate_pre(component).map_err(world)
    }

    /// How many compiled components are kept.
    pub fn compiled_kept(&self) -> usize {
        self.cache.lock().expect("cache lock").entries.len()
    }

    /// Compiles, type-checks, pre-instantiates and validates a plugin version. Blocking
    /// (compilation takes CPU time): call it off the async executor.
    pub fn load(&self, bytes: &[u8], limits: Limits) -> Result<LoadedPlugin, LoadError> {
        check_header(bytes)?;
        let digest = digest_of(bytes);
        let (component, compiled_now) = self.compile(bytes, &digest)?;
        let instance_pre = self.instantiate_pre(&component)?;
        let pre =
            PluginBindingsPre::new(instance_pre).map_err(|e| LoadError::World(format!("{e:#}")))?;
        let info = call::call_info(&self.engine, &pre, &limits)?.map_err(LoadError::InvalidInfo)?;
        validate_info(&info).map_err(LoadError::InvalidInfo)?;
        // Only a version that loaded is kept: a refused one is compiled again if offered
        // again, and never holds memory meanwhile.
        if compiled_now {
            self.write_compiled(&digest, &component);
        }
        self.cache
            .lock()
            .expect("cache lock")
            .keep((digest.clone(), self.engine.fingerprint()), component);
        Ok(LoadedPlugin {
            info,
            digest,
            size: bytes.len(),
            limits,
            pre,
        })
    }

    /// [`Sandbox::load`] on the blocking pool.
    pub async fn load_async(
        &self,
        bytes: Vec<u8>,
        limits: Limits,
    ) -> Result<LoadedPlugin, LoadError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.load(&bytes, limits))
            .await
            .unwrap_or_else(|e| Err(LoadError::Compile(format!("loader task failed: {e}"))))
    }

    /// Runs one decision synchronously (for offline tools and tests).
    pub fn decide_blocking(
        &self,
        plugin: &LoadedPlugin,
        entry: Entry,
        observed: &Observed,
        object: &str,
    ) -> Result<Result<Plan, ReconcileError>, CallError> {
        self.decide_held(plugin, entry, observed, object)
            .map(|(answer, _)| answer)
    }

    /// [`Sandbox::decide_blocking`], with the share of the host's guest-memory budget the
    /// parsed plan holds until the reservation is dropped.
    fn decide_held(
        &self,
        plugin: &LoadedPlugin,
        entry: Entry,
        observed: &Observed,
        object: &str,
    ) -> Result<call::Held, CallError> {
        self.decide_in(self.engine.guest_memory(), plugin, entry, observed, object)
    }

    /// A decision whose guest memory and parsed answer draw on `memory`.
    fn decide_in(
        &self,
        memory: &Arc<crate::runtime::limits::GuestMemory>,
        plugin: &LoadedPlugin,
        entry: Entry,
        observed: &Observed,
        object: &str,
    ) -> Result<call::Held, CallError> {
        let ctx = CallContext {
            plugin: plugin.info.name.clone(),
            version: plugin.info.version.clone(),
            object: object.to_string(),
            now_unix_ms: observed.now_unix_ms,
            seed: observed.seed,
        };
        call::call_decide(
            (&self.engine, memory),
            &plugin.pre,
            &plugin.limits,
            ctx,
            entry,
            observed,
        )
    }

    /// Runs one decision on the blocking pool, waiting for a free slot first. At most
    /// `max_concurrent_calls` decisions run at once; the async executor never runs wasm.
    pub async fn decide(
        &self,
        plugin: Arc<LoadedPlugin>,
        entry: Entry,
        observed: Observed,
        object: String,
    ) -> Result<Result<Plan, ReconcileError>, CallError> {
        self.decide_holding(plugin, entry, observed, object)
            .await
            .map(|(answer, _)| answer)
    }

    /// [`Sandbox::decide`], with the share of the host's guest-memory budget the parsed
    /// plan holds: keep the reservation for as long as the plan lives (a reconcile keeps it
    /// until its writes are done).
    pub async fn decide_holding(
        &self,
        plugin: Arc<LoadedPlugin>,
        entry: Entry,
        observed: Observed,
        object: String,
    ) -> Result<(Result<Plan, ReconcileError>, Option<Reservation>), CallError> {
        self.decide_within(false, plugin, entry, observed, object)
            .await
    }

    /// [`Sandbox::decide`] for a candidate's shadow decision: in the candidates' own share
    /// of calls ([`candidate_share`]), so a spinning or slow candidate never takes a slot
    /// from the decisions that act.
    pub async fn decide_candidate(
        &self,
        plugin: Arc<LoadedPlugin>,
        entry: Entry,
        observed: Observed,
        object: String,
    ) -> Result<Result<Plan, ReconcileError>, CallError> {
        self.decide_within(true, plugin, entry, observed, object)
            .await
            .map(|(answer, _)| answer)
    }

    /// Asks `plugin` whether the admission `request` (of `object`, `namespace/name`) may go
    /// on: on the blocking pool, in the active versions' share of calls and memory. A trap,
    /// a timeout or a malformed verdict is the error (the webhook refuses then).
    pub async fn validate(
        &self,
        plugin: Arc<LoadedPlugin>,
        request: crate::runtime::types::AdmissionRequest,
        object: String,
    ) -> Result<crate::runtime::types::Verdict, CallError> {
        self.on_pool(plugin, object, move |engine, plugin, ctx| {
            call::call_validate(engine, &plugin.pre, &plugin.limits, ctx, &request)
        })
        .await
    }

    /// Asks `plugin` to default `object` (`Some(version)`: to convert it to that version of
    /// its CRD instead): the object it answers, or its refusal. As [`Sandbox::validate`].
    pub async fn transform(
        &self,
        plugin: Arc<LoadedPlugin>,
        to_version: Option<String>,
        object: serde_json::Value,
        name: String,
    ) -> Result<Result<serde_json::Value, String>, CallError> {
        self.on_pool(plugin, name, move |engine, plugin, ctx| {
            let transform = match &to_version {
                Some(v) => call::Transform::Convert(v),
                None => call::Transform::Default,
            };
            call::call_transform(engine, &plugin.pre, &plugin.limits, ctx, transform, &object)
        })
        .await
    }

    /// Runs `f` on the blocking pool with a call slot of the active versions' share.
    async fn on_pool<T: Send + 'static>(
        &self,
        plugin: Arc<LoadedPlugin>,
        object: String,
        f: impl FnOnce(
            (&SandboxEngine, &Arc<crate::runtime::limits::GuestMemory>),
            &LoadedPlugin,
            CallContext,
        ) -> Result<T, CallError>
        + Send
        + 'static,
    ) -> Result<T, CallError> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CallError::Unavailable("sandbox closed".into()))?;
        let this = self.clone();
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let ctx = CallContext {
                plugin: plugin.info.name.clone(),
                version: plugin.info.version.clone(),
                object,
                now_unix_ms: jiff::Timestamp::now().as_millisecond(),
                seed: rand::random(),
            };
            let memory = this.engine.guest_memory().clone();
            span.in_scope(|| f((&this.engine, &memory), &plugin, ctx))
        })
        .await
        .unwrap_or_else(|e| Err(CallError::Unavailable(format!("call task failed: {e}"))))
    }

    /// A decision in the active versions' share of calls and memory, or (`candidate`) in
    /// the candidates' own.
    async fn decide_within(
        &self,
        candidate: bool,
        plugin: Arc<LoadedPlugin>,
        entry: Entry,
        observed: Observed,
        object: String,
    ) -> Result<call::Held, CallError> {
        let permits = if candidate {
            &self.candidate_permits
        } else {
            &self.permits
        };
        let permit = permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CallError::Unavailable("sandbox closed".into()))?;
        let this = self.clone();
        // The call runs in the caller's span (the reconcile's), so the guest's log lines
        // are in it too.
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let memory = if candidate {
                this.engine.candidate_memory().clone()
            } else {
                this.engine.guest_memory().clone()
            };
            span.in_scope(|| this.decide_in(&memory, &plugin, entry, &observed, &object))
        })
        .await
        .unwrap_or_else(|e| Err(CallError::Unavailable(format!("call task failed: {e}"))))
    }
}
