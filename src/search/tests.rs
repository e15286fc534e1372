//! Tests of the BM25 and hybrid ranking over small hand-made catalogs.

use super::names::decompound_names;
use super::*;

fn doc(server: &str, name: &str, description: &str, params: &str) -> ToolDoc {
    ToolDoc {
        key: format!("{server}__{name}"),
        server: server.into(),
        name: name.into(),
        title: String::new(),
        description: description.into(),
        params: params.into(),
        server_text: server.into(),
        learned: String::new(),
    }
}

fn index() -> SearchIndex {
    SearchIndex::build(index_docs()).unwrap()
}

fn index_docs() -> Vec<ToolDoc> {
    vec![
        doc(
            "fs",
            "read_text_file",
            "Read the complete contents of a file as text",
            "path head tail",
        ),
        doc(
            "fs",
            "write_file",
            "Create a new file or overwrite a file",
            "path content",
        ),
        doc(
            "fs",
            "list_directory",
            "List files and directories in a path",
            "path",
        ),
        doc("everything", "echo", "Echoes back the input", "message"),
        doc(
            "everything",
            "get-sum",
            "Returns the sum of two numbers",
            "a b",
        ),
        doc(
            "time",
            "get_current_time",
            "Get current time in a specific timezone",
            "timezone",
        ),
        doc(
            "time",
            "convert_time",
            "Convert time between timezones",
            "source_timezone time target_timezone",
        ),
        doc(
            "gh",
            "getIssue",
            "Fetch one issue of a repository",
            "owner repo issue_number",
        ),
    ]
}

fn keys(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.key.as_str()).collect()
}

#[test]
fn replacing_a_server_reindexes_it_alone_and_leaves_the_old_version_intact() {
    let before = index();
    let everything = vec![
        doc("everything", "echo", "Echoes back the input", "message"),
        doc("everything", "add", "Adds two numbers together", "a b"),
    ];
    let after = before
        .replace_server("everything", everything.clone())
        .unwrap()
        .expect("a small change is incremental");
    assert_eq!(after.len(), 8);
    assert_eq!(after.keys().iter().filter(|k| k.is_empty()).count(), 2);

    // The new tool is found, the removed one is not, even by its exact name.
    let top = |idx: &SearchIndex, q: &str| idx.search(q, 1, None).unwrap();
    assert_eq!(top(&after, "add numbers")[0].key, "everything__add");
    assert!(
        top(&after, "get-sum")
            .iter()
            .all(|h| h.key != "everything__get-sum")
    );
    assert!(!top(&after, "get-sum").first().is_some_and(|h| h.exact));
    // Hybrid search never returns the removed documents' (zero) vector rows.
    let n = after.keys().len();
    let map = after
        .keys()
        .iter()
        .enumerate()
        .filter(|(_, k)| !k.is_empty())
        .map(|(i, k)| {
            let mut v = vec![0.0; n];
            v[i] = 1.0;
            (k.clone(), v)
        })
        .collect();
    let vectors = DocVectors::new(n, after.keys(), &map);
    let hits = after
        .search_hybrid("zzz", &vec![0.0; n], &vectors, None, 20, None)
        .unwrap();
    assert_eq!(hits.len(), 8);
    assert!(hits.iter().all(|h| !h.key.is_empty()));
    // Searches on the old version still see the old tools.
    assert_eq!(top(&before, "get-sum")[0].key, "everything__get-sum");
    assert_eq!(top(&before, "add numbers")[0].key, "everything__get-sum");

    // Every tool ranks as it does in a fresh build of the same documents.
    let mut docs = index_docs();
    docs.retain(|d| d.server != "everything");
    docs.extend(everything);
    let fresh = SearchIndex::build(docs.clone()).unwrap();
    for d in &docs {
        let q = format!("{} {}", d.description, d.params);
        assert_eq!(
            keys(&after.search(&q, 3, None).unwrap()),
            keys(&fresh.search(&q, 3, None).unwrap()),
            "{q}"
        );
    }

    // Only the newest version can be updated; churn past a quarter means a rebuild.
    assert!(before.replace_server("time", vec![]).unwrap().is_none());
    assert!(after.replace_server("fs", vec![]).unwrap().is_none());
    let cleared = index().replace_server("gh", vec![]).unwrap().unwrap();
    assert!(cleared.search("issue", 3, None).unwrap().is_empty());
    assert_eq!(cleared.len(), 7);
}

#[test]
fn finds_by_description_words_with_stemming() {
    let idx = index();
    let hits = idx.search("reading files", 3, None).unwrap();
    assert_eq!(hits[0].key, "fs__read_text_file");
    let hits = idx.search("current time in Tokyo", 2, None).unwrap();
    assert_eq!(hits[0].key, "time__get_current_time", "{hits:?}");
}

/// A product name written in camel case ("MySQL": "my", a stop word, and "SQL") also matches
/// the whole word in a snake_case name (`mysql_server_list`).
#[test]
fn a_word_split_at_case_changes_also_matches_whole() {
    let docs = vec![
        doc("db", "mysql_server_list", "List servers", ""),
        doc("db", "sql_server_list", "List servers", ""),
    ];
    let idx = SearchIndex::build(docs).unwrap();
    let hits = idx.search("MySQL servers", 2, None).unwrap();
    assert_eq!(
        keys(&hits),
        ["db__mysql_server_list", "db__sql_server_list"]
    );
    // A whole word no tool has does not count against the tools that have its parts.
    let hits = idx.search("sqlServer", 2, None).unwrap();
    assert!((hits[0].coverage - 1.0).abs() < 1e-6, "{hits:?}");
}

