//! The head most clients send, tokenized in one pass: a request line
//! `token SP target SP HTTP/1.x CRLF`, then field lines `name: value CRLF`
//! whose values are visible ASCII and spaces, then CRLF. A head in that shape
//! is one httparse takes whole, and this gives the same method, target,
//! version and field spans httparse's tokens would; anything else (a bare LF,
//! a tab or obs-text in a value, a value empty or ending in a space, an
//! unfinished head, more lines than slots) is left to httparse and the checks
//! around it. So nothing is refused here: what is judged after tokenizing
//! ([`super::judge_head`]) is judged the same way for every head.

use super::super::grammar::TCHAR;
use super::{HeaderSpan, Method, RequestHead, Span, Version};

/// Bytes of a method or a field name (RFC 9110 tchar).
const TOKEN: &[bool; 256] = &TCHAR;
/// Bytes of a target's path taken here: visible ASCII (httparse takes
/// obs-text too) but `?`, which ends the path, and `#`, which no target may
/// hold (left to the full parse, which refuses it).
const PATH: [bool; 256] = without(range(b'!', 0x7e), b"?#");
/// Bytes of a target's query taken here: a path's and `?`.
const QUERY: [bool; 256] = without(range(b'!', 0x7e), b"#");
/// Bytes of a field value taken here: visible ASCII and SP.
const VALUE: [bool; 256] = range(b' ', 0x7e);

/// The bytes from `low` to `high`, as a table.
const fn range(low: u8, high: u8) -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = low as usize;
    while b <= high as usize {
        t[b] = true;
        b += 1;
    }
    t
}

/// `table` without the bytes of `out`.
const fn without(mut table: [bool; 256], out: &[u8]) -> [bool; 256] {
    let mut i = 0;
    while i < out.len() {
        table[out[i] as usize] = false;
        i += 1;
    }
    table
}

/// What tokenizing found beyond the spans it stores in the head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tokenized {
    /// The head's length in the window it was tokenized from.
    pub(super) len: usize,
    /// Where the target's first `?` is in the parsed buffer, if it has one.
    /// The target is known to be visible ASCII without `#`, so judging it
    /// needs no further look at its bytes.
    pub(super) question: Option<usize>,
}

/// Tokenizes `rest` (the window after leading empty lines, which start at
/// `skip` in the parsed buffer) into `head` when it holds a whole head of
/// the common shape with at most `slot_count` field lines. Returns the
/// head's length in `rest` and where its query starts; `None` leaves `head`
/// to be parsed in full. One look at each byte, each against one table.
pub(super) fn tokenize(
    rest: &[u8],
    skip: usize,
    slot_count: usize,
    head: &mut RequestHead,
) -> Option<Tokenized> {
    let method_end = run_of(rest, 0, TOKEN);
    if method_end == 0 || rest.get(method_end) != Some(&b' ') {
        return None;
    }
    let target_at = method_end + 1;
    let mut target_end = run_of(rest, target_at, &PATH);
    let mut question = None;
    if rest.get(target_end) == Some(&b'?') {
        question = Some(skip + target_end);
        target_end = run_of(rest, target_end + 1, &QUERY);
    }
    if target_end == target_at || rest.get(target_end) != Some(&b' ') {
        return None;
    }
    let version = match rest.get(target_end + 1..target_end + 11)? {
        b"HTTP/1.1\r\n" => Version::Http11,
        b"HTTP/1.0\r\n" => Version::Http10,
        _ => return None,
    };
    head.method = Method::from_token(rest.get(..method_end)?);
    head.method_span = Span::new(skip, skip + method_end);
    head.target = Span::new(skip + target_at, skip + target_end);
    head.version = version;
    let mut at = target_end + 11;
    loop {
        let name_end = run_of(rest, at, TOKEN);
        if name_end == at {
            // No name: the empty line that ends the head, or another shape.
            return match rest.get(at..at + 2)? {
                b"\r\n" => {
                    head.head_len = skip + at + 2;
                    Some(Tokenized {
                        len: at + 2,
                        question,
                    })
                }
                _ => None,
            };
        }
        if rest.get(name_end) != Some(&b':') || head.headers.len() >= slot_count {
            return None;
        }
        let mut value_at = name_end + 1;
        while let Some(b' ' | b'\t') = rest.get(value_at) {
            value_at += 1;
        }
        let value_end = run_of(rest, value_at, &VALUE);
        // httparse stores a value without trailing whitespace: an empty
        // value, or one ending in SP, is left to it.
        if value_end == value_at
            || rest.get(value_end - 1) == Some(&b' ')
            || rest.get(value_end..value_end + 2)? != b"\r\n"
        {
            return None;
        }
        head.headers.push(HeaderSpan {
            name: Span::new(skip + at, skip + name_end),
            value: Span::new(skip + value_at, skip + value_end),
        });
        at = value_end + 2;
    }
}

