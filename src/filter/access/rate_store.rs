//! A rate limit's counts kept in Redis (or Valkey), so that every instance
//! sharing the store counts the same clients: ten instances behind a load
//! balancer allow the configured rate in total, not ten times it.
//!
//! # One round trip per decision
//!
//! The decision is the same GCRA step as the local table's (`rate_limit.rs`),
//! run by the store as a script: it reads the key's theoretical arrival time,
//! compares it with the store's own clock (`TIME`, one clock for the whole
//! fleet), and moves it one interval on when the request passes, all in one
//! atomic step with one answer. The key expires once its time has passed, so
//! the store holds only clients that owe something.
//!
//! # Never a blocking call on a worker
//!
//! Each worker keeps one connection per store (`StoreLinks`, in the worker's
//! handler slots), multiplexed: requests in flight at once are pipelined on
//! it. A decision waits for its answer at most `store_timeout`; a store that
//! is slower, refuses or is gone answers by the rule's `on_store_error`
//! (the local table, let through, or 503). A lost connection is made again in
//! the background, not by a request: until it is back, decisions take the
//! fallback at once. An outage is logged once when it starts and once when
//! it ends, and counted (`/metrics`, the status page).
//!
//! # Keys a client cannot choose
//!
//! The store key is the rule's tag and a 128-bit SHA-256 prefix of what the
//! request is counted by (its address or a header's value): a client cannot
//! choose a key's bytes or length, nor make two keys collide. The same rule on
//! two instances (route host and path, what it counts by, rate and burst)
//! gives the same keys, which is what shares the count.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::hash::Hasher;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use aws_lc_rs::digest;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Cmd, ErrorKind, Script, ServerErrorKind, Value};
use tokio::sync::Notify;

/// The GCRA step, in microseconds of the store's clock. KEYS[1]: the client's
/// key; ARGV[1]: the emission interval; ARGV[2]: the tolerance (burst - 1
/// intervals). Answers 0 when the request passes, else the microseconds until
/// one would.
const GCRA_SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = now
local stored = redis.call('GET', KEYS[1])
if stored then tat = tonumber(stored) or now end
if tat < now then tat = now end
local ahead = tat - now
if ahead > tolerance then return ahead - tolerance end
local new = tat + interval
redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', math.floor((new - now) / 1000) + 1)
return 0
";

/// The longest wait a store's answer may name: a day. A larger one is not
/// an answer of the script above.
const MAX_WAIT_MICROS: i64 = 86_400 * 1_000_000;

/// How long a connection may take to be made.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// First and longest pause between attempts to reach a store that is down.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MOST: Duration = Duration::from_secs(2);

/// How a rule answers when its store cannot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnStoreError {
    /// By this instance's own table (the default).
    Local,
    /// Let the request through.
    Allow,
    /// 503 with `Retry-After: 1`.
    Deny,
}

impl OnStoreError {
    /// The name as written in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            OnStoreError::Local => "local",
            OnStoreError::Allow => "allow",
            OnStoreError::Deny => "deny",
        }
    }

    /// Reads `local`, `allow` or `deny`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "local" => Ok(OnStoreError::Local),
            "allow" => Ok(OnStoreError::Allow),
            "deny" => Ok(OnStoreError::Deny),
            _ => Err(format!(
                "{s:?} is not an answer to a store error; use \"local\", \"allow\" or \"deny\""
            )),
        }
    }
}

/// What a store said about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreVerdict {
    /// The request passes.
    Pass,
    /// Refused: this long until one would pass.
    Wait(Duration),
}

/// Why a store gave no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFailure {
    /// No connection yet, or the last one was lost: the fallback at once.
    Unreachable,
    /// No answer within `store_timeout`.
    Timeout,
    /// The store answered with an error, or with something the script never
    /// answers; or the connection failed under the request.
    Error,
}

impl StoreFailure {
    fn label(self) -> &'static str {
        match self {
            StoreFailure::Unreachable => "unreachable",
            StoreFailure::Timeout => "timeout",
            StoreFailure::Error => "error",
        }
    }
}

