//! The frames a connection has queued to write, in order: a byte buffer the
//! frame writers append to, and body buffers queued without a copy between
//! runs of it. Both roles queue the same way, so one queue serves them.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::Bytes;

/// Queued output: `pieces`, then `buf[pos..]` (`pos` is 0 while pieces wait).
#[derive(Debug, Default)]
pub(crate) struct Output {
    /// Frames appended by the writers of `frame`.
    buf: Vec<u8>,
    pos: usize,
    /// Output written before `buf`: body buffers queued without a copy, each
    /// after the frames cut off from `buf` before it, so the order holds.
    pieces: VecDeque<Bytes>,
    /// Bytes of `pieces.front()` already written.
    piece_pos: usize,
    /// Bytes in `pieces`, written ones included.
    pieces_len: usize,
}

impl Output {
    /// A queue holding `first` (a connection's opening frames).
    pub(crate) fn new(first: Vec<u8>) -> Self {
        Output {
            buf: first,
            ..Output::default()
        }
    }

    /// The buffer frames are appended to.
    pub(crate) fn frames(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Queues `body` after the frames queued so far, without copying it.
    pub(crate) fn push_owned(&mut self, body: Bytes) {
        self.cut();
        self.pieces_len += body.len();
        self.pieces.push_back(body);
    }

    /// The first run of queued output.
    pub(crate) fn first(&self) -> &[u8] {
        match self.pieces.front() {
            Some(p) => &p[self.piece_pos..],
            None => &self.buf[self.pos..],
        }
    }

    /// Bytes queued to write.
    pub(crate) fn len(&self) -> usize {
        self.pieces_len - self.piece_pos + self.buf.len() - self.pos
    }

    /// Fills `dst` with the queued output in order, as many runs as fit;
    /// returns how many it filled.
    pub(crate) fn slices<'s>(&'s self, dst: &mut [IoSlice<'s>]) -> usize {
        let mut n = 0;
        let runs = self
            .pieces
            .iter()
            .enumerate()
            .map(|(i, p)| if i == 0 { &p[self.piece_pos..] } else { &p[..] })
            .chain(std::iter::once(&self.buf[self.pos..]))
            .filter(|run| !run.is_empty());
        for (slot, run) in dst.iter_mut().zip(runs) {
            *slot = IoSlice::new(run);
            n += 1;
        }
        n
    }

    /// The first `n` bytes of the queued output were written.
    pub(crate) fn consume(&mut self, mut n: usize) {
        while n > 0 {
            let Some(front) = self.pieces.front() else {
                break;
            };
            let left = front.len() - self.piece_pos;
            if n < left {
                self.piece_pos += n;
                return;
            }
            n -= left;
            self.pieces_len -= front.len();
            self.piece_pos = 0;
            self.pieces.pop_front();
        }
        self.pos = (self.pos + n).min(self.buf.len());
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos >= 64 * 1024 && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }

    /// Moves what `buf` holds into the pieces, so a body buffer can follow it.
    fn cut(&mut self) {
        if self.pos < self.buf.len() {
            let mut run = std::mem::take(&mut self.buf);
            run.drain(..self.pos);
            self.pos = 0;
            self.pieces_len += run.len();
            self.pieces.push_back(Bytes::from(run));
        }
    }

    /// Frees the buffers when nothing waits in them, so an idle connection
    /// holds none.
    pub(crate) fn release_idle(&mut self) {
        if self.pieces.is_empty() {
            self.pieces = VecDeque::new();
        }
        if self.pos == self.buf.len() {
            self.buf = Vec::new();
            self.pos = 0;
        }
    }

    /// The frame buffer's allocation, for the tests that check it is freed.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity()
    }
}
