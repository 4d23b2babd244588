//! Response bodies over a multiplexed stream (HTTP/2, HTTP/3): every piece
//! is sized to the room the stream has (the client's flow-control windows
//! and the connection's queued output), so a client that reads slowly holds
//! at most that much of the server's memory, and a file is read a bounded
//! chunk at a time only once the client can take it (from the page cache on
//! the loop, else on the file pool). Each wait for room is bounded by the
//! driver's write timeout. A driver says how its stream takes bytes through
//! [`StreamSink`]; the order of a body's pieces is decided here once.

use std::fs::File;
use std::future::poll_fn;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

use std::task::{Context, Poll};

use super::chunk_buffers::{self, CHUNK_MAX};
use super::stream_session::{PushedBody, StreamAnswer};
use crate::file_io::residency::read_cached;
use crate::http::{Body, BodyPart, BodyStream, FileRegion, Session};

/// Takes the next piece of a pushed body, as `Session::poll_write_body`.
pub(crate) fn poll_write_pushed<'a, S: StreamSink<'a>>(
    s: &mut S,
    cx: &mut Context<'_>,
    data: &[u8],
) -> Poll<io::Result<usize>> {
    let length = s.promised_length();
    let push = s.pushed();
    if !push.active || push.finished {
        return Poll::Ready(Err(io::Error::other("no pushed body is being sent")));
    }
    if data.is_empty() {
        return Poll::Ready(Ok(0));
    }
    if push.drop {
        push.written += data.len() as u64;
        return Poll::Ready(Ok(data.len()));
    }
    if length.is_some_and(|len| push.written + data.len() as u64 > len) {
        return Poll::Ready(Err(io::Error::other("pushed body longer than its length")));
    }
    let n = std::task::ready!(s.poll_send_capacity(cx, data.len()))?;
    s.send_data(&data[..n], false)?;
    s.pushed().written += n as u64;
    Poll::Ready(Ok(n))
}

/// Ends a pushed body with `trailers`, as `Session::finish_body`: one
/// shorter than its promised length is left unfinished.
pub(crate) fn finish_pushed<'a, S: StreamSink<'a>>(s: &mut S, trailers: &[(&str, &[u8])]) {
    let length = s.promised_length();
    let push = s.pushed();
    if !push.active || push.finished {
        return;
    }
    if push.drop {
        push.finished = true;
        return;
    }
    if length.is_some_and(|n| n != push.written) {
        return;
    }
    if s.end_body(trailers).is_ok() {
        s.pushed().finished = true;
    }
}

/// How a driver's stream takes the pieces of a response body.
pub(crate) trait StreamSink<'a>: Session<'a> {
    /// The progress of the stream's answer.
    fn answer(&self) -> &StreamAnswer;

    /// The progress of the stream's answer, to write.
    fn answer_mut(&mut self) -> &mut StreamAnswer;

    /// Takes the body `send_response` kept to send after the head.
    fn take_pending(&mut self) -> Option<Body<'a>>;

    /// The progress of a pushed body.
    fn pushed(&mut self) -> &mut PushedBody {
        &mut self.answer_mut().push
    }

    /// The body length promised in the head, when one was.
    fn promised_length(&self) -> Option<u64> {
        self.answer().length
    }

    /// Room to send up to `want` body bytes: `Ok(n)` with `0 < n <= want`;
    /// waits (bounded by the write timeout) while there is none.
    fn poll_send_capacity(&mut self, cx: &mut Context<'_>, want: usize) -> Poll<io::Result<usize>>;

    /// Queues `data` (within the capacity just granted).
    fn send_data(&mut self, data: &[u8], end: bool) -> io::Result<()>;

    /// Queues `data` (within the capacity just granted) without copying it.
    fn send_data_owned(&mut self, data: Bytes, end: bool) -> io::Result<()>;

    /// Ends the body, with trailers when there are any.
    fn end_body(&mut self, trailers: &[(&str, &[u8])]) -> io::Result<()>;
}

/// Sends `body` on `s`, then ends it; an error leaves the stream to be
/// reset. A tunnel is the driver's and ends the body here.
pub(crate) async fn send_body<'a, S: StreamSink<'a>>(s: &mut S, body: Body<'a>) -> io::Result<()> {
    s.send_body(body).await
}

/// The steps of [`send_body`], on any sink.
trait SendSteps<'a>: StreamSink<'a> {
    async fn send_body(&mut self, body: Body<'a>) -> io::Result<()> {
        match body {
            Body::Empty | Body::Push(_) | Body::Tunnel(_) => self.end_body(&[]),
            Body::Bytes(bytes) => self.send_slice(bytes, true).await,
            Body::Owned(bytes) => self.send_slice(&bytes, true).await,
            Body::File(region) => self.send_region(&region, true).await,
            Body::Parts(parts) => {
                let last = parts.len().saturating_sub(1);
                for (i, part) in parts.iter().enumerate() {
                    match part {
                        BodyPart::Owned(b) => self.send_slice(b, i == last).await?,
                        BodyPart::File(r) => self.send_region(r, i == last).await?,
                    }
                }
                if parts.is_empty() {
                    self.end_body(&[])?;
                }
                Ok(())
            }
            Body::Stream(stream) => self.send_stream(stream).await,
        }
    }

