//! One call into a plugin: a fresh store with deadline and memory cap, instantiation from
//! the pre-instantiated component, the exported function, and classification of failures.

use wasmtime::component::Instance;
use wasmtime::{AsContextMut, Store, Trap};

use super::bindings::{self, PluginBindings, PluginBindingsPre, RawAnswer};
use super::budget;
use super::engine::SandboxEngine;
use super::error::CallError;
use super::limits::Limits;
use super::store::{CallContext, StoreData};
use super::types::{Observed, Plan, PluginInfo, ReconcileError};

/// Runs `f` against a freshly instantiated plugin in a fresh store.
///
/// Guarantees: the call ends within `limits.deadline` (plus one epoch tick), the instance
/// never holds more than `limits.memory_bytes` of linear memory, nor more than the engine's
/// [`super::limits::GuestMemory`] leaves free, at most [`super::store::MAX_RESOURCES`] WASI
/// resources, and every failure comes
/// back as a [`CallError`], never as a panic. Blocking: call it off the async executor.
pub(crate) fn with_instance<R>(
    engine: &SandboxEngine,
    pre: &PluginBindingsPre<StoreData>,
    limits: &Limits,
    ctx: CallContext,
    f: impl FnOnce(&mut Store<StoreData>, &Instance) -> wasmtime::Result<R>,
) -> Result<R, CallError> {
    let data = StoreData::new(limits, ctx, engine.guest_memory().clone());
    let mut store = Store::new(engine.engine(), data);
    store.limiter(|d| &mut d.limiter);
    store.set_hostcall_fuel(hostcall_fuel(limits));
    store.set_epoch_deadline(SandboxEngine::ticks_for(limits.deadline));
    store.epoch_deadline_trap();
    let result = pre
        .instance_pre()
        .instantiate(&mut store)
        .and_then(|instance| f(&mut store, &instance));
    store.data().flush_output();
    result.map_err(|e| classify(&e, store.data(), limits))
}

/// Most host-side bytes one lift may account for, per byte of the guest's memory cap: a
/// list of actions takes 12 bytes of guest memory per element and its lazy handles
/// ([`bindings::RawAnswer`]) about 224 bytes of accounting each, though the handles copy
/// nothing. Every value a lift reads lies in the guest's memory, so the copies a guest can
/// cause stay bounded by that memory; this fuel only keeps wasmtime's own accounting (128 MiB
/// by default) from refusing an oversized answer before the host can measure it and say
/// which limit it broke.
const FUEL_PER_GUEST_BYTE: usize = 20;

fn hostcall_fuel(limits: &Limits) -> usize {
    limits
        .memory_bytes
        .saturating_mul(FUEL_PER_GUEST_BYTE)
        .max(128 << 20)
}

fn classify(err: &wasmtime::Error, data: &StoreData, limits: &Limits) -> CallError {
    if err.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return CallError::Timeout(limits.deadline);
    }
    if data.limiter.refused {
        return CallError::OutOfMemory(limits.memory_bytes);
    }
    if data.limiter.host_refused {
        return CallError::HostMemory(data.limiter.host_limit());
    }
    let text = format!("{err:#}");
    if text.contains("maximum concurrent") || text.contains("pooling allocator") {
        return CallError::Unavailable(text);
    }
    match data.panic_message() {
        Some(panic) => CallError::Trap(panic),
        None => CallError::Trap(text),
    }
}

/// Calls `info()` and converts the answer.
pub(crate) fn call_info(
    engine: &SandboxEngine,
    pre: &PluginBindingsPre<StoreData>,
    limits: &Limits,
) -> Result<Result<PluginInfo, String>, CallError> {
    let ctx = CallContext::default();
    let raw = with_instance(engine, pre, limits, ctx, |store, instance| {
        PluginBindings::new(&mut *store, instance)?.call_info(store)
    })?;
    if let Err(e) = budget::check_info(bindings::info_shape(&raw)) {
        return Ok(Err(e));
    }
    Ok(bindings::info_from_wit(raw))
}

/// Which exported decision function to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `reconcile`
    Reconcile,
    /// `cleanup`
    Cleanup,
}

impl Entry {
    /// The export's name in the plugin world.
    fn export(self) -> &'static str {
        match self {
            Entry::Reconcile => "reconcile",
            Entry::Cleanup => "cleanup",
        }
    }
}

/// Calls `reconcile` or `cleanup`, checks the answer against the output budget
/// ([`budget`]) while it still lies in the guest's memory, and only then copies and
/// converts it.
pub(crate) fn call_decide(
    engine: &SandboxEngine,
    pre: &PluginBindingsPre<StoreData>,
    limits: &Limits,
    ctx: CallContext,
    entry: Entry,
    observed: &Observed,
) -> Result<Result<Plan, ReconcileError>, CallError> {
    let input = bindings::observed_to_wit(observed);
    let answer = with_instance(engine, pre, limits, ctx, |store, instance| {
        let func = instance.get_typed_func::<(&bindings::WitObserved,), (RawAnswer,)>(
            &mut *store,
            entry.export(),
        )?;
        let (raw,) = func.call(&mut *store, (&input,))?;
        bindings::read_answer(
            store.as_context_mut(),
            raw,
            |shape| budget::check_plan(shape, limits),
            |bytes| budget::check_error(bytes, limits),
        )
    })?;
    match answer.map_err(CallError::InvalidOutput)? {
        Ok(plan) => bindings::plan_from_wit(plan)
            .map(Ok)
            .map_err(CallError::InvalidOutput),
        Err(e) => Ok(Err(bindings::error_from_wit(e))),
    }
}