/// The query's word as written ("papers") ranks a tool with that very form above one with
/// another form of its stem ("paper"), which stemming alone cannot tell apart.
#[test]
fn the_form_a_query_uses_counts_beyond_its_stem() {
    let docs = vec![
        doc("p", "read_paper", "Read a paper", ""),
        doc("p", "find_papers", "Find papers by keyword", ""),
    ];
    let ranked = |surface: f32, query: &str| {
        let options = SearchOptions {
            surface,
            embeddings: false,
            ..SearchOptions::default()
        };
        let idx = SearchIndex::build_with(docs.clone(), options).unwrap();
        let hits = idx.search(query, 2, None).unwrap();
        keys(&hits)
            .iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ranked(0.5, "papers")[0], "p__find_papers");
    assert_eq!(ranked(0.5, "paper")[0], "p__read_paper");
    // With stems alone both tools have the word once, and the shorter description wins.
    assert_eq!(ranked(0.0, "papers")[0], "p__read_paper");
}

#[test]
fn camel_case_queries_match_snake_case_names() {
    let idx = index();
    assert_eq!(
        idx.search("readTextFile", 1, None).unwrap()[0].key,
        "fs__read_text_file"
    );
    assert_eq!(
        idx.search("get issue", 1, None).unwrap()[0].key,
        "gh__getIssue"
    );
}

#[test]
fn a_misspelt_or_misqualified_name_puts_the_close_tool_first() {
    let idx = SearchIndex::build(vec![
        doc(
            "time",
            "convert_time",
            "Convert a time between time zones",
            "",
        ),
        doc(
            "time",
            "get_current_time",
            "Get the current time in a time zone",
            "",
        ),
        doc(
            "fs",
            "read_multiple_files",
            "Read several files at once",
            "",
        ),
        doc("fs", "read_file", "Read a file", ""),
        doc("fs", "list_directory", "List a directory", ""),
    ])
    .unwrap();
    let first = |q: &str| {
        let hits = idx.search(q, 3, None).unwrap();
        (
            hits[0].key.clone(),
            hits[0].close,
            hits.iter().filter(|h| h.close).count(),
        )
    };
    // One letter missing, two letters swapped, no separators, another server.
    assert_eq!(
        first("get_curent_time"),
        ("time__get_current_time".into(), true, 1)
    );
    assert_eq!(
        first("getCurrnetTime"),
        ("time__get_current_time".into(), true, 1)
    );
    assert_eq!(
        first("listdirectory"),
        ("fs__list_directory".into(), true, 1)
    );
    assert_eq!(
        first("memory__read_file"),
        ("fs__read_file".into(), true, 1)
    );
    // Exact names are not "close"; sentences and short words are not name-shaped.
    assert_eq!(first("read_file"), ("fs__read_file".into(), false, 0));
    assert_eq!(
        idx.search("get the curent time", 3, None)
            .unwrap()
            .iter()
            .filter(|h| h.close)
            .count(),
        0
    );
    assert_eq!(
        idx.search("read_fil", 3, Some("time"))
            .unwrap()
            .iter()
            .filter(|h| h.close)
            .count(),
        0
    );
}

#[test]
fn a_word_that_tools_have_is_not_taken_for_a_misspelt_name() {
    let idx = SearchIndex::build(vec![
        doc("s", "send_email", "Send an email message", ""),
        doc("s", "mail", "Check the mailbox", ""),
        doc("s", "café_menu", "Dishes of the day", ""),
    ])
    .unwrap();
    // "email" is one letter from `mail`, but send_email has the word: no did-you-mean.
    let hits = idx.search("email", 3, None).unwrap();
    assert_eq!(hits[0].key, "s__send_email", "{hits:?}");
    assert!(
        hits.iter().all(|h| !h.close) && confident(&hits),
        "{hits:?}"
    );
    // Typos are counted in characters, not bytes: ü is two bytes.
    let hits = idx.search("cafémenüü", 3, None).unwrap();
    assert!(hits[0].close && hits[0].key == "s__café_menu", "{hits:?}");
}

#[test]
fn exact_names_come_first() {
    let idx = index();
    assert_eq!(
        idx.search("echo", 3, None).unwrap()[0].key,
        "everything__echo"
    );
    assert_eq!(
        idx.search("time__convert_time", 3, None).unwrap()[0].key,
        "time__convert_time"
    );
    assert_eq!(
        idx.search("GET-SUM", 3, None).unwrap()[0].key,
        "everything__get-sum"
    );
}

#[test]
fn server_filter_and_empty_queries() {
    let idx = index();
    let hits = idx.search("file path time", 10, Some("time")).unwrap();
    assert!(
        !hits.is_empty() && hits.iter().all(|h| h.key.starts_with("time__")),
        "{hits:?}"
    );
    assert!(idx.search("  ?! ", 5, None).unwrap().is_empty());
    assert!(idx.search("zebra quantum", 5, None).unwrap().is_empty());
}

#[test]
fn equal_input_gives_equal_output_with_ties_by_key() {
    let a = index().search("file", 10, None).unwrap();
    let b = index().search("file", 10, None).unwrap();
    assert_eq!(a, b);
    let tied = SearchIndex::build(vec![
        doc("b", "x", "identical words", ""),
        doc("a", "x", "identical words", ""),
    ])
    .unwrap();
    assert_eq!(
        keys(&tied.search("identical", 2, None).unwrap()),
        ["a__x", "b__x"]
    );
}