/// One store (one URL), shared by every rule and worker that names it.
#[derive(Debug)]
pub struct RateStore {
    /// Tells this store's per-worker connections apart from other stores'.
    id: u64,
    /// The URL as written, which tells stores apart.
    url: String,
    /// The URL without its password, for logs and metrics.
    label: String,
    client: Client,
    /// Whether the store answered last time it was tried; an outage is
    /// logged when this turns false and when it turns true again.
    up: AtomicBool,
    /// Decisions that fell back, by failure (unreachable, timeout, error).
    failures: [AtomicU64; 3],
    /// Decisions the store made.
    decisions: AtomicU64,
}

/// Stores of the configurations alive, by URL, so that rules naming one URL
/// share one connection per worker. Taken only while a configuration is
/// built and when `/metrics` is rendered, never by a request.
static STORES: Mutex<Vec<Weak<RateStore>>> = Mutex::new(Vec::new());

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl RateStore {
    /// The store at `url` (`redis://host:port/db`, `redis+unix:///path`): the
    /// running one when a live configuration names the same URL. The URL is
    /// checked here; nothing is connected until a worker needs it.
    pub fn for_url(url: &str) -> Result<Arc<RateStore>, String> {
        let client = Client::open(url).map_err(|e| {
            format!("{url:?} is not a store address such as \"redis://127.0.0.1:6379/0\" ({e})")
        })?;
        let label = without_password(url);
        let mut stores = STORES.lock().unwrap_or_else(|e| e.into_inner());
        stores.retain(|s| s.strong_count() > 0);
        if let Some(store) = stores
            .iter()
            .filter_map(Weak::upgrade)
            .find(|s| s.url == url)
        {
            return Ok(store);
        }
        let store = Arc::new(RateStore {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            url: url.to_string(),
            label,
            client,
            up: AtomicBool::new(true),
            failures: Default::default(),
            decisions: AtomicU64::new(0),
        });
        stores.push(Arc::downgrade(&store));
        Ok(store)
    }

    /// The store's URL without a password.
    pub fn label(&self) -> &str {
        &self.label
    }

    fn mark_down(&self, why: &str) {
        if self.up.swap(false, Ordering::AcqRel) {
            tracing::warn!(store = %self.label, error = %why, "rate-limit store unreachable; its rules answer by on_store_error until it is back");
        }
    }

    fn mark_up(&self) {
        if !self.up.swap(true, Ordering::AcqRel) {
            tracing::info!(store = %self.label, "rate-limit store reachable again");
        }
    }
}

/// A rule's part of a store: its key tag and its GCRA settings.
#[derive(Debug)]
pub struct StoreRule {
    store: Arc<RateStore>,
    /// `pier:rl:`, a tag of the rule and `:`, before each client's part.
    prefix: [u8; PREFIX_LEN],
    /// The script's two arguments, written once: the emission interval and
    /// the tolerance, in microseconds.
    interval_arg: Box<[u8]>,
    tolerance_arg: Box<[u8]>,
    timeout: Duration,
    script: Script,
}

/// `pier:rl:` and 16 hex digits of the rule's tag and `:`.
const PREFIX_LEN: usize = 8 + 16 + 1;

/// A store key: the prefix and 32 hex digits of the client's part.
pub type StoreKey = [u8; PREFIX_LEN + 32];

impl StoreRule {
    /// `rule` names the rule the same way on every instance (route, what it
    /// counts by, rate, burst): it makes the keys that share the count.
    pub fn new(
        store: Arc<RateStore>,
        rule: &str,
        per_request: Duration,
        burst: u32,
        timeout: Duration,
    ) -> Self {
        let tag = digest::digest(&digest::SHA256, rule.as_bytes());
        let mut prefix = [0u8; PREFIX_LEN];
        prefix[..8].copy_from_slice(b"pier:rl:");
        hex_into(&tag.as_ref()[..8], &mut prefix[8..24]);
        prefix[24] = b':';
        let interval = (per_request.as_micros() as u64).max(1);
        let tolerance = interval.saturating_mul(u64::from(burst.max(1) - 1));
        StoreRule {
            store,
            prefix,
            interval_arg: interval.to_string().into_bytes().into(),
            tolerance_arg: tolerance.to_string().into_bytes().into(),
            timeout,
            script: Script::new(GCRA_SCRIPT),
        }
    }

    /// The store this rule counts in.
    pub fn store(&self) -> &RateStore {
        &self.store
    }

