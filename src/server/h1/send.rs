//! Answers as HTTP/1 bytes: the head with the framing the body calls for, small
//! bodies copied behind it (pipelined answers leave in one write), large ones
//! sent after it by sendfile, in bounded chunks, or piece by piece from a
//! stream; over plain TCP a large body in memory leaves with its head in one
//! gathered write, from where it is.

use std::io::IoSlice;
use std::task::Poll;

use tracing::debug;

use super::push::DIRECT_WRITE_MIN;
use super::{Answered, Downstream, Exit, Http1Conn, WRITE_HIGH_WATER};
use crate::deadline::io_within;
use crate::file_io::residency::read_cached;
use crate::http::status::has_no_body;
use crate::http::{Body, BodyPart, BodyStream, FileRegion, ResponseHead};
use crate::http1::parse::{Method, Version};
use crate::http1::write::{self, BodyFraming, ConnectionHeader};
use crate::server::file_region::{send_file_region, Pacing};
use crate::server::transport::FILE_CHUNK;

/// Files up to this size are copied into the output buffer (one write with the head,
/// and pipelined responses coalesce); larger ones go by sendfile or bounded chunks.
const INLINE_FILE_MAX: u64 = 64 * 1024;
/// Bodies in memory up to this size are copied into the output buffer where
/// the transport cannot gather writes (TLS); larger ones are written from
/// where they are in bounded chunks, so clients that do not read cannot each
/// pin a copy.
const INLINE_BODY_MAX: usize = 64 * 1024;

