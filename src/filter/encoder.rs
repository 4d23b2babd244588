//! One streaming encoder over the three codings: input goes in bounded
//! slices, output comes out as it is ready, so a response is never held whole.
//! Each encoder is sized for the body when its length is known (a smaller
//! window for a small body, as nginx does for gzip), which saves most of the
//! set-up cost of a small response.
//!
//! gzip of a body whose length is known and at most [`GATHER_MAX`] is gathered
//! in one bounded buffer and encoded in one call to libdeflate when it ends:
//! about 0.6x the CPU of a zlib stream at the same level, and smaller output.
//! A flush, or more input than announced, turns the gathered input into a
//! flate2 stream that goes on from there; other bodies are streams throughout.
//!
//! The gathering buffer and libdeflate's output buffer are kept by each worker
//! thread and reused from response to response (a few spares, each at most
//! [`GATHER_MAX`] and its bound), not allocated and freed each time: a fresh
//! 100 KiB buffer is zeroed, and when freed the allocator hands its pages back
//! to the kernel (an `madvise` per response), so the next response faulted
//! them in again, a page at a time. A file is read straight into the
//! gathering buffer ([`StreamEncoder::gather_space`]), and a body held whole
//! in memory is encoded from where it lies ([`StreamEncoder::finish_with`]).

use std::cell::RefCell;
use std::io::{self, Write};

use flate2::{Compress, Compression, FlushCompress, Status};
use libdeflater::{CompressionLvl, Compressor};

use crate::http::content_coding::Coding;

/// Largest window any encoder uses (512 KiB for brotli and zstd, 32 KiB for
/// gzip, its maximum): what one compressed response may hold of memory in its
/// window, whatever the body's length.
const MAX_WINDOW_LOG: u32 = 19;

/// Largest body gzip gathers and encodes in one call: no more memory than a
/// streaming deflate's own tables at a 32 KiB window (about 256 KiB), and one
/// call on it holds the worker for about a third of a millisecond at level 5.
pub const GATHER_MAX: usize = 128 * 1024;

/// A coding's encoder for one response.
pub struct StreamEncoder {
    kind: Kind,
}

enum Kind {
    /// gzip input held until the body ends, then encoded whole.
    GzipGathered(Gathered),
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

/// gzip input of a body of known length, gathered to be encoded whole.
struct Gathered {
    level: u32,
    /// The body's announced length: a buffer at least this long is taken
    /// at the first write (a HEAD request never writes).
    len: usize,
    /// Gathered input in `input[..filled]`; what lies past it is left from
    /// earlier use (the buffer is reused, never zeroed again).
    input: Vec<u8>,
    filled: usize,
    /// The stream was ended: more input is an error, as for the others.
    finished: bool,
}

impl Gathered {
    /// The buffer, taken from this thread's spares at the first use.
    fn buffer(&mut self) -> &mut [u8] {
        if self.input.len() < self.len {
            self.input = take_input(self.len);
        }
        &mut self.input[..self.len]
    }

