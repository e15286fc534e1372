//! Which protocol revision a connection starts with. A server whose revision is not known yet
//! is probed with `server/discover` (rmcp's `Auto`: 2026-07-28 if it answers, else
//! `initialize`); one known to speak an `initialize` revision gets `initialize` straight away,
//! never a probe (dual-era servers lock a connection into the era of its first request).
//! The revision is known from the last connection in this process, else from the catalog.

use rmcp::model::ProtocolVersion;
use rmcp::service::ClientLifecycleMode;

use super::UpstreamError;

/// How the next connection to a server starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Start {
    /// `server/discover` first, falling back to `initialize` on the same connection (and on a
    /// new one if the probe broke it).
    Probe,
    /// Plain `initialize` at 2025-11-25, as every pre-2026 server expects.
    Initialize,
}

impl Start {
    /// The start for a server that last spoke `known` (`None`: never connected).
    pub(super) fn after(known: Option<&ProtocolVersion>) -> Self {
        match known {
            Some(version) if version.has_initialize() => Self::Initialize,
            _ => Self::Probe,
        }
    }

    /// The start for the next connection after this one failed with `error`, if it changes:
    /// a probe that timed out is not made again (a pre-2026 server may ignore it until it is
    /// initialized), and an `initialize` the server refused lets the next connection probe (a
    /// server may drop the older revision).
    pub(super) fn after_failure(&self, error: &UpstreamError) -> Option<Self> {
        match (self, error) {
            (Self::Probe, UpstreamError::ConnectTimeout { .. }) => Some(Self::Initialize),
            (Self::Initialize, UpstreamError::Initialize { .. }) => Some(Self::Probe),
            _ => None,
        }
    }

    /// The revision a slot keeps to make this start next (see [`Self::after`]).
    pub(super) fn assumed(&self) -> Option<ProtocolVersion> {
        match self {
            Self::Probe => None,
            Self::Initialize => Some(ProtocolVersion::V_2025_11_25),
        }
    }

    /// rmcp's lifecycle for this start.
    pub(super) fn lifecycle(&self) -> ClientLifecycleMode {
        match self {
            Self::Probe => ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            },
            Self::Initialize => ClientLifecycleMode::Initialize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_server_known_to_initialize_is_not_probed() {
        assert_eq!(Start::after(None), Start::Probe);
        assert_eq!(
            Start::after(Some(&ProtocolVersion::V_2026_07_28)),
            Start::Probe
        );
        for legacy in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2024_11_05] {
            assert_eq!(Start::after(Some(&legacy)), Start::Initialize);
        }
        assert_eq!(
            Start::Initialize.lifecycle(),
            ClientLifecycleMode::Initialize
        );
        for start in [Start::Probe, Start::Initialize] {
            assert_eq!(Start::after(start.assumed().as_ref()), start);
        }
    }

    #[test]
    fn a_timed_out_probe_is_not_repeated_and_a_refused_initialize_probes_next() {
        let timeout = UpstreamError::ConnectTimeout {
            server: "s".into(),
            after: std::time::Duration::from_secs(5),
            stderr: String::new(),
        };
        let refused = UpstreamError::Initialize {
            server: "s".into(),
            message: "-32022".into(),
            stderr: String::new(),
        };
        assert_eq!(
            Start::Probe.after_failure(&timeout),
            Some(Start::Initialize)
        );
        assert_eq!(
            Start::Initialize.after_failure(&refused),
            Some(Start::Probe)
        );
        assert_eq!(Start::Probe.after_failure(&refused), None);
        assert_eq!(Start::Initialize.after_failure(&timeout), None);
        assert!(matches!(
            Start::Probe.lifecycle(),
            ClientLifecycleMode::Auto { preferred_versions, .. }
                if preferred_versions == [ProtocolVersion::V_2026_07_28]
        ));
    }
}
