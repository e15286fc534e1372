//! Why an HTTP upstream could not be reached, in words that name the cause and the next step:
//! connection refused, unknown host, TLS, no answer in time, an HTTP status, a reply that is
//! not MCP. rmcp's own texts name its transport types instead.

use std::error::Error;

use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

/// The cause of a failed streamable-HTTP `initialize` to `url` of `server`, when it is one of
/// the kinds above.
pub(super) fn initialize(server: &str, url: &str, e: &ClientInitializeError) -> Option<String> {
    let ClientInitializeError::TransportError { error, .. } = e else {
        return None;
    };
    let http = error
        .error
        .downcast_ref::<StreamableHttpError<reqwest::Error>>()?;
    Some(match http {
        StreamableHttpError::Client(e) => request(url, e),
        StreamableHttpError::HttpStatus(s) => status(server, url, s.status),
        StreamableHttpError::UnexpectedServerResponse(text) => {
            let code = text
                .strip_prefix("HTTP ")
                .and_then(|rest| rest.get(..3))
                .and_then(|code| code.parse().ok())?;
            status(server, url, code)
        }
        StreamableHttpError::UnexpectedContentType(kind) => not_mcp(url, kind.as_deref()),
        _ => return None,
    })
}

/// A request to `url` that got no HTTP answer.
pub(super) fn request(url: &str, e: &reqwest::Error) -> String {
    let authority = authority(url);
    let chain = chain(e);
    let io_kind = |kind| {
        std::iter::successors(Some(e as &(dyn Error + 'static)), |e| (*e).source())
            .filter_map(|e| e.downcast_ref::<std::io::Error>())
            .any(|io| io.kind() == kind)
    };
    if e.is_timeout() || io_kind(std::io::ErrorKind::TimedOut) {
        format!(
            "{authority} did not answer in time; check that the server is up, or raise timeoutSecs"
        )
    } else if io_kind(std::io::ErrorKind::ConnectionRefused) {
        format!(
            "cannot connect to {authority}: connection refused, nothing listens there; start the server, or fix the host and port in \"url\""
        )
    } else if chain.contains("dns error") {
        format!(
            "cannot resolve the host of {authority}; check the host name in \"url\" and the network"
        )
    } else if url.starts_with("https:") && e.is_connect() {
        // Reached, but no connection: the TLS handshake failed (rustls's error hides inside
        // nested io errors, so it is told by elimination).
        let detail = chain.rsplit(": ").next().unwrap_or_default();
        format!(
            "the TLS handshake with {authority} failed ({detail}); if the server speaks plain HTTP, make \"url\" http://, otherwise check its certificate"
        )
    } else if e.is_connect() {
        format!("cannot connect to {authority}: {chain}")
    } else {
        format!("the request to {authority} failed: {chain}")
    }
}

/// `url` answered with HTTP `code` where MCP was expected.
pub(super) fn status(server: &str, url: &str, code: u16) -> String {
    let url = shown(url);
    match code {
        401 | 403 => format!(
            "{url} refused access (HTTP {code}); give credentials in \"headers\" (such as Authorization) or an \"oauth\" block, or log in with `meta-server auth login {server}`"
        ),
        404 => format!(
            "nothing at {url} (HTTP 404); check the path in \"url\": streamable HTTP servers usually serve /mcp, legacy SSE servers /sse (with \"type\": \"sse\")"
        ),
        405 => format!(
            "{url} does not take MCP messages (HTTP 405); if it is a legacy SSE server, add \"type\": \"sse\""
        ),
        500..=599 => format!("{url} failed (HTTP {code}); the server's own log says why"),
        _ => format!("{url} answered HTTP {code}, not MCP; check \"url\""),
    }
}

/// `url` answered with a body of type `kind` instead of JSON or an event stream.
pub(super) fn not_mcp(url: &str, kind: Option<&str>) -> String {
    let url = shown(url);
    let kind = kind.unwrap_or("no content type");
    if kind.starts_with("text/html") {
        format!(
            "{url} answered with a web page (text/html), not MCP; is \"url\" the server's MCP endpoint (often /mcp)?"
        )
    } else {
        format!("{url} answered with {kind}, not MCP; is \"url\" the server's MCP endpoint?")
    }
}

/// `host:port` of `url`.
fn authority(url: &str) -> String {
    match url.parse::<http::Uri>() {
        Ok(u) => {
            let host = u.host().unwrap_or_default();
            let port = u.port_u16().or(match u.scheme_str() {
                Some("https") => Some(443),
                Some("http") => Some(80),
                _ => None,
            });
            port.map_or_else(|| host.to_owned(), |port| format!("{host}:{port}"))
        }
        Err(_) => "the server".to_owned(),
    }
}

/// `url` without user info or query, which may hold secrets.
fn shown(url: &str) -> String {
    match url.parse::<http::Uri>() {
        Ok(u) => format!(
            "{}://{}{}",
            u.scheme_str().unwrap_or("http"),
            authority(url),
            u.path()
        ),
        Err(_) => "the url".to_owned(),
    }
}

/// The texts of `e` and its sources, joined.
fn chain(e: &(dyn Error + 'static)) -> String {
    std::iter::successors(Some(e), |e| (*e).source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_name_the_next_step() {
        let url = "http://127.0.0.1:9/mcp";
        assert!(status("s", url, 404).contains("/mcp"));
        assert!(status("s", url, 401).contains("meta-server auth login s"));
        assert!(status("s", url, 405).contains("\"type\": \"sse\""));
        assert!(status("s", url, 502).contains("HTTP 502"));
        assert!(not_mcp(url, Some("text/html; charset=utf-8")).contains("web page"));
        assert_eq!(authority("https://example.com/mcp"), "example.com:443");
        assert_eq!(
            shown("https://user:pw@example.com:8443/mcp?key=secret"),
            "https://example.com:8443/mcp"
        );
    }
}
