//! Sending a region of a file to a client without ever waiting on the disk
//! from the event loop.
//!
//! The region goes in chunks of [`FILE_CHUNK`]. A chunk whose pages are in the
//! page cache is sent inline: by `sendfile` on plain TCP, or read with
//! `RWF_NOWAIT` into the buffer TLS encrypts from. On plain TCP a cold chunk is
//! read once on the blocking pool into the pool thread's own buffer, which
//! brings its pages into the cache, and then goes out by `sendfile` as a hot
//! one (so cold downloads cost no buffer per connection); where the file
//! system cannot say what is cached (FUSE), and under TLS, a chunk not known
//! to be cached is read on the pool into the connection's buffer and written
//! from it. Either way the worker serves its other connections meanwhile. After every chunk the task yields, so a large
//! download cannot starve the small replies of the same worker. A file that
//! shrinks, a read error or a pool timeout ends the send with an error, which
//! closes the connection: the promised length can no longer be kept.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Duration;

use super::transport::{Downstream, FILE_CHUNK};
use crate::deadline::io_within;
use crate::file_io::residency::{looks_resident, probe, read_cached, Residency};
use crate::file_io::FileIoPool;

/// Sends `len` bytes of `file` from `offset` over `io`.
pub(crate) async fn send_file_region<D: Downstream>(
    io: &mut D,
    pool: &FileIoPool,
    file: &File,
    offset: u64,
    len: u64,
    write_timeout: Duration,
) -> io::Result<()> {
    let end = offset + len;
    let mut pos = offset;
    let mut buf: Vec<u8> = Vec::new();
    // A descriptor the pool's threads can hold, duplicated at the first cold chunk.
    let mut shared: Option<Arc<File>> = None;
    while pos < end {
        let want = (end - pos).min(FILE_CHUNK);
        if D::ZERO_COPY_FILES {
            let mut hot = probe(file, pos, want);
            if hot == Residency::Cold {
                // Read once off the loop, into the pool thread's own buffer, so
                // the pages are cached and go out by sendfile after all.
                let f = shared_file(&mut shared, file)?;
                let read = pool
                    .run(move || warm_chunk(&f, pos, want as usize))
                    .await
                    .map_err(|e| io::Error::new(io::ErrorKind::TimedOut, e))??;
                if read > 0 && looks_resident(file, pos, read as u64) {
                    hot = Residency::Hot;
                }
            }
            if hot == Residency::Hot {
                io.send_file(file, pos, want, write_timeout).await?;
                pos += want;
                tokio::task::yield_now().await;
                continue;
            }
        }
        let want = want as usize;
        if buf.len() < want {
            buf.resize(want, 0);
        }
        let n = match read_cached(file, &mut buf[..want], pos) {
            Some(r) => r?,
            None => {
                let f = shared_file(&mut shared, file)?;
                let taken = std::mem::take(&mut buf);
                let (back, read) = pool
                    .run(move || read_chunk(&f, taken, pos, want))
                    .await
                    .map_err(|e| io::Error::new(io::ErrorKind::TimedOut, e))?;
                buf = back;
                read?
            }
        };
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shrank while being sent",
            ));
        }
        io_within(write_timeout, "write timeout", io.write_all(&buf[..n])).await?;
        pos += n as u64;
        tokio::task::yield_now().await;
    }
    Ok(())
}

/// A descriptor of `file` the pool's threads can hold, duplicated once.
fn shared_file(shared: &mut Option<Arc<File>>, file: &File) -> io::Result<Arc<File>> {
    if let Some(f) = shared {
        return Ok(f.clone());
    }
    Ok(shared.insert(Arc::new(file.try_clone()?)).clone())
}

thread_local! {
    /// A pool thread's buffer for reads that only bring pages into the cache.
    static WARM_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// On a pool thread: reads up to `want` bytes at `pos` into the thread's own
/// buffer, for the page cache's sake; how many bytes there were.
fn warm_chunk(file: &File, pos: u64, want: usize) -> io::Result<usize> {
    WARM_BUFFER.with(|buf| {
        let mut buf = buf.borrow_mut();
        if buf.len() < want {
            buf.resize(want, 0);
        }
        let taken = std::mem::take(&mut *buf);
        let (back, read) = read_chunk(file, taken, pos, want);
        *buf = back;
        read
    })
}

/// On a pool thread: reads up to `want` bytes at `pos` into `buf`, stopping
/// early only at end of file; gives the buffer back either way.
fn read_chunk(
    file: &File,
    mut buf: Vec<u8>,
    pos: u64,
    want: usize,
) -> (Vec<u8>, io::Result<usize>) {
    let mut done = 0;
    while done < want {
        match file.read_at(&mut buf[done..want], pos + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (buf, Err(e)),
        }
    }
    (buf, Ok(done))
}
