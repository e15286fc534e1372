use std::cell::Cell;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn max_bytes(n: usize) -> impl Fn(&str) -> bool {
    move |s: &str| s.len() <= n
}

/// Concatenates every page from 0, checking each is non-empty and within `max_chars`.
fn all_pages(text: &str, max_chars: usize) -> String {
    let (mut out, mut at) = (String::new(), 0);
    let total = text.chars().count();
    while at < total {
        let (page, next) = page(text, at, max_chars);
        assert!(!page.is_empty(), "empty page at {at}");
        assert!(page.chars().count() <= max_chars.max(1));
        assert_eq!(next, at + page.chars().count());
        out.push_str(&page);
        at = next;
    }
    assert_eq!(page(text, total, max_chars), (String::new(), total));
    out
}

fn chars_from(text: &str, offset: usize) -> String {
    text.chars().skip(offset).collect()
}

#[test]
fn boundary_names_are_the_notice_vocabulary() {
    let names: Vec<_> = [
        Boundary::JsonElement,
        Boundary::Line,
        Boundary::Section,
        Boundary::Paragraph,
        Boundary::Sentence,
        Boundary::Word,
        Boundary::Char,
    ]
    .map(Boundary::as_str)
    .into();
    assert_eq!(
        names,
        [
            "json-element",
            "line",
            "section",
            "paragraph",
            "sentence",
            "word",
            "char"
        ]
    );
}

#[test]
fn detects_each_kind() {
    assert_eq!(detect("  {\"a\": [1, 2]}\n"), ContentKind::Json);
    assert_eq!(detect("[]"), ContentKind::Json);
    assert_eq!(
        detect("{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n"),
        ContentKind::Ndjson
    );
    assert_eq!(
        detect("# Title\n\nSome text.\n\n- one\n- two\n"),
        ContentKind::Markdown
    );
    let rust = "use std::io;\n\nfn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n";
    assert_eq!(detect(rust), ContentKind::Code);
    let python = "import os\n\ndef main():\n    return os.getcwd()\n";
    assert_eq!(detect(python), ContentKind::Code);
    let prose = "It was a bright cold day in April.\nThe clocks were striking thirteen.\n";
    assert_eq!(detect(prose), ContentKind::Text);
    // Starts like JSON but is not one document: not JSON.
    assert_eq!(detect("{\"a\": 1} trailing words here."), ContentKind::Text);
    assert_eq!(detect("{\"a\": [1, 2}"), ContentKind::Code);
    // A JSON scalar is not a collection to cut.
    assert_eq!(detect("\"just a string\""), ContentKind::Text);
}

#[test]
fn scanner_agrees_with_serde_json() {
    let cases = [
        "[]",
        "{}",
        " [1, -0, 0.5, -1.5e+10, 2E-3, true, false, null] ",
        r#"{"a\"b": "x\\y\/\b\f\n\r\t\u00e9\ud83d\ude00", "": {}}"#,
        "[01]",
        "[1.]",
        "[-]",
        "[.5]",
        "[1e]",
        "[+1]",
        r#"["\x"]"#,
        r#"["\ud800"]"#,
        r#"["\ud800\u0041"]"#,
        r#"["\udc00"]"#,
        r#"["\u12g4"]"#,
        "[\"tab\there\"]",
        "[1,]",
        "[,1]",
        "{\"a\" 1}",
        "{\"a\":1,}",
        "{1:2}",
        "[1] [2]",
        "[1]]",
        "[[1]",
        "{\"a\":[1}]",
        "[tru]",
        "[nul]",
        "[1 2]",
    ];
    for case in cases {
        let serde =
            serde_json::from_str::<Value>(case).is_ok_and(|v| v.is_array() || v.is_object());
        assert_eq!(json::scan(case).is_some(), serde, "{case}");
    }
}

#[test]
fn nesting_deeper_than_serde_allows_is_not_json() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert!(serde_json::from_str::<Value>(&deep).is_err());
    assert_eq!(detect(&deep), ContentKind::Text);
}

