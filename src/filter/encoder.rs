//! One streaming encoder over the three codings: input goes in bounded
//! slices, output comes out as it is ready, so a response is never held whole.
//! Each encoder is sized for the body when its length is known (a smaller
//! window for a small body, as nginx does for gzip), which saves most of the
//! set-up cost of a small response.

use std::io::{self, Write};

use flate2::{Compress, Compression, FlushCompress, Status};

use crate::http::content_coding::Coding;

/// Largest window any encoder uses (512 KiB for brotli and zstd, 32 KiB for
/// gzip, its maximum): what one compressed response may hold of memory in its
/// window, whatever the body's length.
const MAX_WINDOW_LOG: u32 = 19;

/// A coding's encoder for one response.
pub struct StreamEncoder {
    kind: Kind,
}

enum Kind {
    Gzip(Box<Compress>),
    Br(Option<Box<brotli::CompressorWriter<Vec<u8>>>>),
    Zstd(Option<Box<zstd::stream::write::Encoder<'static, Vec<u8>>>>),
}

/// log2 of the window for a body of `len` bytes (unknown: the largest),
/// between `min` and `max`.
fn window_log(len: Option<u64>, min: u32, max: u32) -> u32 {
    match len {
        Some(n) => (u64::BITS - n.saturating_sub(1).leading_zeros()).clamp(min, max),
        None => max,
    }
}

impl StreamEncoder {
    /// An encoder for `coding` at `level` (already checked against the
    /// coding's range), for a body of `len` bytes when known.
    pub fn new(coding: Coding, level: u32, len: Option<u64>) -> io::Result<Self> {
        let kind = match coding {
            Coding::Gzip => Kind::Gzip(Box::new(Compress::new_gzip(
                Compression::new(level),
                window_log(len, 9, 15) as u8,
            ))),
            Coding::Br => Kind::Br(Some(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                4096,
                level,
                window_log(len, 10, MAX_WINDOW_LOG),
            )))),
            Coding::Zstd => {
                let mut e = zstd::stream::write::Encoder::new(Vec::new(), level as i32)?;
                e.window_log(window_log(len, 10, MAX_WINDOW_LOG))?;
                if let Some(n) = len {
                    e.set_pledged_src_size(Some(n))?;
                }
                Kind::Zstd(Some(Box::new(e)))
            }
        };
        Ok(StreamEncoder { kind })
    }

    /// Encodes `input`, appending to `out` whatever output is ready.
    pub fn write(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        match &mut self.kind {
            Kind::Gzip(c) => deflate(c, input, out, FlushCompress::None),
            Kind::Br(w) => {
                let w = w.as_mut().ok_or_else(finished)?;
                w.write_all(input)?;
                out.append(w.get_mut());
                Ok(())
            }
            Kind::Zstd(e) => {
                let e = e.as_mut().ok_or_else(finished)?;
                e.write_all(input)?;
                out.append(e.get_mut());
                Ok(())
            }
        }
    }

    /// Emits everything given so far, so a slow source's bytes reach the
    /// client (a sync flush: the stream goes on after it).
    pub fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        match &mut self.kind {
            Kind::Gzip(c) => deflate(c, &[], out, FlushCompress::Sync),
            Kind::Br(w) => {
                let w = w.as_mut().ok_or_else(finished)?;
                w.flush()?;
                out.append(w.get_mut());
                Ok(())
            }
            Kind::Zstd(e) => {
                let e = e.as_mut().ok_or_else(finished)?;
                e.flush()?;
                out.append(e.get_mut());
                Ok(())
            }
        }
    }

    /// Ends the stream, appending its last bytes to `out`.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        match &mut self.kind {
            Kind::Gzip(c) => deflate(c, &[], out, FlushCompress::Finish),
            Kind::Br(w) => {
                let w = w.take().ok_or_else(finished)?;
                out.append(&mut w.into_inner());
                Ok(())
            }
            Kind::Zstd(e) => {
                let e = e.take().ok_or_else(finished)?;
                out.append(&mut e.finish()?);
                Ok(())
            }
        }
    }
}

fn finished() -> io::Error {
    io::Error::other("the compressed stream is already finished")
}

/// Runs deflate over all of `input` with `flush`, growing `out` as needed.
fn deflate(
    c: &mut Compress,
    input: &[u8],
    out: &mut Vec<u8>,
    flush: FlushCompress,
) -> io::Result<()> {
    let mut pos = 0;
    loop {
        if out.capacity() - out.len() < 1024 {
            out.reserve((input.len() - pos) / 2 + 4096);
        }
        let before_in = c.total_in();
        let before_out = c.total_out();
        let status = c
            .compress_vec(&input[pos..], out, flush)
            .map_err(io::Error::other)?;
        pos += (c.total_in() - before_in) as usize;
        let progressed = c.total_in() > before_in || c.total_out() > before_out;
        let room_left = out.capacity() > out.len();
        match status {
            Status::StreamEnd => return Ok(()),
            // Input all taken and the output not cut short: done for now.
            _ if flush != FlushCompress::Finish && pos == input.len() && room_left => return Ok(()),
            _ if !progressed && room_left => {
                return Err(io::Error::other("the gzip encoder made no progress"))
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn text() -> Vec<u8> {
        (0..4000)
            .flat_map(|i| format!("line {i} of a text that repeats itself\n").into_bytes())
            .collect()
    }

    fn decode(coding: Coding, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match coding {
            Coding::Gzip => {
                flate2::read::GzDecoder::new(data)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Br => {
                brotli::BrotliDecompress(&mut &data[..], &mut out).unwrap();
            }
            Coding::Zstd => out = zstd::decode_all(data).unwrap(),
        }
        out
    }

    #[test]
    fn each_coding_round_trips_in_slices_with_flushes_between() {
        let input = text();
        for coding in Coding::ALL {
            for len in [None, Some(input.len() as u64)] {
                let mut e = StreamEncoder::new(coding, 4, len).unwrap();
                let mut out = Vec::new();
                for (i, slice) in input.chunks(7000).enumerate() {
                    e.write(slice, &mut out).unwrap();
                    if i % 5 == 0 {
                        let before = out.len();
                        e.flush(&mut out).unwrap();
                        // Everything so far can be decoded from what is out.
                        assert!(out.len() > before || i == 0 || coding == Coding::Zstd);
                    }
                }
                e.finish(&mut out).unwrap();
                assert!(out.len() < input.len() / 4, "{coding:?} packs the text");
                assert_eq!(decode(coding, &out), input, "{coding:?} {len:?}");
                assert!(e.write(b"more", &mut out).is_err() || coding == Coding::Gzip);
            }
        }
    }

    #[test]
    fn a_flush_makes_what_was_written_decodable() {
        let mut e = StreamEncoder::new(Coding::Gzip, 4, None).unwrap();
        let mut out = Vec::new();
        e.write(b"data: first event\n\n", &mut out).unwrap();
        e.flush(&mut out).unwrap();
        let mut d = flate2::write::GzDecoder::new(Vec::new());
        d.write_all(&out).unwrap();
        d.flush().unwrap();
        assert_eq!(d.get_ref(), b"data: first event\n\n");
    }

    #[test]
    fn small_bodies_get_small_windows() {
        assert_eq!(window_log(Some(100), 10, 19), 10);
        assert_eq!(window_log(Some(10_000), 10, 19), 14);
        assert_eq!(window_log(Some(1 << 14), 10, 19), 14);
        assert_eq!(window_log(Some(10 << 20), 10, 19), 19);
        assert_eq!(window_log(None, 9, 15), 15);
        assert_eq!(window_log(Some(0), 9, 15), 9);
    }
}
