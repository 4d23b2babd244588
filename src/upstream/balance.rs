//! The balancing methods: smooth weighted round robin (nginx's algorithm), least
//! connections (weighted, per worker), and ketama-style consistent hashing on a
//! request key. A worker's group state (`GroupState::pick_server` in
//! `upstream.rs`) applies them to the servers that are up and not yet tried, so
//! a retry lands on another server.

/// Balancing method of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Balance {
    /// Smooth weighted round robin.
    RoundRobin,
    /// Fewest in-flight requests relative to weight (this worker's view).
    LeastConn,
    /// Consistent hash of a request key.
    Hash(HashKey),
}

/// What a consistent hash is computed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashKey {
    /// The client address (after PROXY protocol), without the port.
    ClientIp,
    /// The request path (without the query).
    Path,
    /// The path and the query: what a cache key names, so a fleet of cache
    /// instances holds each object once.
    Uri,
    /// A request header's value (lower-case name); requests without it hash as empty.
    Header(String),
}

impl HashKey {
    /// Parses `client_ip`, `path` or `header:Name`.
    pub fn parse(s: &str) -> Result<HashKey, String> {
        match s {
            "client_ip" => Ok(HashKey::ClientIp),
            "path" => Ok(HashKey::Path),
            "uri" => Ok(HashKey::Uri),
            _ => match s.strip_prefix("header:") {
                Some(name)
                    if !name.is_empty()
                        && name.bytes().all(|b| {
                            b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
                        }) =>
                {
                    Ok(HashKey::Header(name.to_ascii_lowercase()))
                }
                _ => Err(format!(
                    "unknown hash_key {s:?}; expected \"client_ip\", \"path\", \"uri\" or \"header:Name\""
                )),
            },
        }
    }
}

/// 64-bit FNV-1a with a final avalanche (splitmix64's), so nearby keys spread
/// over the whole ring.
pub fn hash64(bytes: &[u8]) -> u64 {
    hash64_parts(&[bytes])
}

/// [`hash64`] of the concatenation of `parts`, without building it.
pub fn hash64_parts(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Points each unit of weight puts on the ring (as nginx's `hash ... consistent`).
const POINTS_PER_WEIGHT: u32 = 160;

/// A ketama-style ring: each server owns `160 x weight` points; a key goes to the
/// first point at or after its hash. Adding or removing a server moves only the
/// keys next to its points.
#[derive(Debug)]
pub struct Ring {
    points: Vec<(u64, u32)>,
}

impl Ring {
    /// Builds the ring from (index, name, weight) of the servers it holds;
    /// the name (not the position) places the points, so reordering the
    /// config or adding a server moves only the keys next to its points.
    pub fn new<'a>(servers: impl Iterator<Item = (usize, &'a str, u32)>) -> Ring {
        let mut points = Vec::new();
        for (index, name, weight) in servers {
            for i in 0..weight * POINTS_PER_WEIGHT {
                let mut key = Vec::with_capacity(name.len() + 12);
                key.extend_from_slice(name.as_bytes());
                key.push(b'#');
                key.extend_from_slice(i.to_string().as_bytes());
                points.push((hash64(&key), index as u32));
            }
        }
        points.sort_unstable();
        Ring { points }
    }

    /// The first server at or after `hash` on the ring that `eligible` allows.
    pub fn first_eligible(&self, hash: u64, eligible: impl Fn(usize) -> bool) -> Option<usize> {
        self.walk(hash)
            .take(self.points.len())
            .find(|&i| eligible(i))
    }

    /// Servers in ring order starting at `hash`; each server may repeat.
    fn walk(&self, hash: u64) -> impl Iterator<Item = usize> + '_ {
        let start = self.points.partition_point(|&(p, _)| p < hash);
        self.points[start..]
            .iter()
            .chain(self.points[..start].iter())
            .map(|&(_, s)| s as usize)
    }
}

/// Whether every weight is the same.
fn uniform(weights: &[i64]) -> bool {
    weights.windows(2).all(|w| w[0] == w[1])
}

