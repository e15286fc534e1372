//! The help of every command, as snapshots: it is what users read (and docs/commands.md's twin).

use crate::support::{meta_server, succeeds};

#[test]
fn help_of_every_command() {
    for command in [
        "",
        "serve",
        "add",
        "remove",
        "get",
        "list",
        "index",
        "search",
        "call",
        "auth",
        "auth login",
        "auth status",
        "auth logout",
        "tools",
        "tools review",
        "tools approve",
        "learned",
        "learned list",
        "learned forget",
        "measure",
        "import",
        "install",
        "uninstall",
        "eval",
    ] {
        let mut args: Vec<&str> = command.split_whitespace().collect();
        args.push("--help");
        let out = succeeds(meta_server(&args).env("COLUMNS", "100"));
        let help = String::from_utf8(out.stdout).unwrap();
        let name = if command.is_empty() {
            "main".to_owned()
        } else {
            command.replace(' ', "-")
        };
        insta::with_settings!({prepend_module_to_snapshot => false, snapshot_suffix => name.as_str()}, {
            insta::assert_snapshot!("help", help);
        });
    }
}