#[test]
fn weak_matches_are_not_confident() {
    let idx = index();
    let hits = idx.search("current time in a timezone", 3, None).unwrap();
    assert_eq!(hits[0].key, "time__get_current_time");
    assert!(confident(&hits), "{hits:?}");
    // Only the common word "file" matches; the distinctive words match nothing.
    let hits = idx.search("zebra stripes file", 3, None).unwrap();
    assert!(!hits.is_empty(), "near misses are still returned");
    assert!(hits[0].coverage < CONFIDENT_COVERAGE, "{hits:?}");
    assert!(!confident(&hits));
    assert!(!confident(&[]));
    // An exact name is confident whatever its words.
    let hits = idx.search("Echo", 3, None).unwrap();
    assert!(hits[0].exact && confident(&hits));
    // In hybrid search, meaning counts too: a close vector is confident without the words.
    let weak = |similarity| Hit {
        key: "s__t".into(),
        score: 1.0,
        coverage: 0.05,
        words: 1,
        exact: false,
        close: false,
        similarity,
    };
    assert!(confident(&[weak(Some(0.45))]));
    assert!(!confident(&[weak(Some(0.25))]));
    assert!(!confident(&[weak(None)]));
    // One word in common is noise unless it is half the query; two make a fifth enough.
    let shares = |coverage, words| Hit {
        coverage,
        words,
        ..weak(None)
    };
    assert!(!confident(&[shares(0.45, 1)]));
    assert!(confident(&[shares(0.5, 1)]));
    assert!(confident(&[shares(0.2, 2)]));
    assert!(!confident(&[shares(0.15, 3)]));
}

#[test]
fn exact_names_made_of_stop_words_are_still_found() {
    let options = SearchOptions {
        stopwords: StopWords::Lucene,
        ..SearchOptions::default()
    };
    let idx = SearchIndex::build_with(
        vec![
            doc("x", "it", "Information technology helpdesk", ""),
            doc("y", "it", "Other", ""),
        ],
        options,
    )
    .unwrap();
    assert_eq!(
        keys(&idx.search("it", 5, None).unwrap()),
        ["x__it", "y__it"]
    );
    assert_eq!(keys(&idx.search("it", 5, Some("y")).unwrap()), ["y__it"]);
}

#[test]
fn run_together_names_are_split_by_the_catalog_vocabulary() {
    let docs = vec![
        doc("s", "keywordexplorer", "Explore keyword ideas", ""),
        doc("s", "other", "A keyword explorer for ads", ""),
        doc("s", "tira", "Beauty shop", ""),
    ];
    let parts = decompound_names(&docs);
    assert_eq!(parts, ["keyword explorer", "", ""]);
    let options = SearchOptions {
        decompound: true,
        ..SearchOptions::default()
    };
    let idx = SearchIndex::build_with(docs, options).unwrap();
    assert_eq!(
        idx.search("keyword explorer", 1, None).unwrap()[0].key,
        "s__keywordexplorer"
    );
    assert_eq!(
        idx.search("keywordexplorer", 1, None).unwrap()[0].key,
        "s__keywordexplorer"
    );
}

/// Hand-made unit vectors: tool `i` of [`index`] points along axis `i`.
fn axis_vectors(idx: &SearchIndex) -> DocVectors {
    let n = idx.len();
    let map = idx
        .keys()
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let mut v = vec![0.0; n];
            v[i] = 1.0;
            (k.clone(), v)
        })
        .collect();
    DocVectors::new(n, idx.keys(), &map)
}

fn towards(idx: &SearchIndex, key: &str) -> Vec<f32> {
    let mut v = vec![0.0; idx.len()];
    v[idx.keys().iter().position(|k| k == key).unwrap()] = 1.0;
    v
}

#[test]
fn hybrid_search_finds_what_the_vectors_say_when_no_word_matches() {
    for fusion in [
        Fusion::Rrf {
            k: 60.0,
            vector: 1.0,
            coverage: false,
        },
        SearchOptions::default().fusion,
        Fusion::Weighted { alpha: 0.5 },
    ] {
        let idx = SearchIndex::build_with(
            index_docs(),
            SearchOptions {
                fusion,
                ..SearchOptions::default()
            },
        )
        .unwrap();
        let vectors = axis_vectors(&idx);
        let q = towards(&idx, "time__convert_time");
        // No word of the query is in any tool: BM25 finds nothing, the vectors decide.
        assert!(idx.search("alter an hour", 3, None).unwrap().is_empty());
        let hits = idx
            .search_hybrid("alter an hour", &q, &vectors, None, 3, None)
            .unwrap();
        assert_eq!(hits[0].key, "time__convert_time", "{fusion:?}");
        // The server filter applies to vector hits too.
        let hits = idx
            .search_hybrid("alter an hour", &q, &vectors, None, 3, Some("fs"))
            .unwrap();
        assert!(hits.iter().all(|h| h.key.starts_with("fs__")), "{hits:?}");
        // Exact names still come first, whatever the vectors say.
        let hits = idx
            .search_hybrid("echo", &q, &vectors, None, 3, None)
            .unwrap();
        assert_eq!(hits[0].key, "everything__echo");
        assert!(hits[0].exact);
    }
}

#[test]
fn hybrid_search_agreement_beats_either_signal_alone() {
    let idx = index();
    let vectors = axis_vectors(&idx);
    // BM25 alone ranks list_directory below the tools with "file" in their names; vectors
    // pointing at it move it up, and BM25 keeps the other file tools above unrelated ones.
    let bm25 = idx.search("file", 5, None).unwrap();
    assert_ne!(bm25[0].key, "fs__list_directory");
    let q = towards(&idx, "fs__list_directory");
    let hits = idx
        .search_hybrid("file", &q, &vectors, None, 5, None)
        .unwrap();
    assert_eq!(hits[0].key, "fs__list_directory", "{hits:?}");
    assert!(
        hits[..3].iter().all(|h| h.key.starts_with("fs__")),
        "{hits:?}"
    );
}

