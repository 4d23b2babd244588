//! Stateless session tickets (TLS 1.2 and 1.3) sealed with AES-256-GCM.
//!
//! Ticket keys are derived from one secret and the current rotation period:
//! `key(p) = HMAC-SHA256(secret, "pier ticket key" || p)`, named by
//! `HMAC-SHA256(secret, "pier ticket name" || p)[..16]`, where `p` is the Unix time
//! divided by the rotation interval. Tickets are sealed with the key of the current
//! period and opened with the previous, current or next one. Instances that share
//! the secret (`ticket_key_file`) therefore rotate in step, without talking to each
//! other, and resume each other's sessions; a clock a little ahead or behind still
//! resumes.
//!
//! The key set sits behind an atomic pointer: sealing and opening a ticket load it
//! without a lock, and whichever handshake first notices a new period derives the
//! next set and swaps it in.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::{hkdf, hmac};

/// Bytes naming the key a ticket was sealed with.
const NAME_LEN: usize = 16;
/// AES-GCM tag.
const TAG_LEN: usize = 16;
/// Tickets larger than this are not ours; rustls' own state is far smaller.
const MAX_TICKET: usize = 4096;
/// Lengths accepted for a key file: nginx's `ssl_session_ticket_key` formats, so an
/// existing file works.
pub const KEY_FILE_LENGTHS: [usize; 2] = [48, 80];

/// The secret ticket keys are derived from.
#[derive(Clone)]
pub struct TicketSecret(Arc<[u8]>);

impl fmt::Debug for TicketSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TicketSecret(..)")
    }
}

impl TicketSecret {
    /// A random secret, for an instance that shares tickets with nobody.
    pub fn random() -> Result<TicketSecret, String> {
        let mut s = [0u8; 48];
        aws_lc_rs::rand::fill(&mut s).map_err(|_| "no randomness for a ticket key".to_string())?;
        Ok(TicketSecret(Arc::from(&s[..])))
    }

    /// Reads a key file: 48 or 80 bytes, e.g. from `openssl rand 80`.
    pub fn from_file(path: &str) -> Result<TicketSecret, String> {
        let bytes = crate::config::value::read_named_file(path, 4096)
            .map_err(|e| format!("{path}: {e}"))?;
        Self::from_bytes(&bytes).map_err(|m| format!("{path}: {m}"))
    }

    /// The key QUIC seals its address-validation tokens (Retry) with,
    /// derived from this secret so that, like the tickets, it holds across
    /// instances sharing a `ticket_key_file`, a binary upgrade among them.
    pub fn quic_token_key(&self) -> Arc<hkdf::Prk> {
        Arc::new(hkdf::Salt::new(hkdf::HKDF_SHA256, b"pier quic token key").extract(&self.0))
    }

    /// Checks and wraps key-file contents.
    pub fn from_bytes(bytes: &[u8]) -> Result<TicketSecret, String> {
        if !KEY_FILE_LENGTHS.contains(&bytes.len()) {
            return Err(format!(
                "a ticket key file holds 48 or 80 random bytes (e.g. `openssl rand 80`), this one has {}",
                bytes.len()
            ));
        }
        Ok(TicketSecret(Arc::from(bytes)))
    }
}

struct TicketKey {
    name: [u8; NAME_LEN],
    aead: LessSafeKey,
}

impl TicketKey {
    fn derive(secret: &[u8], period: u64) -> TicketKey {
        let mac = hmac::Key::new(hmac::HMAC_SHA256, secret);
        let tag = |label: &[u8]| {
            let mut ctx = hmac::Context::with_key(&mac);
            ctx.update(label);
            ctx.update(&period.to_be_bytes());
            ctx.sign()
        };
        let mut name = [0u8; NAME_LEN];
        name.copy_from_slice(&tag(b"pier ticket name").as_ref()[..NAME_LEN]);
        let key = tag(b"pier ticket key");
        // A 32-byte key is always a valid AES-256 key.
        let unbound = UnboundKey::new(&AES_256_GCM, key.as_ref()).expect("32-byte AES-256 key");
        TicketKey {
            name,
            aead: LessSafeKey::new(unbound),
        }
    }
}

/// The keys usable during one period: previous, current and next.
struct KeySet {
    period: u64,
    secret: TicketSecret,
    keys: [TicketKey; 3],
}

impl KeySet {
    fn new(secret: TicketSecret, period: u64) -> KeySet {
        let keys = [
            TicketKey::derive(&secret.0, period.wrapping_sub(1)),
            TicketKey::derive(&secret.0, period),
            TicketKey::derive(&secret.0, period.wrapping_add(1)),
        ];
        KeySet {
            period,
            secret,
            keys,
        }
    }

    fn current(&self) -> &TicketKey {
        &self.keys[1]
    }
}

/// Seals and opens session tickets; shared by every worker of a listener, and kept
/// across reloads so tickets issued before a reload still resume.
pub struct Ticketer {
    rotation_secs: u64,
    set: ArcSwap<KeySet>,
    clock: fn() -> u64,
}