    /// Sends bytes, one granted piece at a time; when the room is there at
    /// once (a small answer), without waiting.
    async fn send_slice(&mut self, mut data: &[u8], end: bool) -> io::Result<()> {
        if data.is_empty() {
            return if end { self.end_body(&[]) } else { Ok(()) };
        }
        while !data.is_empty() {
            let n = poll_fn(|cx| self.poll_send_capacity(cx, data.len())).await?;
            let (piece, rest) = data.split_at(n);
            data = rest;
            self.send_data(piece, end && data.is_empty())?;
        }
        Ok(())
    }

    /// Sends a file region, reading each chunk only once the window has room.
    async fn send_region(&mut self, region: &FileRegion, end: bool) -> io::Result<()> {
        if let Some(bytes) = cached_region(region) {
            return self.send_slice(bytes, end).await;
        }
        if region.len == 0 {
            return if end { self.end_body(&[]) } else { Ok(()) };
        }
        let stop = region.offset + region.len;
        let mut pos = region.offset;
        let mut shared: Option<Arc<File>> = None;
        while pos < stop {
            let want = ((stop - pos) as usize).min(CHUNK_MAX);
            let n = poll_fn(|cx| self.poll_send_capacity(cx, want)).await?;
            // Each chunk is read into a buffer that the DATA frames then carry
            // to the socket (or to TLS) without a copy, and that comes back
            // for a later chunk once they are written.
            let mut buf = chunk_buffers::take(n);
            let read = match read_cached(&region.file, &mut buf[..n], pos) {
                Some(r) => r?,
                None => {
                    let f = match &shared {
                        Some(f) => f.clone(),
                        None => shared.insert(Arc::new(region.file.try_clone()?)).clone(),
                    };
                    let mut owned = std::mem::take(&mut buf);
                    let (back, r) = self
                        .worker()
                        .config
                        .file_io
                        .run(move || {
                            let r = f.read_at(&mut owned[..n], pos);
                            (owned, r)
                        })
                        .await
                        .map_err(|e| io::Error::new(io::ErrorKind::TimedOut, e.to_string()))?;
                    buf = back;
                    r?
                }
            };
            if read == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shrank while being sent",
                ));
            }
            pos += read as u64;
            self.send_data_owned(chunk_buffers::share(buf, read), end && pos == stop)?;
        }
        Ok(())
    }

    /// Pulls a stream's pieces and sends each, then its trailers.
    async fn send_stream(&mut self, mut stream: Box<dyn BodyStream + 'a>) -> io::Result<()> {
        let mut total = 0u64;
        let mut piece = Vec::new();
        loop {
            piece.clear();
            let more = poll_fn(|cx| stream.poll_chunk(cx, &mut piece)).await?;
            total += piece.len() as u64;
            if !piece.is_empty() {
                self.send_slice(&piece, false).await?;
            }
            if !more {
                break;
            }
        }
        if self.promised_length().is_some_and(|n| n != total) {
            return Err(io::Error::other("response body stream broke its length"));
        }
        let trailers: Vec<(&str, &[u8])> = stream
            .trailers()
            .iter()
            .map(|f| (&*f.name, &*f.value))
            .collect();
        self.end_body(&trailers)
    }
}

impl<'a, S: StreamSink<'a>> SendSteps<'a> for S {}

/// `content[offset..offset + len]` of a region whose file is held in memory.
fn cached_region(region: &FileRegion) -> Option<&[u8]> {
    let bytes = region.content.as_deref()?;
    let start = usize::try_from(region.offset).ok()?;
    let end = start.checked_add(usize::try_from(region.len).ok()?)?;
    bytes.get(start..end)
}
