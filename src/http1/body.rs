//! Message body framing: Content-Length, chunked (RFC 9112 §7.1) and
//! read-until-close, as one resumable decoder.
//!
//! The decoder never copies: each call returns the body bytes it found as a
//! sub-slice of the input and says how much input it consumed. Input may be
//! split anywhere (down to one byte per call) and the body comes out the same,
//! which is what lets one decoder serve a downstream request body, an upstream
//! response body being proxied, and the load generator.
//!
//! Chunked syntax is checked strictly: hex sizes without whitespace, chunk
//! extensions per the grammar (then ignored), CRLF exactly where the grammar
//! puts it, trailer fields validated like header fields (then discarded).
//! Every line and the trailer section are bounded, so a hostile peer cannot
//! make the decoder hold state that grows.

use super::framing::BodyKind;
use super::grammar::is_tchar;

/// Longest chunk-size line (size, extensions, CRLF) accepted.
pub const MAX_CHUNK_LINE: usize = 4096;

/// Largest trailer section (all trailer lines and the final CRLF) accepted.
pub const MAX_TRAILERS: usize = 64 * 1024;

/// Most chunk-extension bytes accepted over a whole body. Each line is already
/// bounded, but a body of one-byte chunks each carrying a long extension would
/// otherwise cost thousands of framing bytes per data byte; nothing legitimate
/// sends more than a few extensions.
pub const MAX_CHUNK_EXTENSIONS: usize = 64 * 1024;

/// More hex digits than this would overflow a u64 chunk size.
const MAX_SIZE_DIGITS: u8 = 16;

/// Output of one [`BodyDecoder::decode`] call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// Input bytes used up (framing and data); advance the input by this much.
    pub consumed: usize,
    /// Body bytes found, a sub-slice of the input; may be empty.
    pub data: &'a [u8],
    /// The body is complete; input after `consumed` belongs to the next message.
    pub done: bool,
}

/// Why a body could not be decoded. Framing errors leave the connection in an
/// unknown state: answer (or drop) and close.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} ({})", self.reason(), self.status())]
pub enum BodyError {
    /// Chunk size missing, not hex, or preceded by whitespace.
    InvalidChunkSize,
    /// Chunk size has more than 16 hex digits.
    ChunkSizeTooLong,
    /// Chunk extension does not follow the grammar.
    InvalidChunkExtension,
    /// Chunk-size line longer than [`MAX_CHUNK_LINE`].
    ChunkLineTooLong,
    /// Chunk extensions of the body longer than [`MAX_CHUNK_EXTENSIONS`] in total.
    ChunkExtensionsTooLarge,
    /// Chunk data not followed by CRLF.
    MissingChunkCrlf,
    /// Trailer field malformed (bad name, control byte, obs-fold, bare LF).
    InvalidTrailer,
    /// Trailer section longer than [`MAX_TRAILERS`].
    TrailersTooLarge,
    /// Body exceeds the limit set with [`BodyDecoder::with_max_body`] (413).
    TooLarge,
    /// The connection ended before the body did.
    Incomplete,
}

impl BodyError {
    /// Status to answer a downstream client with.
    pub fn status(&self) -> u16 {
        match self {
            BodyError::TooLarge => 413,
            _ => 400,
        }
    }

    /// Short cause for logs.
    pub fn reason(&self) -> &'static str {
        match self {
            BodyError::InvalidChunkSize => "invalid chunk size",
            BodyError::ChunkSizeTooLong => "chunk size too long",
            BodyError::InvalidChunkExtension => "invalid chunk extension",
            BodyError::ChunkLineTooLong => "chunk-size line too long",
            BodyError::ChunkExtensionsTooLarge => "chunk extensions too large",
            BodyError::MissingChunkCrlf => "chunk data not followed by CRLF",
            BodyError::InvalidTrailer => "invalid trailer field",
            BodyError::TrailersTooLarge => "trailer section too large",
            BodyError::TooLarge => "body too large",
            BodyError::Incomplete => "body ended early",
        }
    }
}

