//! The resources meta-server serves itself, never an upstream: skills (`skill://<name>`) and
//! stored results (the template behind a truncation notice).

use rmcp::ErrorData as McpError;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate};

use crate::library::Library;
use crate::result::Owner;
use crate::server::State;
use crate::server::passthrough::{self, OwnSpaces};
use crate::server::tools::reply;

/// URI scheme of skills as resources.
const SKILL_SCHEME: &str = "skill://";

/// The URIs meta-server serves itself, never an upstream: skills and stored results.
pub(super) const OWN: OwnSpaces = OwnSpaces(&[SKILL_SCHEME, crate::result::RESOURCE_PREFIX]);

/// Whether meta-server serves `uri` itself (a skill or a stored result), never an upstream.
pub(super) fn is_own(uri: &str) -> bool {
    OWN.holds(uri)
}

/// The skill `uri` names, if it names one.
pub(super) fn skill_name(uri: &str) -> Option<&str> {
    uri.strip_prefix(SKILL_SCHEME)
}

/// The skills of `library` as resources.
pub(super) fn skills(library: &Library) -> impl Iterator<Item = Resource> + '_ {
    library.skills.iter().map(|skill| {
        let mut r = Resource::new(format!("{SKILL_SCHEME}{}", skill.name), skill.name.clone());
        r.description = Some(skill.description.clone());
        r.mime_type = Some("text/markdown".into());
        r
    })
}

/// The skill `name` of `library` read at `uri`.
pub(super) fn read_skill(
    library: &Library,
    name: &str,
    uri: &str,
) -> Result<ReadResourceResult, McpError> {
    let skill = library
        .skills
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| {
            passthrough::not_found(
                format!(
                    "no skill \"{}\"; resources/list shows the skills",
                    reply::echo(name)
                ),
                uri,
            )
        })?;
    let mut contents = ResourceContents::text(skill.text.clone(), uri.to_owned());
    if let ResourceContents::TextResourceContents { mime_type, .. } = &mut contents {
        *mime_type = Some("text/markdown".into());
    }
    Ok(ReadResourceResult::new(vec![contents]))
}

/// meta-server's stored-result template.
pub(super) fn stored_result_template() -> ResourceTemplate {
    let mut template = ResourceTemplate::new(
        format!("{}{{resourceId}}", crate::result::RESOURCE_PREFIX),
        "stored-result",
    );
    template.title = Some("Full result of a truncated tool call".into());
    template.description = Some(
        "The whole result behind a TRUNCATION NOTICE; resourceId is the notice's resourceId (r- and 32 hex digits).".into(),
    );
    template
}

/// The stored result at `uri`, if `owner` may read it.
pub(super) async fn read_stored(
    state: &State,
    uri: &str,
    owner: &Owner,
) -> Result<ReadResourceResult, McpError> {
    let id = crate::result::resource_id(uri).ok_or_else(|| {
        passthrough::not_found(
            format!(
                "unknown resource {}; resources/list and resources/templates/list show the resources, and stored results look like {}r-<32 hex digits>",
                reply::echo(uri),
                crate::result::RESOURCE_PREFIX
            ),
            uri,
        )
    })?;
    match state.results.read_resource(id, owner).await {
        Ok(contents) => Ok(ReadResourceResult::new(vec![contents])),
        Err(e) => Err(passthrough::not_found(e.to_string(), uri)),
    }
}
