//! `pier echo`: a thread-per-core echo server, plain or TLS, that writes back what
//! it reads. It is the server side of the TLS stream benchmark, so it shares the
//! serving pieces (SO_REUSEPORT sockets, one current-thread runtime per worker, the
//! rustls provider) and nothing else: no HTTP, no routing.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rustls::server::ServerSessionMemoryCache;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing::{debug, info};

use crate::cli::EchoArgs;
use crate::deadline;
use crate::listener::bind_reuseport;
use crate::logging::StderrLogFormat;
use crate::tls::stream::ReadAhead;

/// Bytes read (and written back) at a time, per connection.
const ECHO_BUF: usize = 32 * 1024;
/// A handshake that takes longer is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// TLS 1.2/1.3 sessions remembered per worker.
const SESSION_CACHE_PER_WORKER: usize = 1024;

/// Runs until SIGTERM or SIGINT.
pub fn run(args: EchoArgs) -> anyhow::Result<()> {
    crate::logging::init(StderrLogFormat::Text);
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let tls = if args.tls || args.cert.tls_cert.is_some() {
        let (ck, origin) = match args.cert.pair() {
            Some((c, k)) => {
                let (c, k) = (c.display().to_string(), k.display().to_string());
                let ck = crate::tls::load_pem(&c, &k).map_err(|e| anyhow::anyhow!(e.message))?;
                (ck, c)
            }
            _ => (
                crate::tls::self_signed().map_err(anyhow::Error::msg)?,
                "self-signed for localhost".to_string(),
            ),
        };
        let fingerprint = crate::tls::fingerprint(&ck.chain[0]);
        let config = crate::tls::server_config(ck).map_err(anyhow::Error::msg)?;
        info!(certificate = %origin, sha256 = %fingerprint, "TLS certificate");
        Some(config)
    } else {
        None
    };
    let sockets = bind_reuseport(args.listen, 4096, workers)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let bound = sockets[0].local_addr()?;
    for (id, socket) in sockets.into_iter().enumerate() {
        // Each worker gets its own config copy, so session caches are not shared.
        let config = tls.as_ref().map(|c| {
            let mut c = rustls::ServerConfig::clone(c);
            c.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE_PER_WORKER);
            Arc::new(c)
        });
        std::thread::Builder::new()
            .name(format!("pier-echo-{id}"))
            .spawn(move || {
                if let Err(e) = worker(socket, config) {
                    tracing::error!(worker = id, error = %e, "echo worker failed");
                }
            })
            .context("cannot start a worker thread")?;
    }
    let scheme = if tls.is_some() { "tls" } else { "tcp" };
    info!(listeners = %format!("{scheme}://{bound}"), workers, "pier echo started");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        Ok::<(), io::Error>(())
    })?;
    info!("stopped");
    Ok(())
}

fn worker(socket: std::net::TcpListener, tls: Option<Arc<rustls::ServerConfig>>) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = TcpListener::from_std(socket)?;
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let acceptor = acceptor.clone();
            tokio::task::spawn_local(async move {
                let r = match acceptor {
                    None => echo(stream).await,
                    Some(a) => {
                        match deadline::io_within(
                            HANDSHAKE_TIMEOUT,
                            "handshake",
                            a.accept(ReadAhead::new(stream)),
                        )
                        .await
                        {
                            Ok(s) => echo(s).await,
                            Err(e) => Err(e),
                        }
                    }
                };
                if let Err(e) = r {
                    debug!(%peer, error = %e, "echo connection ended");
                }
            });
        }
    })
}

/// Writes back everything read until the peer closes.
async fn echo<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) -> io::Result<()> {
    let mut buf = vec![0u8; ECHO_BUF];
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            let _ = s.shutdown().await;
            return Ok(());
        }
        s.write_all(&buf[..n]).await?;
        s.flush().await?;
    }
}