/// Resumable body decoder: feed it input, advance by `consumed`, repeat until `done`.
#[derive(Clone, Debug)]
pub struct BodyDecoder {
    state: DecodeState,
    /// Body bytes accepted so far, for the optional limit.
    total: u64,
    max_body: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum DecodeState {
    Length { remaining: u64 },
    Chunked(Chunked),
    UntilClose,
    Done,
    Failed(BodyError),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Chunked {
    step: Step,
    /// Chunk size being read, then bytes of chunk data still to come.
    size: u64,
    digits: u8,
    /// Bytes of the current chunk-size line (bounded by MAX_CHUNK_LINE).
    line_len: usize,
    /// Bytes of the trailer section so far (bounded by MAX_TRAILERS).
    trailer_len: usize,
    /// Chunk-extension bytes of the whole body so far (bounded by MAX_CHUNK_EXTENSIONS).
    ext_len: usize,
}

/// Position in the chunked grammar; one byte moves it at most one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// First byte of chunk-size (must be a hex digit).
    SizeStart,
    /// More hex digits, or what follows them.
    Size,
    /// BWS after the size or a value: only more BWS or `;` may follow.
    ExtBws,
    /// After `;`: BWS then an extension name.
    ExtNameStart,
    ExtName,
    /// BWS after a name: `=`, `;` or more BWS.
    ExtAfterName,
    /// After `=`: BWS then a token or quoted-string.
    ExtValueStart,
    ExtToken,
    ExtQuoted,
    ExtQuotedEscape,
    /// After the closing quote.
    ExtAfterQuoted,
    /// CR of the chunk-size line seen; LF must follow.
    SizeLf,
    /// Inside chunk data (`size` bytes left); bulk-copied, never stepped.
    Data,
    DataCr,
    DataLf,
    /// Start of a trailer line, or of the final empty line.
    TrailerStart,
    TrailerName,
    TrailerValue,
    TrailerLf,
    /// CR of the final empty line seen; LF ends the body.
    EndLf,
}

impl BodyDecoder {
    /// Decoder for a request body framed as the head said.
    pub fn new(kind: BodyKind) -> Self {
        let state = match kind {
            BodyKind::None | BodyKind::Length(0) => DecodeState::Done,
            BodyKind::Length(n) => DecodeState::Length { remaining: n },
            BodyKind::Chunked => DecodeState::Chunked(Chunked {
                step: Step::SizeStart,
                size: 0,
                digits: 0,
                line_len: 0,
                trailer_len: 0,
                ext_len: 0,
            }),
        };
        BodyDecoder {
            state,
            total: 0,
            max_body: u64::MAX,
        }
    }

    /// Decoder for a response body delimited by the connection closing
    /// (RFC 9112 §6.3 rule 8); it is never `done`, see [`Self::finish`].
    pub fn until_close() -> Self {
        BodyDecoder {
            state: DecodeState::UntilClose,
            total: 0,
            max_body: u64::MAX,
        }
    }

    /// Fails with [`BodyError::TooLarge`] once the body would exceed `max`
    /// bytes; a Content-Length over the limit fails on the first call, before
    /// any data, and a chunk as soon as its size line is read.
    pub fn with_max_body(mut self, max: u64) -> Self {
        self.max_body = max;
        if let DecodeState::Length { remaining } = self.state {
            if remaining > max {
                self.state = DecodeState::Failed(BodyError::TooLarge);
            }
        }
        self
    }

    /// Whether the whole body has been seen.
    pub fn is_done(&self) -> bool {
        self.state == DecodeState::Done
    }

    /// Body bytes decoded so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Called when the peer closed: `Ok` if the body is complete (or ends at
    /// close), [`BodyError::Incomplete`] if it was cut short.
    pub fn finish(&self) -> Result<(), BodyError> {
        match &self.state {
            DecodeState::Done | DecodeState::UntilClose => Ok(()),
            DecodeState::Failed(e) => Err(*e),
            _ => Err(BodyError::Incomplete),
        }
    }

