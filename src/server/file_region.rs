//! Sending a region of a file to a client without ever waiting on the disk
//! from the event loop.
//!
//! The region goes in chunks of [`FILE_CHUNK`]. A chunk whose pages are in the
//! page cache is sent inline: by `sendfile` on plain TCP, or read with
//! `RWF_NOWAIT` into the buffer TLS encrypts from. On plain TCP a cold chunk is
//! read once on the blocking pool into the pool thread's own buffer, which
//! brings its pages into the cache, and then goes out by `sendfile` as a hot
//! one (so cold downloads cost no buffer per connection). Where the file system
//! cannot say what is cached (FUSE, some network mounts), a pool thread sends
//! up to [`POOL_SEND_MAX`] itself, by `sendfile` on a second descriptor of the
//! socket, as far as the socket takes it without waiting: the disk wait falls
//! on that thread and the bytes are never copied. Under TLS a chunk not known
//! to be cached is read on the pool into the connection's buffer and written
//! from it, and the next chunk's read is under way while it is written. Either
//! way the worker serves its other connections meanwhile.
//!
//! A slow disk's latency is paid per read, not per byte, when reads run in
//! parallel: once a download has found a chunk not cached, a pool job keeps
//! the reads of a window ahead of the send in flight
//! ([`crate::file_io::readahead`], up to 4 MiB of page cache ahead), so a
//! download runs at the disk's throughput rather than at one read per disk
//! latency. After every chunk the task yields, so a large download cannot
//! starve the small replies of the same worker, and while the worker answers
//! other requests its downloads' pool sends take turns
//! ([`super::download_pacing`]): the pool threads' sends cost the worker's
//! core too, which the yield alone does not limit. A file that shrinks, a read
//! error or a pool timeout ends the send with an error, which closes the
//! connection: the promised length can no longer be kept.
//!
//! Memory per connection stays bounded: plain TCP holds no buffer for the
//! file at all (two duplicated descriptors and the read-ahead's state, about
//! 100 bytes), TLS two chunk buffers (512 KiB) while a cold file is sent.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use super::download_pacing::DownloadPacer;
use super::transport::{Downstream, FILE_CHUNK};
use crate::deadline::io_within;
use crate::file_io::readahead::ReadAhead;
use crate::file_io::residency::{looks_resident, probe, read_cached, Residency};
use crate::file_io::{read_up_to, FileIoError, FileIoPool};
use crate::observe::metrics::WorkerStats;

/// Most bytes one send from a pool thread may take: the worker spends nothing
/// on the bytes themselves, so fewer, larger jobs mean fewer hops between the
/// threads, each a wait for the scheduler on a busy core.
const POOL_SEND_MAX: u64 = 4 * FILE_CHUNK;

/// What paces a worker's downloads: its pacer, and its request counters, which
/// say whether it is answering anything else.
#[derive(Clone, Copy)]
pub(crate) struct Pacing<'a> {
    pub pacer: &'a DownloadPacer,
    pub stats: &'a WorkerStats,
}

