//! Unit tests of the proxy phases that work on bytes: the two rewrites, the
//! field classification, the early-answer watcher.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::fields::{ConnectionOptions, Field, FieldCopy};
use super::request_info::RequestInfo;
use super::rewrite_request::{encode_request_head, Client};
use super::rewrite_response::encode_response_fields;
use super::send::Answer;
use super::{ErrorKind, Forwarding, ProxyError, ProxyRoute, Side};
use crate::cache::tap::NoTap;
use crate::http::{RequestView, Session};
use crate::http1::parse::{parse_request, Limits, Method, RequestHead};
use crate::http1::response::parse_response;
use crate::http1::response::ParsedResponseHead;
use crate::http1::write::{self, BodyFraming, ConnectionHeader};
use crate::http1::{HeaderLines, Parsed};
use crate::upstream::balance::Balance;
use crate::upstream::group::UpstreamGroup;
use crate::upstream::request_head::Http1Head;

/// A session that only takes interim heads, and notes them.
#[derive(Default)]
struct InterimSink {
    heads: Vec<(u16, Vec<(String, String)>)>,
    record: crate::http::RequestRecord,
}

impl<'h> Session<'h> for InterimSink {
    fn request(&self) -> RequestView<'_> {
        unreachable!("the relay reads no request")
    }
    fn worker(&self) -> &'h crate::worker::WorkerCtx {
        unreachable!("the relay needs no worker")
    }
    fn poll_body(
        &mut self,
        _: &mut Context<'_>,
    ) -> Poll<Result<usize, crate::http::BodyReadError>> {
        Poll::Ready(Ok(0))
    }
    fn body_chunk(&self) -> &[u8] {
        &[]
    }
    fn consume_body(&mut self, _: usize) {}
    fn send_response(&mut self, _: &crate::http::ResponseHead<'_>, _: crate::http::Body<'h>) {}
    fn responded(&self) -> bool {
        false
    }
    fn send_interim(&mut self, status: u16, fields: &[(&str, &[u8])]) {
        let fields = fields
            .iter()
            .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v).into_owned()))
            .collect();
        self.heads.push((status, fields));
    }
    fn record(&self) -> &crate::http::RequestRecord {
        &self.record
    }
    fn record_mut(&mut self) -> &mut crate::http::RequestRecord {
        &mut self.record
    }
    fn poll_write_body(&mut self, _: &mut Context<'_>, d: &[u8]) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(d.len()))
    }
    fn poll_flush_body(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn finish_body(&mut self, _: &[(&str, &[u8])]) {}
    fn note_upstream(&mut self, _: std::net::SocketAddr, _: Duration) {}
}

/// Feeds `chunks` one at a time to an early-answer watcher; returns whether
/// each made the answer final, and whether an interim head was seen.
fn watch_answer(chunks: &[&[u8]]) -> (Vec<bool>, bool) {
    let (finals, _, seen) = watch_relaying(chunks);
    (finals, seen > 0)
}

/// [`watch_answer`], with what the client was given and how many interim
/// heads came.
fn watch_relaying(chunks: &[&[u8]]) -> (Vec<bool>, InterimSink, u32) {
    let (mut buf, mut head, mut interim) = (Vec::new(), ParsedResponseHead::new(), 0);
    let mut sink = InterimSink::default();
    let limits = Limits::default();
    let mut answer = Answer {
        buf: &mut buf,
        head: &mut head,
        method: Method::Post,
        limits: &limits,
        interim: &mut interim,
    };
    let finals = chunks
        .iter()
        .map(|c| {
            answer.buf.extend_from_slice(c);
            answer.is_final(&mut sink)
        })
        .collect();
    (finals, sink, interim)
}

#[test]
fn interim_heads_reach_the_client_without_hop_by_hop_date_or_server_fields() {
    let (finals, sink, seen) = watch_relaying(&[
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nDate: x\r\nServer: up\r\nConnection: x-hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\n\r\n",
        b"HTTP/1.1 103 Early Hints\r\nServer: up\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 20",
        b"0 OK\r\nContent-Length: 0\r\n\r\n",
    ]);
    assert_eq!((finals, seen), (vec![false, false, true], 3));
    // The second 103 hints nothing once its Server field is left out: not sent.
    let link = ("Link".to_string(), "</style.css>; rel=preload".to_string());
    assert_eq!(sink.heads, [(103, vec![link]), (100, vec![])]);
}

