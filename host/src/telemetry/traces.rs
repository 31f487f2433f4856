//! Traces over OTLP: the host's `tracing` spans (a `reconcile` span per reconcile, a `write`
//! span per write to the API server) exported by the OpenTelemetry layer when the standard
//! variables ask for it, and not built at all otherwise.
//!
//! Configured by the OpenTelemetry SDK's environment variables only: the exporter is on when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and not
//! empty) and `OTEL_SDK_DISABLED` is not `true`. The exporter speaks OTLP over HTTP/protobuf
//! (`OTEL_EXPORTER_OTLP_*_HEADERS`, `_TIMEOUT` and `_COMPRESSION` as the SDK reads them; a
//! `_PROTOCOL` other than `http/protobuf` is refused rather than sent to a port that speaks
//! something else), spans go out in batches (`OTEL_BSP_*`), sampled as `OTEL_TRACES_SAMPLER`
//! says, from the service `OTEL_SERVICE_NAME` (default `wasmop`) with the attributes of
//! `OTEL_RESOURCE_ATTRIBUTES`.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::registry::LookupSpan;

/// The service name when `OTEL_SERVICE_NAME` does not give one.
pub const SERVICE_NAME: &str = "wasmop";

/// The spans exported: the host's own at `info` and above (its reconciles and writes),
/// whatever `WASMOP_LOG` lets through to the log. A dependency's spans (kube's per-request
/// `HTTP` spans, say) are not exported.
const EXPORTED_TARGET: &str = "wasmop";

// Guest lines (`runtime::store::GUEST_TARGET`) are exported as span events only with
// `--trace-guest-logs`: a plugin may log what it read, a Secret's value say, and the trace
// backend is another audience than the host's log.
use crate::runtime::store::GUEST_TARGET;

/// The most characters of an error's text recorded on a span (`otel.status_description`):
/// a plugin's error message, or a panic's, is its own text.
pub const MAX_STATUS_CHARS: usize = 256;

/// `text` cut to [`MAX_STATUS_CHARS`], for a span's status.
pub fn status_text(text: &str) -> String {
    match text.char_indices().nth(MAX_STATUS_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The one OTLP protocol built in.
const PROTOCOL: &str = "http/protobuf";

/// Why trace export could not start.
#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    /// The exporter refused its configuration (an endpoint that is no URL, say).
    #[error("traces over OTLP: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// A protocol other than the one built in was asked for.
    #[error("traces over OTLP: {variable}={value}: only {PROTOCOL} is built in")]
    Protocol {
        /// The variable that asked.
        variable: &'static str,
        /// What it asked for.
        value: String,
    },
}

/// What is exported: the host's own spans and events at `info` and above, guest lines
/// ([`GUEST_TARGET`]) only with `guest_logs`.
fn export_filter(guest_logs: bool) -> Targets {
    let guests = if guest_logs {
        LevelFilter::INFO
    } else {
        LevelFilter::OFF
    };
    Targets::new()
        .with_target(EXPORTED_TARGET, LevelFilter::INFO)
        .with_target(GUEST_TARGET, guests)
        .with_default(LevelFilter::OFF)
}

/// Whether the environment asks for trace export (`env` reads a variable).
pub fn requested(env: impl Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// The protocol asked for, when it is not the one built in (the traces variable wins over
/// the general one, as in the SDK; the SDK itself would fall back to HTTP/protobuf without
/// a word, towards a port that may speak gRPC).
pub fn unsupported_protocol(env: impl Fn(&str) -> Option<String>) -> Option<TracesError> {
    let asked = [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]
    .into_iter()
    .find_map(|variable| {
        let value = env(variable)?.trim().to_string();
        (!value.is_empty()).then_some((variable, value))
    })?;
    let (variable, value) = asked;
    (!value.eq_ignore_ascii_case(PROTOCOL)).then_some(TracesError::Protocol { variable, value })
}

/// The running exporter: hold it while the host runs, then [`Traces::shutdown`] it so that
/// the last batch is sent.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Sends the spans still queued and stops the exporter (bounded by the SDK's export
    /// timeout). Call it outside the async runtime: it blocks.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "traces: the last spans may not have been exported");
        }
    }
}

/// The OpenTelemetry layer and its exporter when [`requested`] by the process's environment;
/// `Ok(None)` when not (nothing is built: no thread, no connection, no cost beyond the
/// spans the log already has). An error is a configuration the exporter refuses.
pub fn layer<S>(guest_logs: bool) -> Result<Option<(impl Layer<S>, Traces)>, TracesError>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    let env = |name: &str| std::env::var(name).ok();
    if !requested(env) {
        return Ok(None);
    }
    if let Some(refused) = unsupported_protocol(env) {
        return Err(refused);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(SERVICE_NAME);
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer(SERVICE_NAME);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(export_filter(guest_logs));
    Ok(Some((layer, Traces { provider })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_keeps_at_most_its_share_of_an_error() {
        assert_eq!(status_text("short"), "short");
        let long = "s".repeat(10_000);
        let cut = status_text(&long);
        assert_eq!(cut.chars().count(), MAX_STATUS_CHARS + 1);
    }

    #[test]
    fn guest_lines_are_exported_only_when_asked() {
        let info = &tracing::Level::INFO;
        let off = export_filter(false);
        assert!(off.would_enable("wasmop::reconcile", info));
        assert!(!off.would_enable(GUEST_TARGET, &tracing::Level::ERROR));
        assert!(!off.would_enable("kube_client", info));
        let on = export_filter(true);
        assert!(on.would_enable(GUEST_TARGET, info));
        assert!(!on.would_enable(GUEST_TARGET, &tracing::Level::DEBUG));
    }

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn only_an_endpoint_turns_export_on() {
        assert!(!requested(env(&[])));
        assert!(!requested(env(&[
            ("OTEL_SERVICE_NAME", "x"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100")
        ])));
        assert!(requested(env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4318"
        )])));
        assert!(requested(env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:4318/v1/traces"
        )])));
    }

    #[test]
    fn only_http_protobuf_is_accepted() {
        assert!(unsupported_protocol(env(&[])).is_none());
        assert!(
            unsupported_protocol(env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]))
                .is_none()
        );
        let refused = unsupported_protocol(env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]));
        assert_eq!(
            refused.map(|e| e.to_string()).as_deref(),
            Some(
                "traces over OTLP: OTEL_EXPORTER_OTLP_PROTOCOL=grpc: only http/protobuf is built in"
            )
        );
        // The traces variable wins, either way.
        assert!(
            unsupported_protocol(env(&[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
            ]))
            .is_none()
        );
        assert!(
            unsupported_protocol(env(&[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
            ]))
            .is_some()
        );
    }

    #[test]
    fn an_empty_endpoint_or_a_disabled_sdk_is_off() {
        // The specification: an empty value is as if unset.
        assert!(!requested(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "")])));
        assert!(!requested(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ])));
        assert!(requested(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "false"),
        ])));
    }
}