/// Found by the `truncate` fuzz target: 128 levels passed the scanner but not serde_json, so
/// a json-element cut of them did not parse.
#[test]
fn scanner_nesting_limit_is_serde_json_s() {
    for depth in [127, 128] {
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let serde = serde_json::from_str::<Value>(&text).is_ok();
        assert_eq!(json::scan(&text).is_some(), serde, "depth {depth}");
        let cut = cut(&text, &max_bytes(usize::MAX));
        if cut.boundary == Boundary::JsonElement {
            serde_json::from_str::<Value>(&cut.shown).unwrap();
        }
    }
}

#[test]
fn json_cut_keeps_elements_of_the_largest_collection() {
    let items: Vec<Value> = (0..50)
        .map(|i| json!({"id": i, "name": format!("item {i}")}))
        .collect();
    let doc = json!({"total": 50, "items": items, "next": "cursor,]}"});
    let text = serde_json::to_string_pretty(&doc).unwrap();
    let cut = cut(&text, &max_bytes(600));
    assert_eq!(cut.boundary, Boundary::JsonElement);
    assert!(cut.shown.len() <= 600);
    let shown: Value = serde_json::from_str(&cut.shown).unwrap();
    let kept = shown["items"].as_array().unwrap().len();
    assert!((1..50).contains(&kept), "{kept}");
    assert_eq!(
        shown["items"].as_array().unwrap()[..],
        doc["items"].as_array().unwrap()[..kept]
    );
    assert_eq!(shown["total"], 50);
    assert_eq!(shown["next"], "cursor,]}");
    assert_eq!(
        cut.detail.as_deref(),
        Some(&*format!("kept {kept} of 50 elements of /items"))
    );
    // The original from next_offset starts with the first element not shown.
    let rest = chars_from(&text, cut.next_offset);
    let first_omitted = serde_json::to_string_pretty(&doc["items"][kept]).unwrap();
    let first_omitted = first_omitted.replace('\n', "\n    ");
    assert!(rest.starts_with(&first_omitted), "{rest:.80}");
    // Formatting of what is shown is the original's.
    assert!(text.starts_with(cut.shown.split(",\n    {\n      \"id\": ").next().unwrap()));
}

#[test]
fn json_that_fits_is_returned_whole() {
    let text = r#"{"a": [1, 2, 3]}"#;
    let cut = cut(text, &max_bytes(100));
    assert_eq!(cut.shown, text);
    assert_eq!(cut.next_offset, text.chars().count());
    assert_eq!(cut.detail, None);
}

#[test]
fn json_pointer_escapes_keys() {
    let big: Vec<u32> = (0..500).collect();
    let doc = json!({"meta": 1, "a/b~c": {"é\"x": big}});
    let text = doc.to_string();
    let cut = cut(&text, &max_bytes(200));
    let detail = cut.detail.unwrap();
    assert!(
        detail.ends_with(" of 500 elements of /a~1b~0c/é\"x"),
        "{detail}"
    );
    serde_json::from_str::<Value>(&cut.shown).unwrap();
    assert!(chars_from(&text, cut.next_offset).starts_with(|c: char| c.is_ascii_digit()));
}

#[test]
fn json_descends_into_the_first_element_when_none_fits_whole() {
    let rows = |n: u32| json!({"rows": (0..200).map(|i| i * n).collect::<Vec<_>>()});
    let doc = json!([rows(1), rows(2)]);
    let text = doc.to_string();
    let cut = cut(&text, &max_bytes(300));
    let shown: Value = serde_json::from_str(&cut.shown).unwrap();
    let kept = shown[0]["rows"].as_array().unwrap().len();
    assert_eq!(shown.as_array().unwrap().len(), 1);
    assert!(kept > 10);
    assert_eq!(
        cut.detail.as_deref(),
        Some(&*format!(
            "kept {kept} of 200 elements of /0/rows; only the first of 2 elements of the root array"
        ))
    );
    assert_eq!(
        chars_from(&text, cut.next_offset),
        text[text.find(&format!(",{},", kept)).unwrap() + 1..]
    );
}

