//! `meta-server eval` on small fixtures: no config needed, metrics as expected.

use serde_json::Value;

use crate::support::{fails, meta_server, repo, succeeds};

fn fixture(name: &str) -> String {
    repo()
        .join("tests/fixtures/eval")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn eval_scores_a_tools_file_without_any_config() {
    let home = tempfile::tempdir().unwrap();
    let queries = fixture("queries.jsonl");
    let tools = fixture("tools.jsonl");
    let args = ["eval", "--queries", &queries, "--tools", &tools];
    // HOME without a config: eval must not look for one.
    let out = succeeds(
        meta_server(&[&args[..], &["--json"]].concat())
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path()),
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["queries"], 5);
    assert_eq!(report["tools"], 6);
    assert_eq!(report["unknownGold"], 1, "nowhere/missing is not a tool");
    let m = &report["metrics"];
    // q4 has two gold items, one of which does not exist: its recall is at most 0.5.
    let r10 = m["recall@10"].as_f64().unwrap();
    assert!((r10 - 0.9).abs() < 1e-9, "{report}");
    // One query finds its tool second; the others first.
    for (key, want) in [("recall@1", 0.7), ("recall@5", 0.9), ("mrr", 0.9)] {
        let got = m[key].as_f64().unwrap();
        assert!(
            (got - want).abs() < 1e-9,
            "{key} = {got}, want {want}: {report}"
        );
    }

    // The human table says the same.
    let out = meta_server(&args).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("5 queries, 6 tools"), "{text}");
    assert!(
        text.contains("R@1      0.700") && text.contains("R@10     0.900"),
        "{text}"
    );
    let warning = String::from_utf8(out.stderr).unwrap();
    assert!(
        warning.contains("1 gold items name tools not in the catalog")
            && warning.contains("queries.jsonl:4: nowhere__missing"),
        "{warning}"
    );

    // A ranking option that removes all text fields finds nothing but exact names.
    let out = meta_server(
        &[
            &args[..],
            &[
                "--json",
                "--option",
                "name=0",
                "--option",
                "description=0",
                "--option",
                "params=0",
                "--option",
                "server=0",
                "--option",
                "title=0",
                "--option",
                "surface=0",
            ],
        ]
        .concat(),
    )
    .output()
    .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["metrics"]["recall@10"], 0.0, "{report}");

    let stderr = fails(&mut meta_server(
        &[&args[..], &["--option", "bogus=1"]].concat(),
    ));
    assert!(stderr.contains("unknown option"), "{stderr}");
}

#[test]
fn eval_reads_a_catalog_dir_and_reports_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let queries = dir.path().join("q.jsonl");
    std::fs::write(
        &queries,
        concat!(
            r#"{"id": 1, "query": "current time in Tokyo", "gold": [{"server": "time", "name": "get_current_time"}]}"#,
            "\n",
            r#"{"id": 2, "query": "add two numbers", "gold": [{"server": "everything", "name": "get-sum"}]}"#,
            "\n"
        ),
    )
    .unwrap();
    let catalogs = repo().join("catalogs");
    let out = succeeds(&mut meta_server(&[
        "--catalog-dir",
        catalogs.to_str().unwrap(),
        "eval",
        "--queries",
        queries.to_str().unwrap(),
        "--json",
    ]));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["queries"], 2);
    assert_eq!(report["unknownGold"], 0);
    // BM25 alone (the tests switch embeddings off): for "add two numbers", `get-sum` ("the sum
    // of two numbers") covers more of a short query than memory's `add_observations` ("add" in
    // its name), so it comes first.
    assert_eq!(report["metrics"]["recall@1"], 1.0, "{report}");
    assert_eq!(report["metrics"]["mrr"], 1.0, "{report}");

    // Without --catalog-dir, the config's catalogDir is where the catalogs are.
    let config = crate::support::write_config(
        dir.path(),
        serde_json::json!({}),
        serde_json::json!({"catalogDir": catalogs}),
    );
    let args = [
        "--config",
        config.to_str().unwrap(),
        "eval",
        "--queries",
        queries.to_str().unwrap(),
        "--json",
    ];
    let out = succeeds(&mut meta_server(&args));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["metrics"]["mrr"], 1.0, "{report}");

    // Metrics go down to rank 10: fewer results would make R@10 a lie.
    let stderr = fails(&mut meta_server(&[&args[..], &["--limit", "5"]].concat()));
    assert!(stderr.contains("10..=50"), "{stderr}");

    // Gold tools that are all missing (a misspelt server) score nothing: an error, not zeros.
    std::fs::write(
        &queries,
        r#"{"id": 1, "query": "current time", "gold": [{"server": "tme", "name": "get_current_time"}]}"#,
    )
    .unwrap();
    let stderr = fails(&mut meta_server(&args));
    assert!(
        stderr.contains("none of the gold tools is in the catalog")
            && stderr.contains("q.jsonl:1: tme__get_current_time"),
        "{stderr}"
    );

    std::fs::write(&queries, "{\"query\": \"x\"}\n").unwrap();
    let stderr = fails(&mut meta_server(&[
        "--catalog-dir",
        catalogs.to_str().unwrap(),
        "eval",
        "--queries",
        queries.to_str().unwrap(),
    ]));
    assert!(stderr.contains("q.jsonl:1: not a query line"), "{stderr}");
}