#[test]
fn hybrid_search_counts_the_servers_nearness_by_default() {
    let idx = index();
    let vectors = axis_vectors(&idx);
    // echo is the nearest tool alone; every fs tool is almost as near. With server evidence
    // (the default) an fs tool comes first; with the tools' own cosines alone, echo does.
    let mut q = vec![0.0; idx.len()];
    for (key, c) in [
        ("everything__echo", 0.50),
        ("fs__write_file", 0.48),
        ("fs__read_text_file", 0.46),
        ("fs__list_directory", 0.44),
    ] {
        q[idx.keys().iter().position(|k| k == key).unwrap()] = c;
    }
    let hits = idx
        .search_hybrid("zzz", &q, &vectors, None, 3, None)
        .unwrap();
    assert_eq!(hits[0].key, "fs__write_file", "{hits:?}");
    let alone = SearchIndex::build_with(
        index_docs(),
        SearchOptions {
            context: None,
            ..SearchOptions::default()
        },
    )
    .unwrap();
    let hits = alone
        .search_hybrid("zzz", &q, &vectors, None, 3, None)
        .unwrap();
    assert_eq!(hits[0].key, "everything__echo", "{hits:?}");
}

#[test]
fn vectors_decide_when_the_best_hit_covers_little_of_a_short_query() {
    // "Tokyo" is in no tool and weighs most: both time tools match "time" alone, convert_time
    // in shorter fields (BM25 ranks it first), get_current_time nearer in meaning.
    let query = "what time is it in Tokyo";
    let cosines = [
        ("time__get_current_time", 0.33),
        ("time__convert_time", 0.32),
        ("everything__get-sum", 0.12),
        ("fs__list_directory", 0.10),
    ];
    let ranked = |options: SearchOptions| {
        let idx = SearchIndex::build_with(index_docs(), options).unwrap();
        let vectors = axis_vectors(&idx);
        let mut q = vec![0.0; idx.len()];
        for (key, c) in cosines {
            q[idx.keys().iter().position(|k| k == key).unwrap()] = c;
        }
        let hits = idx
            .search_hybrid(query, &q, &vectors, None, 2, None)
            .unwrap();
        hits[0].key.clone()
    };
    assert_eq!(ranked(SearchOptions::default()), "time__get_current_time");
    let full_weight = SearchOptions {
        lexical_coverage: 0.0,
        ..SearchOptions::default()
    };
    assert_eq!(ranked(full_weight), "time__convert_time");
    let words = SearchIndex::build(index_docs()).unwrap();
    assert_eq!(
        words.search(query, 1, None).unwrap()[0].key,
        "time__convert_time"
    );
}

#[test]
fn cjk_descriptions_are_searchable_by_their_words() {
    let idx = SearchIndex::build(vec![
        doc("zh", "read", "读取文件内容", ""),
        doc("zh", "send", "发送电子邮件", ""),
    ])
    .unwrap();
    assert_eq!(idx.search("文件", 1, None).unwrap()[0].key, "zh__read");
}

#[test]
fn a_cjk_word_ranks_the_tool_that_has_it_above_one_with_its_characters_apart() {
    // Both descriptions have 文 and 件 once and are equally long; only the first has 文件.
    let idx = SearchIndex::build(vec![
        doc("zh", "count", "文本件数统计分析", ""),
        doc("zh", "upload", "上传文件到服务器", ""),
    ])
    .unwrap();
    let hits = idx.search("文件", 2, None).unwrap();
    assert_eq!(hits[0].key, "zh__upload", "{hits:?}");
    assert!(hits[0].score > hits[1].score, "{hits:?}");
    assert!(confident(&hits) && hits[0].words == 1, "{hits:?}");
    // "Write a tweet" shares two lone characters with "write a file": one word, weak.
    let idx = SearchIndex::build(vec![
        doc("zh", "write", "写入文件", ""),
        doc("zh", "read", "读取目录", ""),
    ])
    .unwrap();
    let hits = idx.search("写推文", 2, None).unwrap();
    assert_eq!(hits[0].key, "zh__write");
    assert!(!confident(&hits), "{hits:?}");
}

#[test]
fn coverage_weighs_short_queries_only() {
    let docs = vec![
        doc(
            "memory",
            "add_observations",
            "Add new observations to existing entities in the knowledge graph",
            "observations",
        ),
        doc(
            "everything",
            "get-sum",
            "Returns the sum of two numbers",
            "a First number b Second number",
        ),
        doc(
            "memory",
            "create_entities",
            "Create multiple new entities in the knowledge graph",
            "entities",
        ),
        doc("fs", "read_text_file", "Read a file as text", "path"),
    ];
    let plain = SearchOptions {
        coverage: 0.0,
        ..SearchOptions::default()
    };
    let plain = SearchIndex::build_with(docs.clone(), plain).unwrap();
    let idx = SearchIndex::build(docs).unwrap();
    // In a short query a tool's score is weighed by the share of the query it matches:
    // `get-sum` ("two numbers") keeps more of its score than `add_observations` ("add").
    let score = |idx: &SearchIndex, query: &str, key: &str| {
        let hits = idx.search(query, 4, None).unwrap();
        hits.iter().find(|h| h.key == key).map(|h| h.score).unwrap()
    };
    let kept = |key| score(&idx, "add two numbers", key) / score(&plain, "add two numbers", key);
    let (sum, add) = (
        kept("everything__get-sum"),
        kept("memory__add_observations"),
    );
    assert!(add < sum && sum < 1.0, "{add} {sum}");
    assert_eq!(
        keys(&idx.search("add two numbers", 1, None).unwrap()),
        ["everything__get-sum"]
    );
    // A long request is scored as before: no tool covers most of its words.
    let long = "please add the new observations about these two numbers to the existing entities";
    let scores = |idx: &SearchIndex| -> Vec<(String, f32)> {
        let hits = idx.search(long, 4, None).unwrap();
        hits.into_iter().map(|h| (h.key, h.score)).collect()
    };
    assert_eq!(scores(&plain), scores(&idx));
}

