//! One call into a plugin: a fresh store with deadline and memory cap, instantiation from
//! the pre-instantiated component, the exported function, and classification of failures.

use std::sync::Arc;

use wasmtime::{Store, Trap};

use crate::runtime::bindings::{self, PluginBindings, PluginBindingsPre};
use crate::runtime::budget;
use crate::runtime::engine::SandboxEngine;
use crate::runtime::error::CallError;
use crate::runtime::limits::{GuestMemory, Limits, Reservation};
use crate::runtime::store::{CallContext, StoreData};
use crate::runtime::types::{
    AdmissionRequest, Observed, Plan, PluginInfo, ReconcileError, Verdict,
};

/// Runs `f` against a freshly instantiated plugin in a fresh store.
///
/// `fuel` bounds the host memory one lift may copy out of the guest (wasmtime's hostcall
/// fuel): the answer of the exported function, and the arguments of every call the guest
/// makes to the host. Over it the lift stops before it allocates, and the call fails as
/// [`CallError::InvalidOutput`].
///
/// Guarantees: the call ends within `limits.deadline` (plus one epoch tick), the instance
/// never holds more than `limits.memory_bytes` of linear memory, nor more than the engine's
/// [`crate::runtime::limits::GuestMemory`] leaves free, at most [`crate::runtime::store::MAX_RESOURCES`] WASI
/// resources, and every failure comes
/// back as a [`CallError`], never as a panic. Blocking: call it off the async executor.
pub(crate) fn with_instance<R>(
    (engine, memory): (&SandboxEngine, &Arc<GuestMemory>),
    pre: &PluginBindingsPre<StoreData>,
    limits: &Limits,
    ctx: CallContext,
    fuel: usize,
    f: impl FnOnce(&mut Store<StoreData>, &PluginBindings) -> wasmtime::Result<R>,
) -> Result<R, CallError> {
    let _ticking = engine.ticking();
    let data = StoreData::new(limits, ctx, memory.clone());
    let mut store = Store::new(engine.engine(), data);
    store.limiter(|d| &mut d.limiter);
    store.set_hostcall_fuel(fuel);
    store.set_epoch_deadline(SandboxEngine::ticks_for(limits.deadline));
    store.epoch_deadline_trap();
    let result = pre
        .instantiate(&mut store)
        .and_then(|bindings| f(&mut store, &bindings));
    store.data().flush_output();
    result.map_err(|e| classify(&e, store.data(), limits, fuel))
}

/// What wasmtime says when a lift would copy more than the hostcall fuel allows.
const FUEL_EXHAUSTED: &str = "fuel allocated for hostcalls has been exhausted";