/// Short requests like the ones a model sends to search_tools, over the shipped catalogs:
/// those the four servers answer are mostly confident; those they cannot answer ("write a
/// tweet" shares only "write" with `write_file`) never are.
#[test]
fn short_requests_are_confident_only_when_a_shipped_tool_answers_them() {
    let catalogs = repo().join("catalogs");
    let share = |file: &str| {
        let queries = fixture(file);
        let out = succeeds(&mut meta_server(&[
            "eval",
            "--queries",
            &queries,
            "--catalog-dir",
            catalogs.to_str().unwrap(),
            "--option",
            "embeddings=false",
            "--json",
        ]));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["queries"], 20);
        report["confidence"]["share"].as_f64().unwrap()
    };
    let answerable = share("shipped-answerable.jsonl");
    assert!(answerable >= 0.85, "confident on {answerable}");
    let unanswerable = share("shipped-unanswerable.jsonl");
    assert_eq!(unanswerable, 0.0);
}

/// The BM25 row of EVAL.md and docs/search.md, reproduced from the MetaTool data kept in the repo:
/// a ranking change that moves them must update the documents too.
#[test]
fn metatool_numbers_in_the_documents_reproduce() {
    let data = repo().join("evaldata");
    let out = succeeds(&mut meta_server(&[
        "eval",
        "--queries",
        data.join("metatool.queries.jsonl").to_str().unwrap(),
        "--tools",
        data.join("metatool.catalog.jsonl").to_str().unwrap(),
        "--option",
        "embeddings=false",
        "--json",
    ]));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["queries"], 20_544);
    let m = &report["metrics"];
    let got: Vec<String> = ["recall@1", "recall@5", "recall@10", "mrr", "ndcg@10"]
        .iter()
        .map(|k| format!("{:.3}", m[k].as_f64().unwrap()))
        .collect();
    assert_eq!(
        got,
        ["0.441", "0.645", "0.713", "0.528", "0.572"],
        "{report}"
    );
}

/// Without --queries every set of --sets is measured, each over its own catalog (or its base
/// set's); --set picks some, --every samples.
#[test]
fn eval_reports_every_set_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["one", "two"] {
        std::fs::copy(
            fixture("queries.jsonl"),
            dir.path().join(format!("{name}.queries.jsonl")),
        )
        .unwrap();
        std::fs::copy(
            fixture("tools.jsonl"),
            dir.path().join(format!("{name}.catalog.jsonl")),
        )
        .unwrap();
    }
    let sets = dir.path().to_str().unwrap();
    let base = ["eval", "--sets", sets, "--option", "embeddings=false"];
    let report = |extra: &[&str]| -> Value {
        let out = succeeds(&mut meta_server(&[&base[..], extra, &["--json"]].concat()));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let all = report(&[]);
    let names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["set"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["one", "two"], "{all}");
    assert_eq!(all[0]["queries"], 5);
    assert_eq!(all[0]["metrics"], all[1]["metrics"]);
    let r3 = all[0]["metrics"]["recall@3"].as_f64().unwrap();
    assert!((r3 - 0.9).abs() < 1e-9, "{all}");
    let two = report(&["--set", "two", "--every", "2"]);
    assert_eq!(two.as_array().unwrap().len(), 1);
    assert_eq!(
        (&two[0]["set"], &two[0]["queries"]),
        (&"two".into(), &2.into())
    );

    // The table has a row per set.
    let out = succeeds(&mut meta_server(&base));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("| one | 5 | 6 | bm25 |") && text.contains("| two |"),
        "{text}"
    );

    let stderr = fails(&mut meta_server(&[&base[..], &["--set", "three"]].concat()));
    assert!(stderr.contains("no set \"three\""), "{stderr}");

    // --held-out measures only the sets with a NAME.heldout.jsonl, on those queries.
    let stderr = fails(&mut meta_server(&[&base[..], &["--held-out"]].concat()));
    assert!(stderr.contains("no NAME.heldout.jsonl"), "{stderr}");
    let aside: String = std::fs::read_to_string(fixture("queries.jsonl"))
        .unwrap()
        .lines()
        .take(2)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.path().join("two.heldout.jsonl"), aside).unwrap();
    let held = report(&["--held-out"]);
    assert_eq!(held.as_array().unwrap().len(), 1, "{held}");
    assert_eq!(
        (&held[0]["set"], &held[0]["queries"]),
        (&"two (held out)".into(), &2.into())
    );

    // --part splits each query file by a hash of the ids: the fixture's five are all "fit".
    let fit = report(&["--set", "one", "--part", "fit"]);
    assert_eq!(fit[0]["queries"], 5, "{fit}");
    let stderr = fails(&mut meta_server(
        &[&base[..], &["--set", "one", "--part", "check"]].concat(),
    ));
    assert!(stderr.contains("queries in this --part"), "{stderr}");

    // --baseline ranks with plain BM25 and says so; --ranked writes one line per query.
    let ranked = dir.path().join("ranked.jsonl");
    let plain = report(&[
        "--set",
        "one",
        "--baseline",
        "--ranked",
        ranked.to_str().unwrap(),
    ]);
    assert_eq!(plain[0]["ranking"], "plain bm25 (baseline)", "{plain}");
    let lines: Vec<Value> = std::fs::read_to_string(&ranked)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["set"], "one");
    assert!(lines[0]["ranked"].as_array().is_some_and(|r| !r.is_empty()));

    // A set named BASE.VARIANT without a catalog of its own asks other queries of BASE's tools;
    // one without either catalog is an error naming the file it looked for.
    std::fs::copy(
        fixture("queries.jsonl"),
        dir.path().join("one.short.queries.jsonl"),
    )
    .unwrap();
    let variant = report(&["--set", "one.short"]);
    assert_eq!(variant[0]["tools"], all[0]["tools"], "{variant}");
    assert_eq!(variant[0]["metrics"], all[0]["metrics"], "{variant}");
    std::fs::copy(
        fixture("queries.jsonl"),
        dir.path().join("three.short.queries.jsonl"),
    )
    .unwrap();
    let stderr = fails(&mut meta_server(&base));
    assert!(
        stderr.contains("has no tools file") && stderr.contains("three.short.catalog.jsonl"),
        "{stderr}"
    );
}

