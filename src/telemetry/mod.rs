//! OpenTelemetry traces of `serve`, exported over OTLP (HTTP/protobuf) when an endpoint is
//! configured (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
//! `metaServer.telemetry.endpoint`), off otherwise.
//!
//! Spans are ordinary `tracing` spans with the target [`TARGET`]: the log output never shows
//! them, and with telemetry off their call sites are disabled, so they cost a load of an
//! atomic each. `context.rs` carries W3C trace context in and out (request `_meta`, HTTP
//! headers); `export.rs` is the exporter's HTTP client.

mod context;
mod export;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;

use crate::config::TelemetrySettings;

pub use context::{adopt_parent, inject, mirror_headers};

/// The `tracing` target of every span that is exported (and of no log line).
pub const TARGET: &str = "meta_server::otel";

/// The `service.name` of traces unless `OTEL_SERVICE_NAME` or the config says otherwise.
const SERVICE_NAME: &str = "meta-server";

/// How long each export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether spans are exported: read by the code that carries trace context, so that it costs
/// nothing when they are not.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether this process exports traces.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Whether span fields may carry argument values and results (`META_SERVER_LOG_PAYLOADS=1`).
pub fn payloads() -> bool {
    static PAYLOADS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PAYLOADS.get_or_init(|| std::env::var_os("META_SERVER_LOG_PAYLOADS").is_some_and(|v| v == "1"))
}

/// Why traces cannot be exported as configured.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(
        "metaServer.telemetry.headers \"{name}\": the value uses ${{{var}}}, which is not set; export it or remove the header"
    )]
    Unset { name: String, var: String },
    #[error("cannot set up the OTLP trace exporter: {0}")]
    Exporter(String),
}

/// The tracer provider of a process that exports traces; [`Telemetry::shutdown`] sends what
/// is left.
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Starts exporting when an endpoint is configured (the `OTEL_*` variables win over
    /// `settings`); `None` when telemetry is off. Exports run on `runtime`, which must outlive
    /// [`Telemetry::shutdown`].
    pub fn start(
        settings: Option<&TelemetrySettings>,
        runtime: tokio::runtime::Handle,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, TelemetryError> {
        let set = |var: &str| env(var).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            || settings.is_some_and(|s| !s.enabled)
        {
            return Ok(None);
        }
        let from_env = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"))
            .is_some();
        let configured = settings.and_then(|s| s.endpoint.as_deref());
        if !from_env && configured.is_none() {
            return Ok(None);
        }
        let mut headers = std::collections::HashMap::new();
        for (name, value) in settings.map(|s| &s.headers).into_iter().flatten() {
            let value = crate::config::expand(value, &|var| env(var)).map_err(
                |crate::config::Unset(var)| TelemetryError::Unset {
                    name: name.clone(),
                    var,
                },
            )?;
            headers.insert(name.clone(), value);
        }
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(export::OnRuntime::new(runtime))
            .with_timeout(EXPORT_TIMEOUT)
            .with_headers(headers);
        if let (false, Some(base)) = (from_env, configured) {
            exporter = exporter.with_endpoint(format!("{base}/v1/traces"));
        }
        let exporter = exporter
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let mut resource = Resource::builder();
        if set("OTEL_SERVICE_NAME").is_none() {
            let name = settings.and_then(|s| s.service_name.clone());
            resource = resource.with_service_name(name.unwrap_or_else(|| SERVICE_NAME.into()));
        }
        let mut provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build());
        if let (None, Some(ratio)) = (
            set("OTEL_TRACES_SAMPLER"),
            settings.and_then(|s| s.sample_ratio),
        ) {
            let ratio = Box::new(Sampler::TraceIdRatioBased(ratio));
            provider = provider.with_sampler(Sampler::ParentBased(ratio));
        }
        let provider = provider.build();
        ENABLED.store(true, Ordering::Relaxed);
        Ok(Some(Self { provider }))
    }

    /// The `tracing` layer that turns the spans of [`TARGET`] into OpenTelemetry spans (and
    /// sees nothing else).
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        let tracer = self.provider.tracer(SERVICE_NAME);
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_filter(Targets::new().with_target(TARGET, tracing::Level::TRACE))
    }

    /// Exports the spans not sent yet, then stops the exporter.
    pub fn shutdown(self) {
        ENABLED.store(false, Ordering::Relaxed);
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!("traces not all exported at exit: {e}");
        }
    }
}
