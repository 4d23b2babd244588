//! An HTTP/2 origin server for tests, written with the `h2` crate: prior
//! knowledge over TCP, or ALPN `h2` over TLS. It answers by path, counts
//! connections and notes the streams its client reset.
//!
//! - `/upload`: reads the whole request body; answers `got N bytes` with the
//!   trailer `x-body-len: N`, and each request trailer `name: value` as the
//!   response trailer `x-echo-name: value`.
//! - `/slow/<ms>`: answers `slow` after `ms` milliseconds.
//! - `/ticks`: sends `tick\n` every 50 ms for 5 s.
//! - `/trailers-only`: a gRPC trailers-only answer (`grpc-status: 5`).
//! - `/fail`: 503 with the body `origin failure`.
//! - `/early-hints/<n>`: `n` × `103 Early Hints` with a `link` field, then
//!   `hinted`.
//! - `/cache/<max-age>/<ms>/...`: after `ms` milliseconds, a cacheable 200
//!   (`cache-control: max-age=<max-age>`, `etag: "v1"`) whose body is 40000
//!   bytes of `c`, more than one DATA frame; to `if-none-match: "v1"`, a 304
//!   at once, fresh for 60 s and marked `x-fresh: yes`.
//! - anything else: `<method> <path> <authority> te=<te>`, with `x-origin: h2`.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use http::{HeaderMap, Request, Response};

/// A running origin; stopped when dropped.
pub struct H2Origin {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    resets: Arc<Mutex<Vec<String>>>,
    requests: Arc<Mutex<Vec<Request<()>>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl H2Origin {
    /// Prior knowledge over plain TCP.
    pub fn start() -> H2Origin {
        Self::start_with(None)
    }

    /// Over TLS with this certificate chain and key (PEM files), ALPN `alpn`.
    pub fn start_tls(cert: &std::path::Path, key: &std::path::Path, alpn: &[&str]) -> H2Origin {
        use rustls::pki_types::pem::PemObject;
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(cert)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(key).unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        config.alpn_protocols = alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
        Self::start_with(Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))))
    }

    fn start_with(tls: Option<tokio_rustls::TlsAcceptor>) -> H2Origin {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let resets = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel();
        let thread = {
            let (connections, resets, requests) =
                (connections.clone(), resets.clone(), requests.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    loop {
                        let (tcp, _) = tokio::select! {
                            a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
                            _ = &mut stop_rx => return,
                        };
                        connections.fetch_add(1, Ordering::SeqCst);
                        let (resets, requests, tls) =
                            (resets.clone(), requests.clone(), tls.clone());
                        tokio::task::spawn_local(async move {
                            match tls {
                                Some(acceptor) => {
                                    if let Ok(s) = acceptor.accept(tcp).await {
                                        serve(s, resets, requests).await;
                                    }
                                }
                                None => serve(tcp, resets, requests).await,
                            }
                        });
                    }
                });
            })
        };
        H2Origin {
            addr,
            connections,
            resets,
            requests,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Paths of the streams the client reset before they were answered whole.
    pub fn resets(&self) -> Vec<String> {
        self.resets.lock().unwrap().clone()
    }

    /// Request heads received so far.
    pub fn requests(&self) -> Vec<(String, HeaderMap)> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|r| (r.uri().to_string(), r.headers().clone()))
            .collect()
    }
}

impl Drop for H2Origin {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve<T>(io: T, resets: Arc<Mutex<Vec<String>>>, requests: Arc<Mutex<Vec<Request<()>>>>)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let Ok(mut conn) = h2::server::handshake(io).await else {
        return;
    };
    while let Some(Ok((req, respond))) = conn.accept().await {
        let (parts, body) = req.into_parts();
        let head = Request::from_parts(parts, ());
        requests.lock().unwrap().push(clone_head(&head));
        let resets = resets.clone();
        tokio::task::spawn_local(async move {
            answer(head, body, respond, resets).await;
        });
    }
}

fn clone_head(r: &Request<()>) -> Request<()> {
    let mut c = Request::builder()
        .method(r.method().clone())
        .uri(r.uri().clone())
        .body(())
        .unwrap();
    *c.headers_mut() = r.headers().clone();
    c
}

