//! The state directory: account credentials, certificates, keys, HTTP-01 tokens
//! and lock files, shared by every instance of a fleet (a shared volume). Files
//! are written whole under a temporary name and renamed, so a reader never sees
//! half a certificate; secrets are created with mode 0600.
//!
//! The lock is a file created with `O_EXCL` (atomic on local file systems and on
//! NFS v3+), which works across hosts where `flock` does not. A holder that died
//! leaves it behind: a lock older than [`LOCK_STALE`] is taken over.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use super::settings::KeyType;

/// A lock untouched this long belongs to an instance that died mid-order
/// (an order is bounded well below this).
pub const LOCK_STALE: Duration = Duration::from_secs(10 * 60);
/// Largest state file read (account JSON, certificate chain, key, token).
const MAX_STATE_FILE: u64 = 1 << 20;

/// One instance's view of a state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

/// A certificate read from the state directory, ready to serve.
pub struct StoredCert {
    /// Chain and key for rustls.
    pub key: Arc<CertifiedKey>,
    /// Start of validity.
    pub not_before: SystemTime,
    /// End of validity.
    pub not_after: SystemTime,
    /// SHA-256 of the leaf, to tell a new certificate from the one served.
    pub fingerprint: String,
}

/// Start and end of a DER certificate's validity.
pub fn validity(der: &CertificateDer<'_>) -> Result<(SystemTime, SystemTime), String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
        .map_err(|e| format!("not an X.509 certificate: {e}"))?;
    let v = cert.validity();
    let at = |t: i64| {
        if t >= 0 {
            SystemTime::UNIX_EPOCH + Duration::from_secs(t as u64)
        } else {
            SystemTime::UNIX_EPOCH
        }
    };
    Ok((at(v.not_before.timestamp()), at(v.not_after.timestamp())))
}

/// Builds the served form of a PEM chain and key.
pub fn certified(chain_pem: &[u8], key_pem: &[u8]) -> Result<StoredCert, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("certificate chain: {e}"))?;
    let Some(leaf) = chain.first() else {
        return Err("no certificate in the chain".into());
    };
    let (not_before, not_after) = validity(leaf)?;
    let fingerprint = crate::tls::fingerprint(leaf);
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| format!("key: {e}"))?;
    let ck = CertifiedKey::from_der(chain, key, &crate::tls::provider())
        .map_err(|e| format!("key does not fit the certificate: {e}"))?;
    Ok(StoredCert {
        key: Arc::new(ck),
        not_before,
        not_after,
        fingerprint,
    })
}

impl StateDir {
    /// The directory at `root` (created on first write).
    pub fn new(root: &Path) -> StateDir {
        StateDir {
            root: root.to_path_buf(),
        }
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates the directory (and `http-01/`) with mode 0700 if missing.
    pub fn create(&self) -> io::Result<()> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(self.root.join("http-01"))
    }

    /// `<root>/<name>.<key type>.<ext>`.
    fn file(&self, name: &str, kt: KeyType, ext: &str) -> PathBuf {
        self.root.join(format!("{name}.{}.{ext}", kt.label()))
    }

    /// Account credentials file of a directory URL (one account per CA).
    pub fn account_path(&self, directory: &str) -> PathBuf {
        let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, directory.as_bytes());
        let hex: String = d.as_ref()[..6].iter().map(|b| format!("{b:02x}")).collect();
        self.root.join(format!("account-{hex}.json"))
    }

    /// Reads a state file, bounded.
    pub fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        crate::config::value::read_named_file(&path.to_string_lossy(), MAX_STATE_FILE)
    }

    /// The stored certificate of `name`, if there is a readable one.
    pub fn load_cert(&self, name: &str, kt: KeyType) -> Result<Option<StoredCert>, String> {
        let (crt, key) = (self.file(name, kt, "crt"), self.file(name, kt, "key"));
        let chain = match self.read(&crt) {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", crt.display())),
        };
        let key_pem = self
            .read(&key)
            .map_err(|e| format!("{}: {e}", key.display()))?;
        certified(&chain, &key_pem)
            .map(Some)
            .map_err(|e| format!("{}: {e}", crt.display()))
    }

    /// Stores a new certificate, key first, each file replaced atomically. A
    /// reader between the two renames finds a key that does not fit the chain,
    /// which `load_cert` reports and callers retry.
    pub fn store_cert(
        &self,
        name: &str,
        kt: KeyType,
        chain_pem: &[u8],
        key_pem: &[u8],
    ) -> io::Result<()> {
        write_private(&self.file(name, kt, "key"), key_pem)?;
        write_private(&self.file(name, kt, "crt"), chain_pem)
    }

    /// Path of the HTTP-01 token file; `None` for a token that is not base64url.
    pub fn token_path(&self, token: &str) -> Option<PathBuf> {
        valid_token(token).then(|| self.root.join("http-01").join(token))
    }

    /// The lock file of `name`'s orders.
    pub fn lock_path(&self, name: &str, kt: KeyType) -> PathBuf {
        self.file(name, kt, "lock")
    }
}

