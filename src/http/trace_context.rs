//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>): the
//! `traceparent` field parsed strictly and written back, and the random ids a
//! new trace or span gets. Ids come from a per-thread generator seeded from
//! the system's random source, so making one takes no lock and no syscall.

use std::cell::Cell;

/// A trace id: 16 bytes, never all zero.
pub type TraceId = [u8; 16];
/// A span id: 8 bytes, never all zero.
pub type SpanId = [u8; 8];

/// The `sampled` bit of the trace flags.
pub const FLAG_SAMPLED: u8 = 0x01;

/// Length of a version-00 `traceparent` value.
pub const TRACEPARENT_LEN: usize = 55;

/// What an incoming `traceparent` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace the request belongs to.
    pub trace_id: TraceId,
    /// The caller's span: the parent of Pier's server span.
    pub parent_id: SpanId,
    /// Trace flags; only [`FLAG_SAMPLED`] is acted on.
    pub flags: u8,
}

impl TraceParent {
    /// Whether the caller sampled the trace.
    pub fn sampled(&self) -> bool {
        self.flags & FLAG_SAMPLED != 0
    }
}

/// Parses a `traceparent` value by the W3C rules: lowercase hex only, ids not
/// all zero, version `ff` invalid; version 00 exactly 55 characters; a later
/// version read by its version-00 prefix when that prefix is whole and ends
/// the value or is followed by `-`. `None` means: start a new trace.
pub fn parse_traceparent(v: &[u8]) -> Option<TraceParent> {
    let v = trim_ows(v);
    if v.len() < TRACEPARENT_LEN {
        return None;
    }
    let version = hex_byte(&v[0..2])?;
    match version {
        0xff => return None,
        0 if v.len() != TRACEPARENT_LEN => return None,
        _ if v.len() > TRACEPARENT_LEN && v[TRACEPARENT_LEN] != b'-' => return None,
        _ => {}
    }
    if v[2] != b'-' || v[35] != b'-' || v[52] != b'-' {
        return None;
    }
    let mut trace_id = [0u8; 16];
    hex_into(&v[3..35], &mut trace_id)?;
    let mut parent_id = [0u8; 8];
    hex_into(&v[36..52], &mut parent_id)?;
    let flags = hex_byte(&v[53..55])?;
    if trace_id == [0; 16] || parent_id == [0; 8] {
        return None;
    }
    Some(TraceParent {
        trace_id,
        parent_id,
        flags,
    })
}

/// `traceparent: 00-{trace}-{span}-{flags}\r\n`: the field an upstream
/// gets, written whole so an HTTP/1 head takes it in one copy.
#[derive(Debug, Clone, Copy)]
pub struct TraceparentField {
    line: [u8; TRACEPARENT_FIELD_LEN],
}

/// `traceparent: `, ahead of the value in the field's line.
const TRACEPARENT_NAME: &[u8] = b"traceparent: ";
/// Where the value starts in the field's line.
const VALUE_AT: usize = TRACEPARENT_NAME.len();
/// Length of the whole field line, `\r\n` included.
const TRACEPARENT_FIELD_LEN: usize = VALUE_AT + TRACEPARENT_LEN + 2;

impl TraceparentField {
    /// The field naming `span_id` of `trace_id` as the parent, with the
    /// `sampled` flag.
    #[inline]
    pub fn new(trace_id: &TraceId, span_id: &SpanId, sampled: bool) -> TraceparentField {
        let mut line = TRACEPARENT_LINE;
        line[VALUE_AT + 3..VALUE_AT + 35].copy_from_slice(&hex16(trace_id));
        hex_write(span_id, &mut line[VALUE_AT + 36..VALUE_AT + 52]);
        line[VALUE_AT + 54] = b'0' + u8::from(sampled);
        TraceparentField { line }
    }

    /// The field's name.
    pub fn name(&self) -> &'static [u8] {
        b"traceparent"
    }

    /// The value: `00-{trace}-{span}-{flags}`.
    pub fn value(&self) -> &[u8; TRACEPARENT_LEN] {
        self.line[VALUE_AT..VALUE_AT + TRACEPARENT_LEN]
            .try_into()
            .expect("the value is TRACEPARENT_LEN bytes of the line")
    }

    /// The field as an HTTP/1 head line, `\r\n` included.
    pub fn line(&self) -> &[u8] {
        &self.line
    }
}

/// The field's line before the ids are written into it.
const TRACEPARENT_LINE: [u8; TRACEPARENT_FIELD_LEN] = {
    let mut line = [b'-'; TRACEPARENT_FIELD_LEN];
    let mut i = 0;
    while i < VALUE_AT {
        line[i] = TRACEPARENT_NAME[i];
        i += 1;
    }
    line[VALUE_AT] = b'0';
    line[VALUE_AT + 1] = b'0';
    line[VALUE_AT + 53] = b'0';
    line[TRACEPARENT_FIELD_LEN - 2] = b'\r';
    line[TRACEPARENT_FIELD_LEN - 1] = b'\n';
    line
};

