//! A budget for the control frames a client makes the server answer (PING
//! and SETTINGS, each acknowledged): h2 answers every one, so a client
//! sending them in a stream keeps a worker busy for nothing. The frame heads
//! are read off the bytes as they come in, before h2 sees them; past the
//! budget the connection is closed with GOAWAY (ENHANCE_YOUR_CALM), as nginx
//! and h2o do for their floods.

use tokio::time::Instant;

/// The connection preface, which is not framed.
const PREFACE_LEN: usize = 24;
const PING: u8 = 6;
const SETTINGS: u8 = 4;
const ACK: u8 = 1;

/// Frame heads seen so far and the allowance left.
pub(super) struct ControlBudget {
    preface_left: usize,
    head: [u8; 9],
    have: usize,
    payload_left: usize,
    burst: u32,
    tokens: u32,
    refilled: Option<Instant>,
}

impl ControlBudget {
    /// A budget of `burst` frames at once, refilled at a tenth of that per second.
    pub(super) fn new(burst: u32) -> Self {
        ControlBudget {
            preface_left: PREFACE_LEN,
            head: [0; 9],
            have: 0,
            payload_left: 0,
            burst,
            tokens: burst,
            refilled: None,
        }
    }

    /// Reads the frame heads in `bytes` (the next bytes from the client);
    /// false once the client has sent more control frames than allowed.
    pub(super) fn scan(&mut self, mut bytes: &[u8]) -> bool {
        let p = self.preface_left.min(bytes.len());
        self.preface_left -= p;
        bytes = &bytes[p..];
        while !bytes.is_empty() {
            if self.payload_left > 0 {
                let n = self.payload_left.min(bytes.len());
                self.payload_left -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (9 - self.have).min(bytes.len());
            self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have < 9 {
                break;
            }
            self.have = 0;
            let h = self.head;
            self.payload_left =
                (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
            if (h[3] == PING || h[3] == SETTINGS) && h[4] & ACK == 0 && !self.take() {
                return false;
            }
        }
        true
    }

    fn take(&mut self) -> bool {
        let now = Instant::now();
        let since = *self.refilled.get_or_insert(now);
        let elapsed_ms = now.saturating_duration_since(since).as_millis() as u64;
        let add = elapsed_ms * u64::from(self.burst) / 10_000;
        if add > 0 {
            self.tokens = (u64::from(self.tokens) + add).min(u64::from(self.burst)) as u32;
            self.refilled = Some(now);
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn pings_past_the_burst_are_refused_and_acks_and_data_are_free() {
        let mut b = ControlBudget::new(10);
        let mut input = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        input.extend(frame(SETTINGS, 0, &[0, 3, 0, 0, 0, 100]));
        for _ in 0..50 {
            input.extend(frame(SETTINGS, ACK, &[]));
            // A DATA payload that looks like a PING head is not one.
            input.extend(frame(0, 0, &frame(PING, 0, &[0; 8])));
        }
        for _ in 0..9 {
            input.extend(frame(PING, 0, &[1; 8]));
        }
        // Fed a byte at a time: frame heads split across reads still count.
        for byte in input.chunks(1) {
            assert!(b.scan(byte));
        }
        assert!(!b.scan(&frame(PING, 0, &[2; 8])), "the eleventh is refused");
    }
}
