//! Host and Origin checks against DNS rebinding for every path of `serve --http`, made before a
//! token or a body is read: rmcp makes the same ones for `/mcp`, but `/healthz` and `/metrics`
//! (which tell server names, counts and the store's address) must refuse a page on a foreign
//! origin too. The rules are rmcp's, so `/mcp` accepts and refuses exactly what it did.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::uri::Authority;
use http::{HeaderMap, StatusCode, Uri, header};

/// The Host and Origin values a request may carry.
#[derive(Debug)]
pub(super) struct Allowed {
    hosts: Vec<HostPort>,
    origins: Vec<AllowedOrigin>,
}

/// A host (lower-case, without IPv6 brackets) and its port, if given.
#[derive(Debug, PartialEq)]
struct HostPort {
    host: String,
    port: Option<u16>,
}

#[derive(Debug, PartialEq)]
enum Origin {
    Null,
    Tuple {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

#[derive(Debug, PartialEq)]
enum AllowedOrigin {
    Null,
    /// `port: None` is `:*` or no port: any port.
    Tuple {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

impl Allowed {
    /// From the lists given to rmcp (`allowed_hosts`, `allowed_origins`); entries that do not
    /// parse match nothing, as there.
    pub(super) fn new(hosts: &[String], origins: &[String]) -> Self {
        Self {
            hosts: hosts.iter().filter_map(|h| allowed_host(h)).collect(),
            origins: origins.iter().filter_map(|o| allowed_origin(o)).collect(),
        }
    }

    /// Why `headers` (and `uri`, for HTTP/2's `:authority`) are refused, if they are.
    fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), (StatusCode, &'static str)> {
        let host = match headers.get(header::HOST) {
            Some(value) => value
                .to_str()
                .ok()
                .and_then(|v| Authority::try_from(v).ok())
                .map(|a| host_port(a.host(), a.port_u16()))
                .ok_or((StatusCode::BAD_REQUEST, "Bad Request: Invalid Host header"))?,
            None => uri
                .authority()
                .map(|a| host_port(a.host(), a.port_u16()))
                .ok_or((StatusCode::BAD_REQUEST, "Bad Request: missing Host header"))?,
        };
        let host_ok = self.hosts.is_empty()
            || self.hosts.iter().any(|allowed| {
                allowed.host == host.host && allowed.port.is_none_or(|p| host.port == Some(p))
            });
        if !host_ok {
            return Err((
                StatusCode::FORBIDDEN,
                "Forbidden: Host header is not allowed",
            ));
        }
        if self.origins.is_empty() {
            return Ok(());
        }
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Ok(());
        };
        let origin = origin
            .to_str()
            .ok()
            .and_then(parse_origin)
            .ok_or((StatusCode::FORBIDDEN, "Forbidden: Invalid Origin header"))?;
        if self
            .origins
            .iter()
            .any(|allowed| origin_matches(allowed, &origin))
        {
            Ok(())
        } else {
            Err((
                StatusCode::FORBIDDEN,
                "Forbidden: Origin header is not allowed",
            ))
        }
    }
}

fn host_port(host: &str, port: Option<u16>) -> HostPort {
    HostPort {
        host: host
            .trim_matches('[')
            .trim_matches(']')
            .to_ascii_lowercase(),
        port,
    }
}

fn allowed_host(entry: &str) -> Option<HostPort> {
    let entry = entry.trim();
    if entry.is_empty() {
        return None;
    }
    Some(match Authority::try_from(entry) {
        Ok(a) => host_port(a.host(), a.port_u16()),
        Err(_) => host_port(entry, None),
    })
}

fn parse_origin(value: &str) -> Option<Origin> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.eq_ignore_ascii_case("null") {
        return Some(Origin::Null);
    }
    let uri = Uri::try_from(value).ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let authority = uri.authority()?;
    let HostPort { host, port } = host_port(authority.host(), authority.port_u16());
    Some(Origin::Tuple { scheme, host, port })
}

fn allowed_origin(entry: &str) -> Option<AllowedOrigin> {
    let entry = entry.trim();
    let (base, any_port) = match entry.strip_suffix(":*") {
        Some(base) => (base, true),
        None => (entry, false),
    };
    match parse_origin(base)? {
        Origin::Null if !any_port => Some(AllowedOrigin::Null),
        Origin::Null => None,
        Origin::Tuple { port: Some(_), .. } if any_port => None,
        Origin::Tuple { scheme, host, port } => Some(AllowedOrigin::Tuple { scheme, host, port }),
    }
}

fn origin_matches(allowed: &AllowedOrigin, origin: &Origin) -> bool {
    match (allowed, origin) {
        (AllowedOrigin::Null, Origin::Null) => true,
        (
            AllowedOrigin::Tuple { scheme, host, port },
            Origin::Tuple {
                scheme: o_scheme,
                host: o_host,
                port: o_port,
            },
        ) => {
            let default = match o_scheme.as_str() {
                "http" => Some(80),
                "https" => Some(443),
                _ => None,
            };
            scheme == o_scheme
                && host == o_host
                && port.is_none_or(|p| o_port.or(default) == Some(p))
        }
        _ => false,
    }
}

/// Refuses a request with a foreign Host or Origin (403) or an unreadable Host (400).
pub(super) async fn same_origin(
    State(allowed): State<Arc<Allowed>>,
    request: Request,
    next: Next,
) -> Response {
    match allowed.check(request.uri(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err((status, why)) => {
            tracing::warn!(
                path = request.uri().path(),
                "{why} (possible DNS rebinding or cross-origin request)"
            );
            (status, format!("{why}\n")).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed() -> Allowed {
        let hosts = ["localhost", "127.0.0.1", "::1", "box.lan:8080"].map(String::from);
        let origins = [
            "http://localhost:*",
            "https://[::1]:*",
            "https://app.example",
        ]
        .map(String::from);
        Allowed::new(&hosts, &origins)
    }

    fn check(pairs: &[(&str, &str)]) -> Result<(), StatusCode> {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        allowed()
            .check(&Uri::from_static("/healthz"), &headers)
            .map_err(|(status, _)| status)
    }

    #[test]
    fn loopback_hosts_on_any_port_pass() {
        assert_eq!(check(&[("host", "localhost")]), Ok(()));
        assert_eq!(check(&[("host", "127.0.0.1:9000")]), Ok(()));
        assert_eq!(check(&[("host", "[::1]:9000")]), Ok(()));
        assert_eq!(check(&[("host", "LocalHost:1")]), Ok(()));
        assert_eq!(check(&[("host", "box.lan:8080")]), Ok(()));
    }

    #[test]
    fn foreign_or_broken_hosts_are_refused() {
        assert_eq!(
            check(&[("host", "evil.example")]),
            Err(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            check(&[("host", "box.lan:8081")]),
            Err(StatusCode::FORBIDDEN),
            "an entry with a port allows that port only"
        );
        assert_eq!(check(&[("host", "a b")]), Err(StatusCode::BAD_REQUEST));
        assert_eq!(check(&[]), Err(StatusCode::BAD_REQUEST));
    }

    #[test]
    fn origins_are_checked_when_present() {
        let host = ("host", "localhost");
        assert_eq!(check(&[host, ("origin", "http://localhost:5173")]), Ok(()));
        assert_eq!(check(&[host, ("origin", "https://[::1]:1")]), Ok(()));
        assert_eq!(check(&[host, ("origin", "https://app.example")]), Ok(()));
        for foreign in [
            "http://evil.example",
            "null",
            "https://localhost:5173",
            "http://localhost.evil.example",
            "garbage",
        ] {
            assert_eq!(
                check(&[host, ("origin", foreign)]),
                Err(StatusCode::FORBIDDEN),
                "{foreign}"
            );
        }
    }
}