/// Lowercase hex of `bytes` into `out` (twice as long): a table lookup and
/// a two-byte store per byte, unrolled where the lengths are known.
#[inline(always)]
pub fn hex_write(bytes: &[u8], out: &mut [u8]) {
    let out = &mut out[..bytes.len() * 2];
    for (b, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(*b)]);
    }
}

/// Lowercase hex of a trace id, digit by digit over fixed-size arrays so the
/// compiler turns it into a few vector operations (about 60 instructions
/// against 72 for table lookups).
#[inline(always)]
fn hex16(bytes: &TraceId) -> [u8; 32] {
    let mut nibbles = [0u8; 32];
    for (b, pair) in bytes.iter().zip(nibbles.chunks_exact_mut(2)) {
        pair[0] = b >> 4;
        pair[1] = b & 0x0f;
    }
    nibbles.map(|n| n + if n > 9 { b'a' - 10 } else { b'0' })
}

/// Every byte's two lowercase hex digits.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut t = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [HEX[i >> 4], HEX[i & 0xf]];
        i += 1;
    }
    t
};

fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

fn lower_hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

fn hex_byte(pair: &[u8]) -> Option<u8> {
    Some(lower_hex_digit(pair[0])? << 4 | lower_hex_digit(pair[1])?)
}

fn hex_into(text: &[u8], out: &mut [u8]) -> Option<()> {
    for (pair, b) in text.chunks_exact(2).zip(out.iter_mut()) {
        *b = hex_byte(pair)?;
    }
    Some(())
}

/// Whether a `tracestate` value may be forwarded: visible ASCII, at most 512
/// bytes (the size the W3C text lets a vendor cut at), so a client cannot make
/// the upstream head grow without bound through Pier.
pub fn tracestate_ok(v: &[u8]) -> bool {
    v.len() <= 512 && v.iter().all(|&c| (0x20..0x7f).contains(&c))
}

thread_local! {
    /// wyrand state of this thread; 0 until seeded.
    static RNG: Cell<u64> = const { Cell::new(0) };
}

/// A random 64-bit number from this thread's generator: wyrand (a counter
/// and one wide multiply, as OpenTelemetry SDKs use a fast generator for
/// ids), seeded once from the system's random source. Ids need to be
/// unique and unpredictable enough to spread, not secret.
#[inline]
fn next_u64() -> u64 {
    RNG.with(|s| {
        let mut state = s.get();
        if state == 0 {
            state = seed();
        }
        state = state.wrapping_add(WY_STEP);
        s.set(state);
        wymix(state)
    })
}

/// wyrand's counter increment.
const WY_STEP: u64 = 0xa076_1d64_78bd_642f;

/// wyrand's output for a counter value: one wide multiply, folded.
#[inline(always)]
fn wymix(state: u64) -> u64 {
    let t = u128::from(state) * u128::from(state ^ 0xe703_7ed1_a0b4_28db);
    (t >> 64) as u64 ^ t as u64
}

/// A thread's first state, from the system's random source.
#[cold]
fn seed() -> u64 {
    let mut seed = [0u8; 8];
    if aws_lc_rs::rand::fill(&mut seed).is_err() {
        seed = (u64::from(std::process::id()) ^ 0x2545_f491_4f6c_dd1d).to_le_bytes();
    }
    u64::from_le_bytes(seed) | 1
}

/// A random 64-bit number that is not zero.
#[inline]
fn next_nonzero() -> u64 {
    loop {
        let v = next_u64();
        if v != 0 {
            return v;
        }
    }
}

/// A new random span id (never all zero).
#[inline]
pub fn new_span_id() -> SpanId {
    next_nonzero().to_be_bytes()
}

/// A new trace id and span id (neither all zero), drawn in one visit to the
/// thread's generator: what a request that starts a trace needs.
#[inline]
pub fn new_trace_and_span_ids() -> (TraceId, SpanId) {
    RNG.with(|s| {
        let mut state = s.get();
        if state == 0 {
            state = seed();
        }
        let mut draw = || loop {
            state = state.wrapping_add(WY_STEP);
            let v = wymix(state);
            if v != 0 {
                return v;
            }
        };
        let (high, low, span) = (draw(), draw(), draw());
        s.set(state);
        (
            (u128::from(high) << 64 | u128::from(low)).to_be_bytes(),
            span.to_be_bytes(),
        )
    })
}

