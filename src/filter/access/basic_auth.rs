//! `basic_auth`: HTTP Basic authentication (RFC 7617) against an htpasswd
//! file of bcrypt (`htpasswd -B`) or argon2 hashes, answered with 401 and
//! `WWW-Authenticate` when the credentials are missing or wrong.
//!
//! The hash check runs on the [`HashPool`], never on a worker's event loop.
//! A successful check is remembered for [`VERIFIED_FOR`], as Caddy does, so a
//! signed-in client pays for one hash, not one per request. The memory is a
//! fixed table of 64-bit tags of HMAC-SHA256 under a key drawn at start over
//! the user name and password: it holds no password, an attacker cannot
//! compute a tag without the key, and a wrong password is never remembered.
//! Slots are two atomics, so workers share it without a lock; a torn read
//! pairs a verified tag with another verified tag's expiry at worst.
//! The table and the users belong to the configuration generation: a reload
//! (SIGHUP) reads the file again and forgets what was remembered.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lc_rs::hmac;
use aws_lc_rs::rand::SystemRandom;

use super::hash_pool::HashPool;
use super::Refusal;
use crate::filter::{RouteFilter, Verdict};
use crate::http::Session;

/// How long a verified user name and password are taken without hashing again.
pub const VERIFIED_FOR: Duration = Duration::from_secs(300);
/// Slots of the verified-credentials table (16 bytes each).
const REMEMBERED: usize = 1024;
/// Longest `Authorization` value looked at; longer ones are wrong credentials.
const MAX_CREDENTIALS: usize = 1024;

/// A stored password hash, as the htpasswd line has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordHash {
    /// `$2a$`, `$2b$`, `$2x$` or `$2y$`.
    Bcrypt(Arc<str>),
    /// `$argon2id$`, `$argon2i$` or `$argon2d$` (PHC string).
    Argon2(Arc<str>),
}

impl PasswordHash {
    /// Reads the hash part of an htpasswd line; an error says what it is instead.
    pub fn parse(hash: &str) -> Result<PasswordHash, String> {
        if hash.starts_with("$2a$")
            || hash.starts_with("$2b$")
            || hash.starts_with("$2x$")
            || hash.starts_with("$2y$")
        {
            hash.parse::<bcrypt::HashParts>()
                .map_err(|e| format!("its bcrypt hash is malformed ({e})"))?;
            return Ok(PasswordHash::Bcrypt(hash.into()));
        }
        if hash.starts_with("$argon2") {
            argon2::PasswordHash::new(hash)
                .map_err(|e| format!("its argon2 hash is malformed ({e})"))?;
            return Ok(PasswordHash::Argon2(hash.into()));
        }
        let what = if hash.starts_with("$apr1$") {
            "an MD5 (apr1) hash"
        } else if hash.starts_with("{SHA}") {
            "a SHA-1 hash"
        } else if hash.starts_with("$5$") || hash.starts_with("$6$") {
            "a SHA-crypt hash"
        } else {
            "a hash in a form Pier does not read (crypt or plain text)"
        };
        Err(format!(
            "it has {what}; Pier verifies bcrypt (htpasswd -B) and argon2 hashes only"
        ))
    }

    /// Whether `password` matches; slow on purpose, so it runs on the pool.
    /// Both crates compare in constant time.
    fn verify(&self, password: &[u8]) -> bool {
        match self {
            PasswordHash::Bcrypt(h) => bcrypt::verify(password, h).unwrap_or(false),
            PasswordHash::Argon2(h) => {
                use argon2::PasswordVerifier;
                argon2::PasswordHash::new(h).is_ok_and(|parsed| {
                    argon2::Argon2::default()
                        .verify_password(password, &parsed)
                        .is_ok()
                })
            }
        }
    }
}

/// Users and hashes read from an htpasswd file.
pub fn parse_htpasswd(text: &str) -> Result<HashMap<Box<[u8]>, PasswordHash>, String> {
    let mut users = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = n + 1;
        let Some((user, hash)) = line.split_once(':') else {
            return Err(format!("line {at} is not `user:hash`"));
        };
        if user.is_empty() {
            return Err(format!("line {at} has an empty user name"));
        }
        let hash = PasswordHash::parse(hash).map_err(|e| format!("line {at} ({user:?}): {e}"))?;
        if users
            .insert(user.as_bytes().to_vec().into_boxed_slice(), hash)
            .is_some()
        {
            return Err(format!("line {at}: user {user:?} is listed twice"));
        }
    }
    if users.is_empty() {
        return Err("it lists no user".into());
    }
    Ok(users)
}

