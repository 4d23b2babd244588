//! HTTP/2 frames written by hand, for tests that must send what a well-behaved
//! client library refuses to (connection-specific fields, floods of resets,
//! CONTINUATION or PING frames) and read what the server answers.
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const PRIORITY: u8 = 2;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const WINDOW_UPDATE: u8 = 8;
pub const CONTINUATION: u8 = 9;
pub const END_STREAM: u8 = 1;
pub const END_HEADERS: u8 = 4;
pub const ACK: u8 = 1;

/// One frame's bytes.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An HPACK header block of literal fields without indexing or Huffman.
pub fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in fields {
        out.push(0);
        push_len(&mut out, n.len());
        out.extend_from_slice(n.as_bytes());
        push_len(&mut out, v.len());
        out.extend_from_slice(v.as_bytes());
    }
    out
}

fn push_len(out: &mut Vec<u8>, n: usize) {
    // 7-bit prefix integer (RFC 7541 §5.1), H = 0.
    if n < 127 {
        out.push(n as u8);
        return;
    }
    out.push(127);
    let mut rest = n - 127;
    while rest >= 128 {
        out.push((rest % 128 + 128) as u8);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// A GET request's fields for `path`.
pub fn get_fields(path: &str) -> Vec<(&str, &str)> {
    vec![
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "localhost"),
        (":path", path),
    ]
}

/// A frame as read back.
#[derive(Debug)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The error code of a GOAWAY or RST_STREAM.
    pub fn error_code(&self) -> Option<u32> {
        let at = match self.kind {
            GOAWAY => 4,
            RST_STREAM => 0,
            _ => return None,
        };
        let b = self.payload.get(at..at + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// A raw HTTP/2 client connection over plain TCP (prior knowledge).
pub struct RawH2 {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl RawH2 {
    /// Connects and sends the preface and an empty SETTINGS frame.
    pub fn connect(addr: SocketAddr) -> RawH2 {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut c = RawH2 {
            stream,
            buf: Vec::new(),
        };
        c.send(PREFACE);
        c.send(&frame(SETTINGS, 0, 0, &[]));
        c
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Sends, reporting failure instead of panicking (the server may have
    /// closed the connection).
    pub fn try_send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// The next frame, or `None` once the connection is closed or `within` passed.
    pub fn next_frame(&mut self, within: Duration) -> Option<Frame> {
        let deadline = Instant::now() + within;
        loop {
            if self.buf.len() >= 9 {
                let len = (usize::from(self.buf[0]) << 16)
                    | (usize::from(self.buf[1]) << 8)
                    | usize::from(self.buf[2]);
                if self.buf.len() >= 9 + len {
                    let f = Frame {
                        kind: self.buf[3],
                        flags: self.buf[4],
                        stream: u32::from_be_bytes([
                            self.buf[5],
                            self.buf[6],
                            self.buf[7],
                            self.buf[8],
                        ]) & 0x7fff_ffff,
                        payload: self.buf[9..9 + len].to_vec(),
                    };
                    self.buf.drain(..9 + len);
                    return Some(f);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 16384];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return None
                }
                Err(_) => return None,
            }
        }
    }

    /// Reads frames until one matches `want` (or the connection ends).
    pub fn wait_for(&mut self, within: Duration, want: impl Fn(&Frame) -> bool) -> Option<Frame> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let f = self.next_frame(left)?;
            if want(&f) {
                return Some(f);
            }
        }
    }

    /// Reads until the server closes the connection; true if it did within `within`.
    pub fn closed_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return false
                }
                Err(_) => return true,
            }
        }
    }
}