    /// The store key of one client, from what [`KeyDigest`] was fed.
    pub fn key(&self, client: KeyDigest) -> StoreKey {
        let d = client.0.finish();
        let mut key = [0u8; PREFIX_LEN + 32];
        key[..PREFIX_LEN].copy_from_slice(&self.prefix);
        hex_into(&d.as_ref()[..16], &mut key[PREFIX_LEN..]);
        key
    }

    /// Asks the store about one request of `key`, on this worker's
    /// connection; waits for it at most `store_timeout` in all, a connection
    /// being made included.
    pub async fn decide(
        &self,
        links: &StoreLinks,
        key: StoreKey,
    ) -> Result<StoreVerdict, StoreFailure> {
        let result = match crate::deadline::within(self.timeout, self.ask(links, key)).await {
            Err(_) => Err(StoreFailure::Timeout),
            Ok(result) => result,
        };
        match result {
            Ok(_) => self.store.decisions.fetch_add(1, Ordering::Relaxed),
            Err(failure) => self.store.failures[failure as usize].fetch_add(1, Ordering::Relaxed),
        };
        result
    }

    async fn ask(&self, links: &StoreLinks, key: StoreKey) -> Result<StoreVerdict, StoreFailure> {
        let mut conn = match links.connection(&self.store) {
            Connection::Ready(conn) => conn,
            Connection::Down => return Err(StoreFailure::Unreachable),
            Connection::Connecting(made) => {
                made.notified().await;
                match links.connection(&self.store) {
                    Connection::Ready(conn) => conn,
                    _ => return Err(StoreFailure::Unreachable),
                }
            }
        };
        let mut call = Cmd::with_capacity(6, 160);
        call.arg("EVALSHA")
            .arg(self.script.get_hash())
            .arg(b"1")
            .arg(&key[..])
            .arg(&*self.interval_arg)
            .arg(&*self.tolerance_arg);
        let mut answer = call.query_async::<Value>(&mut conn).await;
        if matches!(&answer, Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)) {
            // A store that restarted, or never ran the script: loaded once
            // per connection that finds it missing.
            answer = match self.script.prepare_invoke().load_async(&mut conn).await {
                Ok(_) => call.query_async::<Value>(&mut conn).await,
                Err(e) => Err(e),
            };
        }
        match answer {
            Ok(value) => verdict(&value).ok_or(StoreFailure::Error),
            Err(e) => {
                if e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() {
                    links.lost(&self.store, &e.to_string());
                }
                Err(StoreFailure::Error)
            }
        }
    }
}

/// The verdict in a store's answer, or `None` for an answer the script never gives.
fn verdict(value: &Value) -> Option<StoreVerdict> {
    match *value {
        Value::Int(0) => Some(StoreVerdict::Pass),
        Value::Int(n) if (1..=MAX_WAIT_MICROS).contains(&n) => {
            Some(StoreVerdict::Wait(Duration::from_micros(n as u64)))
        }
        _ => None,
    }
}

/// What a request is counted by, fed into SHA-256 (through [`Hasher`], so
/// the local table's key code feeds it the same bytes).
pub struct KeyDigest(digest::Context);

impl Default for KeyDigest {
    fn default() -> Self {
        KeyDigest(digest::Context::new(&digest::SHA256))
    }
}

impl Hasher for KeyDigest {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let d = self.0.clone().finish();
        let mut first = [0u8; 8];
        first.copy_from_slice(&d.as_ref()[..8]);
        u64::from_le_bytes(first)
    }
}

/// Writes `bytes` as lowercase hex digits into `out`, twice as long.
fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (b, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 15)];
    }
}

/// `url` with the password of its user part, if any, left out.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{scheme}://{name}:***@{host}"),
            None => format!("{scheme}://***@{host}"),
        },
        None => url.to_string(),
    }
}

/// One worker's connections to the stores its rules name, in the worker's
/// handler slots: made on first use and again after a loss, in the
/// background, and dropped with the configuration generation.
#[derive(Default)]
pub struct StoreLinks {
    links: RefCell<Vec<(u64, Rc<RefCell<Link>>)>>,
}

/// The state of one worker's connection to one store.
enum Link {
    /// Being made; told to those waiting for it once it is made or failed.
    Connecting(Rc<Notify>),
    Up(MultiplexedConnection),
    /// Lost or refused: tried again at `retry_at`, then after twice `pause`.
    Down {
        retry_at: Instant,
        pause: Duration,
    },
}

