//! Phase 9, the tunnel after a 101: the head goes to the client, then bytes
//! both ways until either side closes.

use tracing::debug;

use super::rewrite_response::encode_response_head;
use super::upstream::UpstreamGroup;
use crate::http1::client::ClientStream;
use crate::http1::response::ResponseHead;
use crate::http1::write::{BodyFraming, ConnectionHeader};
use crate::server::h1::{Downstream, Exit, Http1Conn};

/// After a 101: forwards the head, then relays bytes both ways until either
/// side closes or the group's read timeout passes with no traffic.
pub(super) async fn tunnel<D: Downstream>(
    conn: &mut Http1Conn<'_, D>,
    group: &UpstreamGroup,
    server: usize,
    mut up: ClientStream,
    up_read: &[u8],
    resp: &ResponseHead,
) -> Result<bool, Exit> {
    let ctx = conn.ctx;
    {
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        let mut date = ctx.date.borrow_mut();
        encode_response_head(
            &mut b.write,
            resp,
            up_read,
            date.get(),
            BodyFraming::None,
            ConnectionHeader::Omit,
            false,
            true,
            None,
        );
        // Bytes the upstream sent right after its head belong to the new protocol.
        b.write.extend_from_slice(&up_read[resp.head_len..]);
    }
    if conn.flush().await.is_err() {
        return Err(Exit::Broken);
    }
    // Bytes the client sent after its request, likewise.
    let early = {
        let b = conn.bufs.as_mut().expect("buffers held while proxying");
        let early = b.read[conn.rpos..].to_vec();
        conn.rpos = b.read.len();
        early
    };
    if !early.is_empty() && up.write_all(&early).await.is_err() {
        return Err(Exit::Broken);
    }
    let r = crate::stream_proxy::relay(conn.io.io_mut(), &mut up, group.read_timeout).await;
    debug!(upstream = %group.servers[server].addr, result = ?r, "upgraded connection ended");
    Err(Exit::Broken)
}