/// Smooth weighted round robin state (one per group per worker).
#[derive(Debug)]
pub struct SmoothWrr {
    current: Vec<i64>,
    weights: Vec<i64>,
    /// Every weight is the same: smooth WRR is then a plain rotation, taken
    /// in one step from `cursor` instead of a pass over every server.
    uniform: bool,
    /// Where the rotation of a uniform group looks first.
    cursor: usize,
    /// Rotates the starting point of least_conn ties.
    tie: usize,
}

impl SmoothWrr {
    /// State for servers with these weights.
    pub fn new(weights: impl Iterator<Item = u32>) -> Self {
        let weights: Vec<i64> = weights.map(i64::from).collect();
        SmoothWrr {
            current: vec![0; weights.len()],
            uniform: uniform(&weights),
            weights,
            cursor: 0,
            tie: 0,
        }
    }

    /// Takes the servers' weights now (servers added, weights changed); the
    /// turns already earned are kept for servers that stay.
    pub fn set_weights(&mut self, weights: impl Iterator<Item = u32>) {
        self.weights.clear();
        self.weights.extend(weights.map(i64::from));
        self.current.resize(self.weights.len(), 0);
        self.uniform = uniform(&self.weights);
    }

    /// nginx's smooth WRR over the servers `eligible` allows: each gains its
    /// weight, the largest wins and pays back the total. Spreads a 5:1:1 group as
    /// a a b a c a a rather than a a a a a b c.
    ///
    /// A `retry` (a pick for a request that already tried a server) takes
    /// no turn from the rotation of an equal-weight group, as smooth WRR
    /// would not: the next request goes where it would have gone.
    pub fn next(&mut self, eligible: impl Fn(usize) -> bool, retry: bool) -> Option<usize> {
        if self.uniform {
            return self.rotate(eligible, retry);
        }
        let mut total = 0;
        let mut best: Option<usize> = None;
        for i in 0..self.weights.len() {
            if !eligible(i) {
                continue;
            }
            self.current[i] += self.weights[i];
            total += self.weights[i];
            if best.is_none_or(|b| self.current[i] > self.current[b]) {
                best = Some(i);
            }
        }
        let b = best?;
        self.current[b] -= total;
        Some(b)
    }

    /// Equal weights: the next server `eligible` allows from the cursor, the
    /// order smooth WRR gives them, in one step when it is up.
    fn rotate(&mut self, eligible: impl Fn(usize) -> bool, retry: bool) -> Option<usize> {
        let n = self.weights.len();
        let mut i = self.cursor;
        for _ in 0..n {
            if i >= n {
                i = 0;
            }
            if eligible(i) {
                if !retry {
                    self.cursor = i + 1;
                }
                return Some(i);
            }
            i += 1;
        }
        None
    }