/// What a decision can use of its worker's connection now.
enum Connection {
    Ready(MultiplexedConnection),
    /// Being made: done when it is made or failed.
    Connecting(Rc<Notify>),
    Down,
}

impl StoreLinks {
    /// This worker's connection to `store`: ready, being made (one is
    /// started here when the last failed long enough ago), or down.
    fn connection(&self, store: &Arc<RateStore>) -> Connection {
        let link = self.link(store);
        let mut state = link.borrow_mut();
        match &*state {
            Link::Up(conn) => Connection::Ready(conn.clone()),
            Link::Connecting(made) => Connection::Connecting(Rc::clone(made)),
            Link::Down { retry_at, pause } => {
                if Instant::now() < *retry_at {
                    return Connection::Down;
                }
                let (pause, made) = (*pause, Rc::new(Notify::new()));
                *state = Link::Connecting(Rc::clone(&made));
                drop(state);
                connect(Rc::clone(&link), Arc::clone(store), pause);
                Connection::Connecting(made)
            }
        }
    }

    /// The connection to `store` failed under a request: made again in the
    /// background after a short pause.
    fn lost(&self, store: &Arc<RateStore>, why: &str) {
        let link = self.link(store);
        let mut state = link.borrow_mut();
        if matches!(*state, Link::Up(_)) {
            *state = Link::Down {
                retry_at: Instant::now(),
                pause: RETRY_FIRST,
            };
            store.mark_down(why);
        }
    }

    fn link(&self, store: &Arc<RateStore>) -> Rc<RefCell<Link>> {
        let mut links = self.links.borrow_mut();
        if let Some((_, link)) = links.iter().find(|(id, _)| *id == store.id) {
            return Rc::clone(link);
        }
        let link = Rc::new(RefCell::new(Link::Connecting(Rc::new(Notify::new()))));
        links.push((store.id, Rc::clone(&link)));
        drop(links);
        connect(Rc::clone(&link), Arc::clone(store), RETRY_FIRST);
        link
    }
}

/// Makes a connection to `store` on this worker's runtime and puts it in
/// `link`; a failure leaves the link down until `pause` has passed.
fn connect(link: Rc<RefCell<Link>>, store: Arc<RateStore>, pause: Duration) {
    tokio::task::spawn_local(async move {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(None);
        let made = store
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await;
        let mut state = link.borrow_mut();
        if let Link::Connecting(waiting) = &*state {
            waiting.notify_waiters();
        }
        match made {
            Ok(conn) => {
                *state = Link::Up(conn);
                store.mark_up();
            }
            Err(e) => {
                *state = Link::Down {
                    retry_at: Instant::now() + pause,
                    pause: (pause * 2).min(RETRY_MOST),
                };
                store.mark_down(&e.to_string());
            }
        }
    });
}

/// The Prometheus text of the stores of the configurations alive (empty
/// when no rule names a store).
pub fn render_store_metrics(out: &mut String) {
    let stores: Vec<Arc<RateStore>> = STORES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    if stores.is_empty() {
        return;
    }
    let label = |s: &RateStore| s.label.replace('\\', "\\\\").replace('"', "\\\"");
    let _ = writeln!(out, "# HELP pier_rate_limit_store_up Whether a rate-limit store answered when it was last tried (1) or not (0).");
    let _ = writeln!(out, "# TYPE pier_rate_limit_store_up gauge");
    for s in &stores {
        let up = u8::from(s.up.load(Ordering::Relaxed));
        let _ = writeln!(
            out,
            "pier_rate_limit_store_up{{store=\"{}\"}} {up}",
            label(s)
        );
    }
    let _ = writeln!(
        out,
        "# HELP pier_rate_limit_store_decisions_total Rate-limit decisions a store made."
    );
    let _ = writeln!(out, "# TYPE pier_rate_limit_store_decisions_total counter");
    for s in &stores {
        let n = s.decisions.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "pier_rate_limit_store_decisions_total{{store=\"{}\"}} {n}",
            label(s)
        );
    }
    let _ = writeln!(out, "# HELP pier_rate_limit_store_fallbacks_total Rate-limit decisions taken by on_store_error, by why the store gave none.");
    let _ = writeln!(out, "# TYPE pier_rate_limit_store_fallbacks_total counter");
    for s in &stores {
        for failure in [
            StoreFailure::Unreachable,
            StoreFailure::Timeout,
            StoreFailure::Error,
        ] {
            let n = s.failures[failure as usize].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "pier_rate_limit_store_fallbacks_total{{store=\"{}\",reason=\"{}\"}} {n}",
                label(s),
                failure.label()
            );
        }
    }
}