    /// Decodes from `input`, returning at most one contiguous run of body
    /// bytes. Consumes framing after that run up to the next data or the end
    /// of the body, so the call that returns the last data also reports `done`.
    /// When input ends mid-element the state is kept; call again with more.
    /// A fault found after some body bytes in the same input is reported on
    /// the next call, after those bytes are returned (`consumed` then stops
    /// before the offending byte); from then on every call returns that error.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<Decoded<'a>, BodyError> {
        let result = match &mut self.state {
            DecodeState::Done => (
                Decoded {
                    consumed: 0,
                    data: &[],
                    done: true,
                },
                None,
            ),
            DecodeState::Failed(e) => return Err(*e),
            DecodeState::Length { remaining } => {
                let n = clamp(*remaining, input.len());
                *remaining -= n as u64;
                let done = *remaining == 0;
                self.total += n as u64;
                if done {
                    self.state = DecodeState::Done;
                }
                let decoded = Decoded {
                    consumed: n,
                    data: input.get(..n).unwrap_or(&[]),
                    done,
                };
                (decoded, None)
            }
            DecodeState::UntilClose => {
                // Hand out the bytes up to the limit, so the outcome does not
                // depend on how the input was split; the error comes next call.
                let allowed = clamp(self.max_body.saturating_sub(self.total), input.len());
                self.total += allowed as u64;
                let data = input.get(..allowed).unwrap_or(&[]);
                let decoded = Decoded {
                    consumed: allowed,
                    data,
                    done: false,
                };
                if allowed < input.len() {
                    (decoded, Some(BodyError::TooLarge))
                } else {
                    (decoded, None)
                }
            }
            DecodeState::Chunked(c) => {
                let (decoded, error) = c.decode(input, &mut self.total, self.max_body);
                if decoded.done {
                    self.state = DecodeState::Done;
                }
                (decoded, error)
            }
        };
        match result {
            (decoded, None) => Ok(decoded),
            (decoded, Some(e)) => {
                self.state = DecodeState::Failed(e);
                // Body bytes found before the fault are still delivered, as
                // they would have been had the input arrived in pieces.
                if decoded.data.is_empty() {
                    Err(e)
                } else {
                    Ok(decoded)
                }
            }
        }
    }
}

/// `min(remaining, available)` as a usize without lossy casts.
fn clamp(remaining: u64, available: usize) -> usize {
    usize::try_from(remaining).map_or(available, |r| r.min(available))
}