#[test]
fn an_endless_run_of_interim_heads_is_a_bad_response() {
    let early = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n";
    let max = super::interim::MAX_INTERIM as usize;
    let (finals, sink, _) = watch_relaying(&vec![&early[..]; max + 2]);
    // The first MAX_INTERIM go to the client; the next one ends the sending
    // (the head reader then answers 502) and is never relayed.
    assert!(finals[..max].iter().all(|f| !f));
    assert!(finals[max..].iter().all(|&f| f));
    assert_eq!(sink.heads.len(), max);
    let mut buf = early.repeat(2);
    let mut count = super::interim::MAX_INTERIM;
    let r = super::interim::relay_interim(
        &mut InterimSink::default(),
        &mut buf,
        &Limits::default(),
        Method::Get,
        &mut ParsedResponseHead::new(),
        &mut count,
    );
    assert_eq!(r, Err(super::interim::InterimError::TooMany));
}

#[test]
fn an_interim_head_during_sending_counts_as_an_answer_but_not_a_final_one() {
    // 103 then a reset: nothing final, but the upstream did answer, so the
    // request must not be sent again (it reached the upstream).
    assert_eq!(
        watch_answer(&[b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"]),
        (vec![false], true)
    );
    // A final head in pieces: final once complete, no interim.
    assert_eq!(
        watch_answer(&[b"HTTP/1.1 413 Too", b" Large\r\nContent-Length: 0\r\n\r\n"]),
        (vec![false, true], false)
    );
    // Interim then final in one read.
    assert_eq!(
        watch_answer(&[b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"]),
        (vec![true], true)
    );
}

/// The route most tests rewrite for: `X-Forwarded-*` added, the client's
/// `Host` kept, no `Via`; a test that needs another changes its fields.
fn route() -> ProxyRoute {
    let group = UpstreamGroup {
        name: "t".into(),
        index: 0,
        servers: Default::default(),
        discovery: Default::default(),
        resolutions: Default::default(),
        balance: Balance::RoundRobin,
        tls: None,
        connect_timeout: Duration::from_secs(1),
        response_timeout: Duration::from_secs(1),
        read_timeout: Duration::from_secs(1),
        retries: 1,
        max_idle: 1,
        max_idle_peak: 1,
        idle_peak_window: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        max_fails: 1,
        fail_timeout: Duration::from_secs(1),
        health_check: None,
        max_in_flight: 0,
        retry_after: "1".into(),
        socket: Default::default(),
        counters: Default::default(),
        protocol: crate::upstream::group::UpstreamProtocol::Http1,
        max_streams: 100,
    };
    ProxyRoute {
        group: Arc::new(group),
        forwarding: Forwarding {
            x_forwarded: true,
            forwarded: false,
        },
        via: false,
        preserve_host: true,
        client_addr_header: Some("X-Real-IP".into()),
        client_cert_header: None,
        request_rules: None,
        error_pages: Default::default(),
        cache: None,
    }
}

fn rewrite(raw: &[u8], r: &ProxyRoute) -> String {
    let client = Client {
        addr: "192.0.2.7:5555".parse().unwrap(),
        secure: false,
        subject: None,
        early_data: false,
        request_id: &crate::http::RequestId::default(),
        trace: None,
    };
    rewrite_for(raw, r, client)
}

fn rewrite_for(raw: &[u8], r: &ProxyRoute, client: Client<'_>) -> String {
    let mut head = RequestHead::new();
    assert_eq!(
        parse_request(raw, &Limits::default(), &mut head),
        Ok(Parsed::Complete)
    );
    let view = RequestView::http1(&head, raw, client.addr, None);
    let info = RequestInfo::new(&view, false);
    let mut out = Vec::new();
    let mut head = Http1Head::new(&mut out);
    encode_request_head(
        &mut head,
        &view,
        r,
        "10.0.0.9:3000",
        client,
        &info,
        &mut NoTap,
    );
    String::from_utf8(out).unwrap()
}

#[test]
fn hop_by_hop_and_connection_named_fields_are_dropped() {
    let out = rewrite(
        b"GET /a?b HTTP/1.1\r\nHost: ex.com\r\nConnection: close, X-Foo\r\nX-Foo: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\nProxy-Connection: x\r\nUpgrade: h2c\r\nX-Bar: 2\r\nX-Real-IP: 6.6.6.6\r\n\r\n",
        &ProxyRoute {
            via: true,
            ..route()
        },
    );
    assert!(
        out.starts_with("GET /a?b HTTP/1.1\r\nHost: ex.com\r\n"),
        "{out}"
    );
    for gone in [
        "X-Foo",
        "Keep-Alive",
        "TE:",
        "Proxy-Connection",
        "Upgrade",
        "Connection",
        "6.6.6.6",
    ] {
        assert!(!out.contains(gone), "{gone} forwarded: {out}");
    }
    for kept in [
        "X-Bar: 2\r\n",
        "X-Forwarded-For: 192.0.2.7\r\n",
        "X-Forwarded-Proto: http\r\n",
        "X-Forwarded-Host: ex.com\r\n",
        "Via: 1.1 pier\r\n",
        "X-Real-IP: 192.0.2.7\r\n",
    ] {
        assert!(out.contains(kept), "{kept} missing: {out}");
    }
    assert!(out.ends_with("\r\n\r\n"));
}

#[test]
fn framing_is_exactly_one_field_and_xff_appends() {
    let r = ProxyRoute {
        forwarding: Forwarding {
            x_forwarded: true,
            forwarded: true,
        },
        preserve_host: false,
        ..route()
    };
    let out = rewrite(
        b"POST http://ex.com/p?q=1 HTTP/1.1\r\nHost: ex.com\r\nTransfer-Encoding: chunked\r\nX-Forwarded-For: 1.1.1.1\r\nX-Forwarded-Proto: evil\r\nExpect: 100-continue\r\n\r\n",
        &r,
    );
    assert!(
        out.starts_with("POST /p?q=1 HTTP/1.1\r\nHost: 10.0.0.9:3000\r\n"),
        "{out}"
    );
    assert_eq!(out.matches("Transfer-Encoding: chunked\r\n").count(), 1);
    assert!(!out.contains("Content-Length"));
    assert!(!out.contains("evil"));
    assert!(!out.contains("Expect"));
    assert!(
        out.contains("X-Forwarded-For: 1.1.1.1, 192.0.2.7\r\n"),
        "{out}"
    );
    assert!(out.contains("Forwarded: for=192.0.2.7;proto=http;host=\"ex.com\"\r\n"));
    assert!(!out.contains("Via"));

    let out = rewrite(
        b"PUT /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n",
        &r,
    );
    assert_eq!(out.matches("Content-Length: 3\r\n").count(), 1);
}

#[test]
fn client_cert_header_carries_the_verified_subject_only() {
    let r = ProxyRoute {
        via: true,
        client_cert_header: Some("X-Client-Subject".into()),
        ..route()
    };
    let raw = b"GET / HTTP/1.1\r\nHost: h\r\nX-Client-Subject: CN=forged\r\n\r\n";
    let client = Client {
        addr: "192.0.2.7:5555".parse().unwrap(),
        secure: true,
        subject: Some("CN=client,O=Example"),
        early_data: false,
        request_id: &crate::http::RequestId::default(),
        trace: None,
    };
    let out = rewrite_for(raw, &r, client);
    assert_eq!(out.matches("X-Client-Subject").count(), 1, "{out}");
    assert!(out.contains("X-Client-Subject: CN=client,O=Example\r\n"));
    assert!(out.contains("X-Forwarded-Proto: https\r\n"));
    // Without a certificate the field is only removed.
    let out = rewrite(raw, &r);
    assert!(!out.contains("X-Client-Subject"), "{out}");
}

#[test]
fn a_request_from_early_data_goes_upstream_with_early_data_1() {
    let early = |raw: &[u8], early_data: bool| {
        let client = Client {
            addr: "192.0.2.7:5555".parse().unwrap(),
            secure: true,
            subject: None,
            early_data,
            request_id: &crate::http::RequestId::default(),
            trace: None,
        };
        rewrite_for(raw, &route(), client)
    };
    let raw = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    assert!(early(raw, true).contains("Early-Data: 1\r\n"));
    assert!(!early(raw, false).contains("Early-Data"));
    // An earlier hop's field is kept, not repeated.
    let out = early(b"GET / HTTP/1.1\r\nHost: h\r\nEarly-Data: 1\r\n\r\n", true);
    assert_eq!(out.matches("Early-Data").count(), 1, "{out}");
}

#[test]
fn upgrade_is_forwarded_only_when_asked_for() {
    let out = rewrite(
        b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n",
        &route(),
    );
    assert!(
        out.contains("Connection: upgrade\r\nUpgrade: websocket\r\n"),
        "{out}"
    );
    assert!(out.contains("Sec-WebSocket-Key: k\r\n"));
}

#[test]
fn response_head_keeps_end_to_end_fields_only() {
    let raw = b"HTTP/1.1 200 OK\r\nServer: up\r\nDate: x\r\nConnection: X-Up\r\nX-Up: 1\r\nX-Keep: 2\r\nContent-Length: 5\r\nKeep-Alive: timeout=5\r\n\r\n";
    let out = encode_response_as(raw, BodyFraming::Length(5), false);
    assert!(
        out.starts_with("HTTP/1.1 200 OK\r\nServer: pier\r\n"),
        "{out}"
    );
    assert_eq!(out.matches("Content-Length").count(), 1);
    assert!(out.contains("X-Keep: 2\r\n"));
    for gone in ["X-Up", "Keep-Alive", "Server: up", "Date: x", "Connection"] {
        assert!(!out.contains(gone), "{gone}: {out}");
    }
}

#[test]
fn field_names_are_classified_case_insensitively_and_exactly() {
    let cases: [(&[u8], Field); 24] = [
        (b"TE", Field::HopByHop),
        (b"Host", Field::Host),
        (b"DATE", Field::Date),
        (b"server", Field::Server),
        (b"Expect", Field::Expect),
        (b"UpGrade", Field::Upgrade),
        (b"Trailer", Field::HopByHop),
        (b"Connection", Field::Connection),
        (b"keep-ALIVE", Field::HopByHop),
        (b"Content-Length", Field::ContentLength),
        (b"X-Forwarded-For", Field::XForwardedFor),
        (b"Proxy-Connection", Field::HopByHop),
        (b"x-forwarded-host", Field::XForwardedHost),
        (b"Transfer-Encoding", Field::TransferEncoding),
        (b"X-FORWARDED-PROTO", Field::XForwardedProto),
        (b"Content-Type", Field::Other),
        (b"X-Forwarded-Fox", Field::Other),
        // Near misses of the names above.
        (b"T", Field::Other),
        (b"TF", Field::Other),
        (b"Hosts", Field::Other),
        (b"Dat", Field::Other),
        (b"Connectio", Field::Other),
        (b"Keep-Alivf", Field::Other),
        (b"", Field::Other),
    ];
    for (name, field) in cases {
        assert_eq!(Field::of(name), field, "{}", String::from_utf8_lossy(name));
    }
    assert!(Field::ContentLength.is_hop_by_hop());
    assert!(Field::Upgrade.is_hop_by_hop());
    assert!(!Field::Host.is_hop_by_hop());
    assert!(!Field::Other.is_hop_by_hop());
}

#[test]
fn connection_options_are_gathered_from_every_connection_line() {
    let lines: [(&[u8], &[u8]); 4] = [
        (b"Connection", b"close, X-A"),
        (b"X-A", b"1"),
        (b"connection", b" , x-b ,"),
        (b"X-C", b"x-d"),
    ];
    let options = ConnectionOptions::gather(|| lines.iter().copied());
    assert!(options.overflow.is_none());
    for named in [&b"x-a"[..], b"X-B", b"Close"] {
        assert!(options.names(named), "{}", String::from_utf8_lossy(named));
    }
    for not_named in [&b"X-C"[..], b"x-d", b"X", b""] {
        assert!(!options.names(not_named));
    }
}

#[test]
fn connection_options_beyond_the_inline_list_still_name_fields() {
    let many = b"o1, o2, o3, o4, o5, o6, o7, o8, o9";
    let lines: [(&[u8], &[u8]); 2] = [(b"Connection", many), (b"Connection", b"o10")];
    let options = ConnectionOptions::gather(|| lines.iter().copied());
    assert!(options.overflow.is_some());
    for i in 1..=10 {
        assert!(options.names(format!("O{i}").as_bytes()), "o{i}");
    }
    assert!(!options.names(b"o11"));

    // Through the request and response rewrites.
    let out = rewrite(
        b"GET / HTTP/1.1\r\nHost: h\r\nConnection: a, b, c, d, e, f, g, h\r\nI: 0\r\nConnection: i\r\nA: 1\r\nH: 2\r\nJ: 3\r\nX-Forwarded-For: 1.1.1.1\r\n\r\n",
        &route(),
    );
    for gone in ["\r\nA:", "\r\nH:", "\r\nI:", "Connection"] {
        assert!(!out.contains(gone), "{gone} forwarded: {out}");
    }
    assert!(out.contains("\r\nJ: 3\r\n"), "{out}");
    assert!(
        out.contains("X-Forwarded-For: 1.1.1.1, 192.0.2.7\r\n"),
        "{out}"
    );

    let raw = b"HTTP/1.1 200 OK\r\nConnection: a,b,c,d,e,f,g,h,i\r\nI: 0\r\nA: 1\r\nJ: 3\r\nContent-Length: 0\r\n\r\n";
    let out = encode_response(raw);
    assert!(!out.contains("\r\nI:") && !out.contains("\r\nA:"), "{out}");
    assert!(out.contains("\r\nJ: 3\r\n"), "{out}");
}

#[test]
fn x_forwarded_for_named_by_connection_is_not_appended_to() {
    let out = rewrite(
        b"GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 6.6.6.6\r\nConnection: X-Forwarded-For\r\n\r\n",
        &route(),
    );
    assert!(out.contains("X-Forwarded-For: 192.0.2.7\r\n"), "{out}");
    assert!(!out.contains("6.6.6.6"), "{out}");
}

#[test]
fn response_upgrade_is_kept_only_for_a_relayed_upgrade() {
    let raw = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: k\r\n\r\n";
    let out = encode_response_as(raw, BodyFraming::None, true);
    assert!(out.contains("\r\nUpgrade: websocket\r\n"), "{out}");
    assert!(out.contains("\r\nSec-WebSocket-Accept: k\r\n"), "{out}");
    assert_eq!(out.matches("Connection: upgrade\r\n").count(), 1, "{out}");
    assert!(!out.contains("Connection: Upgrade"), "{out}");
    // Not relayed as an upgrade: dropped like any hop-by-hop field.
    let out = encode_response(raw);
    assert!(!out.contains("Upgrade"), "{out}");
}

fn encode_response(raw: &[u8]) -> String {
    encode_response_as(raw, BodyFraming::None, false)
}

/// Parses `raw` as an upstream response head and encodes it for the client,
/// the status line, framing and `Connection` as the HTTP/1 driver writes them.
fn encode_response_as(raw: &[u8], framing: BodyFraming, upgrade: bool) -> String {
    let mut resp = ParsedResponseHead::new();
    assert_eq!(
        parse_response(raw, &Limits::default(), Method::Get, &mut resp),
        Ok(Parsed::Complete)
    );
    let mut out = Vec::new();
    let connection = if upgrade {
        ConnectionHeader::Upgrade
    } else {
        ConnectionHeader::Omit
    };
    write::write_head_start(
        &mut out,
        resp.status,
        b"Thu, 01 Jan 1970 00:00:00 GMT",
        framing,
        connection,
    );
    encode_response_fields(&mut out, &resp, raw, false, upgrade);
    out.extend_from_slice(b"\r\n");
    String::from_utf8(out).unwrap()
}

#[test]
fn field_copy_matches_line_by_line_encoding_for_any_selection() {
    let raw =
        b"GET / HTTP/1.1\r\nHost: h\r\nB:2\r\nC: 3  \r\nD:\t4\r\nE: \r\nF:\r\nG: 7\r\nH: 8\r\n\r\n";
    let mut head = RequestHead::new();
    assert_eq!(
        parse_request(raw, &Limits::default(), &mut head),
        Ok(Parsed::Complete)
    );
    let spans = head.header_spans();
    assert_eq!(spans.len(), 8);
    assert_eq!(spans[0].name.get(raw), b"Host");
    for keep in 0u32..(1 << spans.len()) {
        let mut want = Vec::new();
        let mut got = Vec::new();
        let mut copy = FieldCopy::default();
        for (i, &h) in spans.iter().enumerate() {
            if keep & (1 << i) == 0 {
                continue;
            }
            want.extend_from_slice(h.name.get(raw));
            want.extend_from_slice(b": ");
            want.extend_from_slice(h.value.get(raw));
            want.extend_from_slice(b"\r\n");
            copy.field(&mut got, raw, h);
        }
        copy.finish(&mut got, raw);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "selection {keep:#b}"
        );
    }
}

#[test]
fn errors_read_as_sentences_without_debug_names() {
    let e = ProxyError::upstream(ErrorKind::Connect, "Connection refused (os error 111)");
    assert_eq!(
        e.to_string(),
        "the upstream could not be connected to: connection refused"
    );
    let e = ProxyError::upstream(ErrorKind::NoServer, "x").to_string();
    assert!(
        !e.contains("NoServer") && e.contains("has no server up"),
        "{e}"
    );
}

#[test]
fn error_sides_map_to_statuses() {
    let up = |k| ProxyError::upstream(k, "x").status();
    assert_eq!(up(ErrorKind::Connect), 502);
    assert_eq!(up(ErrorKind::Reset), 502);
    assert_eq!(up(ErrorKind::Malformed), 502);
    assert_eq!(up(ErrorKind::Timeout), 504);
    assert_eq!(up(ErrorKind::NoServer), 503);
    let down = ProxyError {
        side: Side::Downstream,
        kind: ErrorKind::Timeout,
        cause: String::new(),
    };
    assert_eq!(down.status(), 408);
}
