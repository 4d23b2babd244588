//! Pier: a thread-per-core HTTP/1.1, HTTP/2 and TLS edge server.
//!
//! The library holds everything; `main.rs` only turns argv into a [`cli::Command`]
//! and an exit code. Protocol code (`http1`, `http2`) is sans-IO; `server` holds the
//! drivers that move bytes between a downstream socket and the codecs, and `http` the
//! protocol-neutral session handlers answer through.
#![forbid(unsafe_code)]

pub mod bench;
pub mod binary_upgrade;
pub mod cache;
pub mod cli;
pub mod config;
pub mod deadline;
pub mod echo;
pub mod file_io;
pub mod filter;
pub mod handler;
pub mod http;
pub mod http1;
pub mod http2;
pub mod http3;
pub mod io_text;
pub mod listener;
pub mod listener_key;
pub mod local_thread;
pub mod logging;
pub mod observe;
pub mod proxy_protocol;
pub mod quic;
pub mod route;
pub mod runtime;
pub mod server;
pub mod service;
pub mod sockopt;
pub mod stream_proxy;
pub mod systemd;
pub mod tls;
pub mod upstream;
pub mod worker;
