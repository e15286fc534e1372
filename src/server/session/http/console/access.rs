//! Who may use the console and how the browser proves it: `META_SERVER_TOKEN` or a named token
//! marked `"admin": true`, presented once to `POST /console/login`, which answers with a
//! session cookie (HttpOnly, SameSite=Strict, path `/console`, 12 hours) signed with a key
//! made from that token (so every replica holding the token accepts it, and changing the
//! token ends its sessions). Each POST also carries the session's CSRF token in a header and
//! an `Origin` equal to the page's own. Scripts may send `Authorization: Bearer <token>`
//! instead of the cookie.

use std::time::{SystemTime, UNIX_EPOCH};

use http::{HeaderMap, Method, header};
use ring::hmac;
use sha2::{Digest, Sha256};

/// The session cookie's name.
pub(super) const COOKIE: &str = "meta_server_console";
/// The header a POST carries its CSRF token in.
pub(super) const CSRF_HEADER: &str = "x-csrf-token";
/// How long a console session lasts.
pub(super) const SESSION_SECS: u64 = 12 * 3600;

/// A token that may open the console.
struct Admin {
    /// The principal's name, as the audit log and metrics say it.
    name: String,
    /// SHA-256 of the token, compared in constant time.
    digest: [u8; 32],
    /// The key of its sessions' signatures.
    key: hmac::Key,
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// No token, no session, or an unknown token (401).
    Unauthenticated,
    /// A token that is not an admin's (403).
    NotAdmin,
    /// A POST without the session's CSRF token, or from another origin (403).
    Forged,
    /// No token is configured at all (403): the console needs one.
    NoToken,
}

impl Refused {
    pub(super) fn message(self) -> &'static str {
        match self {
            Self::Unauthenticated => "sign in with META_SERVER_TOKEN or an admin token",
            Self::NotAdmin => {
                "this token may not open the console: mark it \"admin\": true in metaServer.http.tokens, or use META_SERVER_TOKEN"
            }
            Self::Forged => {
                "refused: a console POST must come from the console page itself (its Origin and CSRF token)"
            }
            Self::NoToken => {
                "the console needs a token: set META_SERVER_TOKEN (or --token-file), or a named token with \"admin\": true"
            }
        }
    }
}

/// A signed-in admin: its name and the CSRF token of its session (`None` for a bearer token).
#[derive(Debug, Clone)]
pub(super) struct Signed {
    pub name: String,
    pub csrf: Option<String>,
}

/// The admin tokens, and the names of every token (an admin's or not) to tell them apart.
pub(super) struct Admins {
    admins: Vec<Admin>,
    /// Digests of the tokens that are not admins'.
    others: Vec<[u8; 32]>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

impl Admins {
    /// `admins` are (name, token) of those who may open the console; `others` the tokens of
    /// those who may not.
    pub(super) fn new<'a>(
        admins: impl IntoIterator<Item = (String, &'a str)>,
        others: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let admins = admins
            .into_iter()
            .map(|(name, token)| {
                let digest = digest(token);
                // The signing key is the token's digest under a label of its own.
                let key = hmac::Key::new(hmac::HMAC_SHA256, &digest);
                let label = hmac::sign(&key, b"meta-server console session key v1");
                Admin {
                    name,
                    digest,
                    key: hmac::Key::new(hmac::HMAC_SHA256, label.as_ref()),
                }
            })
            .collect();
        Self {
            admins,
            others: others.into_iter().map(digest).collect(),
        }
    }

    /// Whether no token is configured at all.
    pub(super) fn none(&self) -> bool {
        self.admins.is_empty() && self.others.is_empty()
    }

    /// The admin a token belongs to; a known token that is not an admin's is `NotAdmin`.
    fn admin_of(&self, token: &str) -> Result<&Admin, Refused> {
        if self.none() {
            return Err(Refused::NoToken);
        }
        let presented = digest(token.trim());
        // Every digest is compared, so the time taken does not say which one matched.
        let admin = self.admins.iter().fold(None, |found, a| {
            if same(&a.digest, &presented) {
                Some(a)
            } else {
                found
            }
        });
        let other = self
            .others
            .iter()
            .fold(false, |found, d| found | same(d, &presented));
        match (admin, other) {
            (Some(admin), _) => Ok(admin),
            (None, true) => Err(Refused::NotAdmin),
            (None, false) => Err(Refused::Unauthenticated),
        }
    }

    /// A session cookie's value for the holder of `token`: `<expiry>.<nonce>.<mac>.<name>`.
    pub(super) fn login(&self, token: &str) -> Result<(Signed, String), Refused> {
        let admin = self.admin_of(token)?;
        let expiry = now() + SESSION_SECS;
        let nonce = crate::checksum::hex(&rand::random::<[u8; 16]>());
        let mac = mac(admin, expiry, &nonce);
        let cookie = format!("{expiry}.{nonce}.{mac}.{}", admin.name);
        let signed = Signed {
            name: admin.name.clone(),
            csrf: Some(csrf(admin, &nonce)),
        };
        Ok((signed, cookie))
    }

