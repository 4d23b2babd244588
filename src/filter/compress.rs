//! The compression filter: a route with `compress` serves its handler through
//! [`serve_compressed`], which hands the handler a session that encodes bodies on
//! their way to the driver (gzip, brotli or zstd, chosen by `Accept-Encoding`).
//! The route's other filters ([`super::Filtered`]) run around it.
//! Whatever the handler gives goes out as a pushed body of unknown length:
//!
//! - a body the handler pushes (a proxied response, chunked, close-delimited
//!   or of known length) is encoded piece by piece as it is written, in
//!   bounded slices, the encoder flushed whenever the handler flushes (so a
//!   slow upstream's bytes are not held back);
//! - a body given whole (a `respond` body, a listing, a static file) is read
//!   and encoded once the handler returns, in slices of [`SLICE`] bytes with a
//!   yield to the worker's other connections between them; a file is read in
//!   such slices from the page cache, or off the event loop when cold.
//!
//! gzip of a body of known length up to [`GATHER_MAX`] bytes is the exception
//! that keeps the bound: the encoder gathers it and encodes it in one call when
//! it ends (a third of the CPU of a stream saved; `encoder.rs`), so such a body
//! given whole is encoded from where it lies, and a file from the page cache
//! is read in one piece straight into the encoder's buffer.
//!
//! So no response is ever held whole in memory past that bound, and a large
//! body cannot hold a worker for longer than one slice. Which responses, and
//! how their heads change, is `compress_rules.rs`; the encoders are
//! `encoder.rs`.

use std::fs::File;
use std::io;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use super::compress_rules::{edit_head, CompressSettings, Decision};
use super::encoder::{StreamEncoder, GATHER_MAX};
use super::HeadEdit;
use crate::file_io::residency::read_cached;
use crate::file_io::{read_up_to, FileIoPool};
use crate::handler::Handler;
use crate::http::{
    Body, BodyReadError, FileRegion, OwnedField, RequestView, ResponseHead, Served, Session,
    SessionExt,
};
use crate::worker::WorkerCtx;

/// Bytes of input encoded at a time: a slice of gzip at level 4 takes about
/// half a millisecond, the longest a compressed body holds its worker.
pub const SLICE: usize = 16 * 1024;

/// Serves a request through `handler`, its response compressed as `settings` say.
pub(super) async fn serve_compressed<'h>(
    handler: &'h dyn Handler,
    settings: &'h CompressSettings,
    session: &mut dyn Session<'h>,
) {
    let mut compressing = CompressingSession {
        inner: session,
        settings,
        state: State::Off,
    };
    match handler.serve(&mut compressing) {
        Served::Done => {}
        Served::Pending(answer) => answer.await,
    }
    compressing.complete().await;
}

/// An encoder and the output it made that the driver has not taken yet.
struct Encoding {
    encoder: StreamEncoder,
    out: Vec<u8>,
    /// Bytes of `out` the driver took.
    taken: usize,
    /// Input encoded since the task last yielded.
    since_yield: usize,
    /// Nothing was written since the encoder was last flushed.
    flushed: bool,
    /// The handler ended its pushed body, with these trailers.
    finished: Option<Vec<OwnedField>>,
}

enum State<'h> {
    /// This response is not encoded (or not given yet): calls pass through.
    Off,
    /// Encoding the body the handler pushes.
    Pushed(Box<Encoding>),
    /// Encoding a body the handler gave whole, once it returns.
    Given(Box<Encoding>, Body<'h>),
}

/// The session a compressed route's handler answers through.
struct CompressingSession<'s, 'h> {
    inner: &'s mut dyn Session<'h>,
    settings: &'h CompressSettings,
    state: State<'h>,
}