/// The hits of some queries, exact and close names, typos and server filters included.
fn answers(idx: &SearchIndex) -> Vec<Vec<Hit>> {
    let queries = [
        ("read a file", None),
        ("current time", None),
        ("echo", None),
        ("get_curent_time", None),
        ("time__echo", None),
        ("path", Some("fs")),
        ("sum of numbers", None),
    ];
    queries
        .iter()
        .map(|(q, server)| idx.search(q, 10, *server).unwrap())
        .collect()
}

fn sources() -> std::collections::BTreeMap<String, String> {
    [("fs", "1"), ("everything", "2"), ("time", "3")]
        .into_iter()
        .map(|(s, h)| (s.to_owned(), h.to_owned()))
        .collect()
}

#[test]
fn a_saved_index_answers_exactly_as_the_index_it_was_saved_from() {
    let dir = tempfile::tempdir().unwrap();
    let options = SearchOptions::default();
    assert!(
        SearchIndex::open_saved(dir.path(), &options)
            .unwrap()
            .is_none()
    );
    let built = index();
    assert!(built.save(dir.path(), &sources()).unwrap());
    let (opened, saved_sources) = SearchIndex::open_saved(dir.path(), &options)
        .unwrap()
        .unwrap();
    assert_eq!(saved_sources, sources());
    assert_eq!(answers(&opened), answers(&built));
    assert_eq!(opened.keys(), built.keys());

    // Updated after opening, then saved and opened again: still the updated answers.
    let docs = vec![doc(
        "time",
        "get_timezone",
        "Which timezone a city is in",
        "city",
    )];
    let updated = opened.replace_server("time", docs).unwrap().unwrap();
    assert!(
        !opened.save(dir.path(), &sources()).unwrap(),
        "an older version is not saved"
    );
    assert!(updated.save(dir.path(), &sources()).unwrap());
    let (reopened, _) = SearchIndex::open_saved(dir.path(), &options)
        .unwrap()
        .unwrap();
    assert_eq!(answers(&reopened), answers(&updated));
    assert_eq!(reopened.len(), updated.len());
    let other = SearchOptions {
        stem: false,
        ..SearchOptions::default()
    };
    assert!(
        SearchIndex::open_saved(dir.path(), &other)
            .unwrap()
            .is_none(),
        "saved with other options"
    );
}

/// The directory of this build's saved format under `dir`.
fn root_of(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join(format!("v{}", super::saved::FORMAT))
}

