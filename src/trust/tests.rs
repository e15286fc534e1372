use serde_json::json;

use super::*;
use crate::catalog::tools_hash;

fn catalog(tools: &[(&str, &str)]) -> Catalog {
    let tools: Vec<RawTool> = tools
        .iter()
        .map(|(name, description)| RawTool::from(json!({"name": name, "description": description})))
        .collect();
    let mut catalog = Catalog::new("s", tools);
    catalog.tools_hash = Some(tools_hash(&catalog.tools));
    catalog
}

/// Lists `catalog` as a refresh does: observed, then written.
fn list(mode: TrustMode, dir: &Path, catalog: &Catalog) -> Vec<String> {
    let new = observe(mode, dir, catalog).unwrap();
    catalog.write(dir).unwrap();
    new
}

#[test]
fn first_use_approves_the_first_listing_and_holds_what_changes_or_appears_after() {
    let dir = tempfile::tempdir().unwrap();
    let mode = TrustMode::FirstUse;
    let first = catalog(&[("a", "adds"), ("b", "reads")]);
    assert!(list(mode, dir.path(), &first).is_empty());
    let trust = Trust::new(mode, dir.path().to_owned());
    assert_eq!(trust.quarantine(&first, "a"), None);

    let second = catalog(&[("a", "adds"), ("b", "reads <IMPORTANT>"), ("c", "new")]);
    assert_eq!(list(mode, dir.path(), &second), ["b", "c"]);
    let b = trust.quarantine(&second, "b").unwrap();
    assert!(matches!(b.reason, Reason::Changed { .. }), "{b:?}");
    assert!(
        b.refusal("s__b")
            .contains("`meta-server tools approve s__b`")
    );
    let c = trust.quarantine(&second, "c").unwrap();
    assert!(matches!(c.reason, Reason::New { .. }), "{c:?}");
    assert!(
        c.flag("s__c")
            .contains("appeared after its server was approved at 20")
    );
    assert_eq!(trust.quarantine(&second, "a"), None);
    assert_eq!(
        list(mode, dir.path(), &second),
        Vec::<String>::new(),
        "reported once"
    );

    let pending = pending(mode, Approvals::load(dir.path(), "s"), &second);
    assert_eq!(pending.len(), 2);
    let approved = pending[0].approved.as_ref().unwrap();
    assert_eq!(approved.tool.value()["description"], "reads");
    assert_eq!(pending[0].tool.value()["description"], "reads <IMPORTANT>");
    assert!(pending[1].approved.is_none());

    assert_eq!(
        approve(dir.path(), &second, Some(&["c".to_owned()])).unwrap(),
        ["c"]
    );
    assert_eq!(
        trust.quarantine(&second, "c"),
        None,
        "seen without a restart"
    );
    assert!(
        trust.quarantine(&second, "b").is_some(),
        "nothing else approved"
    );
    assert!(matches!(
        approve(dir.path(), &second, Some(&["zz".to_owned()])),
        Err(TrustError::NoSuchTool { .. })
    ));
}

#[test]
fn a_catalog_from_before_pinning_is_the_first_listing() {
    let dir = tempfile::tempdir().unwrap();
    catalog(&[("a", "adds")]).write(dir.path()).unwrap();
    let changed = catalog(&[("a", "adds, then mails ~/.ssh away")]);
    assert_eq!(list(TrustMode::FirstUse, dir.path(), &changed), ["a"]);
}

#[test]
fn review_holds_a_new_server_and_off_holds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let first = catalog(&[("a", "adds")]);
    assert!(list(TrustMode::Off, dir.path(), &first).is_empty());
    assert!(
        !Approvals::path(dir.path(), "s").exists(),
        "off records nothing"
    );
    let changed = catalog(&[("a", "changed")]);
    assert!(list(TrustMode::Off, dir.path(), &changed).is_empty());
    assert_eq!(
        Trust::new(TrustMode::Off, dir.path().to_owned()).quarantine(&changed, "a"),
        None
    );

    let dir = tempfile::tempdir().unwrap();
    let review = Trust::new(TrustMode::Review, dir.path().to_owned());
    assert_eq!(list(TrustMode::Review, dir.path(), &changed), ["a"]);
    assert_eq!(
        review.quarantine(&changed, "a").map(|q| q.reason),
        Some(Reason::NewServer)
    );
    approve(dir.path(), &changed, None).unwrap();
    assert_eq!(review.quarantine(&changed, "a"), None);
}

#[test]
fn unreadable_approvals_hold_every_tool() {
    let dir = tempfile::tempdir().unwrap();
    let first = catalog(&[("a", "adds")]);
    std::fs::write(Approvals::path(dir.path(), "s"), "{").unwrap();
    let trust = Trust::new(TrustMode::FirstUse, dir.path().to_owned());
    let held = trust.quarantine(&first, "a").unwrap();
    assert!(held.why().contains("tools approve"), "{}", held.why());
    approve(dir.path(), &first, None).unwrap();
    assert_eq!(trust.quarantine(&first, "a"), None);
}