/// ACME tokens are base64url (RFC 8555 8.1): nothing else may become a path.
pub fn valid_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= 256
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Writes `bytes` to `path` with mode 0600 through a temporary file and a rename.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension(format!(
        "tmp-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    ));
    let r = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if r.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    r
}

/// A held order lock; dropping it removes the file.
#[derive(Debug)]
pub struct OrderLock {
    path: PathBuf,
}

impl Drop for OrderLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Takes the lock at `path`, or returns `None` while another instance (or task)
/// holds it. A lock older than `stale` is taken over.
pub fn try_lock(path: &Path, stale: Duration) -> io::Result<Option<OrderLock>> {
    for _ in 0..2 {
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(mut f) => {
                let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
                let _ = writeln!(f, "pid {} on {}", std::process::id(), host.trim());
                return Ok(Some(OrderLock {
                    path: path.to_path_buf(),
                }));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let age = fs::metadata(path)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|m| SystemTime::now().duration_since(m).ok());
                match age {
                    Some(a) if a > stale => {
                        tracing::warn!(lock = %path.display(), age_s = a.as_secs(), "ACME order lock left by an instance that stopped; taking it over");
                        let _ = fs::remove_file(path);
                    }
                    _ => return Ok(None),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// Whether a lock file exists (another instance is ordering).
pub fn is_locked(path: &Path) -> bool {
    path.exists()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_are_private_and_locks_exclusive_until_stale() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::new(&d.path().join("state"));
        s.create().unwrap();
        let p = s.root().join("x.key");
        write_private(&p, b"secret").unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            fs::metadata(s.root()).unwrap().permissions().mode() & 0o777,
            0o700
        );

        let lp = s.lock_path("a.test", KeyType::EcdsaP256);
        let held = try_lock(&lp, LOCK_STALE).unwrap().expect("free lock");
        assert!(try_lock(&lp, LOCK_STALE).unwrap().is_none(), "held");
        assert!(is_locked(&lp));
        drop(held);
        assert!(!is_locked(&lp));
        let _left = try_lock(&lp, LOCK_STALE).unwrap().unwrap();
        std::mem::forget(_left);
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            try_lock(&lp, Duration::from_millis(1)).unwrap().is_some(),
            "a stale lock is taken over"
        );
    }

    #[test]
    fn stored_certificate_round_trips_and_tokens_stay_inside() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::new(d.path());
        s.create().unwrap();
        assert!(s.load_cert("a.test", KeyType::EcdsaP256).unwrap().is_none());
        let ck = rcgen::generate_simple_self_signed(vec!["a.test".into()]).unwrap();
        s.store_cert(
            "a.test",
            KeyType::EcdsaP256,
            ck.cert.pem().as_bytes(),
            ck.signing_key.serialize_pem().as_bytes(),
        )
        .unwrap();
        let got = s.load_cert("a.test", KeyType::EcdsaP256).unwrap().unwrap();
        assert!(got.not_after > got.not_before);
        assert_eq!(got.fingerprint, crate::tls::fingerprint(ck.cert.der()));
        assert!(s.token_path("../../etc/passwd").is_none());
        assert!(s.token_path("a/b").is_none());
        assert!(s
            .token_path("LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0")
            .is_some());
    }
}
