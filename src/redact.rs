//! Keeping secrets out of what meta-server writes (error texts, log lines, tables): the values
//! a server's config takes from the environment or holds in secret-looking keys, and
//! secret-looking `key=value` pairs and bearer tokens in text an upstream wrote (its stderr).

use std::sync::{Arc, LazyLock};

use parking_lot::RwLock;

use regex::Regex;

/// What replaces a secret.
pub const MASK: &str = "[redacted]";
/// Values shorter than this are not treated as secrets: they would mangle ordinary words.
const MIN_SECRET: usize = 4;

/// `token=abc`, `"api_key": "abc"`, `password: abc`, ...: the key is kept, the value masked.
static PAIRS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)\b((?:access[_-]?|refresh[_-]?|id[_-]?)?token|secret|client[_-]?secret|password|passwd|api[_-]?key|access[_-]?key|authorization|cookie)("?\s*[=:]\s*"?)([^\s"'&,;]+)"#,
    )
    .expect("static regex")
});
/// `Bearer abc.def`, `Basic dXNlcg==`.
static SCHEMES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}").expect("static regex")
});

/// The redactor for everything the process writes to stderr (logs, the final error).
static PROCESS: RwLock<Option<Arc<Redactor>>> = RwLock::new(None);

/// Sets the secrets of every configured server as the process-wide redactor.
pub fn set_process(redactor: Redactor) {
    *PROCESS.write() = Some(Arc::new(redactor));
}

/// Adds `secrets` (a server added to the running config) to the process-wide redactor; those
/// it had stay, as logs may still name what they belonged to.
pub fn extend_process(secrets: impl IntoIterator<Item = String>) {
    let mut process = PROCESS.write();
    let known = process
        .as_ref()
        .map(|r| r.secrets.clone())
        .unwrap_or_default();
    *process = Some(Arc::new(Redactor::new(known.into_iter().chain(secrets))));
}

/// The process-wide redactor: secret-looking pairs only until [`set_process`] ran.
pub fn process() -> Arc<Redactor> {
    PROCESS.read().clone().unwrap_or_default()
}

/// Masks known secret values and secret-looking pairs in text before it leaves the process.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is masked whole.
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .filter(|s| s.chars().count() >= MIN_SECRET)
            .collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Self { secrets }
    }

    /// `text` with every known secret and every secret-looking pair masked.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        // Schemes first: `Authorization: Bearer x` must lose `x`, not just `Bearer`.
        let out = SCHEMES.replace_all(&out, |c: &regex::Captures| format!("{} {MASK}", &c[1]));
        PAIRS
            .replace_all(&out, |c: &regex::Captures| {
                if &c[3] == MASK {
                    c[0].to_owned()
                } else {
                    format!("{}{}{MASK}", &c[1], &c[2])
                }
            })
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_secret_looking_pairs_are_masked() {
        let r = Redactor::new(["s3cr3t-value".to_owned(), "abc".to_owned()]);
        assert_eq!(
            r.apply("GET https://x/mcp?key=s3cr3t-value failed"),
            "GET https://x/mcp?key=[redacted] failed"
        );
        assert_eq!(
            r.apply("abc stays: too short to be one"),
            "abc stays: too short to be one"
        );
        assert_eq!(
            r.apply("token=ghp_123456 and password: hunter22, api_key=\"k-9\""),
            "token=[redacted] and password: [redacted], api_key=\"[redacted]\""
        );
        assert_eq!(
            r.apply("sent Authorization: Bearer eyJhbGciOi.x.y"),
            "sent Authorization: [redacted] [redacted]"
        );
        assert_eq!(r.apply("a bearer of news"), "a bearer of news");
        assert_eq!(
            r.apply("nothing secret in /tmp/x.jsonl"),
            "nothing secret in /tmp/x.jsonl"
        );
    }
}
