//! The HTTP-01 responder (RFC 8555 8.3): `GET /.well-known/acme-challenge/<token>`
//! is answered ahead of every route with the key authorization of a validation
//! in progress.
//!
//! Tokens this instance published sit in a process-wide table read without a
//! lock. A fleet shares its state directory, and the instance that ordered
//! writes the token there too, so whichever instance the CA reaches can answer:
//! a token not in the table is looked up in the state directories of the
//! running configuration (read off the event loop).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;

use super::state::{valid_token, StateDir};

/// Path prefix of HTTP-01 validation requests.
pub const CHALLENGE_PREFIX: &[u8] = b"/.well-known/acme-challenge/";

#[derive(Default)]
struct Table {
    tokens: HashMap<String, String>,
    /// State directories of ACME listeners, searched for tokens another instance wrote.
    dirs: Vec<PathBuf>,
}

fn table() -> &'static ArcSwap<Table> {
    static TABLE: OnceLock<ArcSwap<Table>> = OnceLock::new();
    TABLE.get_or_init(|| ArcSwap::from_pointee(Table::default()))
}

/// Makes the token files of `dirs` answerable (called when ACME starts).
pub fn watch_state_dirs(dirs: Vec<PathBuf>) {
    table().rcu(|t| Table {
        tokens: t.tokens.clone(),
        dirs: dirs.clone(),
    });
}

/// A published HTTP-01 answer; dropping it withdraws it (and its shared file).
pub struct Http01Challenge {
    token: String,
    file: Option<PathBuf>,
}

impl Drop for Http01Challenge {
    fn drop(&mut self) {
        table().rcu(|t| {
            let mut tokens = t.tokens.clone();
            tokens.remove(&self.token);
            Table {
                tokens,
                dirs: t.dirs.clone(),
            }
        });
        if let Some(f) = &self.file {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Answers `token` with `key_authorization` here, and through `state` in every
/// instance sharing it, until the returned guard drops.
pub fn publish(
    state: &StateDir,
    token: &str,
    key_authorization: &str,
) -> std::io::Result<Http01Challenge> {
    let file = state.token_path(token);
    if let Some(f) = &file {
        super::state::write_private(f, key_authorization.as_bytes())?;
    }
    table().rcu(|t| {
        let mut tokens = t.tokens.clone();
        tokens.insert(token.to_string(), key_authorization.to_string());
        Table {
            tokens,
            dirs: t.dirs.clone(),
        }
    });
    Ok(Http01Challenge {
        token: token.to_string(),
        file,
    })
}

/// The token of a validation request's path, if it is one.
pub fn token_of(path: &[u8]) -> Option<&str> {
    let rest = path.strip_prefix(CHALLENGE_PREFIX)?;
    let token = std::str::from_utf8(rest).ok()?;
    valid_token(token).then_some(token)
}

/// The body answering a validation request for `path`, or `None` when the path
/// is not one or the token is unknown (the request then goes to the routes).
pub async fn answer(path: &[u8]) -> Option<Vec<u8>> {
    let token = token_of(path)?;
    let t = table().load_full();
    if let Some(k) = t.tokens.get(token) {
        return Some(k.clone().into_bytes());
    }
    lookup_shared(t, token.to_string()).await
}

async fn lookup_shared(t: Arc<Table>, token: String) -> Option<Vec<u8>> {
    if t.dirs.is_empty() {
        return None;
    }
    tokio::task::spawn_blocking(move || {
        t.dirs.iter().find_map(|d| {
            let path = StateDir::new(d).token_path(&token)?;
            let body = StateDir::new(d).read(&path).ok()?;
            (body.len() < 1024 && body.starts_with(token.as_bytes())).then_some(body)
        })
    })
    .await
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_are_not_tokens_are_left_to_the_routes() {
        assert_eq!(
            token_of(b"/.well-known/acme-challenge/abc_-9"),
            Some("abc_-9")
        );
        assert_eq!(token_of(b"/.well-known/acme-challenge/"), None);
        assert_eq!(token_of(b"/.well-known/acme-challenge/../x"), None);
        assert_eq!(token_of(b"/.well-known/acme-challenge/a%2Fb"), None);
        assert_eq!(token_of(b"/index.html"), None);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn published_and_shared_tokens_are_answered_then_withdrawn() {
        let d = tempfile::tempdir().unwrap();
        let state = StateDir::new(d.path());
        state.create().unwrap();
        let guard = publish(&state, "tokA", "tokA.thumb").unwrap();
        assert_eq!(
            answer(b"/.well-known/acme-challenge/tokA").await.as_deref(),
            Some(&b"tokA.thumb"[..])
        );
        drop(guard);
        assert!(answer(b"/.well-known/acme-challenge/tokA").await.is_none());
        assert!(!d.path().join("http-01/tokA").exists());

        // Another instance wrote this one.
        std::fs::write(d.path().join("http-01/tokB"), "tokB.other").unwrap();
        assert!(answer(b"/.well-known/acme-challenge/tokB").await.is_none());
        watch_state_dirs(vec![d.path().to_path_buf()]);
        assert_eq!(
            answer(b"/.well-known/acme-challenge/tokB").await.as_deref(),
            Some(&b"tokB.other"[..])
        );
        watch_state_dirs(Vec::new());
    }
}