    /// Who sent `headers`: a bearer admin token, or a valid session cookie; for a POST signed by
    /// the cookie, also its CSRF header and same-origin `Origin`.
    pub(super) fn check(&self, method: &Method, headers: &HeaderMap) -> Result<Signed, Refused> {
        if self.none() {
            return Err(Refused::NoToken);
        }
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token);
        if let Some(token) = bearer {
            let admin = self.admin_of(token)?;
            return Ok(Signed {
                name: admin.name.clone(),
                csrf: None,
            });
        }
        let cookie = cookie(headers).ok_or(Refused::Unauthenticated)?;
        let (admin, nonce) = self.session(cookie).ok_or(Refused::Unauthenticated)?;
        let csrf = csrf(admin, nonce);
        if method != Method::GET && method != Method::HEAD {
            let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
            let matches = sent.is_some_and(|s| {
                s.len() == csrf.len()
                    && s.bytes()
                        .zip(csrf.bytes())
                        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                        == 0
            });
            if !matches || !same_origin(headers) {
                return Err(Refused::Forged);
            }
        }
        Ok(Signed {
            name: admin.name.clone(),
            csrf: Some(csrf),
        })
    }

    /// The admin and nonce of a cookie value that is signed and not expired.
    fn session<'c>(&self, value: &'c str) -> Option<(&Admin, &'c str)> {
        let mut parts = value.splitn(4, '.');
        let (expiry, nonce, mac_hex, name) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let expiry: u64 = expiry.parse().ok()?;
        if expiry <= now() {
            return None;
        }
        let admin = self.admins.iter().find(|a| a.name == name)?;
        let mac_bytes = unhex(mac_hex)?;
        let message = session_message(&admin.name, expiry, nonce);
        hmac::verify(&admin.key, message.as_bytes(), &mac_bytes).ok()?;
        Some((admin, nonce))
    }
}

fn session_message(name: &str, expiry: u64, nonce: &str) -> String {
    format!("session\n{expiry}\n{nonce}\n{name}")
}

fn mac(admin: &Admin, expiry: u64, nonce: &str) -> String {
    let message = session_message(&admin.name, expiry, nonce);
    crate::checksum::hex(hmac::sign(&admin.key, message.as_bytes()).as_ref())
}

fn csrf(admin: &Admin, nonce: &str) -> String {
    let tag = hmac::sign(&admin.key, format!("csrf\n{nonce}").as_bytes());
    crate::checksum::hex(&tag.as_ref()[..16])
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The console cookie among a request's cookies.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// Whether a request carries an `Origin` naming the host it was sent to (the console page
/// itself, over http or https): browsers send it with every POST.
pub(super) fn same_origin(headers: &HeaderMap) -> bool {
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    match (origin, host) {
        (Some(origin), Some(host)) => {
            let authority = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"));
            authority.is_some_and(|a| a.eq_ignore_ascii_case(host))
        }
        _ => false,
    }
}

/// The `Set-Cookie` value of a session `value` (empty and expired: a logout).
pub(super) fn set_cookie(value: Option<&str>) -> String {
    match value {
        Some(value) => format!(
            "{COOKIE}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={SESSION_SECS}"
        ),
        None => format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admins() -> Admins {
        Admins::new(
            [
                ("root".to_owned(), "root-token"),
                ("ops".to_owned(), "ops-token"),
            ],
            ["reader-token"],
        )
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn only_admin_tokens_sign_in() {
        let a = admins();
        assert_eq!(a.login("reader-token").unwrap_err(), Refused::NotAdmin);
        assert_eq!(a.login("nobody").unwrap_err(), Refused::Unauthenticated);
        let none = Admins::new([], []);
        assert_eq!(none.login("x").unwrap_err(), Refused::NoToken);
        let (signed, _) = a.login(" ops-token ").unwrap();
        assert_eq!(signed.name, "ops");
    }

    #[test]
    fn a_session_cookie_works_for_gets_and_posts_need_csrf_and_origin() {
        let a = admins();
        let (signed, value) = a.login("root-token").unwrap();
        let csrf = signed.csrf.unwrap();
        let cookie = format!("other=1; {COOKIE}={value}");
        let get = headers(&[("cookie", &cookie)]);
        assert_eq!(a.check(&Method::GET, &get).unwrap().name, "root");
        assert_eq!(a.check(&Method::POST, &get).unwrap_err(), Refused::Forged);
        let post = headers(&[
            ("cookie", &cookie),
            ("x-csrf-token", &csrf),
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ]);
        assert!(a.check(&Method::POST, &post).is_ok());
        let foreign = headers(&[
            ("cookie", &cookie),
            ("x-csrf-token", &csrf),
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
        ]);
        assert_eq!(
            a.check(&Method::POST, &foreign).unwrap_err(),
            Refused::Forged
        );
        // A cookie signed for one admin cannot be renamed to another.
        let renamed = value.replace(".root", ".ops");
        let forged = headers(&[("cookie", &format!("{COOKIE}={renamed}"))]);
        assert_eq!(
            a.check(&Method::GET, &forged).unwrap_err(),
            Refused::Unauthenticated
        );
        // Another process with other tokens does not take it.
        let other = Admins::new([("root".to_owned(), "changed")], []);
        assert!(other.check(&Method::GET, &get).is_err());
    }

    #[test]
    fn a_bearer_admin_token_needs_no_cookie() {
        let a = admins();
        let h = headers(&[("authorization", "Bearer ops-token")]);
        assert_eq!(a.check(&Method::POST, &h).unwrap().name, "ops");
        let h = headers(&[("authorization", "Bearer reader-token")]);
        assert_eq!(a.check(&Method::GET, &h).unwrap_err(), Refused::NotAdmin);
    }
}
