//! `metaServer.telemetry`: where `serve` exports its OpenTelemetry traces (OTLP over
//! HTTP/protobuf). The standard `OTEL_*` variables win over these keys; telemetry is off unless
//! one of them names an endpoint.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::values::{Flag, HttpUrl, Str, StrMap, kind};

/// `metaServer.telemetry`, checked; `headers` are kept as written (`${VAR}` expanded when
/// serving starts, never stored expanded).
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetrySettings {
    /// `false` turns telemetry off even when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
    pub enabled: bool,
    /// The OTLP/HTTP base URL (`/v1/traces` is appended), like `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: Option<String>,
    /// `service.name` of the traces, unless `OTEL_SERVICE_NAME` says otherwise.
    pub service_name: Option<String>,
    /// The share of new traces sampled (a parent's decision is followed), unless
    /// `OTEL_TRACES_SAMPLER` is set.
    pub sample_ratio: Option<f64>,
    /// Headers sent with each export (an API key as `${VAR}`).
    pub headers: BTreeMap<String, String>,
}

/// `metaServer.telemetry` as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct TelemetryBlock {
    enabled: Option<Flag>,
    endpoint: Option<HttpUrl>,
    service_name: Option<Str>,
    sample_ratio: Option<Value>,
    #[serde(default)]
    headers: StrMap,
}

impl TelemetryBlock {
    /// The checked settings; an error is the key (under `metaServer.telemetry`) and what to do.
    pub(super) fn settings(self) -> Result<TelemetrySettings, (&'static str, String)> {
        let sample_ratio = match self.sample_ratio {
            None => None,
            Some(Value::Number(n)) => match n.as_f64().filter(|r| (0.0..=1.0).contains(r)) {
                Some(ratio) => Some(ratio),
                None => {
                    return Err((
                        "sampleRatio",
                        format!(
                            "must be a number from 0 to 1 (the share of traces kept), found {n}"
                        ),
                    ));
                }
            },
            Some(other) => {
                return Err((
                    "sampleRatio",
                    format!(
                        "must be a number from 0 to 1 (the share of traces kept), found {}",
                        kind(&other)
                    ),
                ));
            }
        };
        let service_name = self.service_name.map(|s| s.0);
        if service_name.as_ref().is_some_and(|s| s.trim().is_empty()) {
            return Err((
                "serviceName",
                "is empty; name the service as your tracing backend should show it".into(),
            ));
        }
        Ok(TelemetrySettings {
            enabled: self.enabled.is_none_or(|f| f.0),
            endpoint: self.endpoint.map(|u| u.0.trim_end_matches('/').to_owned()),
            service_name,
            sample_ratio,
            headers: self.headers.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Settings;

    fn parse(block: &str) -> Result<Settings, String> {
        let text = format!(r#"{{"metaServer": {{"telemetry": {block}}}, "mcpServers": {{}}}}"#);
        Settings::parse(Path::new("/cfg/config.json"), &text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_block_is_read_with_headers_unexpanded() {
        let s = parse(
            r#"{"endpoint": "http://127.0.0.1:4318/", "serviceName": "gw", "sampleRatio": 0.25,
                "headers": {"x-api-key": "${KEY}"}}"#,
        )
        .unwrap();
        let t = s.telemetry.unwrap();
        assert_eq!(t.endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        assert_eq!(t.service_name.as_deref(), Some("gw"));
        assert_eq!(t.sample_ratio, Some(0.25));
        assert_eq!(t.headers["x-api-key"], "${KEY}");
        assert!(t.enabled);
        assert_eq!(parse("{}").unwrap().telemetry.unwrap().endpoint, None);
        assert!(
            parse(r#"{"enabled": false}"#)
                .unwrap()
                .telemetry
                .is_some_and(|t| !t.enabled)
        );
    }

    #[test]
    fn bad_keys_are_named() {
        let e = parse(r#"{"sampleRatio": 2}"#).unwrap_err();
        assert!(
            e.contains("metaServer.telemetry.sampleRatio") && e.contains("from 0 to 1"),
            "{e}"
        );
        let e = parse(r#"{"sampleRatio": "half"}"#).unwrap_err();
        assert!(e.contains("found a string"), "{e}");
        let e = parse(r#"{"endpoint": "grpc://x:4317"}"#).unwrap_err();
        assert!(
            e.contains("metaServer.telemetry.endpoint") && e.contains("http(s) URL"),
            "{e}"
        );
        let e = parse(r#"{"endpont": "http://x"}"#).unwrap_err();
        assert!(e.contains("metaServer.telemetry"), "{e}");
        let e = parse(r#"{"serviceName": " "}"#).unwrap_err();
        assert!(e.contains("metaServer.telemetry.serviceName"), "{e}");
        let e = parse(r#"{"headers": {"k": []}}"#).unwrap_err();
        assert!(e.contains("metaServer.telemetry.headers"), "{e}");
    }
}