/// A sampling ratio, 0 to 1, with the bound the ratio sampler compares a
/// trace id against worked out once (not on every request).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleRatio {
    ratio: f64,
    /// Trace ids whose random part, shifted right once, is below this are sampled.
    bound: u64,
}

impl SampleRatio {
    /// The ratio `ratio`; at or below 0 nothing is sampled, at or above 1 everything.
    pub fn new(ratio: f64) -> SampleRatio {
        let bound = if ratio >= 1.0 {
            1u64 << 63
        } else if ratio > 0.0 {
            (ratio * (1u64 << 63) as f64) as u64
        } else {
            0
        };
        SampleRatio { ratio, bound }
    }

    /// The share of traces sampled.
    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// The ratio sampler's decision for `trace_id`, from its last 8 bytes (the
    /// random part in W3C level 2) as OpenTelemetry's `TraceIdRatioBased` does,
    /// so every instance that sees the trace decides alike.
    #[inline]
    pub fn samples(&self, trace_id: &TraceId) -> bool {
        let mut tail = [0u8; 8];
        tail.copy_from_slice(&trace_id[8..]);
        (u64::from_be_bytes(tail) >> 1) < self.bound
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &[u8] = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_version_00_traceparent_parses_and_writes_back_the_same() {
        let p = parse_traceparent(VALID).unwrap();
        assert_eq!(p.trace_id[0], 0x4b);
        assert_eq!(
            p.parent_id,
            [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
        assert!(p.sampled());
        let field = TraceparentField::new(&p.trace_id, &p.parent_id, true);
        assert_eq!(&field.value()[..], VALID);
        assert_eq!(field.line(), [b"traceparent: ", VALID, b"\r\n"].concat());
        let unsampled_field = TraceparentField::new(&p.trace_id, &p.parent_id, false);
        assert!(unsampled_field.value().ends_with(b"-00"));
        let unsampled =
            parse_traceparent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        assert!(!unsampled.unwrap().sampled());
        // Optional whitespace around a field value is not part of it.
        assert!(
            parse_traceparent(b" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\t")
                .is_some()
        );
    }

    #[test]
    fn malformed_traceparents_start_a_new_trace() {
        for bad in [
            &b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"[..],
            b"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            b"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
            b"0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"",
        ] {
            assert_eq!(
                parse_traceparent(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_later_version_is_read_by_its_version_00_prefix() {
        let p = parse_traceparent(
            b"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds",
        );
        assert!(p.unwrap().sampled());
        assert!(
            parse_traceparent(b"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").is_some()
        );
        // The prefix must end at a dash.
        assert_eq!(
            parse_traceparent(b"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"),
            None
        );
    }

    #[test]
    fn every_byte_is_written_as_two_lowercase_hex_digits() {
        let bytes: Vec<u8> = (0..=255).collect();
        let mut out = vec![0u8; 512];
        hex_write(&bytes, &mut out);
        let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(out, expected.as_bytes());
        for (chunk, digits) in bytes
            .chunks_exact(16)
            .zip(expected.as_bytes().chunks_exact(32))
        {
            assert_eq!(hex16(chunk.try_into().unwrap()), digits);
        }
    }

    #[test]
    fn new_ids_are_never_zero_and_differ() {
        let ((a, sa), (b, sb)) = (new_trace_and_span_ids(), new_trace_and_span_ids());
        assert_ne!(a, [0; 16]);
        assert_ne!(a, b);
        assert_ne!(sa, [0; 8]);
        assert_ne!(sa, sb);
        assert_ne!(a[..8], sa);
        assert_ne!(a[8..], sa);
        assert_ne!(new_span_id(), new_span_id());
    }

    #[test]
    fn the_ratio_sampler_keeps_about_its_share() {
        let kept = (0..10_000)
            .filter(|_| SampleRatio::new(0.25).samples(&new_trace_and_span_ids().0))
            .count();
        assert!((2000..3000).contains(&kept), "{kept}");
        assert_eq!(SampleRatio::new(0.25).ratio(), 0.25);
        assert!(SampleRatio::new(1.0).samples(&[0xff; 16]));
        assert!(!SampleRatio::new(0.0).samples(&[1; 16]));
        assert!(SampleRatio::new(0.5).samples(&[0x7f; 16]));
        assert!(!SampleRatio::new(0.5).samples(&[0x80; 16]));
        assert!(SampleRatio::new(1.0).samples(&new_trace_and_span_ids().0));
        assert!(!SampleRatio::new(0.0).samples(&new_trace_and_span_ids().0));
    }

    #[test]
    fn tracestate_is_forwarded_only_when_bounded_and_visible() {
        assert!(tracestate_ok(b"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"));
        assert!(!tracestate_ok(&[b'a'; 513]));
        assert!(!tracestate_ok(b"a=b\r\nx: y"));
    }
}