/// A route's basic authentication.
pub struct BasicAuth {
    users: HashMap<Box<[u8]>, PasswordHash>,
    /// `Basic realm="..."`, ready to send.
    challenge: Box<[u8]>,
    /// A hash checked for unknown users and its answer thrown away, so an
    /// unknown user costs what a known one does and names cannot be probed.
    decoy: PasswordHash,
    tags: hmac::Key,
    remembered: Box<[Remembered]>,
    epoch: Instant,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth")
            .field("users", &self.users.len())
            .field("challenge", &String::from_utf8_lossy(&self.challenge))
            .finish_non_exhaustive()
    }
}

/// A verified-credentials slot: the tag (0: free) and the end of its validity
/// in milliseconds since the table's epoch.
#[derive(Default)]
struct Remembered {
    tag: AtomicU64,
    until: AtomicU64,
}

impl BasicAuth {
    /// `users` must not be empty; `realm` was checked to hold no `"` or `\`.
    pub fn new(users: HashMap<Box<[u8]>, PasswordHash>, realm: &str) -> Result<Self, String> {
        let decoy = users.values().next().ok_or("no user")?.clone();
        let tags = hmac::Key::generate(hmac::HMAC_SHA256, &SystemRandom::new())
            .map_err(|_| "the system's random source failed".to_string())?;
        Ok(BasicAuth {
            users,
            challenge: format!("Basic realm=\"{realm}\", charset=\"UTF-8\"")
                .into_bytes()
                .into_boxed_slice(),
            decoy,
            tags,
            remembered: (0..REMEMBERED).map(|_| Remembered::default()).collect(),
            epoch: Instant::now(),
        })
    }

    fn challenge(&self) -> Refusal<'_> {
        Refusal {
            status: 401,
            field: Some(("WWW-Authenticate", Cow::Borrowed(&self.challenge))),
        }
    }

    fn tag(&self, user: &[u8], password: &[u8]) -> u64 {
        let mut ctx = hmac::Context::with_key(&self.tags);
        ctx.update(&(user.len() as u64).to_le_bytes());
        ctx.update(user);
        ctx.update(password);
        let digest = ctx.sign();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest.as_ref()[..8]);
        u64::from_le_bytes(first).max(1)
    }

    fn since_epoch_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn slot(&self, tag: u64) -> &Remembered {
        &self.remembered[(tag as usize) % self.remembered.len()]
    }

    fn is_remembered(&self, tag: u64) -> bool {
        let slot = self.slot(tag);
        slot.tag.load(Ordering::Acquire) == tag
            && slot.until.load(Ordering::Acquire) > self.since_epoch_ms()
    }

    fn remember(&self, tag: u64) {
        let slot = self.slot(tag);
        slot.until.store(
            self.since_epoch_ms() + VERIFIED_FOR.as_millis() as u64,
            Ordering::Release,
        );
        slot.tag.store(tag, Ordering::Release);
    }
}

impl RouteFilter for BasicAuth {
    fn request_filter<'s, 'h: 's>(&'h self, session: &'s mut dyn Session<'h>) -> Verdict<'s> {
        let given = session
            .request()
            .header("authorization")
            .and_then(credentials);
        let Some((user, password)) = given else {
            self.challenge().answer(session);
            return Verdict::Answered;
        };
        let tag = self.tag(&user, &password);
        let known = self.users.get(user.as_slice());
        if known.is_some() && self.is_remembered(tag) {
            return Verdict::Continue;
        }
        let hash = known.unwrap_or(&self.decoy).clone();
        let is_known = known.is_some();
        let Ok(answer) = HashPool::get().submit(move || hash.verify(&password) && is_known) else {
            Refusal {
                status: 503,
                field: Some(("Retry-After", Cow::Borrowed(b"1"))),
            }
            .answer(session);
            return Verdict::Answered;
        };
        Verdict::Pending(Box::pin(async move {
            if answer.await == Ok(true) {
                self.remember(tag);
                true
            } else {
                self.challenge().answer(session);
                false
            }
        }))
    }
}