/// Where the run of bytes in `class` that starts at `at` ends.
#[inline]
fn run_of(rest: &[u8], mut at: usize, class: &[bool; 256]) -> usize {
    while let Some(&b) = rest.get(at) {
        if !class[usize::from(b)] {
            break;
        }
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use std::mem::MaybeUninit;

    use super::super::{parse_request, Limits, Parsed, RequestError};
    use super::*;
    use crate::http1::span::offset_of;

    /// What httparse makes of `rest`: method, target, minor version, field
    /// spans (as offsets into `rest`) and length, when it takes it whole.
    type Tokens = (Span, Span, u8, Vec<HeaderSpan>, usize);

    fn httparse_tokens(rest: &[u8], slots: usize) -> Option<Tokens> {
        let mut headers = vec![MaybeUninit::<httparse::Header<'_>>::uninit(); slots];
        let mut req = httparse::Request::new(&mut []);
        let Ok(httparse::Status::Complete(len)) = req.parse_with_uninit_headers(rest, &mut headers)
        else {
            return None;
        };
        let span = |part: &[u8]| {
            let at = offset_of(rest, part);
            Span::new(at, at + part.len())
        };
        let fields = req
            .headers
            .iter()
            .map(|h| HeaderSpan {
                name: span(h.name.as_bytes()),
                value: span(h.value),
            })
            .collect();
        Some((
            span(req.method?.as_bytes()),
            span(req.path?.as_bytes()),
            req.version?,
            fields,
            len,
        ))
    }

    fn our_tokens(rest: &[u8], slots: usize) -> Option<Tokens> {
        let mut head = RequestHead::new();
        let tokens = tokenize(rest, 0, slots, &mut head)?;
        // What it found out about the target holds: no `#`, no byte past
        // visible ASCII, and the first `?` where it says.
        let target = head.target.get(rest);
        assert!(target.iter().all(|&b| b.is_ascii_graphic() && b != b'#'));
        let question = target.iter().position(|&b| b == b'?');
        assert_eq!(tokens.question, question.map(|q| head.target.start() + q));
        let len = tokens.len;
        let minor = match head.version {
            Version::Http10 => 0,
            Version::Http11 => 1,
        };
        Some((
            head.method_span,
            head.target,
            minor,
            head.headers.clone(),
            len,
        ))
    }

    /// Heads to start from, and bytes to put in each of their places.
    const SEEDS: &[&[u8]] = &[
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
        b"POST /a?b=c HTTP/1.0\r\nHost: a\r\nContent-Length: 5\r\nX-A:  1 2\r\n\r\nhello",
        b"OPTIONS * HTTP/1.1\r\nHost: h\r\nConnection: close\r\nExpect: 100-continue\r\n\r\n",
        b"GET http://a/b HTTP/1.1\r\nhost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ];
    const PROBES: &[u8] = b" \t\r\n:\x00\x7f\x80\xff#?/aZ0-\"@,;";

    /// Every head the one-pass tokenizer takes, httparse takes whole with the
    /// same tokens; so the checks after tokenizing see the same head.
    #[test]
    fn what_it_takes_httparse_takes_with_the_same_tokens() {
        let mut taken = 0;
        let mut check = |input: &[u8]| {
            for slots in [1, 2, 100] {
                if let Some(ours) = our_tokens(input, slots) {
                    taken += 1;
                    assert_eq!(
                        Some(ours),
                        httparse_tokens(input, slots),
                        "{:?} with {slots} slots",
                        String::from_utf8_lossy(input)
                    );
                }
            }
        };
        for seed in SEEDS {
            check(seed);
            for cut in 0..seed.len() {
                check(&seed[..cut]);
            }
            for at in 0..seed.len() {
                for &probe in PROBES {
                    let mut changed = seed.to_vec();
                    changed[at] = probe;
                    check(&changed);
                    let mut inserted = seed.to_vec();
                    inserted.insert(at, probe);
                    check(&inserted);
                }
                let mut removed = seed.to_vec();
                removed.remove(at);
                check(&removed);
            }
        }
        // The usual heads do take the short way.
        assert!(taken > 1000, "{taken}");
    }

    /// What it leaves to httparse: each is still answered as the full parse
    /// answers it, and bad heads are still refused.
    #[test]
    fn heads_of_other_shapes_are_parsed_in_full() {
        let limits = Limits::default();
        let parse = |raw: &[u8]| parse_request(raw, &limits, &mut RequestHead::new());
        let taken = |raw: &[u8]| tokenize(raw, 0, 100, &mut RequestHead::new()).is_some();
        for (raw, expected) in [
            (
                &b"GET / HTTP/1.1\nHost: a\r\n\r\n"[..],
                Err(RequestError::BadLineEnding),
            ),
            (
                b"GET / HTTP/1.1\r\nHost: a\n\r\n",
                Err(RequestError::BadLineEnding),
            ),
            (
                b"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
                Err(RequestError::InvalidHeaderName),
            ),
            (
                b"GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n",
                Err(RequestError::InvalidHeaderValue),
            ),
            (
                b"GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n",
                Err(RequestError::InvalidTarget),
            ),
            (
                b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
                Err(RequestError::InvalidRequestLine),
            ),
            (
                b"GET / HTTP/1.2\r\nHost: a\r\n\r\n",
                Err(RequestError::VersionNotSupported),
            ),
            (
                b"GET /# HTTP/1.1\r\nHost: a\r\n\r\n",
                Err(RequestError::InvalidTarget),
            ),
            (
                b"GET /a?b#c HTTP/1.1\r\nHost: a\r\n\r\n",
                Err(RequestError::InvalidTarget),
            ),
            (b"GET / HTTP/1.1\r\nHost: a\r\n", Ok(Parsed::Partial)),
            (b"GET / HTTP/1.1\r\nHost:\r\n\r\n", Ok(Parsed::Complete)),
            (b"GET / HTTP/1.1\r\nHost: a \r\n\r\n", Ok(Parsed::Complete)),
            (
                b"GET / HTTP/1.1\r\nHost: a\r\nX: b\tc\r\n\r\n",
                Ok(Parsed::Complete),
            ),
        ] {
            assert!(!taken(raw), "{:?}", String::from_utf8_lossy(raw));
            assert_eq!(parse(raw), expected, "{:?}", String::from_utf8_lossy(raw));
        }
        // Taken the short way, then judged as every head is.
        for (raw, expected) in [
            (&b"GET / HTTP/1.1\r\n\r\n"[..], Err(RequestError::MissingHost)),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", Err(RequestError::DuplicateHost)),
            (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", Err(RequestError::InvalidHost)),
            (b"GET a HTTP/1.1\r\nHost: a\r\n\r\n", Err(RequestError::InvalidTarget)),
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
                Err(RequestError::DuplicateContentLength),
            ),
            (
                b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                Err(RequestError::ContentLengthWithTransferEncoding),
            ),
            (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", Ok(Parsed::Complete)),
        ] {
            assert!(taken(raw), "{:?}", String::from_utf8_lossy(raw));
            assert_eq!(parse(raw), expected, "{:?}", String::from_utf8_lossy(raw));
        }
        // More field lines than slots: refused by the full parse.
        let few = Limits {
            max_headers: 1,
            ..Limits::default()
        };
        let raw = b"GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\r\n";
        assert_eq!(
            parse_request(raw, &few, &mut RequestHead::new()),
            Err(RequestError::TooManyHeaders)
        );
    }
}