impl Chunked {
    fn decode<'a>(
        &mut self,
        input: &'a [u8],
        total: &mut u64,
        max_body: u64,
    ) -> (Decoded<'a>, Option<BodyError>) {
        let mut pos = 0;
        let mut data: &'a [u8] = &[];
        loop {
            if self.step == Step::Data {
                // One data run per call keeps `data` a single sub-slice.
                if !data.is_empty() {
                    break;
                }
                let rest = input.get(pos..).unwrap_or(&[]);
                if rest.is_empty() {
                    break;
                }
                let n = clamp(self.size, rest.len());
                data = rest.get(..n).unwrap_or(&[]);
                pos += n;
                self.size -= n as u64;
                if self.size == 0 {
                    self.step = Step::DataCr;
                }
                continue;
            }
            let Some(&b) = input.get(pos) else { break };
            match self.step(b, total, max_body) {
                Ok(false) => pos += 1,
                Ok(true) => {
                    let decoded = Decoded {
                        consumed: pos + 1,
                        data,
                        done: true,
                    };
                    return (decoded, None);
                }
                Err(e) => {
                    let decoded = Decoded {
                        consumed: pos,
                        data,
                        done: false,
                    };
                    return (decoded, Some(e));
                }
            }
        }
        let decoded = Decoded {
            consumed: pos,
            data,
            done: false,
        };
        (decoded, None)
    }

    /// Advances the grammar by one framing byte; `Ok(true)` when the body ended.
    fn step(&mut self, b: u8, total: &mut u64, max_body: u64) -> Result<bool, BodyError> {
        use Step::*;
        if matches!(
            self.step,
            SizeStart
                | Size
                | ExtBws
                | ExtNameStart
                | ExtName
                | ExtAfterName
                | ExtValueStart
                | ExtToken
                | ExtQuoted
                | ExtQuotedEscape
                | ExtAfterQuoted
                | SizeLf
        ) {
            self.line_len += 1;
            if self.line_len > MAX_CHUNK_LINE {
                return Err(BodyError::ChunkLineTooLong);
            }
            if !matches!(self.step, SizeStart | Size | SizeLf) {
                self.ext_len += 1;
                if self.ext_len > MAX_CHUNK_EXTENSIONS {
                    return Err(BodyError::ChunkExtensionsTooLarge);
                }
            }
        } else if matches!(
            self.step,
            TrailerStart | TrailerName | TrailerValue | TrailerLf | EndLf
        ) {
            self.trailer_len += 1;
            if self.trailer_len > MAX_TRAILERS {
                return Err(BodyError::TrailersTooLarge);
            }
        }
        let ext = BodyError::InvalidChunkExtension;
        self.step = match (self.step, b) {
            (SizeStart, _) => match hex(b) {
                Some(v) => {
                    self.size = u64::from(v);
                    self.digits = 1;
                    Size
                }
                None => return Err(BodyError::InvalidChunkSize),
            },
            (Size, _) if hex(b).is_some() => {
                self.digits += 1;
                if self.digits > MAX_SIZE_DIGITS {
                    return Err(BodyError::ChunkSizeTooLong);
                }
                self.size = (self.size << 4) | u64::from(hex(b).unwrap_or(0));
                Size
            }
            (Size | ExtToken | ExtAfterQuoted, b' ' | b'\t') => ExtBws,
            (Size | ExtName | ExtToken | ExtAfterQuoted, b'\r') => SizeLf,
            (Size | ExtBws | ExtName | ExtAfterName | ExtToken | ExtAfterQuoted, b';') => {
                ExtNameStart
            }
            (Size, _) => return Err(BodyError::InvalidChunkSize),
            (ExtBws | ExtNameStart | ExtAfterName | ExtValueStart, b' ' | b'\t') => self.step,
            (ExtNameStart | ExtName, _) if is_tchar(b) => ExtName,
            (ExtName, b' ' | b'\t') => ExtAfterName,
            (ExtName | ExtAfterName, b'=') => ExtValueStart,
            (ExtValueStart | ExtToken, _) if is_tchar(b) => ExtToken,
            (ExtValueStart, b'"') => ExtQuoted,
            (ExtQuoted, b'"') => ExtAfterQuoted,
            (ExtQuoted, b'\\') => ExtQuotedEscape,
            (ExtQuoted, _) if is_qdtext(b) => ExtQuoted,
            (ExtQuotedEscape, _) if is_field_vchar(b) || b == b' ' || b == b'\t' => ExtQuoted,
            (
                ExtBws | ExtNameStart | ExtName | ExtAfterName | ExtValueStart | ExtToken
                | ExtQuoted | ExtQuotedEscape | ExtAfterQuoted,
                _,
            ) => return Err(ext),
            (SizeLf, b'\n') => {
                self.line_len = 0;
                if self.size == 0 {
                    TrailerStart
                } else {
                    *total = total.saturating_add(self.size);
                    if *total > max_body {
                        return Err(BodyError::TooLarge);
                    }
                    Data
                }
            }
            (SizeLf, _) => return Err(BodyError::InvalidChunkSize),
            // Data is bulk-consumed by the caller and never reaches here.
            (Data, _) => Data,
            (DataCr, b'\r') => DataLf,
            (DataLf, b'\n') => {
                self.size = 0;
                self.digits = 0;
                SizeStart
            }
            (DataCr | DataLf, _) => return Err(BodyError::MissingChunkCrlf),
            (TrailerStart, b'\r') => EndLf,
            (TrailerStart | TrailerName, _) if is_tchar(b) => TrailerName,
            (TrailerName, b':') => TrailerValue,
            (TrailerValue, b'\r') => TrailerLf,
            (TrailerValue, _) if is_field_vchar(b) || b == b' ' || b == b'\t' => TrailerValue,
            (TrailerLf, b'\n') => TrailerStart,
            (EndLf, b'\n') => return Ok(true),
            (TrailerStart | TrailerName | TrailerValue | TrailerLf | EndLf, _) => {
                return Err(BodyError::InvalidTrailer)
            }
        };
        Ok(false)
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// VCHAR or obs-text (RFC 9110 field-vchar).
fn is_field_vchar(b: u8) -> bool {
    (0x21..=0x7e).contains(&b) || b >= 0x80
}

/// RFC 9110 qdtext: what a quoted-string holds unescaped.
fn is_qdtext(b: u8) -> bool {
    matches!(b, b'\t' | b' ' | 0x21 | 0x23..=0x5b | 0x5d..=0x7e) || b >= 0x80
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::test_support::assert_each;

    /// Decodes all of `input` in pieces of at most `step` bytes, as a caller
    /// would: the body bytes delivered, and `(done, bytes consumed)` or the error.
    fn run_full(
        mut d: BodyDecoder,
        input: &[u8],
        step: usize,
    ) -> (Vec<u8>, Result<(bool, usize), BodyError>) {
        let mut body = Vec::new();
        let mut pos = 0;
        let mut end: usize = 0;
        loop {
            end = end.saturating_add(step).min(input.len()).max(pos);
            let r = match d.decode(&input[pos..end]) {
                Ok(r) => r,
                Err(e) => return (body, Err(e)),
            };
            body.extend_from_slice(r.data);
            pos += r.consumed;
            if r.done {
                return (body, Ok((true, pos)));
            }
            if pos == input.len() {
                return (body, Ok((false, pos)));
            }
        }
    }

    fn run(d: BodyDecoder, input: &[u8], step: usize) -> Result<(Vec<u8>, bool, usize), BodyError> {
        let (body, outcome) = run_full(d, input, step);
        outcome.map(|(done, consumed)| (body, done, consumed))
    }

    fn chunked(input: &[u8]) -> Result<(Vec<u8>, bool, usize), BodyError> {
        run(BodyDecoder::new(BodyKind::Chunked), input, usize::MAX)
    }

    fn chunked_err(input: &[u8]) -> BodyError {
        chunked(input).expect_err("expected a framing error")
    }

    /// Every split into two pieces and byte-at-a-time give the same body and outcome.
    fn assert_split_invariant(kind: BodyKind, input: &[u8]) {
        let whole = run_full(BodyDecoder::new(kind), input, usize::MAX);
        assert_eq!(
            whole,
            run_full(BodyDecoder::new(kind), input, 1),
            "byte at a time differs"
        );
        for cut in 0..=input.len() {
            let mut d = BodyDecoder::new(kind);
            let mut body = Vec::new();
            let mut pos = 0;
            let mut outcome = None;
            'pieces: for end in [cut, input.len()] {
                while pos < end {
                    match d.decode(&input[pos..end]) {
                        Err(e) => {
                            outcome = Some(Err(e));
                            break 'pieces;
                        }
                        Ok(r) => {
                            body.extend_from_slice(r.data);
                            pos += r.consumed;
                            if r.done {
                                outcome = Some(Ok((true, pos)));
                                break 'pieces;
                            }
                        }
                    }
                }
            }
            let outcome = outcome.unwrap_or(Ok((false, pos)));
            assert_eq!((body, outcome), whole.clone(), "split at {cut}");
        }
    }

    #[test]
    fn data_before_a_fault_is_delivered_whatever_the_split() {
        // Found by fuzzing: in one piece, the fault after the data used to
        // swallow the data that a byte-at-a-time feed had already delivered.
        let data_then_fault = |input: &[u8]| {
            let (body, outcome) = run_full(BodyDecoder::new(BodyKind::Chunked), input, usize::MAX);
            assert_split_invariant(BodyKind::Chunked, input);
            !body.is_empty() && outcome.is_err()
        };
        assert_each(
            data_then_fault,
            true,
            &[
                b"7\r\n0123456\r8\n",
                b"3\r\nabcX",
                b"3\r\nabc\r\n3\r\ndefXX",
                b"3\r\nabc\r\nZ",
                b"3\r\nabc\r\n0\r\nX : y\r\n\r\n",
            ],
        );
        let mut d = BodyDecoder::new(BodyKind::Chunked);
        let r = d.decode(b"3\r\nabcX").unwrap();
        assert_eq!((r.data, r.consumed, r.done), (&b"abc"[..], 6, false));
        assert_eq!(d.decode(b"X"), Err(BodyError::MissingChunkCrlf));
        // Same for a read-until-close body over its limit.
        let mut d = BodyDecoder::until_close().with_max_body(4);
        let r = d.decode(b"abcdef").unwrap();
        assert_eq!((r.data, r.consumed), (&b"abcd"[..], 4));
        assert_eq!(d.decode(b"ef"), Err(BodyError::TooLarge));
    }

    #[test]
    fn content_length_body() {
        let r = run(
            BodyDecoder::new(BodyKind::Length(5)),
            b"helloNEXT",
            usize::MAX,
        );
        assert_eq!(r, Ok((b"hello".to_vec(), true, 5)));
        assert_split_invariant(BodyKind::Length(5), b"helloNEXT");
        let mut d = BodyDecoder::new(BodyKind::Length(0));
        assert!(d.is_done());
        assert_eq!(
            d.decode(b"x"),
            Ok(Decoded {
                consumed: 0,
                data: b"",
                done: true
            })
        );
        assert_eq!(BodyDecoder::new(BodyKind::None).finish(), Ok(()));
    }

    #[test]
    fn simple_chunked_body() {
        let input = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nGET";
        assert_eq!(
            chunked(input),
            Ok((b"hello world".to_vec(), true, input.len() - 3))
        );
        assert_split_invariant(BodyKind::Chunked, input);
    }

    #[test]
    fn chunked_last_data_reports_done_in_same_call() {
        let mut d = BodyDecoder::new(BodyKind::Chunked);
        let input = b"3\r\nabc\r\n0\r\n\r\n";
        let r = d.decode(input).unwrap();
        assert_eq!(r.data, b"abc");
        assert!(r.done);
        assert_eq!(r.consumed, input.len());
        assert_eq!(d.total(), 3);
    }

    #[test]
    fn chunk_sizes_hex_and_bounds() {
        assert_eq!(
            chunked(b"A\r\n0123456789\r\n0\r\n\r\n").unwrap().0.len(),
            10
        );
        assert_eq!(
            chunked(b"00000a\r\n0123456789\r\n0\r\n\r\n")
                .unwrap()
                .0
                .len(),
            10
        );
        assert_eq!(chunked(b"000\r\n\r\n"), Ok((vec![], true, 7)));
        assert_eq!(chunked_err(b"\r\n"), BodyError::InvalidChunkSize);
        assert_eq!(chunked_err(b"g\r\n"), BodyError::InvalidChunkSize);
        assert_eq!(chunked_err(b" 5\r\nhello\r\n"), BodyError::InvalidChunkSize);
        assert_eq!(chunked_err(b"-5\r\n"), BodyError::InvalidChunkSize);
        assert_eq!(chunked_err(b"0x5\r\n"), BodyError::InvalidChunkSize);
        assert_eq!(chunked_err(b"5\n"), BodyError::InvalidChunkSize);
        assert_eq!(chunked_err(b"5\r\r"), BodyError::InvalidChunkSize);
        assert_eq!(chunked_err(b"5\rhello"), BodyError::InvalidChunkSize);
        // Sixteen digits fit a u64; seventeen are refused whatever their value.
        let r = chunked(b"ffffffffffffffff\r\nabc");
        assert_eq!(r, Ok((b"abc".to_vec(), false, 21)));
        assert_eq!(
            chunked_err(b"00000000000000001\r\n"),
            BodyError::ChunkSizeTooLong
        );
        assert_eq!(
            chunked_err(b"10000000000000000\r\n"),
            BodyError::ChunkSizeTooLong
        );
    }

    #[test]
    fn chunk_extensions() {
        let body_every_split = |input: &[u8]| {
            assert_split_invariant(BodyKind::Chunked, input);
            chunked(input).map(|r| r.0)
        };
        assert_each(
            body_every_split,
            Ok(b"abc".to_vec()),
            &[
                b"3;a\r\nabc\r\n0\r\n\r\n",
                b"3;a=b\r\nabc\r\n0\r\n\r\n",
                b"3 ; a = b ; c\r\nabc\r\n0\r\n\r\n",
                b"3;a=\"q \\\" ;x\"\r\nabc\r\n0\r\n\r\n",
                b"3\t;a=\"\"\r\nabc\r\n0;last=1\r\n\r\n",
                b"3;a;b=c;d=\"e\"\r\nabc\r\n0\r\n\r\n",
            ],
        );
        assert_each(
            chunked_err,
            BodyError::InvalidChunkExtension,
            &[
                b"3;\r\nabc",
                b"3;=b\r\nabc",
                b"3;a=\r\nabc",
                b"3;a=b c\r\nabc",
                b"3;a=\"open\r\nabc",
                b"3;a=\"x\"y\r\nabc",
                b"3;a b\r\nabc",
                b"3;a\x00\r\nabc",
                b"3;a=\"\x01\"\r\nabc",
                b"3;a \r\nabc",
                b"3;a=b \r\nabc",
                b"3;@\r\nabc",
                // Whitespace after the size must lead to an extension.
                b"3 \r\nabc",
                b"3 x\r\nabc",
            ],
        );
    }

    #[test]
    fn chunk_line_is_bounded() {
        let mut long = b"3;a=".to_vec();
        long.resize(MAX_CHUNK_LINE - 2, b'b');
        long.extend_from_slice(b"\r\nabc\r\n0\r\n\r\n");
        assert_eq!(chunked(&long).map(|r| r.0), Ok(b"abc".to_vec()));
        let mut long = b"3;a=".to_vec();
        long.resize(MAX_CHUNK_LINE - 1, b'b');
        long.extend_from_slice(b"\r\nabc\r\n0\r\n\r\n");
        assert_eq!(chunked_err(&long), BodyError::ChunkLineTooLong);
    }

    #[test]
    fn crlf_after_data_is_strict() {
        assert_eq!(
            chunked_err(b"3\r\nabc\n0\r\n\r\n"),
            BodyError::MissingChunkCrlf
        );
        assert_eq!(
            chunked_err(b"3\r\nabcd\r\n0\r\n\r\n"),
            BodyError::MissingChunkCrlf
        );
        assert_eq!(chunked_err(b"3\r\nabc\rX"), BodyError::MissingChunkCrlf);
        assert_eq!(
            chunked_err(b"3\r\nabc0\r\n\r\n"),
            BodyError::MissingChunkCrlf
        );
    }

    #[test]
    fn trailers_validated_and_discarded() {
        let input = b"3\r\nabc\r\n0\r\nX-Sum: 1\r\nY:\r\nZ: a\tb \xff\r\n\r\nNEXT";
        assert_eq!(chunked(input), Ok((b"abc".to_vec(), true, input.len() - 4)));
        assert_split_invariant(BodyKind::Chunked, input);
        assert_each(
            chunked_err,
            BodyError::InvalidTrailer,
            &[
                b"0\r\nX: a\nY: b\r\n\r\n",
                b"0\r\nX: a\r\n b\r\n\r\n",
                b"0\r\nX : a\r\n\r\n",
                b"0\r\n: a\r\n\r\n",
                b"0\r\nX: a\x00\r\n\r\n",
                b"0\r\nX: a\x7f\r\n\r\n",
                b"0\r\nX: a\rb\r\n\r\n",
                b"0\r\nNoColon\r\n\r\n",
                b"0\r\n\n",
                b"0\r\n\rX",
            ],
        );
    }

    #[test]
    fn trailers_are_bounded() {
        let mut input = b"0\r\n".to_vec();
        while input.len() < MAX_TRAILERS + 100 {
            input.extend_from_slice(b"X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        input.extend_from_slice(b"\r\n");
        assert_eq!(chunked_err(&input), BodyError::TrailersTooLarge);
    }

    #[test]
    fn chunk_extension_flood_is_bounded_per_body() {
        // Every line is within MAX_CHUNK_LINE, but together the extensions are not.
        let ext = format!(";x={}", "a".repeat(1000));
        let mut input = Vec::new();
        while input.len() < MAX_CHUNK_EXTENSIONS + 4096 {
            input.extend_from_slice(format!("1{ext}\r\nz\r\n").as_bytes());
        }
        input.extend_from_slice(b"0\r\n\r\n");
        assert_eq!(chunked_err(&input), BodyError::ChunkExtensionsTooLarge);
        assert_eq!(BodyError::ChunkExtensionsTooLarge.status(), 400);
        // A few extensions, and any number of plain chunks, still pass.
        let mut input = Vec::new();
        for _ in 0..(MAX_CHUNK_EXTENSIONS / 4) {
            input.extend_from_slice(b"1\r\nz\r\n");
        }
        input.extend_from_slice(format!("1{ext}\r\nz\r\n0\r\n\r\n").as_bytes());
        let d = BodyDecoder::new(BodyKind::Chunked);
        let (body, _, _) = run(d, &input, 4096).expect("plain chunks are not limited");
        assert_eq!(body.len(), MAX_CHUNK_EXTENSIONS / 4 + 1);
    }

    #[test]
    fn errors_are_sticky() {
        let mut d = BodyDecoder::new(BodyKind::Chunked);
        assert_eq!(d.decode(b"zz"), Err(BodyError::InvalidChunkSize));
        assert_eq!(d.decode(b"5\r\nhello"), Err(BodyError::InvalidChunkSize));
        assert_eq!(d.finish(), Err(BodyError::InvalidChunkSize));
    }

    #[test]
    fn max_body_limits() {
        let d = BodyDecoder::new(BodyKind::Length(11)).with_max_body(10);
        assert_eq!(run(d, b"hello world", 4), Err(BodyError::TooLarge));
        let d = BodyDecoder::new(BodyKind::Length(10)).with_max_body(10);
        assert!(run(d, b"helloworld", 4).is_ok());
        let d = BodyDecoder::new(BodyKind::Chunked).with_max_body(10);
        let input = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
        assert_eq!(run(d, input, 1), Err(BodyError::TooLarge));
        let d = BodyDecoder::new(BodyKind::Chunked).with_max_body(11);
        assert_eq!(run(d, input, 1).map(|r| r.0), Ok(b"hello world".to_vec()));
        // The size line alone is enough to refuse, before any data arrives.
        let mut d = BodyDecoder::new(BodyKind::Chunked).with_max_body(10);
        assert_eq!(d.decode(b"ffff\r\n"), Err(BodyError::TooLarge));
        let mut d = BodyDecoder::until_close().with_max_body(3);
        assert!(d.decode(b"abc").is_ok());
        assert_eq!(d.decode(b"d"), Err(BodyError::TooLarge));
        assert_eq!(BodyError::TooLarge.status(), 413);
    }

    #[test]
    fn until_close_and_finish() {
        let mut d = BodyDecoder::until_close();
        let r = d.decode(b"anything").unwrap();
        assert_eq!((r.consumed, r.data, r.done), (8, &b"anything"[..], false));
        assert_eq!(d.finish(), Ok(()));
        let mut d = BodyDecoder::new(BodyKind::Length(5));
        d.decode(b"abc").unwrap();
        assert_eq!(d.finish(), Err(BodyError::Incomplete));
        let mut d = BodyDecoder::new(BodyKind::Chunked);
        d.decode(b"3\r\nabc\r\n").unwrap();
        assert_eq!(d.finish(), Err(BodyError::Incomplete));
        d.decode(b"0\r\n\r\n").unwrap();
        assert_eq!(d.finish(), Ok(()));
    }

    #[test]
    fn many_small_chunks_every_split() {
        let mut input = Vec::new();
        let mut expect = Vec::new();
        for i in 1..20u8 {
            let data: Vec<u8> = (0..i).map(|j| b'a' + (j % 26)).collect();
            input.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
            input.extend_from_slice(&data);
            input.extend_from_slice(b"\r\n");
            expect.extend_from_slice(&data);
        }
        input.extend_from_slice(b"0\r\nT: v\r\n\r\n");
        assert_eq!(chunked(&input).map(|r| r.0), Ok(expect));
        assert_split_invariant(BodyKind::Chunked, &input);
    }
}