impl<'h> CompressingSession<'_, 'h> {
    /// Sends what encoding is left once the handler returned.
    async fn complete(&mut self) {
        match std::mem::replace(&mut self.state, State::Off) {
            State::Off => {}
            State::Pushed(mut e) => {
                // A pushed body the handler never ended stays unended: the
                // driver then ends the connection, as it would without us.
                if let Some(trailers) = e.finished.take() {
                    if self.drain(&mut e).await.is_ok() && self.end(&mut e).await.is_ok() {
                        let fields: Vec<(&str, &[u8])> =
                            trailers.iter().map(|f| (&*f.name, &*f.value)).collect();
                        self.inner.finish_body(&fields);
                    }
                }
            }
            State::Given(mut e, body) => {
                let pool: &'h FileIoPool = &self.inner.worker().config.file_io;
                let sent = match body {
                    Body::Bytes(b) => self.encode_given(&mut e, b).await,
                    Body::Owned(b) => self.encode_given(&mut e, &b).await,
                    Body::File(region) => self.encode_file(&mut e, &region, pool).await,
                    Body::Stream(mut s) => {
                        let r = self.encode_stream(&mut e, &mut *s).await;
                        if r.is_ok() && self.end(&mut e).await.is_ok() {
                            let fields: Vec<(&str, &[u8])> =
                                s.trailers().iter().map(|f| (&*f.name, &*f.value)).collect();
                            self.inner.finish_body(&fields);
                        }
                        return;
                    }
                    _ => Ok(false),
                };
                let ended = match sent {
                    Ok(true) => true,
                    Ok(false) => self.end(&mut e).await.is_ok(),
                    Err(_) => false,
                };
                if ended {
                    self.inner.finish_body(&[]);
                }
            }
        }
    }

    /// Gives the driver all the output made so far.
    async fn drain(&mut self, e: &mut Encoding) -> io::Result<()> {
        if e.taken < e.out.len() {
            self.inner.write_body(&e.out[e.taken..]).await?;
        }
        e.out.clear();
        e.taken = 0;
        Ok(())
    }

    /// Ends the encoded stream and gives the driver its last bytes.
    async fn end(&mut self, e: &mut Encoding) -> io::Result<()> {
        e.encoder.finish(&mut e.out)?;
        self.drain(e).await
    }

    /// Encodes one slice and hands its output on; yields before the next.
    async fn encode_slice(&mut self, e: &mut Encoding, slice: &[u8], more: bool) -> io::Result<()> {
        e.encoder.write(slice, &mut e.out)?;
        self.drain(e).await?;
        if more {
            tokio::task::yield_now().await;
        }
        Ok(())
    }

    /// A body given whole: encoded from where it lies when the encoder
    /// gathers (then the stream is ended here, and this says `true`), else
    /// in slices as [`encode_all`](Self::encode_all).
    async fn encode_given(&mut self, e: &mut Encoding, data: &[u8]) -> io::Result<bool> {
        if e.encoder.gathers() {
            e.encoder.finish_with(data, &mut e.out)?;
            self.drain(e).await?;
            return Ok(true);
        }
        self.encode_all(e, data).await?;
        Ok(false)
    }

    async fn encode_all(&mut self, e: &mut Encoding, data: &[u8]) -> io::Result<()> {
        // Gathered input is only copied: no slices, nothing to yield for.
        let slice = if e.encoder.gathers() {
            data.len()
        } else {
            SLICE
        };
        let mut slices = data.chunks(slice.max(1)).peekable();
        while let Some(slice) = slices.next() {
            self.encode_slice(e, slice, slices.peek().is_some()).await?;
        }
        Ok(())
    }

    /// A file region: from memory when the open-file cache holds it, else
    /// read in slices, from the page cache on the loop or off it when cold
    /// (a gathered body from the page cache is read straight into the
    /// encoder's buffer). `true` when the stream was ended here.
    async fn encode_file(
        &mut self,
        e: &mut Encoding,
        region: &FileRegion,
        pool: &FileIoPool,
    ) -> io::Result<bool> {
        if let Some(bytes) = region.content.as_deref() {
            let start = usize::try_from(region.offset).unwrap_or(usize::MAX);
            let part = usize::try_from(region.len)
                .ok()
                .and_then(|len| bytes.get(start..start.checked_add(len)?));
            if let Some(part) = part {
                return self.encode_given(e, part).await;
            }
        }
        let end = region.offset + region.len;
        let mut pos = region.offset;
        while pos < end {
            let Some(space) = e.encoder.gather_space() else {
                break;
            };
            let want = space.len().min((end - pos) as usize);
            let n = match read_cached(&region.file, &mut space[..want], pos) {
                Some(r) => r?,
                // Cold: read off the loop below.
                None => break,
            };
            if n == 0 {
                return Err(shrank());
            }
            e.encoder.gathered(n);
            pos += n as u64;
        }
        if pos == end {
            return Ok(false);
        }
        let read_size = if e.encoder.gathers() {
            GATHER_MAX
        } else {
            SLICE
        };
        let mut buf = vec![0u8; read_size.min((end - pos) as usize)];
        let mut shared: Option<Arc<File>> = None;
        while pos < end {
            let want = (end - pos).min(read_size as u64) as usize;
            let n = match read_cached(&region.file, &mut buf[..want], pos) {
                Some(r) => r?,
                None => {
                    let file = match &shared {
                        Some(f) => f.clone(),
                        None => shared.insert(Arc::new(region.file.try_clone()?)).clone(),
                    };
                    let taken = std::mem::take(&mut buf);
                    let (back, read) = pool
                        .run(move || read_up_to(&file, taken, pos, want))
                        .await
                        .map_err(|e| io::Error::new(io::ErrorKind::TimedOut, e))?;
                    buf = back;
                    read?
                }
            };
            if n == 0 {
                return Err(shrank());
            }
            pos += n as u64;
            self.encode_slice(e, &buf[..n], pos < end).await?;
        }
        Ok(false)
    }

    async fn encode_stream(
        &mut self,
        e: &mut Encoding,
        stream: &mut dyn crate::http::BodyStream,
    ) -> io::Result<()> {
        let mut piece = Vec::new();
        loop {
            piece.clear();
            let more = std::future::poll_fn(|cx| stream.poll_chunk(cx, &mut piece)).await?;
            self.encode_all(e, &piece).await?;
            if !more {
                return Ok(());
            }
        }
    }

    /// The head as the handler gave it, edited for `decision`, to the driver.
    fn send_edited(&mut self, head: &ResponseHead<'_>, decision: Decision, body: Body<'h>) {
        let mut edit = HeadEdit::from_head(head);
        edit_head(&mut edit, decision);
        edit.send(self.inner, body);
    }
}

