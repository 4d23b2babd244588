//! Buffers for the file chunks a multiplexed stream sends (HTTP/2, HTTP/3),
//! used again once the connection has written them. A chunk's buffer goes to
//! the connection's output as [`Bytes`] (no copy on the way to the socket or
//! to TLS); when the last of its DATA frames has been written the buffer
//! comes back here instead of to the allocator. A fresh buffer per chunk cost
//! zeroing it before the read (about one instruction a byte) and, once the
//! allocator handed the pages back to the kernel, a page fault for every
//! page of it: 210 faults per MiB sent, against 0.8 for HTTP/1.1's one
//! buffer per connection. A buffer taken again keeps its bytes initialized,
//! so the next read needs no zeroing.
//!
//! The buffers kept are the worker thread's, at most [`KEPT`] of at most
//! [`CHUNK_MAX`] each, so the memory they hold stays bounded however many
//! streams send files.

use std::cell::RefCell;

use bytes::Bytes;

use super::transport::FILE_CHUNK;

/// Largest file chunk a stream reads for one send.
pub(crate) const CHUNK_MAX: usize = FILE_CHUNK as usize;

/// Most buffers a worker keeps for reuse.
const KEPT: usize = 4;

thread_local! {
    /// This thread's buffers that wait to be used again.
    static FREE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of at least `len` initialized bytes: one written before when the
/// thread keeps one, else a new one (zeroed once, here).
pub(crate) fn take(len: usize) -> Vec<u8> {
    let mut buf = FREE
        .try_with(|free| free.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default();
    if buf.len() < len {
        buf.resize(len, 0);
    }
    buf
}

/// `buf[..len]` as [`Bytes`] for the output; `buf` comes back to the thread
/// that drops the last of them.
pub(crate) fn share(buf: Vec<u8>, len: usize) -> Bytes {
    let len = len.min(buf.len());
    Bytes::from_owner(Chunk { buf, len })
}

/// A chunk buffer on its way out, and how many of its bytes are the chunk.
struct Chunk {
    buf: Vec<u8>,
    len: usize,
}

impl AsRef<[u8]> for Chunk {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        if self.buf.len() > CHUNK_MAX {
            return;
        }
        let buf = std::mem::take(&mut self.buf);
        // A thread being torn down no longer keeps buffers; this one is freed.
        let _ = FREE.try_with(|free| {
            if let Ok(mut free) = free.try_borrow_mut() {
                if free.len() < KEPT {
                    free.push(buf);
                }
            }
        });
    }
}

/// Frees the buffers this thread keeps (for the tests that count memory).
#[cfg(test)]
pub(crate) fn release_kept() {
    FREE.with(|free| free.borrow_mut().clear());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_chunk_buffer_is_taken_again_without_a_new_allocation() {
        release_kept();
        let mut buf = take(1000);
        assert!(buf.len() >= 1000);
        buf[..5].copy_from_slice(b"hello");
        let at = buf.as_ptr();
        let bytes = share(buf, 5);
        assert_eq!(&bytes[..], b"hello");
        let frame = bytes.slice(1..3);
        drop(bytes);
        // A DATA frame still holds a slice of it: not free yet.
        let other = take(10);
        assert_ne!(other.as_ptr(), at);
        assert_eq!(&frame[..], b"el");
        drop(frame);
        let again = take(500);
        assert_eq!(again.as_ptr(), at, "the written buffer is reused");
        assert!(again.len() >= 1000, "its bytes stay initialized");
        release_kept();
    }

    #[test]
    fn a_thread_keeps_at_most_a_few_buffers_and_none_oversized() {
        release_kept();
        let chunks: Vec<Bytes> = (0..KEPT + 3).map(|_| share(take(64), 64)).collect();
        drop(chunks);
        FREE.with(|free| assert_eq!(free.borrow().len(), KEPT));
        release_kept();
        drop(share(vec![0; CHUNK_MAX + 1], 1));
        FREE.with(|free| assert!(free.borrow().is_empty()));
    }

    #[test]
    fn a_buffer_longer_than_asked_gives_only_the_chunk() {
        let bytes = share(vec![7u8; 100], 40);
        assert_eq!(bytes.len(), 40);
        let bytes = share(vec![7u8; 10], 40);
        assert_eq!(bytes.len(), 10);
    }
}