#[test]
fn a_damaged_saved_index_is_an_error_never_an_index() {
    let saved = tempfile::tempdir().unwrap();
    index().save(saved.path(), &sources()).unwrap();
    let root = root_of(saved.path());
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("manifest.json")).unwrap()).unwrap();
    let generation = manifest["generation"].as_str().unwrap();
    let files: Vec<String> = manifest["files"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert!(files.iter().any(|f| f == "tables.bin") && files.iter().any(|f| f == "meta.json"));
    assert!(files.len() > 5, "{files:?}");
    type Damage = fn(&std::path::Path);
    let damages: [(&str, Damage); 3] = [
        ("truncated", |p| {
            let bytes = std::fs::read(p).unwrap();
            std::fs::write(p, &bytes[..bytes.len() / 2]).unwrap();
        }),
        ("one byte changed", |p| {
            let mut bytes = std::fs::read(p).unwrap();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0x20;
            std::fs::write(p, bytes).unwrap();
        }),
        ("missing", |p| std::fs::remove_file(p).unwrap()),
    ];
    for file in &files {
        for (what, damage) in damages {
            let dir = tempfile::tempdir().unwrap();
            copy_dir(saved.path(), dir.path());
            damage(&root_of(dir.path()).join(generation).join(file));
            let opened = SearchIndex::open_saved(dir.path(), &SearchOptions::default());
            assert!(
                matches!(opened, Err(SavedError::Unusable { .. })),
                "{file} {what}: {:?}",
                opened.map(|o| o.is_some())
            );
        }
    }
    // A manifest that names a file outside its generation is not followed there.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(saved.path(), dir.path());
    let mut outside = manifest.clone();
    let sum = outside["files"]["meta.json"].clone();
    outside["files"]["../../secret"] = sum;
    std::fs::write(
        root_of(dir.path()).join("manifest.json"),
        serde_json::to_vec(&outside).unwrap(),
    )
    .unwrap();
    let opened = SearchIndex::open_saved(dir.path(), &SearchOptions::default());
    assert!(
        matches!(&opened, Err(SavedError::Unusable { message, .. }) if message.contains("outside")),
        "{:?}",
        opened.map(|o| o.is_some())
    );
    for manifest in ["", "{", "{\"format\": 1}"] {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(saved.path(), dir.path());
        std::fs::write(root_of(dir.path()).join("manifest.json"), manifest).unwrap();
        let opened = SearchIndex::open_saved(dir.path(), &SearchOptions::default());
        assert!(opened.is_err(), "manifest {manifest:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    copy_dir(saved.path(), dir.path());
    std::fs::remove_file(root_of(dir.path()).join("manifest.json")).unwrap();
    let opened = SearchIndex::open_saved(dir.path(), &SearchOptions::default());
    assert!(
        matches!(opened, Ok(None)),
        "files written a moment ago may be another process's save in progress"
    );
    let written = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
    std::fs::File::open(
        dir.path()
            .join(format!("v{}", super::saved::FORMAT))
            .join(generation),
    )
    .unwrap()
    .set_modified(written)
    .unwrap();
    let opened = SearchIndex::open_saved(dir.path(), &SearchOptions::default());
    assert!(
        matches!(&opened, Err(SavedError::Unusable { message, .. }) if message.contains("manifest")),
        "a save without its manifest is half-written: {:?}",
        opened.map(|o| o.is_some())
    );
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn a_query_word_also_finds_its_synonyms_below_the_word_itself() {
    let mut docs = index_docs();
    docs.push(doc(
        "files",
        "list_folder",
        "List the files in a folder",
        "folder",
    ));
    let idx = SearchIndex::build(docs.clone()).unwrap();
    // fs__list_directory has "directory", a synonym of "folder", and ranks below the tool
    // that has the word itself.
    let hits = idx.search("folder", 5, None).unwrap();
    assert_eq!(
        keys(&hits)[..2],
        ["files__list_folder", "fs__list_directory"],
        "{hits:?}"
    );
    // A rare synonym of a common word counts no more than the word: the six tools with "get"
    // in their name and description come before `web__fetch` ("fetch" in both), although
    // "fetch" is the rarer word.
    let mut docs_get = docs.clone();
    for (name, description) in [
        ("get_weather", "Get the weather of a city"),
        ("get_user", "Get a user by id"),
        ("get_page", "Get a page of results"),
        ("get_order", "Get an order"),
    ] {
        docs_get.push(doc("shop", name, description, "id"));
    }
    docs_get.push(doc("web", "fetch", "Fetch a URL", "url"));
    let idx_get = SearchIndex::build(docs_get).unwrap();
    let hits = idx_get.search("get", 10, None).unwrap();
    let fetch = hits.iter().position(|h| h.key == "web__fetch");
    assert!(fetch.is_some_and(|at| at >= 6), "{hits:?}");
    let literal = SearchOptions {
        synonyms: 0.0,
        ..SearchOptions::default()
    };
    let idx = SearchIndex::build_with(docs, literal).unwrap();
    let hits = idx.search("folder", 5, None).unwrap();
    assert_eq!(keys(&hits), ["files__list_folder"]);
}

#[test]
fn meta_servers_own_tools_rank_below_upstream_tools_that_match_as_well() {
    let mut docs = index_docs();
    docs.push(doc(
        HELPER_SERVER,
        "lookup_full_content",
        "Read a tool result that was cut to fit, page by page",
        "resource_id offset",
    ));
    docs.push(doc(
        "papers",
        "read_paper",
        "Read the text of a paper",
        "paper_id",
    ));
    let build = |helpers: f32| {
        let options = SearchOptions {
            helpers,
            ..SearchOptions::default()
        };
        SearchIndex::build_with(docs.clone(), options).unwrap()
    };
    let top3 = |idx: &SearchIndex, q: &str| {
        let hits = idx.search(q, 3, None).unwrap();
        keys(&hits)
            .iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
    };
    let (plain, ranked_down) = (build(1.0), build(SearchOptions::default().helpers));
    let meta = "meta__lookup_full_content";
    // A task that shares a few of the helper's words ("read", "page", "result") finds the
    // upstream tools, and never the helper, whatever the factor.
    let task = "find the paper on protein folding, read its text page by page and list every \
                result it reports";
    for idx in [&plain, &ranked_down] {
        let hits = top3(idx, task);
        assert_eq!(hits[0], "papers__read_paper");
        assert!(!hits.contains(&meta.to_owned()), "{hits:?}");
    }
    // A short query that shares one word ("page") is not about results either.
    let hits = top3(&ranked_down, "turn the page");
    assert!(!hits.contains(&meta.to_owned()), "{hits:?}");
    // Asked for in a few words, it still comes first.
    let ask = "read the rest of a result that was cut";
    assert_eq!(top3(&ranked_down, ask)[0], meta);
}

#[test]
fn a_server_whose_tools_together_match_a_short_query_lifts_its_best_tool() {
    // "time tracking my workspaces": `office__workspaces` has the rarest word in its short
    // name and description; `clock__get_workspaces` has it too, among more words, and only
    // its server's other tools have "time" and "tracking".
    let docs = vec![
        doc("office", "workspaces", "Workspaces", ""),
        doc("office", "edit_document", "Edit a document", "text"),
        doc("office", "share", "Share a document with a person", "email"),
        doc(
            "clock",
            "get_workspaces",
            "Get all workspaces of the user",
            "",
        ),
        doc("clock", "add_entry", "Add an entry of hours", "time"),
        doc("clock", "start", "Start a timer", "tracking"),
        doc("parcel", "follow", "Follow a parcel", "tracking_number"),
        doc("tz", "now", "Current time in a zone", "zone"),
        doc("fs", "read_file", "Read a file", "path"),
    ];
    let build = |server_evidence: f32| {
        let options = SearchOptions {
            server_evidence,
            embeddings: false,
            ..SearchOptions::default()
        };
        SearchIndex::build_with(docs.clone(), options).unwrap()
    };
    let (tools_alone, with_servers) = (build(0.0), build(SearchOptions::default().server_evidence));
    let first = |idx: &SearchIndex, q: &str| idx.search(q, 3, None).unwrap()[0].key.clone();
    let query = "time tracking my workspaces";
    assert_eq!(first(&tools_alone, query), "office__workspaces");
    assert_eq!(first(&with_servers, query), "clock__get_workspaces");
    // A query that only one tool's words answer is not moved.
    assert_eq!(first(&with_servers, "workspaces"), "office__workspaces");
    // A long task spans servers: its ranking is the tools' alone.
    let long = "list the workspaces, then add a time entry for each one and send a tracking \
                report of the hours spent to the team by email";
    let ranked = |idx: &SearchIndex| keys(&idx.search(long, 5, None).unwrap()).join(" ");
    assert_eq!(ranked(&tools_alone), ranked(&with_servers));
}

#[test]
fn feedback_lifts_the_hits_that_share_the_best_hits_words() {
    let docs = vec![
        doc(
            "mail",
            "send_email",
            "Send an email message to an inbox",
            "recipient",
        ),
        doc("mail", "list_inbox", "List the email in an inbox", "folder"),
        doc("chat", "post", "Post a note to a channel", "channel"),
        doc("chat", "pin", "Pin a note in a channel", "channel"),
        doc("fs", "read_file", "Read a file", "path"),
    ];
    let build = |feedback: f32| {
        let options = SearchOptions {
            feedback,
            embeddings: false,
            ..SearchOptions::default()
        };
        SearchIndex::build_with(docs.clone(), options).unwrap()
    };
    let (off, on) = (build(0.0), build(0.5));
    let ord =
        |idx: &SearchIndex, key: &str| idx.keys().iter().position(|k| k == key).unwrap() as u32;
    // `send_email` is the best hit; `list_inbox` and `post` score the same before feedback.
    let hits = |idx: &SearchIndex| {
        vec![
            (ord(idx, "mail__send_email"), 10.0),
            (ord(idx, "mail__list_inbox"), 5.0),
            (ord(idx, "chat__post"), 5.0),
        ]
    };
    let mut unchanged = hits(&off);
    off.word_feedback(&mut unchanged, &[]);
    assert_eq!(unchanged, hits(&off));
    let mut lifted = hits(&on);
    on.word_feedback(&mut lifted, &[]);
    // "email" and "inbox" are the best hit's words that another tool has too.
    assert!(lifted[1].1 > lifted[2].1, "{lifted:?}");
}

/// [`index_docs`] with `learned` queries for `key`.
fn learned_docs(key: &str, learned: &str) -> Vec<ToolDoc> {
    let mut docs = index_docs();
    for d in &mut docs {
        if d.key == key {
            d.learned = learned.to_owned();
        }
    }
    docs
}

#[test]
fn learned_queries_find_their_tool_and_popularity_alone_ranks_nothing() {
    let plain = index();
    let learned = SearchIndex::build(learned_docs(
        "everything__echo",
        &[
            "parrot my words",
            "say it again",
            "parrot back what I typed",
            "mirror my message",
        ]
        .join("\n"),
    ))
    .unwrap();
    assert!(keys(&plain.search("parrot my words", 5, None).unwrap()).is_empty());
    let found = learned.search("parrot my words", 5, None).unwrap();
    assert_eq!(keys(&found), ["everything__echo"]);
    assert!(found[0].coverage > 0.9, "learned words cover the query");
    // However much it learned, a tool is no hit for a query unlike its queries: the tools
    // nobody searched for rank as before.
    for query in [
        "read a file",
        "current time in Tokyo",
        "sum of two numbers",
        "list files",
    ] {
        let before = plain.search(query, 8, None).unwrap();
        let after = learned.search(query, 8, None).unwrap();
        assert!(
            !keys(&after).contains(&"everything__echo"),
            "{query}: {after:?}"
        );
        assert_eq!(keys(&after), keys(&before), "{query}");
    }
}

#[test]
fn an_index_without_learned_queries_ranks_exactly_as_with_the_field_unsearched() {
    let with_field = index();
    let unsearched = SearchIndex::build_with(
        index_docs(),
        SearchOptions {
            learned: 0.0,
            ..SearchOptions::default()
        },
    )
    .unwrap();
    for query in [
        "read file",
        "time",
        "echo",
        "getIssue",
        "sum numbers",
        "zzz",
        "list",
    ] {
        assert_eq!(
            with_field.search(query, 8, None).unwrap(),
            unsearched.search(query, 8, None).unwrap(),
            "{query}"
        );
    }
}

#[test]
fn replacing_a_tool_s_learned_queries_reindexes_it_alone_as_a_full_build_would() {
    let before = index();
    let changed: Vec<ToolDoc> =
        learned_docs("time__convert_time", "move a meeting to another city")
            .into_iter()
            .filter(|d| d.key == "time__convert_time")
            .collect();
    let after = before
        .replace_tools(changed)
        .unwrap()
        .expect("one tool is incremental");
    assert_eq!(after.len(), before.len());
    assert_eq!(after.keys().iter().filter(|k| k.is_empty()).count(), 1);
    let full = SearchIndex::build(learned_docs(
        "time__convert_time",
        "move a meeting to another city",
    ))
    .unwrap();
    for query in [
        "meeting in another city",
        "time",
        "convert_time",
        "read a file",
    ] {
        let keys_of = |idx: &SearchIndex| {
            idx.search(query, 8, None)
                .unwrap()
                .into_iter()
                .map(|h| h.key)
                .collect::<Vec<_>>()
        };
        assert_eq!(keys_of(&after), keys_of(&full), "{query}");
    }
    assert_eq!(
        keys(&after.search("meeting in another city", 1, None).unwrap()),
        ["time__convert_time"]
    );
    assert!(
        before.search("meeting", 1, None).unwrap().is_empty(),
        "the old version is intact"
    );
}

#[test]
fn a_tool_learns_only_the_words_its_own_text_lacks() {
    let learned = "save my notes into a file\nsave a file";
    let new_only = SearchIndex::build(learned_docs("fs__write_file", learned)).unwrap();
    let every_word = SearchIndex::build_with(
        learned_docs("fs__write_file", learned),
        SearchOptions {
            learned_new: false,
            ..SearchOptions::default()
        },
    )
    .unwrap();
    let plain = index();
    let top = |idx: &SearchIndex, q: &str| keys(&idx.search(q, 8, None).unwrap()).join(" ");
    // "file" is the tool's own word: learning it again would lift the tool for every file
    // query, over its siblings.
    for query in ["file", "a file", "contents of a file"] {
        assert_eq!(top(&new_only, query), top(&plain, query), "{query}");
    }
    let score = |idx: &SearchIndex| {
        let hits = idx.search("file", 8, None).unwrap();
        hits.iter()
            .find(|h| h.key == "fs__write_file")
            .unwrap()
            .score
    };
    assert_eq!(score(&new_only), score(&plain));
    assert!(
        score(&every_word) > score(&plain),
        "learned again, the word would count twice"
    );
    assert_eq!(
        keys(&new_only.search("save my notes", 1, None).unwrap()),
        ["fs__write_file"]
    );
}

#[test]
fn argument_values_no_tool_has_do_not_count_against_a_match() {
    let idx = index();
    let hits = idx.search("what time is it in Tokyo", 3, None).unwrap();
    assert!(
        keys(&hits[..2]).contains(&"time__get_current_time"),
        "{hits:?}"
    );
    assert!(
        confident(&hits),
        "Tokyo is a place to ask about, not a missing intent: {hits:?}"
    );
    for query in [
        "read the file /etc/hosts",
        "read \"my old diary\" file",
        "get issue 1234 of the repo",
    ] {
        let hits = idx.search(query, 3, None).unwrap();
        assert!(confident(&hits), "{query}: {hits:?}");
    }
    // Intent words no tool has still count, capitalised or not, first or not.
    for query in [
        "book a flight to Paris",
        "Translate this to French",
        "send a Slack message",
    ] {
        let hits = idx.search(query, 3, None).unwrap();
        assert!(!confident(&hits), "{query}: {hits:?}");
    }
}

#[test]
fn a_query_naming_a_server_ranks_its_tools_that_match_the_rest_first() {
    // "papers" and "search" are everywhere; "arxiv" is the arxiv server's own word.
    let docs = vec![
        doc(
            "arxiv",
            "search_papers",
            "Search by query with categories and dates",
            "query",
        ),
        doc(
            "arxiv",
            "list_papers",
            "List the papers downloaded so far; search_papers finds new papers",
            "",
        ),
        doc("arxiv", "read_paper", "Read a downloaded paper", "paper_id"),
        doc(
            "scholar",
            "search_papers",
            "Search papers and papers' citations",
            "query",
        ),
        doc("scholar", "find_papers", "Find papers by title", "title"),
        doc(
            "web",
            "search",
            "Search the web for pages and papers",
            "query",
        ),
        doc("web", "fetch", "Fetch a page", "url"),
        doc("fs", "read_file", "Read a file", "path"),
    ];
    for embeddings in [false, true] {
        let options = SearchOptions {
            embeddings,
            ..SearchOptions::default()
        };
        let idx = SearchIndex::build_with(docs.clone(), options).unwrap();
        let ranked = |q: &str| match embeddings {
            false => keys(&idx.search(q, 4, None).unwrap())
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>(),
            true => {
                let vectors = axis_vectors(&idx);
                let toward = towards(&idx, "web__search");
                keys(
                    &idx.search_hybrid(q, &toward, &vectors, None, 4, None)
                        .unwrap(),
                )
                .into_iter()
                .map(str::to_owned)
                .collect()
            }
        };
        // The named server's tools that match "search papers" come first, and among them the
        // one the query also names, although a sibling's description names it too.
        let hits = ranked("search papers on arXiv");
        assert_eq!(hits[0], "arxiv__search_papers", "{hits:?}");
        assert!(hits[1].starts_with("arxiv__"), "{hits:?}");
        // Without the server's name, the best match of the words wins.
        assert_ne!(ranked("search papers")[0], "arxiv__search_papers");
        // Tools of the named server that match none of the other words are not lifted.
        let hits = ranked("fetch a page from arxiv");
        assert!(hits[0].starts_with("web__"), "{hits:?}");
    }
}

#[test]
fn a_word_many_servers_use_names_no_server() {
    // "time" is the `time` server's name, but most tools with the word are other servers'.
    let docs = vec![
        doc("time", "convert", "Convert between zones", "zone"),
        doc("time", "now", "Current moment in a zone", "zone"),
        doc(
            "grafana",
            "query_range",
            "Query metrics over a time range",
            "start",
        ),
        doc("tracker", "log_time", "Log time spent on a task", "minutes"),
        doc("cal", "free_time", "Find free time in a calendar", "day"),
        doc("cal", "events", "List calendar events", "day"),
        doc("pause", "wait", "Wait some time", "seconds"),
    ];
    let options = SearchOptions {
        embeddings: false,
        named_servers: false,
        ..SearchOptions::default()
    };
    let unnamed = SearchIndex::build_with(docs.clone(), options).unwrap();
    let named = SearchIndex::build(docs).unwrap();
    // Named, `time` would lift its tools, which have "zone", over `cal__free_time`.
    let query = "free time slots in my zone";
    assert_eq!(
        named.search(query, 1, None).unwrap()[0].key,
        "cal__free_time"
    );
    assert_eq!(
        keys(&named.search(query, 5, None).unwrap()),
        keys(&unnamed.search(query, 5, None).unwrap())
    );
}

#[test]
fn a_catalog_of_one_server_is_ranked_as_if_no_server_were_named() {
    let docs: Vec<ToolDoc> = [
        ("storage_account_list", "List storage accounts"),
        ("storage_account_get", "Get a storage account"),
        ("group_list", "List resource groups"),
    ]
    .into_iter()
    .map(|(name, description)| doc("azure", name, description, ""))
    .collect();
    let options = SearchOptions {
        named_servers: false,
        ..SearchOptions::default()
    };
    let unnamed = SearchIndex::build_with(docs.clone(), options).unwrap();
    let named = SearchIndex::build(docs).unwrap();
    for query in ["azure list storage accounts", "azure groups"] {
        assert_eq!(
            named.search(query, 3, None).unwrap(),
            unnamed.search(query, 3, None).unwrap()
        );
    }
}
