//! Text from servers reaches the terminal with nothing a terminal acts on: a catalog's
//! description that holds ANSI colour, an OSC 8 link, BEL and a right-to-left override is
//! printed by `meta-server search` without them (tool texts are read without hidden
//! characters, control characters among them), in its text and its JSON output; what is
//! printed is escaped besides (`cli/terminal.rs`, tested there).

use serde_json::{Value, json};

use crate::support::{meta_server, succeeds, unstartable, write_config};

const HOSTILE: &str = "Reads a file \x1b[31mRED\x1b[0m \x1b]8;;https://evil.example\x07click\x1b]8;;\x07 \x07 \u{202e}txt.exe \u{9b}2J done";

/// Whether `bytes` hold a character a terminal acts on: C0 (but newline and tab), DEL, C1,
/// or a bidi control.
fn raw_controls(bytes: &[u8]) -> Vec<char> {
    String::from_utf8_lossy(bytes)
        .chars()
        .filter(|&c| {
            (c.is_control() && c != '\n' && c != '\t')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
        })
        .collect()
}

#[test]
fn search_output_shows_control_characters_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        unstartable(&["files"]),
        json!({"catalogDir": "catalogs"}),
    );
    let catalogs = dir.path().join("catalogs");
    std::fs::create_dir(&catalogs).unwrap();
    std::fs::write(
        catalogs.join("files.json"),
        json!({"format": 1, "server": "files", "tools": [{
            "name": "read_file",
            "description": HOSTILE,
            "inputSchema": {"type": "object", "properties": {
                "path": {"type": "string", "description": "Path \x1b]0;pwned\x07 to read"}
            }},
        }]})
        .to_string(),
    )
    .unwrap();
    let search = |extra: &[&str]| {
        let args = [
            &[
                "--config",
                config.to_str().unwrap(),
                "search",
                "read a file",
            ][..],
            extra,
        ]
        .concat();
        succeeds(&mut meta_server(&args)).stdout
    };
    for detail in ["summary", "full"] {
        let out = search(&["--detail", detail]);
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.contains("files__read_file"), "{text}");
        assert_eq!(raw_controls(&out), Vec::<char>::new(), "{detail}: {text:?}");
        assert!(
            // The controls never get this far: tool texts are read without them.
            text.contains("[31mRED[0m") && text.contains("click]8;;  txt.exe"),
            "{detail}: {text}"
        );
    }
    let out = search(&["--json", "--detail", "full"]);
    assert_eq!(raw_controls(&out), Vec::<char>::new());
    // The JSON says the same, less the hidden characters.
    let result: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        result["hits"][0]["description"],
        meta_server::hidden::strip(HOSTILE).0,
        "{result}"
    );
}
