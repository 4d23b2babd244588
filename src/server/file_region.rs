//! Sending a region of a file to a client without ever waiting on the disk
//! from the event loop.
//!
//! The region goes in chunks of [`FILE_CHUNK`]. A chunk whose pages are in the
//! page cache is sent inline: by `sendfile` on plain TCP, or read with
//! `RWF_NOWAIT` into the buffer TLS encrypts from. A cold chunk is read on the
//! blocking pool into that buffer and written from it, while the worker serves
//! its other connections. After every chunk the task yields, so a large
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
use crate::file_io::residency::{looks_resident, read_cached};
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
        if D::ZERO_COPY_FILES && looks_resident(file, pos, want) {
            io.send_file(file, pos, want, write_timeout).await?;
            pos += want;
            tokio::task::yield_now().await;
            continue;
        }
        let want = want as usize;
        if buf.len() < want {
            buf.resize(want, 0);
        }
        let n = match read_cached(file, &mut buf[..want], pos) {
            Some(r) => r?,
            None => {
                let f = match &shared {
                    Some(f) => f.clone(),
                    None => shared.insert(Arc::new(file.try_clone()?)).clone(),
                };
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
