//! Arbitrary bytes on an HTTP/3 stream (control, request or push, in either
//! role) never make the frame parser panic, stall, take more than it was
//! given or hold a frame past its limit; and the bytes read whole or split
//! into pieces give the same frames and the same error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pier::http3::control::ControlStream;
use pier::http3::frame_reader::{FrameEvent, FrameLimits, FrameReader, StreamKind};
use pier::http3::message::{RequestEvent, RequestStream};
use pier::http3::{Error, Role};

/// What a stream produced, owned, DATA pieces joined.
#[derive(Default)]
struct Seen {
    events: Vec<String>,
    data: Vec<u8>,
}

impl Seen {
    fn event(&mut self, e: String) {
        self.flush();
        self.events.push(e);
    }

    fn flush(&mut self) {
        if !self.data.is_empty() {
            self.events.push(format!("data {:?}", self.data));
            self.data.clear();
        }
    }
}

/// Reads `pieces` on a stream chosen by `mode`: its events, and the error
/// that ended it if any.
fn run(mode: u8, limits: FrameLimits, pieces: &[&[u8]]) -> (Vec<String>, Option<Error>) {
    let role = if mode & 4 == 0 { Role::Server } else { Role::Client };
    let mut seen = Seen::default();
    let mut control = ControlStream::new(role, limits);
    let mut request = RequestStream::new(limits);
    let kind = if mode & 8 == 0 { StreamKind::Push } else { StreamKind::Request };
    let mut frames = FrameReader::new(kind, role, limits);
    for piece in pieces {
        let mut input = *piece;
        while !input.is_empty() {
            let step = match mode % 3 {
                0 => control.read(input).map(|(n, e)| {
                    if let Some(e) = e {
                        seen.event(format!("{e:?}"));
                    }
                    n
                }),
                1 => request.read(input).map(|(n, e)| {
                    match e {
                        Some(RequestEvent::Data(d)) => seen.data.extend_from_slice(d),
                        Some(RequestEvent::Head(h)) => {
                            assert!(h.len() <= limits.max_field_section);
                            seen.event(format!("head {h:?}"));
                        }
                        Some(e) => seen.event(format!("{e:?}")),
                        None => {}
                    }
                    n
                }),
                _ => frames.read(input).map(|(n, e)| {
                    match e {
                        Some(FrameEvent::Data(d)) => seen.data.extend_from_slice(d),
                        Some(e) => seen.event(format!("{e:?}")),
                        None => {}
                    }
                    n
                }),
            };
            match step {
                Ok(n) => {
                    assert!(n > 0 && n <= input.len(), "the parser takes input or fails");
                    input = &input[n..];
                }
                Err(e) => {
                    seen.flush();
                    return (seen.events, Some(e));
                }
            }
        }
    }
    seen.flush();
    (seen.events, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Some((&seed, bytes)) = rest.split_first() else {
        return;
    };
    let limits = FrameLimits {
        max_field_section: 1 + usize::from(mode >> 4) * 16,
        max_control_payload: 64,
    };
    let whole = run(mode, limits, &[bytes]);
    let mut pieces = Vec::new();
    let mut at = 0;
    let mut i = 0usize;
    while at < bytes.len() {
        let len = (1 + (usize::from(seed) * (i + 1)) % 13).min(bytes.len() - at);
        pieces.push(&bytes[at..at + len]);
        at += len;
        i += 1;
    }
    let split = run(mode, limits, &pieces);
    assert_eq!(whole, split);
});