    /// Least connections over the servers `eligible` allows: the fewest
    /// requests in flight (`active`) relative to weight; ties go to each
    /// server in turn, as each call starts one server further along.
    pub fn least_conn(
        &mut self,
        active: impl Fn(usize) -> u32,
        eligible: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let n = self.weights.len();
        self.tie = (self.tie + 1) % n.max(1);
        let mut best: Option<usize> = None;
        for j in 0..n {
            let i = (self.tie + j) % n;
            if !eligible(i) {
                continue;
            }
            // active_i / w_i < active_b / w_b without division.
            let better = best.is_none_or(|b| {
                i64::from(active(i)) * self.weights[b] < i64::from(active(b)) * self.weights[i]
            });
            if better {
                best = Some(i);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smooth_wrr_interleaves_by_weight() {
        let mut w = SmoothWrr::new([5, 1, 1].into_iter());
        let seq: Vec<usize> = (0..7).map(|_| w.next(|_| true, false).unwrap()).collect();
        assert_eq!(seq, vec![0, 0, 1, 0, 2, 0, 0]);
        // A server that is not eligible is skipped, the others share its turns.
        let seq: Vec<usize> = (0..4).map(|_| w.next(|i| i != 0, false).unwrap()).collect();
        assert_eq!(seq.iter().filter(|&&i| i == 1).count(), 2);
        assert_eq!(seq.iter().filter(|&&i| i == 2).count(), 2);
        assert_eq!(w.next(|_| false, false), None);
    }

    #[test]
    fn equal_weights_rotate_as_smooth_wrr_would_and_skip_what_is_not_eligible() {
        let mut w = SmoothWrr::new([2, 2, 2, 2].into_iter());
        let seq: Vec<usize> = (0..8).map(|_| w.next(|_| true, false).unwrap()).collect();
        assert_eq!(seq, [0, 1, 2, 3, 0, 1, 2, 3]);
        let mut reference = SmoothWrr::new([2, 2, 2, 2].into_iter());
        reference.uniform = false;
        let smooth: Vec<usize> = (0..8)
            .map(|_| reference.next(|_| true, false).unwrap())
            .collect();
        assert_eq!(seq, smooth, "the same order as the full pass");
        // Server 1 out: the others share its turns.
        let seq: Vec<usize> = (0..6).map(|_| w.next(|i| i != 1, false).unwrap()).collect();
        assert_eq!(seq, [0, 2, 3, 0, 2, 3]);
        assert_eq!(w.next(|_| false, false), None);
        // A retry takes no turn: after 0 failed and 2 took its request, the
        // next requests go to 1 then 2, as smooth WRR sends them.
        let mut w = SmoothWrr::new([1, 1, 1].into_iter());
        assert_eq!(w.next(|_| true, false), Some(0));
        assert_eq!(w.next(|i| i != 0 && i != 1, true), Some(2));
        assert_eq!(w.next(|_| true, false), Some(1));
        assert_eq!(w.next(|_| true, false), Some(2));
        // Weights made unequal: smooth WRR again, 3:1:1:1.
        w.set_weights([3, 1, 1, 1].into_iter());
        let seq: Vec<usize> = (0..6).map(|_| w.next(|_| true, false).unwrap()).collect();
        assert_eq!(seq.iter().filter(|&&i| i == 0).count(), 3, "{seq:?}");
        // A server added with the same weight joins the rotation.
        w.set_weights([1, 1, 1].into_iter());
        let seq: Vec<usize> = (0..6).map(|_| w.next(|_| true, false).unwrap()).collect();
        assert_eq!(seq.iter().filter(|&&i| i == 2).count(), 2, "{seq:?}");
    }

    #[test]
    fn ring_is_balanced_and_stable_when_a_server_goes() {
        let names = ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"];
        let ring = Ring::new(names.iter().enumerate().map(|(i, n)| (i, *n, 1)));
        let mut counts = [0usize; 3];
        let mut owner = Vec::new();
        for k in 0..3000u32 {
            let s = ring.walk(hash64(&k.to_le_bytes())).next().unwrap();
            counts[s] += 1;
            owner.push(s);
        }
        for c in counts {
            assert!((700..1300).contains(&c), "{counts:?}");
        }
        // Without server 1, only its keys move.
        for (k, &was) in owner.iter().enumerate() {
            let now = ring
                .walk(hash64(&(k as u32).to_le_bytes()))
                .find(|&i| i != 1)
                .unwrap();
            if was != 1 {
                assert_eq!(now, was);
            }
        }
    }

    #[test]
    fn hashing_parts_is_hashing_their_concatenation() {
        assert_eq!(hash64_parts(&[b"/a", b"?", b"q=1"]), hash64(b"/a?q=1"));
        assert_ne!(hash64(b"/a?q=1"), hash64(b"/a?q=2"));
    }

    #[test]
    fn hash_key_parses() {
        assert_eq!(HashKey::parse("client_ip"), Ok(HashKey::ClientIp));
        assert_eq!(HashKey::parse("uri"), Ok(HashKey::Uri));
        assert_eq!(
            HashKey::parse("header:X-User"),
            Ok(HashKey::Header("x-user".into()))
        );
        assert!(HashKey::parse("header:").is_err());
        assert!(HashKey::parse("cookie").is_err());
    }
}