/// User name and password from an `Authorization: Basic ...` value.
fn credentials(value: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    if value.len() > MAX_CREDENTIALS {
        return None;
    }
    let value = value.trim_ascii();
    let split = value.iter().position(|&b| b == b' ')?;
    let (scheme, rest) = value.split_at(split);
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return None;
    }
    let encoded = rest.trim_ascii();
    let decoded = data_encoding::BASE64
        .decode(encoded)
        .or_else(|_| data_encoding::BASE64_NOPAD.decode(encoded))
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_read_as_rfc_7617_writes_them() {
        // "Aladdin:open sesame", the RFC's example.
        let v = b"Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==";
        assert_eq!(
            credentials(v),
            Some((b"Aladdin".to_vec(), b"open sesame".to_vec()))
        );
        assert!(credentials(b"basic   QWxhZGRpbjpvcGVuIHNlc2FtZQ==").is_some());
        // A password may hold colons; the user name may not.
        assert_eq!(
            credentials(b"Basic dTpwOnE="),
            Some((b"u".to_vec(), b"p:q".to_vec()))
        );
        assert_eq!(credentials(b"Bearer QWxhZGRpbjpvcGVuIHNlc2FtZQ=="), None);
        assert_eq!(credentials(b"Basic !!!"), None);
        assert_eq!(credentials(b"Basic bm9jb2xvbg=="), None);
        assert_eq!(credentials(b"Basic"), None);
    }

    #[test]
    fn htpasswd_takes_bcrypt_and_argon2_and_names_the_bad_line() {
        let bcrypt = bcrypt::hash_with_salt("pw", 4, [7u8; 16])
            .unwrap()
            .format_for_version(bcrypt::Version::TwoY);
        let argon = {
            use argon2::PasswordHasher;
            argon2::Argon2::default()
                .hash_password_with_salt(b"secret", b"saltsaltsalt")
                .unwrap()
                .to_string()
        };
        let text = format!("# users\nalice:{bcrypt}\n\nbob:{argon}\n");
        let users = parse_htpasswd(&text).unwrap();
        assert_eq!(users.len(), 2);
        assert!(users[&b"alice"[..]].verify(b"pw"));
        assert!(!users[&b"alice"[..]].verify(b"pW"));
        assert!(users[&b"bob"[..]].verify(b"secret"));
        assert!(!users[&b"bob"[..]].verify(b"Secret"));
        let e = parse_htpasswd(&format!("alice:{bcrypt}\ncarol:$apr1$xyz$abc\n")).unwrap_err();
        assert!(
            e.starts_with("line 2 (\"carol\")") && e.contains("MD5"),
            "{e}"
        );
        assert!(parse_htpasswd("nocolon\n").unwrap_err().contains("line 1"));
        assert!(parse_htpasswd(&format!("a:{bcrypt}\na:{bcrypt}\n"))
            .unwrap_err()
            .contains("twice"));
        assert!(parse_htpasswd("# nothing\n").is_err());
    }

    #[test]
    fn remembered_tags_are_per_user_and_password() {
        let hash = bcrypt::hash_with_salt("pw", 4, [1u8; 16])
            .unwrap()
            .to_string();
        let mut users = HashMap::new();
        users.insert(
            b"u".to_vec().into_boxed_slice(),
            PasswordHash::parse(&hash).unwrap(),
        );
        let auth = BasicAuth::new(users, "r").unwrap();
        let t = auth.tag(b"u", b"pw");
        assert!(!auth.is_remembered(t));
        auth.remember(t);
        assert!(auth.is_remembered(t));
        assert!(!auth.is_remembered(auth.tag(b"u", b"pW")));
        // The length prefix keeps "u"+"pw" apart from "up"+"w".
        assert_ne!(auth.tag(b"up", b"w"), t);
        assert_eq!(
            &*auth.challenge,
            b"Basic realm=\"r\", charset=\"UTF-8\"".as_slice()
        );
    }
}
