//! The `initialize` instructions: a short, deterministic overview of the configured servers,
//! fixed for the life of the process.

use crate::catalog::Failure;
use crate::config::Settings;
use crate::hidden;
use crate::library::Library;

/// Upper bound on the overview, in characters, whatever the number of servers: with the three
/// meta-tools the whole surface stays within 4,000 characters (about 1,000 tokens).
const MAX_CHARS: usize = 1_000;
/// Upper bound on one server's line.
const LINE_CHARS: usize = 100;

/// The overview of `settings`' servers as `library` knows them, within [`MAX_CHARS`].
pub fn overview(settings: &Settings, library: &Library) -> String {
    let mut text = String::from(
        "Tools of the MCP servers below are reached through three tools. search_tools finds tools by what they do; \
         get_tool_details shows a tool's full input schema; call_tool runs it by its qualified name <server>__<tool>. \
         Search first instead of guessing names.\n\nServers:\n",
    );
    // Lines are made only until the overview is full: at registry scale it names a few of
    // thousands of servers.
    let count = settings.servers.len() + settings.skipped.len();
    let lines = settings
        .servers
        .iter()
        .map(|server| {
            let catalog = library.catalogs.get(&server.name);
            // The user's description, else the server's own title; never upstream
            // instructions, which are long and written for another context.
            let about = server.description.clone().or_else(|| {
                catalog
                    .and_then(|c| c.server_info.as_ref())
                    .and_then(|i| i.get("title"))
                    .and_then(|v| v.as_str())
                    .map(str::to_owned)
            });
            let tools = match catalog {
                Some(c) => format!("{} tools", c.tools.len()),
                None => match Failure::load(&settings.catalog_dir, &server.name) {
                    Some(failed) => format!("index failed: {}", failed.reason),
                    None => "not indexed yet".to_owned(),
                },
            };
            // A server's title is upstream text: it must not hide anything either.
            let about = about.map(|about| hidden::strip(&about).0);
            let line = match about {
                Some(about) => format!("- {}: {} ({tools})", server.name, about.trim()),
                None => format!("- {} ({tools})", server.name),
            };
            clip(&line, LINE_CHARS)
        })
        .chain(settings.skipped.iter().map(|s| {
            clip(
                &format!("- {} (not available: {})", s.key, s.reason),
                LINE_CHARS,
            )
        }));
    for (i, line) in lines.enumerate() {
        if text.len() + line.len() + 60 > MAX_CHARS {
            text.push_str(&format!(
                "- … and {} more (search_tools finds their tools)\n",
                count - i
            ));
            break;
        }
        text.push_str(&line);
        text.push('\n');
    }
    text.trim_end().to_owned()
}

fn clip(line: &str, max: usize) -> String {
    if line.chars().count() <= max {
        line.to_owned()
    } else {
        let cut: String = line.chars().take(max - 1).collect();
        format!("{cut}…")
    }
}