#[test]
fn json_falls_back_to_text_when_zero_elements_do_not_fit() {
    let doc = json!({"header": "h".repeat(500), "items": (0..2000).collect::<Vec<_>>()});
    let text = doc.to_string();
    let cut = cut(&text, &max_bytes(100));
    assert_ne!(cut.boundary, Boundary::JsonElement);
    assert!(cut.shown.len() <= 100 && !cut.shown.is_empty());
    assert!(text.starts_with(&cut.shown));
}

#[test]
fn an_empty_collection_that_does_not_fit_is_cut_as_text() {
    let cut = cut("[]", &max_bytes(1));
    assert_eq!((cut.shown.as_str(), cut.next_offset), ("[", 1));
}

#[test]
fn json_whose_bulk_is_one_string_is_cut_as_text() {
    let text = json!({"text": "many words ".repeat(1000)}).to_string();
    let cut = cut(&text, &max_bytes(500));
    assert_eq!(cut.boundary, Boundary::Word);
    assert!(cut.shown.starts_with("{\"text\":\"many words many") && cut.shown.len() > 490);
}

#[test]
fn text_cuts_whole_lines() {
    let text: String = (0..100)
        .map(|i| format!("line {i}: something happened\n"))
        .collect();
    let cut = cut(&text, &max_bytes(200));
    assert_eq!(cut.boundary, Boundary::Line);
    assert!(cut.shown.ends_with('\n') && cut.shown.len() <= 200);
    assert!(cut.shown.len() > 150);
    assert_eq!(chars_from(&text, cut.next_offset), text[cut.shown.len()..]);
}

#[test]
fn one_huge_line_is_cut_at_a_sentence_then_a_word_then_a_char() {
    let prose = "Ünïcode sentences go on. ".repeat(10_000);
    let cut1 = cut(&prose, &max_bytes(1000));
    assert_eq!(cut1.boundary, Boundary::Sentence);
    assert!(cut1.shown.ends_with(". ") && cut1.shown.len() > 900);

    let words = "wörd ".repeat(10_000);
    let cut2 = cut(&words, &max_bytes(1000));
    assert_eq!(cut2.boundary, Boundary::Word);
    assert!(cut2.shown.ends_with(' ') && cut2.shown.len() > 990);

    let blob = "ab€".repeat(10_000);
    let cut3 = cut(&blob, &max_bytes(1000));
    assert_eq!(cut3.boundary, Boundary::Char);
    assert!(cut3.shown.len() > 996 && cut3.shown.len() <= 1000);
    assert_eq!(cut3.next_offset, cut3.shown.chars().count());
}

#[test]
fn short_lines_before_a_huge_one_do_not_waste_the_budget() {
    let text = format!("header\n{}", "word ".repeat(10_000));
    let cut = cut(&text, &max_bytes(1000));
    assert_eq!(cut.boundary, Boundary::Word);
    assert!(cut.shown.len() > 990);
}

#[test]
fn markdown_prefers_sections_then_paragraphs() {
    let section = |i: usize| {
        format!(
            "## Part {i}\n\nFirst paragraph of part {i}.\n\n```\ncode # not a heading\n\n```\n\nSecond.\n\n"
        )
    };
    let doc: String = (0..20).map(section).collect();
    let sections = cut(&doc, &max_bytes(300));
    assert_eq!(sections.boundary, Boundary::Section);
    assert!(chars_from(&doc, sections.next_offset).starts_with("## Part "));

    let one_section = format!(
        "# Only\n\n{}",
        (0..40)
            .map(|i| format!("Paragraph {i} line one\nline two.\n\n"))
            .collect::<String>()
    );
    let cut2 = cut(&one_section, &max_bytes(300));
    assert_eq!(cut2.boundary, Boundary::Paragraph);
    assert!(chars_from(&one_section, cut2.next_offset).starts_with("Paragraph "));
}

#[test]
fn code_prefers_blank_line_blocks() {
    let code: String = (0..30)
        .map(|i| format!("fn f{i}() {{\n    let x = {i};\n    x + 1;\n}}\n\n"))
        .collect();
    let cut = cut(&code, &max_bytes(400));
    assert_eq!(detect(&code), ContentKind::Code);
    assert_eq!(cut.boundary, Boundary::Paragraph);
    assert!(cut.shown.ends_with("}\n\n"));
}