fn shrank() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "file shrank while being compressed",
    )
}

/// Gives the driver the output it has not taken yet, as far as it takes it.
fn poll_hand_over(
    inner: &mut dyn Session<'_>,
    cx: &mut Context<'_>,
    e: &mut Encoding,
) -> Poll<io::Result<()>> {
    while e.taken < e.out.len() {
        let n = ready!(inner.poll_write_body(cx, &e.out[e.taken..]))?;
        e.taken += n;
    }
    e.out.clear();
    e.taken = 0;
    Poll::Ready(Ok(()))
}

/// Whether a body of this kind can be encoded.
fn encodable(body: &Body<'_>) -> bool {
    match body {
        Body::Bytes(_) | Body::Owned(_) | Body::File(_) | Body::Stream(_) | Body::Push(_) => {
            !body.is_empty()
        }
        Body::Empty | Body::Parts(_) | Body::Tunnel(_) => false,
    }
}

impl<'h> Session<'h> for CompressingSession<'_, 'h> {
    fn request(&self) -> RequestView<'_> {
        self.inner.request()
    }

    fn worker(&self) -> &'h WorkerCtx {
        self.inner.worker()
    }

    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, BodyReadError>> {
        self.inner.poll_body(cx)
    }

    fn body_chunk(&self) -> &[u8] {
        self.inner.body_chunk()
    }

    fn consume_body(&mut self, n: usize) {
        self.inner.consume_body(n)
    }

    fn request_trailers(&self) -> Vec<(&str, &[u8])> {
        self.inner.request_trailers()
    }

    fn send_response(&mut self, head: &ResponseHead<'_>, body: Body<'h>) {
        if self.inner.responded() {
            return;
        }
        let len = body.len();
        let decision = {
            let req = self.inner.request();
            let mut d = self.settings.decide(&req, head, len);
            if d.coding.is_some() && !encodable(&body) {
                d.coding = None;
                d.weak_etag = false;
            }
            d
        };
        let Some(coding) = decision.coding else {
            if decision.vary || decision.weak_etag {
                return self.send_edited(head, decision, body);
            }
            return self.inner.send_response(head, body);
        };
        let is_head = self.inner.request().method() == crate::http1::parse::Method::Head;
        let encoder = match StreamEncoder::new(coding, self.settings.level(coding), len) {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!(error = %e, "no encoder: the response goes out as it is");
                return self.inner.send_response(head, body);
            }
        };
        self.send_edited(head, decision, Body::Push(None));
        if is_head {
            // The head a GET would get, and no body.
            self.inner.finish_body(&[]);
            return;
        }
        let encoding = Box::new(Encoding {
            encoder,
            out: Vec::new(),
            taken: 0,
            since_yield: 0,
            flushed: true,
            finished: None,
        });
        self.state = match body {
            Body::Push(_) => State::Pushed(encoding),
            given => State::Given(encoding, given),
        };
    }

    fn responded(&self) -> bool {
        self.inner.responded()
    }

    fn send_interim(&mut self, status: u16, fields: &[(&str, &[u8])]) {
        // An interim head has no body to encode: it passes as it is.
        self.inner.send_interim(status, fields)
    }

    fn record(&self) -> &crate::http::RequestRecord {
        self.inner.record()
    }

    fn record_mut(&mut self) -> &mut crate::http::RequestRecord {
        self.inner.record_mut()
    }

    fn poll_write_body(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let State::Pushed(e) = &mut self.state else {
            return self.inner.poll_write_body(cx, data);
        };
        ready!(poll_hand_over(&mut *self.inner, cx, e))?;
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if e.since_yield >= 4 * SLICE {
            // A fast source: let the worker's other connections run.
            e.since_yield = 0;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let take = data.len().min(SLICE);
        e.encoder.write(&data[..take], &mut e.out)?;
        e.since_yield += take;
        e.flushed = false;
        Poll::Ready(Ok(take))
    }

    fn poll_write_body_gathered(
        &mut self,
        cx: &mut Context<'_>,
        pieces: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if !matches!(self.state, State::Pushed(_)) {
            // Not compressed: the pieces reach the driver as they are.
            return self.inner.poll_write_body_gathered(cx, pieces);
        }
        match pieces.iter().find(|p| !p.is_empty()) {
            Some(first) => self.poll_write_body(cx, first),
            None => Poll::Ready(Ok(0)),
        }
    }

    fn poll_flush_body(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let State::Pushed(e) = &mut self.state {
            loop {
                ready!(poll_hand_over(&mut *self.inner, cx, e))?;
                if e.flushed {
                    break;
                }
                e.encoder.flush(&mut e.out)?;
                e.flushed = true;
            }
            e.since_yield = 0;
        }
        self.inner.poll_flush_body(cx)
    }

    fn finish_body(&mut self, trailers: &[(&str, &[u8])]) {
        match &mut self.state {
            State::Pushed(e) => {
                if e.finished.is_none() {
                    e.finished = Some(
                        trailers
                            .iter()
                            .map(|(n, v)| OwnedField::new(n, v))
                            .collect(),
                    );
                }
            }
            _ => self.inner.finish_body(trailers),
        }
    }

    fn note_upstream(&mut self, addr: std::net::SocketAddr, elapsed: std::time::Duration) {
        self.inner.note_upstream(addr, elapsed)
    }

    fn note_cache(&mut self, outcome: &'static str) {
        self.inner.note_cache(outcome)
    }
}
