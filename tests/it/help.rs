//! The help of every command, as snapshots: it is what users read (and the README's twin).

use crate::support::{meta_server, succeeds};

#[test]
fn help_of_every_command() {
    for command in [
        "",
        "serve",
        "index",
        "search",
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
        let name = if command.is_empty() { "main" } else { command };
        insta::with_settings!({prepend_module_to_snapshot => false, snapshot_suffix => name}, {
            insta::assert_snapshot!("help", help);
        });
    }
}
