//! Tool texts that read as instructions to the model rather than a description of the tool:
//! the marks of published tool-poisoning attacks (overriding earlier instructions, `<IMPORTANT>`
//! blocks, hiding things from the user, reaching for credentials, sending data elsewhere,
//! steering other tools). A match flags the tool; it never hides it.

use std::sync::LazyLock;

use regex::{Regex, RegexBuilder};

/// What each pattern catches, and the pattern (case-insensitive, `\s+` between words).
const PATTERNS: [(&str, &str); 10] = [
    (
        "overrides earlier instructions",
        r"\b(ignore|disregard|forget|override)\s+(all\s+|any\s+|the\s+|your\s+)*(previous|prior|above|earlier|preceding|system|original)\s+(instructions?|prompts?|rules|messages|directions|guidelines)",
    ),
    (
        "an instruction block",
        r"<\s*/?\s*(important|system|instructions?|hidden|admin)\s*>",
    ),
    (
        "hides something from the user",
        r"\b(do\s+not|don'?t|never)\s+(tell|inform|notify|alert|warn|mention\s+(this|it)\s+to|reveal\s+(this|it)\s+to|show\s+(this|it)\s+to)\s+the\s+user|\bwithout\s+(telling|informing|notifying|alerting)\s+the\s+user|\bthe\s+user\s+(must|should)\s+not\s+(know|see|be\s+told)|\b(hide|conceal)\s+(this|it)\s+from\s+the\s+user",
    ),
    (
        "reaches for credential files",
        r"~/\.ssh|\.ssh/|\bid_(rsa|ed25519|ecdsa|dsa)\b|\.aws/credentials|\.cursor/mcp\.json|/etc/(passwd|shadow)\b|\.netrc\b|\.kube/config|\.docker/config\.json",
    ),
    (
        "asks for secrets to be passed along",
        r"\b(read|pass|send|include|attach|upload|leak|forward)\s+(the\s+|your\s+|all\s+|any\s+)*(private\s+keys?|ssh\s+keys?|credentials|passwords|secrets|environment\s+variables|api\s+keys)\s+(to|as|in|into|with)\b",
    ),
    (
        "sends data to a third party",
        r"\b(send|forward|upload|post|exfiltrate|transmit|copy)\s+(it|them|this|everything|all\s+\w+|the\s+(whole\s+|full\s+|entire\s+)?(conversation|chat|history|context|contents?|messages?|results?|output))\s+to\s+(https?://|\+?\d[\d\s-]{6,}|[\w-]+\.(com|net|org|io|xyz|ru)\b)",
    ),
    (
        "redirects messages",
        r"\b(change|replace|set)\s+the\s+(recipient|receiver|destination|to\s+address)\b|\bsend\s+all\s+(emails?|messages|mail)\s+to\b",
    ),
    (
        "steers other tools",
        r"\bwhen\s+this\s+tool\s+is\s+(available|loaded|present)|\bwhen\s+\(?[\w.-]+\)?\s+[\w.-]+\s+is\s+(invoked|called)\b|\b(all\s+)?other\s+tools?\s+(must|should)\b",
    ),
    (
        "threatens that the tool fails otherwise",
        r"\botherwise\s+(the|this)\s+tool\s+will\s+not\s+work|\bthe\s+tool\s+will\s+(fail|crash|not\s+work)\s+unless\b",
    ),
    (
        "addresses the model",
        r"\b(you\s+are\s+now|as\s+an\s+ai\s+(assistant|model)|note\s+to\s+the\s+(ai|assistant|model|llm)|(ai|assistant|model|llm)\s*,\s*(you\s+must|please|always))\b",
    ),
];

static COMPILED: LazyLock<Vec<(&str, Regex)>> = LazyLock::new(|| {
    PATTERNS
        .iter()
        .map(|(what, pattern)| {
            let re = RegexBuilder::new(pattern)
                .case_insensitive(true)
                .build()
                .expect("an injection pattern compiles");
            (*what, re)
        })
        .collect()
});

/// Why `texts` read as instructions to the model: what each matching pattern catches, with the
/// first text it matched (at most 60 characters); empty for an ordinary description.
pub fn findings<'a>(texts: impl IntoIterator<Item = &'a str> + Clone) -> Vec<String> {
    COMPILED
        .iter()
        .filter_map(|(what, re)| {
            let found = texts.clone().into_iter().find_map(|t| re.find(t))?;
            let quote: String = found.as_str().chars().take(60).collect();
            Some(format!("{what} (\"{quote}\")"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::catalog::{Catalog, RawTool, ToolDef};

    fn corpus(name: &str) -> Vec<String> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/injection")
            .join(name);
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_published_poisoning_example_is_flagged() {
        let poisoned = corpus("poisoned.txt");
        assert!(poisoned.len() >= 12);
        for text in &poisoned {
            assert!(!findings([text.as_str()]).is_empty(), "not flagged: {text}");
        }
    }

    #[test]
    fn near_miss_ordinary_descriptions_are_not_flagged() {
        for text in &corpus("ordinary.txt") {
            assert_eq!(findings([text.as_str()]), Vec::<String>::new(), "{text}");
        }
    }

    /// The shipped catalogs and the development sets: at most one false flag in 500 tools.
    /// `cargo test --lib injection -- --nocapture` prints the count (EVAL.md).
    #[test]
    fn false_flags_on_the_shipped_and_dev_catalogs() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut tools: Vec<ToolDef> = Vec::new();
        for entry in std::fs::read_dir(root.join("catalogs")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                tools.extend(Catalog::load(&path).unwrap().unwrap().tool_defs());
            }
        }
        for set in ["azure", "mcp-bench", "metatool"] {
            let text = std::fs::read_to_string(root.join(format!("evaldata/{set}.catalog.jsonl")))
                .unwrap();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let raw: RawTool = serde_json::from_str(line).unwrap();
                tools.extend(ToolDef::from_json(&raw).ok());
            }
        }
        let flagged: Vec<(String, Vec<String>)> = tools
            .iter()
            .map(|t| (t.name.clone(), t.flags()))
            .filter(|(_, f)| !f.is_empty())
            .collect();
        eprintln!(
            "injection flags: {} of {} ordinary tools: {flagged:?}",
            flagged.len(),
            tools.len()
        );
        assert!(tools.len() > 600, "{}", tools.len());
        assert!(flagged.len() * 500 <= tools.len(), "{flagged:?}");
    }
}
