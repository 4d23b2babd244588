//! The tunnel of an extended CONNECT (RFC 8441 on HTTP/2, RFC 9220 on
//! HTTP/3), whatever the stream's protocol: the answer's shape (an
//! upgrade's 101 is the stream's 200, a 2xx without a tunnel is 501) and
//! the relay. Once the stream answered `:status 200`, the handler's
//! [`Tunnel`] (the proxy's relay to an upgraded upstream connection) runs
//! over the stream as it would over an HTTP/1 connection after a 101. The
//! stream reads as the client's DATA (the end of its side is end of file, a
//! reset an error) and writes as DATA within the client's flow control;
//! shutting it down ends our side, a half close. The driver frees the
//! client's window as the tunnel takes the bytes, so a slow upstream slows
//! the client down, as the HTTP/1 relay does.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::body_send::StreamSink;
use crate::http::{Body, Tunnel};

/// What an answer to a request on a multiplexed stream is, as far as a
/// tunnel goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TunnelAnswer {
    /// An ordinary answer.
    Plain,
    /// The upstream's 101 to an extended CONNECT: the stream's 200, the
    /// tunnel follows on the stream.
    Opens,
    /// A 2xx to an extended CONNECT with no tunnel: it would tell the client
    /// its tunnel is open, so the route is taken not to speak the protocol
    /// (501).
    NotTaken,
    /// A tunnel for a request that was no extended CONNECT: the stream has
    /// no way to carry it, so its head goes and the stream is reset.
    Stray,
}

impl TunnelAnswer {
    /// The shape of an answer of `status` whose body is a tunnel or not, to
    /// a request that was an extended CONNECT or not.
    pub(crate) fn of(extended_connect: bool, status: u16, tunnel: bool) -> Self {
        match (extended_connect, tunnel) {
            (true, true) if status == 101 => TunnelAnswer::Opens,
            (true, false) if (200..300).contains(&status) => TunnelAnswer::NotTaken,
            (_, true) => TunnelAnswer::Stray,
            _ => TunnelAnswer::Plain,
        }
    }

    /// The stream's `:status` for an answer of `status`: an opened tunnel's
    /// 200, and 500 for what is no final status (a stream has no 1xx final
    /// answer).
    pub(crate) fn status(self, status: u16) -> u16 {
        match self {
            TunnelAnswer::Opens => 200,
            _ if (200..=999).contains(&status) => status,
            _ => 500,
        }
    }

    /// Whether a field of the upstream's head goes on the stream's:
    /// Sec-WebSocket-Accept answers a key the client never sent (RFC 8441
    /// §5, RFC 9220 §3).
    pub(crate) fn carries(self, name: &str) -> bool {
        self != TunnelAnswer::Opens || !name.eq_ignore_ascii_case("sec-websocket-accept")
    }
}

/// A multiplexed stream that can carry a tunnel: it writes as any response
/// body does and reads the client's DATA as the tunnel's bytes.
pub(crate) trait TunnelStream<'a>: StreamSink<'a> {
    /// Reads the client's tunnel bytes into `buf`: nothing at the end of its
    /// side, `ConnectionReset` once it reset the stream.
    fn poll_tunnel_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>>;

    /// Resets the stream: the tunnel broke before our side ended.
    fn cancel_tunnel(&mut self);
}

/// Runs `tunnel` over `stream` until both sides ended (or it failed); a
/// tunnel that ends before our side was closed resets the stream, so the
/// client cannot take a broken tunnel for a closed one.
pub(crate) async fn run_stream_tunnel<'a, S: TunnelStream<'a>>(
    stream: &mut S,
    tunnel: Box<dyn Tunnel + 'a>,
) {
    let mut io = StreamTunnelIo {
        stream,
        shut: false,
        _life: std::marker::PhantomData,
    };
    // The client's bytes all come as DATA: none arrived ahead of the answer
    // outside the stream.
    tunnel.run(&mut io, Vec::new()).await;
    if !io.shut {
        io.stream.cancel_tunnel();
    }
}

/// Sends the body `send_response` kept on `stream`, then ends the stream; an
/// error leaves the stream to be reset. The 101 that opened an extended
/// CONNECT's tunnel kept the tunnel, which runs here.
pub(crate) async fn send_pending<'a, S: TunnelStream<'a>>(stream: &mut S) -> io::Result<()> {
    match stream.take_pending() {
        None => Ok(()),
        Some(Body::Tunnel(tunnel)) => {
            run_stream_tunnel(stream, tunnel).await;
            Ok(())
        }
        Some(body) => super::body_send::send_body(stream, body).await,
    }
}

/// A stream as the byte stream a tunnel relays.
struct StreamTunnelIo<'s, 'a, S: TunnelStream<'a>> {
    stream: &'s mut S,
    /// Our side of the stream was ended.
    shut: bool,
    _life: std::marker::PhantomData<&'a ()>,
}

impl<'a, S: TunnelStream<'a>> AsyncRead for StreamTunnelIo<'_, 'a, S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.get_mut().stream.poll_tunnel_read(cx, buf)
    }
}

impl<'a, S: TunnelStream<'a>> AsyncWrite for StreamTunnelIo<'_, 'a, S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.shut {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let n = std::task::ready!(this.stream.poll_send_capacity(cx, data.len()))?;
        this.stream.send_data(&data[..n], false)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Queued DATA goes out as the connection task writes.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.shut {
            this.stream.send_data(&[], true)?;
            this.shut = true;
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::TunnelAnswer;

    #[test]
    fn an_extended_connects_answer_takes_its_shape_from_status_and_body() {
        assert_eq!(TunnelAnswer::of(true, 101, true), TunnelAnswer::Opens);
        assert_eq!(TunnelAnswer::of(true, 200, false), TunnelAnswer::NotTaken);
        assert_eq!(TunnelAnswer::of(true, 204, false), TunnelAnswer::NotTaken);
        // A refusal passes as it is.
        assert_eq!(TunnelAnswer::of(true, 403, false), TunnelAnswer::Plain);
        assert_eq!(TunnelAnswer::of(false, 200, false), TunnelAnswer::Plain);
        assert_eq!(TunnelAnswer::of(false, 101, true), TunnelAnswer::Stray);
        assert!(!TunnelAnswer::Opens.carries("Sec-WebSocket-Accept"));
        assert!(TunnelAnswer::Opens.carries("sec-websocket-protocol"));
        assert!(TunnelAnswer::Plain.carries("sec-websocket-accept"));
        assert_eq!(TunnelAnswer::Opens.status(101), 200);
        assert_eq!(TunnelAnswer::Plain.status(404), 404);
        assert_eq!(TunnelAnswer::Stray.status(101), 500);
    }
}
