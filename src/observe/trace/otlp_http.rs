//! OTLP/HTTP: each batch is a `POST` of the protobuf request over HTTP/1.1 on
//! a kept-alive blocking connection owned by the exporter thread.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use super::collector_endpoint::{connect, Endpoint};

/// Largest collector answer read (its body is not used).
const ANSWER_MAX: u64 = 64 * 1024;

/// The exporter's HTTP/1.1 connection to an OTLP/HTTP collector.
pub struct OtlpHttp {
    endpoint: Endpoint,
    conn: Option<TcpStream>,
}

impl OtlpHttp {
    /// A link to `endpoint`, connected at the first export.
    pub fn new(endpoint: Endpoint) -> OtlpHttp {
        OtlpHttp {
            endpoint,
            conn: None,
        }
    }

    /// POSTs one batch; a kept connection that the collector closed is
    /// replaced once. After a failure the connection is dropped.
    pub fn export(&mut self, body: &[u8]) -> io::Result<()> {
        let reused = self.conn.is_some();
        let r = match self.post(body) {
            Err(_) if reused => {
                self.conn = None;
                self.post(body)
            }
            r => r,
        };
        if r.is_err() {
            self.conn = None;
        }
        r
    }

    fn post(&mut self, body: &[u8]) -> io::Result<()> {
        let endpoint = &self.endpoint;
        let stream = match &mut self.conn {
            Some(s) => s,
            None => self.conn.insert(connect(endpoint)?),
        };
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nUser-Agent: pier/{}\r\n\r\n",
            endpoint.path,
            endpoint.authority,
            body.len(),
            env!("CARGO_PKG_VERSION"),
        );
        stream.write_all(head.as_bytes())?;
        stream.write_all(body)?;
        let mut reader = BufReader::new((&*stream).take(ANSWER_MAX));
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::other("the collector's answer is not HTTP"))?;
        let mut length = None;
        let mut close = false;
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Err(io::Error::other("the collector closed mid-answer"));
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((name, value)) = l.split_once(':') {
                let value = value.trim();
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.parse::<u64>().ok();
                } else if name.eq_ignore_ascii_case("connection")
                    && value.eq_ignore_ascii_case("close")
                {
                    close = true;
                }
            }
        }
        match length {
            Some(n) => {
                io::copy(&mut reader.by_ref().take(n), &mut io::sink())?;
            }
            // Without a length (chunked or until close) the connection is not
            // reused: its answer is not read to its end.
            None => close = true,
        }
        if close {
            self.conn = None;
        }
        if !(200..300).contains(&status) {
            return Err(io::Error::other(format!("the collector answered {status}")));
        }
        Ok(())
    }
}