/// The rankings `eval` gives `queries` over the `sweep` set's real catalog (31 servers' own
/// tool lists), BM25 alone or hybrid with the model: (query, ranked qualified names).
fn sweep_rankings(queries: &[&str], hybrid: bool) -> Vec<(String, Vec<String>)> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("q.jsonl");
    let lines: Vec<String> = queries
        .iter()
        .map(|q| {
            serde_json::json!({"query": q, "gold": [{"server": "time", "name": "get_current_time"}]})
                .to_string()
        })
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let ranked = dir.path().join("ranked.jsonl");
    let tools = repo().join("evaldata/sweep.catalog.jsonl");
    let mut cmd = meta_server(&[
        "eval",
        "--queries",
        file.to_str().unwrap(),
        "--tools",
        tools.to_str().unwrap(),
        "--ranked",
        ranked.to_str().unwrap(),
    ]);
    if hybrid {
        cmd.env(meta_server::config::EMBEDDINGS_ENV, "on");
    }
    let out = succeeds(&mut cmd);
    let table = String::from_utf8(out.stdout).unwrap();
    assert_eq!(table.contains("hybrid"), hybrid, "{table}");
    std::fs::read_to_string(&ranked)
        .unwrap()
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            let ranked = v["ranked"].as_array().unwrap();
            let ranked = ranked.iter().map(|k| k.as_str().unwrap().to_owned());
            (v["query"].as_str().unwrap().to_owned(), ranked.collect())
        })
        .collect()
}

#[test]
fn queries_naming_a_real_server_find_its_tool_first() {
    // (query, the tool that must come first): the misses issue 41 names on real servers, and
    // queries naming a server by its config name.
    let first = [
        ("search papers on arXiv", "arxiv__search_papers"),
        ("search memory", "memory__search_nodes"),
        ("memory search nodes", "memory__search_nodes"),
        ("duckdb list tables", "duckdb__list_tables"),
        ("github create issue", "github__create_issue"),
        ("kubernetes apply manifest", "kubernetes__kubectl_apply"),
    ];
    let queries: Vec<&str> = first.iter().map(|(q, _)| *q).collect();
    for hybrid in [false, true] {
        let rankings = sweep_rankings(&queries, hybrid);
        for ((query, ranked), (_, want)) in rankings.iter().zip(&first) {
            assert_eq!(ranked[0], *want, "{query} (hybrid: {hybrid}): {ranked:?}");
        }
    }
}

#[test]
fn a_web_page_as_markdown_finds_fetch_in_the_top_three_with_bm25() {
    // "download" is a synonym of fetch's words, "web" of "internet"; the arXiv server's many
    // "download" and "markdown" tools no longer lift it over a server that has the synonyms.
    let query = "download a web page as markdown";
    let rankings = sweep_rankings(&[query], false);
    let ranked = &rankings[0].1;
    assert!(
        ranked[..3].iter().any(|k| k == "fetch__fetch"),
        "{ranked:?}"
    );
}