/// One line per store for the status page: its URL, whether it is up, and
/// its counts.
pub fn store_status_lines() -> Vec<String> {
    let stores = STORES.lock().unwrap_or_else(|e| e.into_inner());
    stores
        .iter()
        .filter_map(Weak::upgrade)
        .map(|s| {
            let fallbacks: u64 = s.failures.iter().map(|f| f.load(Ordering::Relaxed)).sum();
            format!(
                "{} {} decisions {} fallbacks {}",
                s.label,
                if s.up.load(Ordering::Relaxed) {
                    "up"
                } else {
                    "down"
                },
                s.decisions.load(Ordering::Relaxed),
                fallbacks
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_the_script_never_gives_are_refused() {
        assert_eq!(verdict(&Value::Int(0)), Some(StoreVerdict::Pass));
        assert_eq!(
            verdict(&Value::Int(1_500_000)),
            Some(StoreVerdict::Wait(Duration::from_millis(1500)))
        );
        assert_eq!(verdict(&Value::Int(-1)), None);
        assert_eq!(verdict(&Value::Int(MAX_WAIT_MICROS + 1)), None);
        assert_eq!(verdict(&Value::Nil), None);
        assert_eq!(verdict(&Value::SimpleString("OK".into())), None);
        assert_eq!(verdict(&Value::BulkString(b"0".to_vec())), None);
    }

    #[test]
    fn keys_are_fixed_length_hashes_the_same_on_every_instance() {
        let store = RateStore::for_url("redis://127.0.0.1:1/0").unwrap();
        let rule = |burst| {
            StoreRule::new(
                Arc::clone(&store),
                "host|/api|remote_addr",
                Duration::from_millis(10),
                burst,
                Duration::from_millis(5),
            )
        };
        let key = |r: &StoreRule, bytes: &[u8]| {
            let mut d = KeyDigest::default();
            d.write(bytes);
            String::from_utf8(r.key(d).to_vec()).unwrap()
        };
        let (a, b) = (rule(5), rule(5));
        let long = vec![b'x'; 10_000];
        assert_eq!(key(&a, b"client"), key(&b, b"client"));
        assert_ne!(key(&a, b"client"), key(&a, b"other"));
        assert_eq!(key(&a, &long).len(), key(&a, b"").len());
        assert!(key(&a, b"\r\n*3")
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b':'));
        // Another rule, another tag.
        let other = StoreRule::new(
            Arc::clone(&store),
            "host|/other|remote_addr",
            Duration::from_millis(10),
            5,
            Duration::from_millis(5),
        );
        assert_ne!(key(&a, b"client"), key(&other, b"client"));
        assert_eq!(&*a.tolerance_arg, b"40000");
        assert_eq!(&*a.interval_arg, b"10000");
        assert!(key(&a, b"client").starts_with("pier:rl:"));
        assert_eq!(key(&a, b"client").len(), 8 + 16 + 1 + 32);
    }

    #[test]
    fn one_url_is_one_store_and_passwords_stay_out_of_labels() {
        let a = RateStore::for_url("redis://127.0.0.1:2/0").unwrap();
        let b = RateStore::for_url("redis://127.0.0.1:2/0").unwrap();
        let c = RateStore::for_url("redis://127.0.0.1:2/1").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(
            without_password("redis://user:secret@10.0.0.1:6379/0"),
            "redis://user:***@10.0.0.1:6379/0"
        );
        assert_eq!(without_password("redis://:secret@h/0"), "redis://:***@h/0");
        assert!(RateStore::for_url("http://127.0.0.1/").is_err());
        assert!(OnStoreError::parse("fail").is_err());
        assert_eq!(OnStoreError::parse("deny"), Ok(OnStoreError::Deny));
    }
}
