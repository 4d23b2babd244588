//! Who may use the admin listener's `/api/`, decided once for every endpoint.
//!
//! - With `[admin] token_file`, every request (reads too) carries
//!   `Authorization: Bearer TOKEN`, compared in constant time. A browser
//!   never adds it on its own, so the listener may then be reached by any name.
//! - Without one, a loopback admin listener takes requests whose `Host` names
//!   it (a DNS-rebinding page sends its own name, as Caddy checks), and a
//!   listener on any other address takes none: its `/api/` would be open to
//!   the network.
//! - Either way a change (any method but GET and HEAD) whose `Origin` is
//!   another origin, or whose `Sec-Fetch-Site` is another site, is refused: it
//!   comes from a page in a browser.
//!
//! The admin listener has no TLS, so client certificates are not a credential
//! here; put it behind a TLS listener of Pier (`proxy` to it) for that.

use std::fmt;
use std::net::SocketAddr;

use crate::http::RequestView;

/// Who made a request that was let in, for the log.
#[derive(Debug, Clone)]
pub struct ApiCaller {
    /// The peer address.
    pub peer: SocketAddr,
    /// How it was let in.
    pub credential: Credential,
}

/// What let a caller in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// The bearer token of `[admin] token_file`, named by the first 8 hex
    /// digits of its SHA-256 (never the token itself).
    Token(String),
    /// A loopback listener and a `Host` naming it; no token configured.
    Loopback,
}

impl fmt::Display for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::Token(id) => write!(f, "bearer token sha256:{id}"),
            Credential::Loopback => f.write_str("loopback, no token"),
        }
    }
}

/// Why a request was refused: the status and a sentence.
pub type Refusal = (u16, String);

/// Whether an admin listener bound to `addr` counts as reachable from this
/// host only. `0.0.0.0` and `::` are every address, so not loopback.
pub fn is_loopback_listener(addr: SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// Lets `req` in (see the module doc) or says why not. `admin` is the
/// listener's bound address, `token` the configured one; `change` for any
/// method that is not a read.
pub fn api_access(
    req: &RequestView<'_>,
    admin: SocketAddr,
    token: Option<&str>,
    change: bool,
) -> Result<ApiCaller, Refusal> {
    let credential = match token {
        Some(token) => bearer(req, token)?,
        None if !is_loopback_listener(admin) => {
            return Err((
                403,
                format!(
                    "the admin listener {admin} is not a loopback address: /api/ needs [admin] token_file and its token"
                ),
            ))
        }
        None => Credential::Loopback,
    };
    let host = req
        .header("host")
        .and_then(|h| std::str::from_utf8(h).ok())
        .map(str::to_ascii_lowercase)
        .ok_or_else(|| {
            (
                403,
                "a request needs a Host field naming the admin listener".into(),
            )
        })?;
    if credential == Credential::Loopback && !names_listener(&host, admin) {
        return Err((
            403,
            format!("Host {host:?} is not the admin listener ({admin}); the request is refused"),
        ));
    }
    if change {
        from_same_origin(req, &host)?;
    }
    Ok(ApiCaller {
        peer: req.peer(),
        credential,
    })
}

/// The bearer token of `req`, when it is `token`.
fn bearer(req: &RequestView<'_>, token: &str) -> Result<Credential, Refusal> {
    let given = req
        .header("authorization")
        .and_then(|v| v.strip_prefix(b"Bearer "))
        .unwrap_or_default();
    if aws_lc_rs::constant_time::verify_slices_are_equal(given, token.as_bytes()).is_err() {
        return Err((
            401,
            "/api/ needs Authorization: Bearer with the token of [admin] token_file".into(),
        ));
    }
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    let id = digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Credential::Token(id))
}

/// Whether `host` (lowercase, with its port) names the loopback listener `admin`.
fn names_listener(host: &str, admin: SocketAddr) -> bool {
    let port = admin.port();
    [
        admin.to_string(),
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ]
    .iter()
    .any(|n| n == host)
}

/// Refuses a change sent by a page of another origin or site.
fn from_same_origin(req: &RequestView<'_>, host: &str) -> Result<(), Refusal> {
    if let Some(origin) = req.header("origin") {
        if !origin.eq_ignore_ascii_case(format!("http://{host}").as_bytes()) {
            return Err((
                403,
                "a request from a page of another origin cannot change anything".into(),
            ));
        }
    }
    if let Some(site) = req.header("sec-fetch-site") {
        if site != b"same-origin" && site != b"none" {
            return Err((
                403,
                "a request from a page of another site cannot change anything".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_loopback_listeners() {
        for a in ["127.0.0.1:9090", "127.0.0.2:1", "[::1]:9090"] {
            assert!(is_loopback_listener(a.parse().unwrap()), "{a}");
        }
        for a in [
            "0.0.0.0:9090",
            "[::]:9090",
            "10.0.0.1:9090",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert!(!is_loopback_listener(a.parse().unwrap()), "{a}");
        }
    }

    #[test]
    fn a_loopback_listener_is_named_by_its_address_and_local_names() {
        let admin: SocketAddr = "127.0.0.1:9090".parse().unwrap();
        for h in ["127.0.0.1:9090", "localhost:9090", "[::1]:9090"] {
            assert!(names_listener(h, admin), "{h}");
        }
        for h in ["evil.example:9090", "localhost:9091", "127.0.0.1"] {
            assert!(!names_listener(h, admin), "{h}");
        }
    }
}
