//! An HTTP/2 stream as a tunnel's byte stream (RFC 8441): the client's DATA
//! read as the tunnel takes them, END_STREAM as end of file, RST_STREAM as
//! an error. The relay itself is [`crate::server::stream_tunnel`]'s.

use std::io;
use std::task::{Context, Poll};

use tokio::io::ReadBuf;

use super::stream::H2Stream;
use crate::http2::ErrorCode;
use crate::server::stream_tunnel::TunnelStream;

impl<'a> TunnelStream<'a> for H2Stream<'a> {
    fn poll_tunnel_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let id = self.stream_id;
        let mut sh = self.shared.borrow_mut();
        let sh = &mut *sh;
        let Some(slot) = sh.table.slot_mut(id) else {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        };
        if !slot.body.is_empty() {
            let n = slot.body.len().min(buf.remaining());
            buf.put_slice(&slot.body[..n]);
            slot.body.drain(..n);
            sh.conn.release(id, n);
            sh.table.wake_conn();
            return Poll::Ready(Ok(()));
        }
        if slot.reset.is_some() {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        if slot.body_end {
            return Poll::Ready(Ok(()));
        }
        slot.wait(cx.waker());
        Poll::Pending
    }

    fn cancel_tunnel(&mut self) {
        self.reset(ErrorCode::Cancel);
    }
}