fn classify(err: &wasmtime::Error, data: &StoreData, limits: &Limits, fuel: usize) -> CallError {
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
    if text.contains(FUEL_EXHAUSTED) {
        return CallError::InvalidOutput(format!(
            "the plugin handed the host more than {fuel} bytes at once (its answer, or the \
             arguments of a call to the host): over the output budget of {} actions, {} \
             events and {} bytes",
            limits.max_actions, limits.max_events, limits.max_plan_bytes
        ));
    }
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
    let fuel = bindings::info_fuel();
    let raw = with_instance(
        (engine, engine.guest_memory()),
        pre,
        limits,
        ctx,
        fuel,
        |store, b| b.call_info(store),
    )?;
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

/// A decision's answer, with the host memory its parsed plan holds (`None` for an error
/// answer): the reservation is charged to the host-wide guest-memory budget until dropped.
pub(crate) type Held = (Result<Plan, ReconcileError>, Option<Reservation>);

/// Calls `reconcile` or `cleanup`, checks the answer against the output budget
/// ([`budget`]) and converts it. The answer is copied out of the guest under a hostcall
/// fuel of [`bindings::answer_fuel`]: an answer whose copy would be larger than any answer
/// within the limits is refused before the host allocates it; within that, the exact
/// limits are checked on the copy. Its JSON parts are then measured before they are parsed
/// ([`crate::runtime::footprint`]): parsed, they may take at most the call's own memory cap, and only what
/// `memory` (the host-wide budget of its kind of call) has room for
/// ([`CallError::HostMemory`] otherwise); the plan holds
/// that share of the budget for as long as the returned reservation lives.
pub(crate) fn call_decide(
    (engine, memory): (&SandboxEngine, &Arc<GuestMemory>),
    pre: &PluginBindingsPre<StoreData>,
    limits: &Limits,
    ctx: CallContext,
    entry: Entry,
    observed: &Observed,
) -> Result<Held, CallError> {
    let input = bindings::observed_to_wit(observed);
    let fuel = bindings::answer_fuel(limits);
    let raw = with_instance(
        (engine, memory),
        pre,
        limits,
        ctx,
        fuel,
        |store, b| match entry {
            Entry::Reconcile => b.call_reconcile(store, &input),
            Entry::Cleanup => b.call_cleanup(store, &input),
        },
    )?;
    let plan = match raw {
        Ok(plan) => plan,
        Err(e) => {
            budget::check_error(bindings::error_bytes(&e), limits)
                .map_err(CallError::InvalidOutput)?;
            return Ok((Err(bindings::error_from_wit(e)), None));
        }
    };
    budget::check_plan(bindings::plan_shape(&plan), limits).map_err(CallError::InvalidOutput)?;
    let parsed =
        bindings::plan_footprint(&plan, limits.memory_bytes).map_err(CallError::InvalidOutput)?;
    let held = memory
        .reserve(parsed)
        .ok_or(CallError::HostMemory(memory.limit()))?;
    let plan = bindings::plan_from_wit(plan).map_err(CallError::InvalidOutput)?;
    Ok((Ok(plan), Some(held)))
}

/// Calls `validate`. Its verdict may hold at most the plan byte budget of `limits`; over it,
/// or on a trap or a timeout, the error is the caller's to turn into a refusal.
pub(crate) fn call_validate(
    (engine, memory): (&SandboxEngine, &Arc<GuestMemory>),
    pre: &PluginBindingsPre<StoreData>,
    limits: &Limits,
    ctx: CallContext,
    request: &AdmissionRequest,
) -> Result<Verdict, CallError> {
    let input = bindings::admission_to_wit(request);
    let raw = with_instance(
        (engine, memory),
        pre,
        limits,
        ctx,
        limits.max_plan_bytes,
        |store, b| b.call_validate(store, &input),
    )?;
    if bindings::verdict_bytes(&raw) > limits.max_plan_bytes {
        return Err(CallError::InvalidOutput(format!(
            "the verdict holds more than {} bytes",
            limits.max_plan_bytes
        )));
    }
    Ok(bindings::verdict_from_wit(raw))
}

/// Which object transformation to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform<'a> {
    /// `default`
    Default,
    /// `convert` to this version
    Convert(&'a str),
}

/// Calls `default` or `convert` on `object`: the object it answers, parsed, or the
/// plugin's refusal. The answer may hold at most the plan byte budget of `limits`.
pub(crate) fn call_transform(
    (engine, memory): (&SandboxEngine, &Arc<GuestMemory>),
    pre: &PluginBindingsPre<StoreData>,
    limits: &Limits,
    ctx: CallContext,
    transform: Transform<'_>,
    object: &serde_json::Value,
) -> Result<Result<serde_json::Value, String>, CallError> {
    let input = object.to_string();
    let raw = with_instance(
        (engine, memory),
        pre,
        limits,
        ctx,
        limits.max_plan_bytes.max(limits.max_error_bytes),
        |store, b| match transform {
            Transform::Default => b.call_default(store, &input),
            Transform::Convert(to) => b.call_convert(store, &input, to),
        },
    )?;
    match raw {
        Ok(text) => {
            crate::runtime::footprint::of_json(&text, limits.memory_bytes)
                .map_err(|e| CallError::InvalidOutput(format!("the object answered: {e}")))?;
            let v: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| CallError::InvalidOutput(format!("the object answered: {e}")))?;
            if !v.is_object() {
                return Err(CallError::InvalidOutput(
                    "the object answered is not a JSON object".into(),
                ));
            }
            Ok(Ok(v))
        }
        Err(why) => {
            budget::check_error(why.len(), limits).map_err(CallError::InvalidOutput)?;
            Ok(Err(why))
        }
    }
}