#[test]
fn nothing_fits_gives_an_empty_prefix() {
    let cut = cut("ééé", &max_bytes(1));
    assert_eq!((cut.shown.as_str(), cut.next_offset), ("", 0));
}

#[test]
fn fits_is_called_a_logarithmic_number_of_times() {
    let text: String = (0..100_000).map(|i| format!("log line {i}\n")).collect();
    let calls = Cell::new(0);
    let fits = |s: &str| {
        calls.set(calls.get() + 1);
        s.len() <= 40_000
    };
    cut(&text, &fits);
    assert!(calls.get() <= 30, "{} calls", calls.get());

    let items: Vec<u32> = (0..200_000).collect();
    let json = serde_json::to_string(&json!({"items": items})).unwrap();
    calls.set(0);
    let cut = cut(&json, &fits);
    assert_eq!(cut.boundary, Boundary::JsonElement);
    assert!(calls.get() <= 30, "{} calls", calls.get());
}

#[test]
fn pages_prefer_line_ends_then_json_ends_then_whitespace() {
    assert_eq!(page("abc\ndef\nghi", 0, 9), ("abc\ndef\n".to_owned(), 8));
    assert_eq!(
        page("{\"a\":1},{\"b\":2}", 0, 12),
        ("{\"a\":1},".to_owned(), 8)
    );
    assert_eq!(page("one two three", 0, 10), ("one two ".to_owned(), 8));
    assert_eq!(page("abcdefgh", 2, 3), ("cde".to_owned(), 5));
    assert_eq!(page("ééé", 1, 100), ("éé".to_owned(), 3));
    assert_eq!(page("abc", 7, 2), (String::new(), 3));
    // A newline early in the window does not make a tiny page.
    assert_eq!(page("a\nbcdefghij", 0, 8), ("a\nbcdefg".to_owned(), 8));
}

fn snapshot(kind: &str, text: &str, budget: usize) -> String {
    let cut = cut(text, &max_bytes(budget));
    format!(
        "kind: {:?}\nboundary: {}\nnext_offset: {} of {}\ndetail: {}\n--- shown ---\n{}",
        detect(text),
        cut.boundary.as_str(),
        cut.next_offset,
        text.chars().count(),
        cut.detail.as_deref().unwrap_or("-"),
        cut.shown
    ) + &format!(
        "\n--- {kind}: first omitted ---\n{:.60}",
        chars_from(text, cut.next_offset)
    )
}

macro_rules! assert_cut_snapshot {
    ($name:literal, $text:expr, $budget:expr) => {
        insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!($name, snapshot($name, $text, $budget));
        })
    };
}

#[test]
fn snapshot_json() {
    let issues: Vec<Value> = (1..=40)
        .map(|i| json!({"number": i, "title": format!("Issue number {i}"), "state": if i % 3 == 0 { "closed" } else { "open" }, "labels": ["bug"]}))
        .collect();
    let doc = json!({"total_count": 40, "incomplete_results": false, "items": issues});
    assert_cut_snapshot!(
        "truncate_json",
        &serde_json::to_string_pretty(&doc).unwrap(),
        700
    );
}

#[test]
fn snapshot_ndjson() {
    let log: String = (0..30)
        .map(|i| format!("{{\"ts\":\"2025-01-01T00:00:{i:02}Z\",\"level\":\"info\",\"msg\":\"request {i} served\"}}\n"))
        .collect();
    assert_cut_snapshot!("truncate_ndjson", &log, 400);
}

#[test]
fn snapshot_markdown() {
    let doc = "# meta-server\n\nOne MCP entry in front of many servers.\n\n## Install\n\nRun `cargo install meta-server`.\n\n```sh\nmeta-server serve\n```\n\n## Configure\n\nPoint it at your `mcpServers` file.\nEach server is started lazily.\n\n## Budgets\n\nResults over the budget are cut at a boundary and stored whole.\n\n## Recovery\n\nFollow the notice's hint.\n";
    assert_cut_snapshot!("truncate_markdown", doc, 250);
}