/// Sends `len` bytes of `file` from `offset` over `io`.
pub(crate) async fn send_file_region<D: Downstream>(
    io: &mut D,
    pool: &FileIoPool,
    pacing: Pacing<'_>,
    file: &File,
    offset: u64,
    len: u64,
    write_timeout: Duration,
) -> io::Result<()> {
    let end = offset + len;
    let mut pos = offset;
    let mut buf: Vec<u8> = Vec::new();
    // Under TLS off the loop: the buffer the next chunk is read into while
    // `buf` is written, and that read once done (where, buffer, result).
    let mut spare: Vec<u8> = Vec::new();
    let mut prefetched: Option<(u64, Vec<u8>, io::Result<usize>)> = None;
    let mut off_loop = OffLoopFile::default();
    // Once the file system has said it cannot tell what it caches, it is not
    // asked again: on FUSE the question costs a round trip to the daemon.
    // Under TLS, once a chunk was not cached the rest is read off the loop.
    let mut cannot_tell = false;
    while pos < end {
        let want = (end - pos).min(FILE_CHUNK);
        if D::ZERO_COPY_FILES {
            let mut hot = if cannot_tell {
                Residency::Unknown
            } else {
                probe(file, pos, want)
            };
            cannot_tell = hot == Residency::Unknown;
            if hot == Residency::Cold {
                // Read once off the loop, into the pool thread's own buffer, so
                // the pages are cached and go out by sendfile after all.
                let f = off_loop.file(file)?;
                off_loop.read_ahead(pool, pos + want, end);
                let read = pool
                    .run(move || warm_chunk(&f, pos, want as usize))
                    .await
                    .map_err(timed_out)??;
                if read > 0 && looks_resident(file, pos, read as u64) {
                    hot = Residency::Hot;
                }
            }
            if hot == Residency::Hot {
                // A download that found cold pages before keeps its window
                // ahead while it sends the pages read ahead.
                off_loop.read_ahead(pool, pos + want, end);
                io.send_file(file, pos, want, write_timeout).await?;
                pos += want;
                tokio::task::yield_now().await;
                continue;
            }
            if let Some(sock) = off_loop.socket(io) {
                let f = off_loop.file(file)?;
                let want = (end - pos).min(POOL_SEND_MAX);
                off_loop.read_ahead(pool, pos, end);
                let turn = pacing
                    .pacer
                    .turn(
                        want,
                        pacing.stats.requests_total(),
                        &pacing.stats.download_turns_waited,
                    )
                    .await;
                let sent = pool.run(move || send_chunk(&sock, &f, pos, want)).await;
                // The turn ends before the wait for the client below: a slow
                // reader must not hold the other downloads back.
                turn.end(pacing.stats.requests_total());
                let sent = match sent {
                    Ok(sent) => sent,
                    Err(e) => {
                        off_loop.abandon_socket();
                        return Err(timed_out(e));
                    }
                };
                match sent {
                    Ok(0) => return Err(shrank()),
                    Ok(n) => pos += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                if pos < end {
                    io.writable_after_pool_send(write_timeout).await?;
                }
                tokio::task::yield_now().await;
                continue;
            }
        }
        let want = want as usize;
        let n = match prefetched.take() {
            Some((at, next_buf, read)) if at == pos => {
                spare = std::mem::replace(&mut buf, next_buf);
                read?
            }
            _ => {
                if buf.len() < want {
                    buf.resize(want, 0);
                }
                let cached = if cannot_tell {
                    None
                } else {
                    read_cached(file, &mut buf[..want], pos)
                };
                match cached {
                    Some(r) => r?,
                    None => {
                        cannot_tell = true;
                        let f = off_loop.file(file)?;
                        off_loop.read_ahead(pool, pos + want as u64, end);
                        let taken = std::mem::take(&mut buf);
                        let (back, read) = pool
                            .run(move || read_up_to(&f, taken, pos, want))
                            .await
                            .map_err(timed_out)?;
                        buf = back;
                        read?
                    }
                }
            }
        };
        if n == 0 {
            return Err(shrank());
        }
        let next = pos + n as u64;
        let write = io_within(write_timeout, "write timeout", io.write_all(&buf[..n]));
        if cannot_tell && next < end {
            // Off the loop, the next chunk's read is under way while this one
            // is written.
            let f = off_loop.file(file)?;
            off_loop.read_ahead(pool, next, end);
            let next_want = (end - next).min(FILE_CHUNK) as usize;
            let mut taken = std::mem::take(&mut spare);
            if taken.len() < next_want {
                taken.resize(next_want, 0);
            }
            let read = async {
                pool.run(move || read_up_to(&f, taken, next, next_want))
                    .await
                    .map_err(timed_out)
            };
            let ((), (next_buf, read)) = tokio::try_join!(write, read)?;
            prefetched = Some((next, next_buf, read));
        } else {
            write.await?;
        }
        pos = next;
        tokio::task::yield_now().await;
    }
    Ok(())
}

fn timed_out(e: FileIoError) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, e)
}