impl<'a, D: Downstream> Http1Conn<'a, D> {
    /// Encodes the head of the answer and whatever of its body fits in the
    /// output buffer; keeps the rest in `pending`. Only the first answer counts.
    pub(super) fn encode_response(&mut self, head: &ResponseHead<'_>, body: Body<'a>) {
        if self.answer.is_some() {
            return;
        }
        let keep_alive_allowed = self.keep_alive_allowed() && self.record.body_error.is_none();
        let b = self.bufs.as_mut().expect("buffers held while answering");
        let (version, is_head) = (b.head.version, b.head.method == Method::Head);
        let status = head.status;
        let tunnel = matches!(body, Body::Tunnel(_));
        let bodiless = has_no_body(status);
        let length = if bodiless { None } else { body.len() };
        let (framing, close_delimited) = match length {
            _ if bodiless => (BodyFraming::None, false),
            Some(n) => (BodyFraming::Length(n), false),
            None if version == Version::Http11 => (BodyFraming::Chunked, false),
            None => (BodyFraming::None, true),
        };
        // A request whose body was not read whole leaves the connection's input
        // in doubt: answer and close.
        let keep_alive = keep_alive_allowed && !close_delimited && !tunnel && self.body_done();
        let connection = if tunnel {
            ConnectionHeader::Upgrade
        } else {
            ConnectionHeader::choose(keep_alive, version)
        };
        let b = self.bufs.as_mut().expect("buffers held while answering");
        let out = &mut b.write;
        let mut clock_date = self.ctx.date.borrow_mut();
        let date = match head.date {
            Some(kept) => kept,
            None => clock_date.get_at(self.ctx.clock.now()),
        };
        // A fixed answer's head was encoded at load, its configured lines
        // included: one copy around the date.
        let prepared = head
            .configured
            .and_then(|block| block.http1_head())
            .filter(|p| head.fields.is_empty() && p.fits(status, framing, connection));
        if let Some(prepared) = prepared {
            let body_len = match body {
                Body::Bytes(bytes) if !is_head && bytes.len() < DIRECT_WRITE_MIN => bytes.len(),
                _ => 0,
            };
            prepared.write(out, date, head.field_lines.len() + 2 + body_len);
        } else {
            write::write_head_start(out, status, date, framing, connection);
            for &(name, value) in head.fields {
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(value);
                out.extend_from_slice(b"\r\n");
            }
            if let Some(block) = head.configured {
                out.extend_from_slice(block.http1_lines());
            }
        }
        drop(clock_date);
        // Already `name: value\r\n` lines: copied as they are.
        out.extend_from_slice(head.field_lines);
        if let Some(alt_svc) = &self.alt_svc {
            out.extend_from_slice(b"Alt-Svc: ");
            out.extend_from_slice(alt_svc);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        self.record.status = status;
        self.answer = Some(Answered {
            keep_alive,
            chunked: framing == BodyFraming::Chunked,
            length,
        });
        if tunnel {
            self.pending = Some(body);
            return;
        }
        if let Body::Push(_) = body {
            self.push.start(is_head || bodiless);
            return;
        }
        if is_head || bodiless {
            return;
        }
        // Bodies in memory are copied behind the head when small; larger ones
        // leave with it in one gathered write where the transport has them.
        let inline_max = if D::GATHERED_WRITES {
            DIRECT_WRITE_MIN - 1
        } else {
            INLINE_BODY_MAX
        };
        match body {
            Body::Bytes(bytes) if bytes.len() <= inline_max => out.extend_from_slice(bytes),
            Body::Empty | Body::Tunnel(_) | Body::Push(_) => {}
            Body::Owned(bytes) if bytes.len() <= inline_max => out.extend_from_slice(&bytes),
            Body::File(region) => {
                if let Some(bytes) = region.content.as_deref() {
                    let start = usize::try_from(region.offset).unwrap_or(usize::MAX);
                    let part = start
                        .checked_add(region.len as usize)
                        .and_then(|end| bytes.get(start..end));
                    if let Some(part) = part {
                        out.extend_from_slice(part);
                        return;
                    }
                }
                if region.len == 0 {
                    return;
                }
                if region.len <= INLINE_FILE_MAX {
                    let start = out.len();
                    out.resize(start + region.len as usize, 0);
                    let read = read_cached(&region.file, &mut out[start..], region.offset);
                    if matches!(read, Some(Ok(n)) if n as u64 == region.len) {
                        return;
                    }
                    // Not all in the page cache (read off the loop), or shrunk
                    // since it was opened (what is left is sent, which breaks
                    // the promised length and so closes the connection).
                    out.truncate(start);
                }
                self.pending = Some(Body::File(region));
            }
            Body::Parts(parts)
                if length.is_some_and(|n| n <= INLINE_BODY_MAX as u64)
                    && parts.iter().all(|p| in_memory(p).is_some()) =>
            {
                for part in &parts {
                    out.extend_from_slice(in_memory(part).unwrap_or_default());
                }
            }
            other => self.pending = Some(other),
        }
    }

    /// Whether the request body (if any) has been read whole.
    fn body_done(&self) -> bool {
        self.body.is_done()
    }

    /// Sends the part of the body that did not fit behind the head.
    pub(super) async fn send_body(
        &mut self,
        body: Body<'a>,
        answered: Answered,
    ) -> Result<(), Exit> {
        match body {
            Body::File(region) => self.send_file(&region, "file send failed").await,
            Body::Bytes(bytes) => self.send_bytes(bytes).await,
            Body::Owned(bytes) => self.send_bytes(&bytes).await,
            Body::Parts(parts) => self.send_parts(parts).await,
            Body::Stream(stream) => self.send_stream(stream, answered).await,
            Body::Tunnel(tunnel) => {
                if self.flush().await.is_err() {
                    return Err(Exit::Broken);
                }
                let b = self.bufs.as_mut().expect("buffers held while answering");
                let early = b.read.get(self.rpos..).unwrap_or(&[]).to_vec();
                self.rpos = b.read.len();
                tunnel.run(self.io.io_mut(), early).await;
                Err(Exit::Done)
            }
            Body::Empty | Body::Push(_) => Ok(()),
        }
    }

    /// Sends parts in order: bytes and in-memory regions through the output
    /// buffer (flushed at the high-water mark), other file regions as file
    /// bodies are sent (inline when cached, else read off the loop), after
    /// flushing what precedes them.
    async fn send_parts(&mut self, parts: Vec<BodyPart>) -> Result<(), Exit> {
        for part in &parts {
            if let Some(bytes) = in_memory(part) {
                let b = self.bufs.as_mut().expect("buffers held while answering");
                b.write.extend_from_slice(bytes);
                if b.write.len() >= WRITE_HIGH_WATER && self.flush().await.is_err() {
                    return Err(Exit::Broken);
                }
                continue;
            }
            if let BodyPart::File(region) = part {
                self.send_file(region, "file part send failed").await?;
            }
        }
        Ok(())
    }

    /// Sends a file region after flushing what precedes it (inline when the
    /// page cache holds it, else read off the loop), under the write timeout;
    /// `failure` is the log line when it cannot be sent.
    async fn send_file(&mut self, region: &FileRegion, failure: &str) -> Result<(), Exit> {
        if self.flush().await.is_err() {
            return Err(Exit::Broken);
        }
        let r = send_file_region(
            &mut self.io,
            &self.ctx.config.file_io,
            Pacing {
                pacer: &self.ctx.downloads,
                stats: &self.ctx.stats,
            },
            &region.file,
            region.offset,
            region.len,
            self.ctx.config.http.write_timeout,
        )
        .await;
        if let Err(e) = r {
            debug!(peer = %self.peer, error = %e, "{failure}");
            return Err(Exit::Broken);
        }
        self.ctx.stats.bytes_out.add(region.len);
        self.sent += region.len;
        Ok(())
    }

    /// Writes bytes after the head, chunk by chunk, each under the write
    /// timeout: a stall is what ends the connection, not a slow but steady
    /// reader. Where the transport gathers writes, the head and whatever
    /// else is pending leave with the first chunk, none of them copied.
    async fn send_bytes(&mut self, bytes: &[u8]) -> Result<(), Exit> {
        if D::GATHERED_WRITES {
            self.push.stalled_since = None;
            let mut rest = bytes;
            while !rest.is_empty() {
                let piece = [IoSlice::new(&rest[..rest.len().min(FILE_CHUNK as usize)])];
                match std::future::poll_fn(|cx| self.poll_write_behind_pending(cx, &piece)).await {
                    Ok(n) => rest = &rest[n..],
                    Err(e) => {
                        debug!(peer = %self.peer, error = %e, "body send failed");
                        return Err(Exit::Broken);
                    }
                }
            }
            return Ok(());
        }
        if self.flush().await.is_err() {
            return Err(Exit::Broken);
        }
        let write_timeout = self.ctx.config.http.write_timeout;
        for chunk in bytes.chunks(FILE_CHUNK as usize) {
            if let Err(e) =
                io_within(write_timeout, "write timeout", self.io.write_all(chunk)).await
            {
                debug!(peer = %self.peer, error = %e, "body send failed");
                return Err(Exit::Broken);
            }
            self.ctx.stats.bytes_out.add(chunk.len() as u64);
            self.sent += chunk.len() as u64;
        }
        Ok(())
    }

    /// Pulls a stream's pieces and frames them; output is flushed whenever the
    /// stream has to wait, so a slow producer's bytes are not held back.
    async fn send_stream(
        &mut self,
        mut stream: Box<dyn BodyStream + 'a>,
        answered: Answered,
    ) -> Result<(), Exit> {
        let mut piece = Vec::new();
        let mut total = 0u64;
        loop {
            piece.clear();
            let polled =
                std::future::poll_fn(|cx| Poll::Ready(stream.poll_chunk(cx, &mut piece))).await;
            let more = match polled {
                Poll::Ready(r) => r,
                Poll::Pending => {
                    if self.flush().await.is_err() {
                        return Err(Exit::Broken);
                    }
                    std::future::poll_fn(|cx| stream.poll_chunk(cx, &mut piece)).await
                }
            };
            let more = match more {
                Ok(more) => more,
                Err(e) => {
                    debug!(peer = %self.peer, error = %e, "response body stream failed");
                    return Err(Exit::Broken);
                }
            };
            total += piece.len() as u64;
            let b = self.bufs.as_mut().expect("buffers held while answering");
            if answered.chunked {
                write::write_chunk(&mut b.write, &piece);
            } else {
                b.write.extend_from_slice(&piece);
            }
            if b.write.len() >= WRITE_HIGH_WATER && self.flush().await.is_err() {
                return Err(Exit::Broken);
            }
            if !more {
                break;
            }
        }
        let b = self.bufs.as_mut().expect("buffers held while answering");
        if answered.chunked {
            b.write.extend_from_slice(b"0\r\n");
            for t in stream.trailers() {
                b.write.extend_from_slice(t.name.as_bytes());
                b.write.extend_from_slice(b": ");
                b.write.extend_from_slice(&t.value);
                b.write.extend_from_slice(b"\r\n");
            }
            b.write.extend_from_slice(b"\r\n");
        } else if answered.length.is_some_and(|n| n != total) {
            debug!(peer = %self.peer, "response body stream broke its length");
            return Err(Exit::Broken);
        }
        Ok(())
    }
}

/// The bytes of a part when they are already in memory: its own bytes, or a
/// region of a file the open-file cache holds whole.
fn in_memory(part: &BodyPart) -> Option<&[u8]> {
    match part {
        BodyPart::Owned(bytes) => Some(bytes),
        BodyPart::File(region) => cached_region(region),
    }
}

/// `content[offset..offset + len]` of a region whose file is held in memory.
fn cached_region(region: &FileRegion) -> Option<&[u8]> {
    let bytes = region.content.as_deref()?;
    let start = usize::try_from(region.offset).ok()?;
    let end = start.checked_add(usize::try_from(region.len).ok()?)?;
    bytes.get(start..end)
}
