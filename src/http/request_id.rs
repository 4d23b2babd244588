//! A request's identifier (`{request_id}` in header rules, sent upstream and
//! back to the client), made on first use so requests that never show one
//! pay nothing, and unique without any state shared between workers.

use std::cell::Cell;

/// Length of a request identifier: 128 bits in hex.
pub const REQUEST_ID_LEN: usize = 32;

/// A request's identifier, made on first use so requests that never show one
/// pay nothing: a per-thread random prefix and a per-thread counter, unique
/// without any state shared between workers.
#[derive(Debug, Default)]
pub struct RequestId(Cell<Option<[u8; REQUEST_ID_LEN]>>);

impl RequestId {
    /// Forgets the identifier, for the next request on the connection.
    pub fn reset(&self) {
        self.0.set(None);
    }
}

thread_local! {
    /// (random prefix, next sequence number) of this thread.
    static ID_STATE: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

impl RequestId {
    /// The identifier, made now if this is its first use.
    pub fn get(&self) -> [u8; REQUEST_ID_LEN] {
        if let Some(id) = self.0.get() {
            return id;
        }
        let (prefix, seq) = ID_STATE.with(|s| {
            let (mut prefix, seq) = s.get();
            if prefix == 0 {
                let mut seed = [0u8; 8];
                if aws_lc_rs::rand::fill(&mut seed).is_err() {
                    seed = (std::process::id() as u64 ^ 0x9e37_79b9_7f4a_7c15).to_le_bytes();
                }
                prefix = u64::from_le_bytes(seed) | 1;
            }
            s.set((prefix, seq.wrapping_add(1)));
            (prefix, seq)
        });
        let mut id = [0u8; REQUEST_ID_LEN];
        let hex = b"0123456789abcdef";
        // A bijection of the counter (splitmix64's finaliser): still unique,
        // but not a count of the worker's requests for clients to read.
        let mut z = seq.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let both = ((prefix as u128) << 64) | z as u128;
        for (i, byte) in id.iter_mut().enumerate() {
            *byte = hex[((both >> (124 - 4 * i)) & 0xf) as usize];
        }
        self.0.set(Some(id));
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_id_is_stable_within_a_request_and_differs_between_requests() {
        let a = RequestId::default();
        let b = RequestId::default();
        assert_eq!(a.get(), a.get());
        assert_ne!(a.get(), b.get());
        assert!(a.get().iter().all(u8::is_ascii_hexdigit));
        let first = a.get();
        a.reset();
        assert_ne!(a.get(), first);
    }
}