fn shrank() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank while being sent")
}

/// What a send needs once its file has left the page cache: descriptors the
/// pool's threads can hold (duplicated once, at the first such chunk) and the
/// download's read-ahead.
#[derive(Default)]
struct OffLoopFile {
    file: Option<Arc<File>>,
    /// The socket for sends from the pool; `Some(None)` once the transport
    /// turned out not to offer one.
    socket: Option<Option<Arc<OwnedFd>>>,
    ahead: Option<ReadAhead>,
}

impl OffLoopFile {
    fn file(&mut self, file: &File) -> io::Result<Arc<File>> {
        if let Some(f) = &self.file {
            return Ok(f.clone());
        }
        Ok(self.file.insert(Arc::new(file.try_clone()?)).clone())
    }

    fn socket<D: Downstream>(&mut self, io: &D) -> Option<Arc<OwnedFd>> {
        self.socket
            .get_or_insert_with(|| io.socket_for_pool().ok().map(Arc::new))
            .clone()
    }

    /// Ends the connection for the client when a pool thread still holds the
    /// socket (its send hung past the timeout): closing the loop's descriptor
    /// alone would leave the client waiting, and the thread, should it wake,
    /// must not write into a response that has ended.
    fn abandon_socket(&self) {
        if let Some(Some(sock)) = &self.socket {
            let _ = rustix::net::shutdown(&**sock, rustix::net::Shutdown::Both);
        }
    }

    /// Keeps the reads of the window ahead of `from` in flight once the file
    /// was found not cached (and duplicated); the first such call starts the
    /// download's read-ahead, and before it this costs one branch.
    fn read_ahead(&mut self, pool: &FileIoPool, from: u64, end: u64) {
        let Some(file) = &self.file else {
            return;
        };
        self.ahead
            .get_or_insert_with(|| ReadAhead::new(file.clone(), from))
            .advance(pool, from, end);
    }
}

/// On a pool thread: sends up to `want` bytes of `file` at `pos` to the
/// non-blocking `sock`, waiting for the disk but never for the client; how
/// many bytes went (`WouldBlock` when the socket took none, `Ok(0)` at end of
/// file).
fn send_chunk(sock: &OwnedFd, file: &File, pos: u64, want: u64) -> io::Result<u64> {
    let mut at = pos;
    let end = pos + want;
    while at < end {
        let count = (end - at) as usize;
        match rustix::fs::sendfile(sock, file, Some(&mut at), count) {
            Ok(0) => break,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) if at > pos => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(at - pos)
}

thread_local! {
    /// A pool thread's `/dev/null`: pages sent there by `sendfile` are read
    /// into the page cache and never copied.
    static DEV_NULL: Option<OwnedFd> = rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok();
    /// A pool thread's buffer for reads that only bring pages into the cache,
    /// where `/dev/null` cannot take them.
    static WARM_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// On a pool thread: brings up to `want` bytes at `pos` into the page cache,
/// by `sendfile` to `/dev/null` or else by reading them into the thread's own
/// buffer; how many bytes there were.
fn warm_chunk(file: &File, pos: u64, want: usize) -> io::Result<usize> {
    let sunk = DEV_NULL.with(|null| {
        let null = null.as_ref()?;
        let mut at = pos;
        let end = pos + want as u64;
        while at < end {
            let count = (end - at) as usize;
            match rustix::fs::sendfile(null, file, Some(&mut at), count) {
                Ok(0) => break,
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(_) => return None,
            }
        }
        Some((at - pos) as usize)
    });
    if let Some(n) = sunk {
        return Ok(n);
    }
    WARM_BUFFER.with(|buf| {
        let mut buf = buf.borrow_mut();
        if buf.len() < want {
            buf.resize(want, 0);
        }
        let taken = std::mem::take(&mut *buf);
        let (back, read) = read_up_to(file, taken, pos, want);
        *buf = back;
        read
    })
}
