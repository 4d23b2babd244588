//! What a connection's frames may cost beyond the bytes they bring: a
//! bucket of frame credits that useful traffic refills and overhead drains,
//! as nginx weighs an HTTP/2 connection's overhead against its payload and
//! HAProxy counts its "glitches". A client that sends its request body as
//! 1-byte STREAM frames, empty or 1-byte DATA frames, or floods of unknown
//! frames or unknown unidirectional streams (all legal alone) makes the
//! server work per frame for nothing; past the bucket, the connection is
//! closed with H3_EXCESSIVE_LOAD.
//!
//! - Drained by one credit for each QUIC STREAM frame received, each
//!   HTTP/3 frame other than HEADERS with under [`SMALL_FRAME`] bytes of
//!   payload, each unknown frame (plus one per [`BYTES_PER_CREDIT`] of its
//!   payload, which no one reads), and [`UNKNOWN_STREAM_COST`] for each
//!   unidirectional stream of an unknown type.
//! - Refilled by one credit per [`BYTES_PER_CREDIT`] bytes of UDP payload
//!   received and [`REQUEST_CREDIT`] per request head, never above the
//!   bucket's size (`[http3] frame_allowance`), so credit is not banked
//!   for a later flood.
//!
//! An ordinary client stays near full: a packet of at least 40 bytes earns
//! more than the STREAM frame or two it carries, and a request more than its
//! GREASE. A client packing tiny frames into its packets spends several
//! credits per 16 bytes and is closed within a few of its packets once the
//! bucket is empty: the frames a server handles per byte received stay
//! within a small multiple of an ordinary client's. Counters only: no
//! allocation, a few instructions per frame.

use super::{Error, ErrorCode};

/// A non-HEADERS frame with less payload than this costs a credit.
pub const SMALL_FRAME: u64 = 8;
/// Bytes received that earn one credit (and unknown payload that costs one).
pub const BYTES_PER_CREDIT: u64 = 16;
/// Credit each request head earns: its STREAM frames, and GREASE.
pub const REQUEST_CREDIT: u64 = 16;
/// Credit a unidirectional stream of an unknown type costs, about what a
/// request earns: each is a stream opened and stopped for nothing.
pub const UNKNOWN_STREAM_COST: u64 = 16;

/// The frame credit of one connection.
#[derive(Clone, Copy, Debug)]
pub struct FrameBudget {
    /// Credits left, in 1/[`BYTES_PER_CREDIT`] of a credit so bytes earn
    /// without division; below zero is a flood.
    left: i64,
    /// The bucket's size, in the same unit.
    size: i64,
    /// STREAM frames already charged, of QUIC's running count.
    stream_frames_seen: u64,
    /// UDP payload bytes already credited, of QUIC's running count.
    udp_bytes_seen: u64,
}

impl FrameBudget {
    /// A full bucket of `allowance` credits.
    pub fn new(allowance: u32) -> Self {
        let size = i64::from(allowance) * BYTES_PER_CREDIT as i64;
        FrameBudget {
            left: size,
            size,
            stream_frames_seen: 0,
            udp_bytes_seen: 0,
        }
    }

    /// Takes `credits` out.
    pub fn spend(&mut self, credits: u64) {
        let cost = i64::try_from(credits.saturating_mul(BYTES_PER_CREDIT)).unwrap_or(i64::MAX);
        self.left = self.left.saturating_sub(cost);
    }

    /// A request head arrived.
    pub fn earn_request(&mut self) {
        self.earn((REQUEST_CREDIT * BYTES_PER_CREDIT) as i64);
    }

    /// QUIC's running counts of STREAM frames and of UDP payload bytes
    /// received: what came since the last call is charged and credited.
    pub fn observe_transport(&mut self, stream_frames: u64, udp_bytes: u64) {
        let frames = stream_frames.saturating_sub(self.stream_frames_seen);
        let bytes = udp_bytes.saturating_sub(self.udp_bytes_seen);
        self.stream_frames_seen = stream_frames;
        self.udp_bytes_seen = udp_bytes;
        // Earned first: a packet pays for its own frames when it can.
        self.earn(i64::try_from(bytes).unwrap_or(i64::MAX));
        self.spend(frames);
    }

    /// Whether the connection has used up its allowance: the error that
    /// closes it, if so.
    pub fn check(&self) -> Result<(), Error> {
        if self.left < 0 {
            return Err(Error::connection(
                ErrorCode::ExcessiveLoad,
                "The peer sent too many small or unknown frames for the data they carried.",
            ));
        }
        Ok(())
    }

    fn earn(&mut self, units: i64) {
        self.left = self.left.saturating_add(units).min(self.size);
    }
}

/// The credits one HTTP/3 frame of type-class `known` (a frame this side
/// reads), `headers` (HEADERS, paid for by its request) and `len` bytes of
/// payload costs.
pub fn frame_cost(known: bool, headers: bool, len: u64) -> u64 {
    if !known {
        1 + len / BYTES_PER_CREDIT
    } else if !headers && len < SMALL_FRAME {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ordinary_upload_never_drains_the_bucket() {
        let mut b = FrameBudget::new(100);
        // 10,000 packets of 1,200 bytes, each with one STREAM frame and a
        // DATA frame header now and then.
        for i in 1..=10_000u64 {
            b.observe_transport(i, i * 1200);
            b.spend(frame_cost(true, false, 16_384));
            assert!(b.check().is_ok());
        }
    }

    #[test]
    fn small_packets_with_one_small_message_each_stay_within() {
        let mut b = FrameBudget::new(10);
        // A WebSocket sending 4-byte messages, one per 44-byte packet: a
        // STREAM frame and a small DATA frame each.
        for i in 1..=100_000u64 {
            b.observe_transport(i, i * 44);
            b.spend(frame_cost(true, false, 4));
        }
        assert!(b.check().is_ok());
    }

    #[test]
    fn one_byte_stream_frames_packed_in_packets_run_out() {
        let mut b = FrameBudget::new(1000);
        let (mut frames, mut bytes, mut packets) = (0, 0, 0);
        while b.check().is_ok() {
            // 200 STREAM frames of six bytes in a 1,232-byte packet.
            frames += 200;
            bytes += 1232;
            packets += 1;
            b.observe_transport(frames, bytes);
        }
        assert!((5..=10).contains(&packets), "{packets} packets");
        assert_eq!(b.check().unwrap_err().code, ErrorCode::ExcessiveLoad);
    }

    #[test]
    fn empty_data_frames_and_unknown_frames_run_out() {
        let mut b = FrameBudget::new(1000);
        let mut n = 0;
        while b.check().is_ok() {
            b.spend(frame_cost(true, false, 0));
            b.spend(frame_cost(false, false, 3));
            n += 1;
        }
        assert_eq!(n, 501);
        // An unknown frame's payload is paid for, not credited.
        assert_eq!(frame_cost(false, false, 16 * 100), 101);
        assert_eq!(frame_cost(true, true, 0), 0, "HEADERS earn their request");
        assert_eq!(frame_cost(true, false, SMALL_FRAME), 0);
    }

    #[test]
    fn credit_is_not_banked_past_the_allowance() {
        let mut b = FrameBudget::new(100);
        b.observe_transport(0, 1 << 30);
        for _ in 0..1000 {
            b.earn_request();
        }
        b.spend(100);
        assert!(b.check().is_ok());
        b.spend(1);
        assert!(b.check().is_err());
    }
}