async fn answer(
    req: Request<()>,
    mut body: h2::RecvStream,
    mut respond: SendResponse<Bytes>,
    resets: Arc<Mutex<Vec<String>>>,
) {
    let path = req.uri().path().to_string();
    let reset = |resets: &Arc<Mutex<Vec<String>>>| resets.lock().unwrap().push(path.clone());
    if path == "/upload" {
        let mut n = 0usize;
        while let Some(Ok(chunk)) = body.data().await {
            n += chunk.len();
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let request_trailers = body.trailers().await.ok().flatten().unwrap_or_default();
        let resp = Response::builder().status(200).body(()).unwrap();
        let Ok(mut send) = respond.send_response(resp, false) else {
            return;
        };
        let _ = send.send_data(Bytes::from(format!("got {n} bytes")), false);
        let mut trailers = HeaderMap::new();
        trailers.insert("x-body-len", n.to_string().parse().unwrap());
        for (name, value) in &request_trailers {
            let echo = format!("x-echo-{name}");
            trailers.append(
                http::HeaderName::from_bytes(echo.as_bytes()).unwrap(),
                value.clone(),
            );
        }
        let _ = send.send_trailers(trailers);
        return;
    }
    if let Some(ms) = path.strip_prefix("/slow/") {
        let ms: u64 = ms.parse().unwrap_or(0);
        let sleep = tokio::time::sleep(Duration::from_millis(ms));
        tokio::select! {
            _ = sleep => {
                let resp = Response::builder().status(200).body(()).unwrap();
                if let Ok(mut send) = respond.send_response(resp, false) {
                    let _ = send.send_data(Bytes::from_static(b"slow"), true);
                }
            }
            _ = std::future::poll_fn(|cx| respond.poll_reset(cx)) => reset(&resets),
        }
        return;
    }
    if path == "/ticks" {
        let resp = Response::builder()
            .status(200)
            .header("content-type", "text/plain")
            .body(())
            .unwrap();
        let Ok(mut send) = respond.send_response(resp, false) else {
            return;
        };
        for _ in 0..100 {
            if send
                .send_data(Bytes::from_static(b"tick\n"), false)
                .is_err()
            {
                reset(&resets);
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = std::future::poll_fn(|cx| send.poll_reset(cx)) => {
                    reset(&resets);
                    return;
                }
            }
        }
        let _ = send.send_data(Bytes::new(), true);
        return;
    }
    if let Some(n) = path.strip_prefix("/early-hints/") {
        for _ in 0..n.parse().unwrap_or(0) {
            let hint = Response::builder()
                .status(103)
                .header("link", "</style.css>; rel=preload")
                .body(())
                .unwrap();
            if respond.send_informational(hint).is_err() {
                return;
            }
        }
        let resp = Response::builder()
            .status(200)
            .header("content-length", "6")
            .body(())
            .unwrap();
        if let Ok(mut send) = respond.send_response(resp, false) {
            let _ = send.send_data(Bytes::from_static(b"hinted"), true);
        }
        return;
    }
    if path == "/fail" {
        let resp = Response::builder().status(503).body(()).unwrap();
        if let Ok(mut send) = respond.send_response(resp, false) {
            let _ = send.send_data(Bytes::from_static(b"origin failure"), true);
        }
        return;
    }
    if let Some(rest) = path.strip_prefix("/cache/") {
        cacheable(&req, rest, respond).await;
        return;
    }
    if path == "/trailers-only" {
        let resp = Response::builder()
            .status(200)
            .header("content-type", "application/grpc")
            .header("grpc-status", "5")
            .header("grpc-message", "not found")
            .body(())
            .unwrap();
        let _ = respond.send_response(resp, true);
        return;
    }
    let te = req
        .headers()
        .get("te")
        .map_or("-", |v| v.to_str().unwrap_or("?"));
    let text = format!(
        "{} {} {} te={te}",
        req.method(),
        req.uri().path(),
        req.uri().authority().map_or("-", |a| a.as_str())
    );
    let resp = Response::builder()
        .status(200)
        .header("x-origin", "h2")
        .header("content-length", text.len().to_string())
        .body(())
        .unwrap();
    if let Ok(mut send) = respond.send_response(resp, false) {
        let _ = send.send_data(Bytes::from(text), true);
    }
}

/// Size of a `/cache/...` body.
pub const CACHEABLE_LEN: usize = 40_000;

/// A `/cache/<max-age>/<ms>/...` answer: a validator, freshness, and a 304
/// to a request carrying the validator.
async fn cacheable(req: &Request<()>, rest: &str, mut respond: SendResponse<Bytes>) {
    let mut parts = rest.split('/');
    let max_age: u64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(60);
    let ms: u64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let conditional = req
        .headers()
        .get("if-none-match")
        .is_some_and(|v| v == "\"v1\"");
    if conditional {
        let resp = Response::builder()
            .status(304)
            .header("etag", "\"v1\"")
            .header("cache-control", "max-age=60")
            .header("x-fresh", "yes")
            .body(())
            .unwrap();
        let _ = respond.send_response(resp, true);
        return;
    }
    tokio::time::sleep(Duration::from_millis(ms)).await;
    let resp = Response::builder()
        .status(200)
        .header("etag", "\"v1\"")
        .header("cache-control", format!("max-age={max_age}"))
        .header("content-length", CACHEABLE_LEN.to_string())
        .body(())
        .unwrap();
    if let Ok(mut send) = respond.send_response(resp, false) {
        let _ = send.send_data(Bytes::from(vec![b'c'; CACHEABLE_LEN]), true);
    }
}