#[test]
fn snapshot_code() {
    let code = "use std::io;\n\n/// Adds one.\nfn add_one(x: u32) -> u32 {\n    x + 1\n}\n\n/// Doubles.\nfn double(x: u32) -> u32 {\n    x * 2\n}\n\nfn main() -> io::Result<()> {\n    let n = double(add_one(1));\n    assert_eq!(n, 4);\n    Ok(())\n}\n";
    assert_cut_snapshot!("truncate_code", code, 150);
}

#[test]
fn snapshot_prose() {
    let prose = "The meta-server keeps results whole. What the client sees is a prefix, cut where a reader would stop: at the end of a line, or of a sentence when a line is very long. Nothing is summarised away. The rest can be read back page by page, and following the offsets from zero rebuilds the original exactly. This paragraph is one long line on purpose.\n";
    assert_cut_snapshot!("truncate_prose", prose, 200);
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e9f64..1e9).prop_map(Value::from),
        r#"[a-z é😀"\\/\n\t\x01,\]\}]{0,12}"#.prop_map(Value::String),
    ];
    let collections = leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((r#"[a-z~/é"]{0,6}"#, inner), 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    collections.prop_filter("a collection", |v| v.is_array() || v.is_object())
}

fn json_text() -> impl Strategy<Value = String> {
    (json_value(), any::<bool>()).prop_map(|(v, pretty)| {
        if pretty {
            serde_json::to_string_pretty(&v).unwrap()
        } else {
            v.to_string()
        }
    })
}

/// Strings with lines, sentences, words, multi-byte chars and Markdown/code markers.
fn texty() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        r"[a-zé😀 .!?\n#{};`-]{0,400}",
        prop::collection::vec(r"(# |## |- |    |)[a-zA-Zé ]{0,30}[.;{}]?\n{0,2}", 0..40)
            .prop_map(|v| v.concat()),
    ]
}

proptest! {
    #[test]
    fn pages_rebuild_any_text(text in texty(), max in 1usize..60) {
        prop_assert_eq!(all_pages(&text, max), text);
    }

    #[test]
    fn pages_rebuild_any_json(text in json_text(), max in 1usize..60) {
        prop_assert_eq!(all_pages(&text, max), text);
    }

    #[test]
    fn json_cuts_parse_and_fit(text in json_text(), budget in 1usize..400) {
        let fits = max_bytes(budget);
        let cut = cut(&text, &fits);
        let total = text.chars().count();
        prop_assert!(cut.next_offset <= total);
        prop_assert!(fits(&cut.shown));
        if cut.is_whole(&text) {
            prop_assert_eq!(cut.next_offset, total);
        } else if cut.boundary == Boundary::JsonElement {
            let shown: Value = serde_json::from_str(&cut.shown).unwrap();
            prop_assert!(shown.is_array() || shown.is_object());
            let rest = chars_from(&text, cut.next_offset);
            prop_assert!(rest.starts_with(['"', '{', '[', '-', 't', 'f', 'n', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9']), "{}", rest);
        } else {
            prop_assert_eq!(cut.shown, text.chars().take(cut.next_offset).collect::<String>());
        }
    }

    #[test]
    fn text_cuts_are_fitting_prefixes(text in texty(), budget in 0usize..300) {
        let fits = max_bytes(budget);
        let cut = cut(&text, &fits);
        prop_assume!(detect(&text) != ContentKind::Json);
        let total = text.chars().count();
        prop_assert!(cut.next_offset <= total);
        prop_assert_eq!(&cut.shown, &text.chars().take(cut.next_offset).collect::<String>());
        // Every non-empty text has a first char of at most 4 bytes.
        if budget >= 4 {
            prop_assert!(fits(&cut.shown));
            prop_assert!(!cut.shown.is_empty() || text.is_empty());
        }
        if fits(&text) {
            prop_assert_eq!(cut.next_offset, total);
        }
    }
}