impl fmt::Debug for Ticketer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticketer")
            .field("rotation_secs", &self.rotation_secs)
            .finish()
    }
}

fn unix_now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Ticketer {
    /// A ticketer whose keys change every `rotation`.
    pub fn new(secret: TicketSecret, rotation: Duration) -> Ticketer {
        Self::with_clock(secret, rotation, unix_now_secs)
    }

    fn with_clock(secret: TicketSecret, rotation: Duration, clock: fn() -> u64) -> Ticketer {
        let rotation_secs = rotation.as_secs().max(1);
        let period = clock() / rotation_secs;
        Ticketer {
            rotation_secs,
            set: ArcSwap::from_pointee(KeySet::new(secret, period)),
            clock,
        }
    }

    /// The key set for now, rotating it if its period is over.
    fn keys(&self) -> arc_swap::Guard<Arc<KeySet>> {
        let period = (self.clock)() / self.rotation_secs;
        let set = self.set.load();
        if set.period == period {
            return set;
        }
        let next = Arc::new(KeySet::new(set.secret.clone(), period));
        // If another thread rotated first, keep theirs.
        let _ = self.set.compare_and_swap(&*set, next);
        self.set.load()
    }
}

impl rustls::server::ProducesTickets for Ticketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        self.rotation_secs.min(u64::from(u32::MAX)) as u32
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let set = self.keys();
        let key = set.current();
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(NAME_LEN + NONCE_LEN + plain.len() + TAG_LEN);
        out.extend_from_slice(&key.name);
        out.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        key.aead
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&key.name),
                &mut sealed,
            )
            .ok()?;
        out.extend_from_slice(&sealed);
        Some(out)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        if cipher.len() < NAME_LEN + NONCE_LEN + TAG_LEN || cipher.len() > MAX_TICKET {
            return None;
        }
        let (name, rest) = cipher.split_at(NAME_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let set = self.keys();
        let key = set.keys.iter().find(|k| k.name[..] == *name)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain_len = key
            .aead
            .open_in_place(nonce, Aad::from(name), &mut buf)
            .ok()?
            .len();
        buf.truncate(plain_len);
        Some(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::server::ProducesTickets;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn secret(b: u8) -> TicketSecret {
        TicketSecret::from_bytes(&[b; 48]).unwrap()
    }

    #[test]
    fn round_trip_and_tamper() {
        let t = Ticketer::new(secret(1), Duration::from_secs(3600));
        let sealed = t.encrypt(b"session state").unwrap();
        assert_ne!(&sealed[NAME_LEN + NONCE_LEN..], b"session state");
        assert_eq!(t.decrypt(&sealed).unwrap(), b"session state");
        let mut bad = sealed.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(t.decrypt(&bad).is_none());
        for n in [0, 1, 16, 28, 43] {
            assert!(t.decrypt(&sealed[..n.min(sealed.len())]).is_none());
        }
        assert!(t.decrypt(&vec![0u8; 10_000]).is_none());
    }

    #[test]
    fn instances_sharing_a_secret_open_each_others_tickets() {
        let a = Ticketer::new(secret(7), Duration::from_secs(3600));
        let b = Ticketer::new(secret(7), Duration::from_secs(3600));
        let c = Ticketer::new(secret(8), Duration::from_secs(3600));
        let sealed = a.encrypt(b"x").unwrap();
        assert_eq!(b.decrypt(&sealed).unwrap(), b"x");
        assert!(c.decrypt(&sealed).is_none());
    }

    static NOW: AtomicU64 = AtomicU64::new(1_000_000);
    fn fake_now() -> u64 {
        NOW.load(Ordering::SeqCst)
    }

    #[test]
    fn previous_key_is_accepted_after_rotation_and_older_ones_are_not() {
        let t = Ticketer::with_clock(secret(3), Duration::from_secs(100), fake_now);
        let old = t.encrypt(b"old").unwrap();
        NOW.fetch_add(100, Ordering::SeqCst);
        let newer = t.encrypt(b"new").unwrap();
        assert_ne!(old[..NAME_LEN], newer[..NAME_LEN], "key rotated");
        assert_eq!(t.decrypt(&old).unwrap(), b"old", "previous key still opens");
        NOW.fetch_add(100, Ordering::SeqCst);
        assert!(t.decrypt(&old).is_none(), "two periods later it is gone");
        assert_eq!(t.decrypt(&newer).unwrap(), b"new");
    }

    #[test]
    fn key_file_lengths() {
        assert!(TicketSecret::from_bytes(&[0; 80]).is_ok());
        assert!(TicketSecret::from_bytes(&[0; 48]).is_ok());
        let e = TicketSecret::from_bytes(b"-----BEGIN").unwrap_err();
        assert!(e.contains("48 or 80"), "{e}");
    }
}