    /// The input gathered so far.
    fn gathered(&self) -> &[u8] {
        &self.input[..self.filled]
    }
}

impl Drop for Gathered {
    fn drop(&mut self) {
        give_back_input(std::mem::take(&mut self.input));
    }
}

impl StreamEncoder {
    /// An encoder for `coding` at `level` (already checked against the
    /// coding's range), for a body of `len` bytes when known.
    pub fn new(coding: Coding, level: u32, len: Option<u64>) -> io::Result<Self> {
        let kind = match coding {
            Coding::Gzip => match len.and_then(|n| usize::try_from(n).ok()) {
                Some(len) if len <= GATHER_MAX => Kind::GzipGathered(Gathered {
                    level,
                    len,
                    input: Vec::new(),
                    filled: 0,
                    finished: false,
                }),
                _ => Kind::Gzip(gzip_stream(level, len)),
            },
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

    /// Whether input is only gathered for now, to be encoded when the body
    /// ends: the caller may hand it over whole, with no yield between slices.
    pub fn gathers(&self) -> bool {
        matches!(&self.kind, Kind::GzipGathered(g) if !g.finished)
    }

    /// Turns gathered gzip input into a stream, encoding what was gathered.
    fn stream_gathered(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        if let Kind::GzipGathered(g) = &mut self.kind {
            if g.finished {
                return Err(finished());
            }
            let mut c = gzip_stream(g.level, Some(g.len as u64));
            deflate(&mut c, g.gathered(), out, FlushCompress::None)?;
            self.kind = Kind::Gzip(c);
        }
        Ok(())
    }

    /// Encodes `input`, appending to `out` whatever output is ready.
    pub fn write(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        match &mut self.kind {
            Kind::GzipGathered(g) if !g.finished && g.filled + input.len() <= g.len => {
                let at = g.filled;
                g.buffer()[at..at + input.len()].copy_from_slice(input);
                g.filled += input.len();
                Ok(())
            }
            Kind::GzipGathered(_) => {
                // More than announced: no longer bounded by the length.
                self.stream_gathered(out)?;
                self.write(input, out)
            }
            Kind::Gzip(c) => deflate(c, input, out, FlushCompress::None),
            Kind::Br(w) => through(w, out, |w| w.write_all(input)),
            Kind::Zstd(e) => through(e, out, |e| e.write_all(input)),
        }
    }

    /// Room for the rest of the announced body, to read it into in place
    /// (then [`gathered`](Self::gathered) says how much came): only while
    /// input is gathered, and only what the announced length has left.
    pub fn gather_space(&mut self) -> Option<&mut [u8]> {
        match &mut self.kind {
            Kind::GzipGathered(g) if !g.finished && g.filled < g.len => {
                let at = g.filled;
                Some(&mut g.buffer()[at..])
            }
            _ => None,
        }
    }

    /// Counts `n` bytes read into [`gather_space`](Self::gather_space) as
    /// gathered input.
    pub fn gathered(&mut self, n: usize) {
        if let Kind::GzipGathered(g) = &mut self.kind {
            g.filled = (g.filled + n).min(g.len);
        }
    }

    /// Encodes `input` and ends the stream: as [`write`](Self::write) then
    /// [`finish`](Self::finish), but a gathering encoder that has nothing yet
    /// encodes a whole body straight from where it lies, with no copy.
    pub fn finish_with(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        match &mut self.kind {
            Kind::GzipGathered(g) if !g.finished && g.filled == 0 && input.len() == g.len => {
                g.finished = true;
                gzip_whole(g.level, input, out)
            }
            _ => {
                self.write(input, out)?;
                self.finish(out)
            }
        }
    }

    /// Emits everything given so far, so a slow source's bytes reach the
    /// client (a sync flush: the stream goes on after it).
    pub fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        match &mut self.kind {
            Kind::GzipGathered(_) => {
                self.stream_gathered(out)?;
                self.flush(out)
            }
            Kind::Gzip(c) => deflate(c, &[], out, FlushCompress::Sync),
            Kind::Br(w) => through(w, out, |w| w.flush()),
            Kind::Zstd(e) => through(e, out, |e| e.flush()),
        }
    }

    /// Ends the stream, appending its last bytes to `out`.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        match &mut self.kind {
            Kind::GzipGathered(g) => {
                if g.finished {
                    return Err(finished());
                }
                g.finished = true;
                let r = gzip_whole(g.level, g.gathered(), out);
                give_back_input(std::mem::take(&mut g.input));
                r
            }
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

/// The brotli and zstd writers, which keep their output in a `Vec` until it
/// is taken.
trait BufferedEncoder: Write {
    fn output(&mut self) -> &mut Vec<u8>;
}

impl BufferedEncoder for brotli::CompressorWriter<Vec<u8>> {
    fn output(&mut self) -> &mut Vec<u8> {
        self.get_mut()
    }
}

impl BufferedEncoder for zstd::stream::write::Encoder<'static, Vec<u8>> {
    fn output(&mut self) -> &mut Vec<u8> {
        self.get_mut()
    }
}

/// Runs `step` on a writer not yet finished and moves its output to `out`.
fn through<W: BufferedEncoder>(
    w: &mut Option<Box<W>>,
    out: &mut Vec<u8>,
    step: impl FnOnce(&mut W) -> io::Result<()>,
) -> io::Result<()> {
    let w = w.as_deref_mut().ok_or_else(finished)?;
    step(w)?;
    out.append(w.output());
    Ok(())
}

/// A gzip stream for a body of `len` bytes when known.
fn gzip_stream(level: u32, len: Option<u64>) -> Box<Compress> {
    Box::new(Compress::new_gzip(
        Compression::new(level),
        window_log(len, 9, 15) as u8,
    ))
}

/// Gathering buffers a thread keeps for later responses: one is enough
/// while responses are read and encoded within one turn of the worker (a
/// file from the page cache, a body given whole); a second serves a pushed
/// body gathered across waits. More at once are allocated and freed.
const SPARE_INPUTS: usize = 2;

/// Gathered input shorter than this gets a buffer of its own length rather
/// than a spare (a spare is [`GATHER_MAX`] long, allocated once).
const SPARE_INPUT_MIN: usize = 16 * 1024;

/// What a worker thread keeps for whole-body gzip between responses.
#[derive(Default)]
struct WholeGzip {
    /// libdeflate compressors, one per level once used (a compressor sets
    /// its tables up at each call, so nothing carries over).
    compressors: Vec<(u32, Compressor)>,
    /// libdeflate's output buffer, as long as the largest bound asked yet.
    output: Vec<u8>,
    /// Gathering buffers not in use, each [`GATHER_MAX`] long.
    inputs: Vec<Vec<u8>>,
}

thread_local! {
    static WHOLE_GZIP: RefCell<WholeGzip> = RefCell::new(WholeGzip::default());
}

/// A buffer at least `len` long to gather input in: a spare when the input
/// is not small.
fn take_input(len: usize) -> Vec<u8> {
    if len < SPARE_INPUT_MIN {
        return vec![0; len];
    }
    WHOLE_GZIP
        .try_with(|w| w.borrow_mut().inputs.pop())
        .ok()
        .flatten()
        .unwrap_or_else(|| vec![0; GATHER_MAX])
}

/// Keeps a gathering buffer for a later response, if it is a spare and the
/// thread has room for it.
fn give_back_input(buf: Vec<u8>) {
    if buf.len() != GATHER_MAX {
        return;
    }
    let _ = WHOLE_GZIP.try_with(|w| {
        let mut w = w.borrow_mut();
        if w.inputs.len() < SPARE_INPUTS {
            w.inputs.push(buf);
        }
    });
}

/// Encodes `input` whole as one gzip member, appended to `out`.
fn gzip_whole(level: u32, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
    WHOLE_GZIP.with(|w| {
        let w = &mut *w.borrow_mut();
        let i = match w.compressors.iter().position(|(l, _)| *l == level) {
            Some(i) => i,
            None => {
                let lvl = CompressionLvl::new(level as i32)
                    .map_err(|_| io::Error::other(format!("{level} is not a gzip level")))?;
                w.compressors.push((level, Compressor::new(lvl)));
                w.compressors.len() - 1
            }
        };
        let c = &mut w.compressors[i].1;
        let bound = c.gzip_compress_bound(input.len());
        if w.output.len() < bound {
            w.output.resize(bound, 0);
        }
        let n = c
            .gzip_compress(input, &mut w.output[..bound])
            .map_err(|_| io::Error::other("the gzip encoder ran out of room"))?;
        out.extend_from_slice(&w.output[..n]);
        Ok(())
    })
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

    fn page(len: usize) -> Vec<u8> {
        let mut t = text();
        t.truncate(len);
        t
    }

    #[test]
    fn gzip_of_a_known_length_is_encoded_whole_by_libdeflate() {
        let input = page(100_000);
        let mut e = StreamEncoder::new(Coding::Gzip, 5, Some(input.len() as u64)).unwrap();
        let mut out = Vec::new();
        for slice in input.chunks(16384) {
            assert!(e.gathers());
            e.write(slice, &mut out).unwrap();
            assert!(out.is_empty(), "nothing comes out before the end");
        }
        e.finish(&mut out).unwrap();
        assert!(!e.gathers());
        let mut whole = Compressor::new(CompressionLvl::new(5).unwrap());
        let mut expected = vec![0; whole.gzip_compress_bound(input.len())];
        let n = whole.gzip_compress(&input, &mut expected).unwrap();
        assert_eq!(
            out,
            expected[..n],
            "one libdeflate call over the whole body"
        );
        assert_eq!(decode(Coding::Gzip, &out), input);
        assert!(e.write(b"more", &mut out).is_err());
        assert!(e.finish(&mut out).is_err());
    }

    #[test]
    fn gzip_gathers_only_bounded_known_lengths() {
        let gathers = |len| StreamEncoder::new(Coding::Gzip, 5, len).unwrap().gathers();
        assert!(gathers(Some(GATHER_MAX as u64)));
        assert!(!gathers(Some(GATHER_MAX as u64 + 1)));
        assert!(!gathers(None));
        assert!(!StreamEncoder::new(Coding::Br, 5, Some(1000))
            .unwrap()
            .gathers());
    }

    #[test]
    fn a_flush_while_gathering_sends_what_was_gathered_and_streams_on() {
        let input = page(60_000);
        let mut e = StreamEncoder::new(Coding::Gzip, 5, Some(input.len() as u64)).unwrap();
        let mut out = Vec::new();
        e.write(&input[..20_000], &mut out).unwrap();
        e.flush(&mut out).unwrap();
        assert!(!e.gathers());
        let mut d = flate2::write::GzDecoder::new(Vec::new());
        d.write_all(&out).unwrap();
        d.flush().unwrap();
        assert_eq!(
            d.get_ref()[..],
            input[..20_000],
            "the client has the first part"
        );
        e.write(&input[20_000..], &mut out).unwrap();
        e.finish(&mut out).unwrap();
        assert_eq!(decode(Coding::Gzip, &out), input);
    }

    #[test]
    fn a_body_longer_than_announced_is_streamed_whole() {
        let input = page(50_000);
        let mut e = StreamEncoder::new(Coding::Gzip, 5, Some(30_000)).unwrap();
        let mut out = Vec::new();
        for slice in input.chunks(16384) {
            e.write(slice, &mut out).unwrap();
        }
        assert!(!e.gathers());
        e.finish(&mut out).unwrap();
        assert_eq!(decode(Coding::Gzip, &out), input);
    }

    /// libdeflate's gzip of `input` in one call.
    fn whole(input: &[u8]) -> Vec<u8> {
        let mut c = Compressor::new(CompressionLvl::new(5).unwrap());
        let mut out = vec![0; c.gzip_compress_bound(input.len())];
        let n = c.gzip_compress(input, &mut out).unwrap();
        out.truncate(n);
        out
    }

    fn spare_inputs() -> usize {
        WHOLE_GZIP.with(|w| w.borrow().inputs.len())
    }

    #[test]
    fn a_file_is_read_straight_into_the_gathering_buffer() {
        let input = page(100_000);
        let mut e = StreamEncoder::new(Coding::Gzip, 5, Some(input.len() as u64)).unwrap();
        let space = e.gather_space().unwrap();
        assert_eq!(space.len(), input.len(), "room for the whole body");
        space[..60_000].copy_from_slice(&input[..60_000]);
        e.gathered(60_000);
        let space = e.gather_space().unwrap();
        assert_eq!(space.len(), 40_000, "room for the rest only");
        space.copy_from_slice(&input[60_000..]);
        e.gathered(40_000);
        assert!(e.gather_space().is_none(), "no room past the length");
        let mut out = Vec::new();
        e.finish(&mut out).unwrap();
        assert_eq!(out, whole(&input));
        assert!(e.gather_space().is_none());
        for (coding, len) in [(Coding::Gzip, None), (Coding::Br, Some(1000))] {
            assert!(StreamEncoder::new(coding, 5, len)
                .unwrap()
                .gather_space()
                .is_none());
        }
    }

    #[test]
    fn a_body_given_whole_is_encoded_from_where_it_lies() {
        let input = page(70_000);
        let mut e = StreamEncoder::new(Coding::Gzip, 5, Some(input.len() as u64)).unwrap();
        let mut out = Vec::new();
        e.finish_with(&input, &mut out).unwrap();
        assert_eq!(out, whole(&input));
        assert!(e.finish(&mut out).is_err(), "already ended");
        // Part gathered already: the rest follows it.
        let mut e = StreamEncoder::new(Coding::Gzip, 5, Some(input.len() as u64)).unwrap();
        let mut out = Vec::new();
        e.write(&input[..1000], &mut out).unwrap();
        e.finish_with(&input[1000..], &mut out).unwrap();
        assert_eq!(out, whole(&input));
        // Other codings write, then finish.
        let mut e = StreamEncoder::new(Coding::Br, 5, Some(input.len() as u64)).unwrap();
        let mut out = Vec::new();
        e.finish_with(&input, &mut out).unwrap();
        assert_eq!(decode(Coding::Br, &out), input);
    }

    #[test]
    fn gathering_buffers_are_reused_and_never_leak_earlier_input() {
        // A thread of its own: the spares are per thread.
        std::thread::spawn(reuse_on_a_fresh_thread).join().unwrap();
    }

    fn reuse_on_a_fresh_thread() {
        assert_eq!(spare_inputs(), 0);
        let encode = |input: &[u8]| {
            let mut e = StreamEncoder::new(Coding::Gzip, 5, Some(input.len() as u64)).unwrap();
            let mut out = Vec::new();
            for slice in input.chunks(16384) {
                e.write(slice, &mut out).unwrap();
            }
            e.finish(&mut out).unwrap();
            out
        };
        let long = page(120_000);
        assert_eq!(encode(&long), whole(&long));
        assert_eq!(spare_inputs(), 1, "kept for the next response");
        // A shorter body in the same buffer: none of the longer one's bytes.
        let short: Vec<u8> = page(40_000)
            .iter()
            .map(|b| b.to_ascii_uppercase())
            .collect();
        assert_eq!(encode(&short), whole(&short));
        assert_eq!(spare_inputs(), 1, "the same buffer, taken and given back");
        // A small body gets its own buffer and leaves the spare alone.
        assert_eq!(decode(Coding::Gzip, &encode(b"tiny body")), b"tiny body");
        assert_eq!(spare_inputs(), 1);

        // Bodies gathered at once each have their own; the thread keeps two.
        let mut encoders: Vec<_> = (0..3)
            .map(|_| StreamEncoder::new(Coding::Gzip, 5, Some(50_000)).unwrap())
            .collect();
        let bodies: Vec<Vec<u8>> = (0..3u8)
            .map(|i| page(50_000).iter().map(|b| b ^ (i * 32)).collect())
            .collect();
        let mut out = Vec::new();
        for (e, body) in encoders.iter_mut().zip(&bodies) {
            e.write(body, &mut out).unwrap();
        }
        assert_eq!(spare_inputs(), 0);
        for (e, body) in encoders.iter_mut().zip(&bodies) {
            let mut out = Vec::new();
            e.finish(&mut out).unwrap();
            assert_eq!(decode(Coding::Gzip, &out), *body);
        }
        assert_eq!(spare_inputs(), SPARE_INPUTS);
        // An encoder dropped while gathering gives its buffer back too.
        drop(encoders);
        let mut e = StreamEncoder::new(Coding::Gzip, 5, Some(50_000)).unwrap();
        e.write(&bodies[0], &mut out).unwrap();
        assert_eq!(spare_inputs(), SPARE_INPUTS - 1);
        drop(e);
        assert_eq!(spare_inputs(), SPARE_INPUTS);
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
