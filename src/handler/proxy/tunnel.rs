//! Phase 9, the tunnel after a 101: the proxy answers with the 101 head and a
//! [`Tunnel`] body, the session's upgrade handoff. Once the head is out the
//! driver hands over the raw downstream stream and the bytes the client sent
//! past its request; this relays bytes both ways until either side closes.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tracing::debug;

use crate::http::{Tunnel, TunnelIo};
use crate::http1::client::ClientStream;
use crate::upstream::connect::InFlight;
use crate::upstream::group_state::GroupAdmission;

/// An upgraded upstream connection (an HTTP/1.1 connection after its 101,
/// or an HTTP/2 stream after its extended CONNECT's 2xx) waiting for the
/// downstream one. It holds the request's admission and in-flight count: an
/// open tunnel is in flight.
pub(super) struct UpgradeTunnel<'h, U = ClientStream> {
    pub(super) up: U,
    /// What the upstream sent right after its 101 head: the new protocol's
    /// first bytes, for the client.
    pub(super) from_upstream: Vec<u8>,
    /// The group's read timeout: the tunnel closes after this long idle.
    pub(super) idle: Duration,
    /// The server's name, for the log line when the tunnel ends.
    pub(super) upstream: Box<str>,
    pub(super) _admission: GroupAdmission<'h>,
    pub(super) _in_flight: InFlight<'h>,
}

impl<U: AsyncRead + AsyncWrite + Unpin> Tunnel for UpgradeTunnel<'_, U> {
    fn run<'a>(
        self: Box<Self>,
        mut downstream: &'a mut dyn TunnelIo,
        early: Vec<u8>,
    ) -> Pin<Box<dyn Future<Output = ()> + 'a>>
    where
        Self: 'a,
    {
        Box::pin(async move {
            let mut t = *self;
            if !t.from_upstream.is_empty()
                && (downstream.write_all(&t.from_upstream).await.is_err()
                    || downstream.flush().await.is_err())
            {
                return;
            }
            // Bytes the client sent after its request belong to the new protocol too.
            if !early.is_empty() && t.up.write_all(&early).await.is_err() {
                return;
            }
            let r =
                crate::stream_proxy::byte_relay::relay(&mut downstream, &mut t.up, t.idle).await;
            debug!(upstream = %t.upstream, result = ?r, "upgraded connection ended");
        })
    }
}
