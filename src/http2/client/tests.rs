//! The client connection driven with raw frames, as an origin would send
//! them, and wired to the server connection in memory for whole exchanges
//! (request head, bodies over several windows, trailers, interim heads,
//! resets, GOAWAY). The error rules and the flood budgets facing an origin
//! are in `error_tests.rs`.

use std::time::Instant;

use super::*;
use crate::http2::conn::{Events, RequestHead, ServerConnection};
use crate::http2::frame::{self, flag, kind, PREFACE};
use crate::http2::hpack::Decoder;
pub(super) use crate::http2::shared::test_wire::*;

pub(super) type Fields = Vec<(Vec<u8>, Vec<u8>)>;

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ev {
    Response {
        stream: StreamId,
        status: u16,
        fields: Fields,
        end_stream: bool,
    },
    Data(StreamId, Vec<u8>, bool),
    Trailers(StreamId, Fields),
    Reset(StreamId, ErrorCode),
    GoAway(StreamId, ErrorCode),
    SendWindow,
    Settings,
}

#[derive(Default)]
pub(super) struct Recorder(pub(super) Vec<Ev>);

fn owned<'a>(fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Fields {
    fields.map(|(n, v)| (n.to_vec(), v.to_vec())).collect()
}

impl ClientEvents for Recorder {
    fn response(&mut self, stream: StreamId, head: &ResponseHead, end_stream: bool) {
        self.0.push(Ev::Response {
            stream,
            status: head.status(),
            fields: owned(head.fields()),
            end_stream,
        });
    }
    fn data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) {
        self.0.push(Ev::Data(stream, data.to_vec(), end_stream));
    }
    fn trailers(&mut self, stream: StreamId, fields: &ResponseHead) {
        self.0.push(Ev::Trailers(stream, owned(fields.fields())));
    }
    fn reset(&mut self, stream: StreamId, code: ErrorCode) {
        self.0.push(Ev::Reset(stream, code));
    }
    fn goaway(&mut self, last_stream: StreamId, code: ErrorCode) {
        self.0.push(Ev::GoAway(last_stream, code));
    }
    fn send_window(&mut self) {
        self.0.push(Ev::SendWindow);
    }
    fn settings(&mut self) {
        self.0.push(Ev::Settings);
    }
}

/// A response head block of literal fields.
pub(super) fn response_block(status: &str, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut f = vec![(":status", status)];
    f.extend_from_slice(fields);
    block(&f)
}

/// An origin played with raw frames: the connection under test, what it
/// reported, and the clock.
pub(super) struct Origin {
    pub(super) conn: ClientConnection,
    pub(super) events: Recorder,
    pub(super) now: Instant,
}

impl Origin {
    /// A connection past the SETTINGS exchange, its output drained.
    pub(super) fn new(limits: ClientLimits) -> Origin {
        let mut o = Origin::fresh(limits);
        let mut hello = settings(&[]);
        hello.extend(frame(kind::SETTINGS, flag::ACK, 0, &[]));
        o.send(&hello).unwrap();
        o.frames();
        o.events();
        o
    }

    pub(super) fn fresh(limits: ClientLimits) -> Origin {
        Origin {
            conn: ClientConnection::new(limits),
            events: Recorder::default(),
            now: Instant::now(),
        }
    }

    pub(super) fn events(&mut self) -> Vec<Ev> {
        std::mem::take(&mut self.events.0)
    }

    /// Opens a request (`end_stream`: without a body), its HEADERS drained.
    pub(super) fn open(&mut self, method: &str, end_stream: bool) -> StreamId {
        let id = self
            .conn
            .open_stream(
                method.as_bytes(),
                b"https",
                b"example.com",
                b"/",
                &mut std::iter::empty(),
                end_stream,
            )
            .unwrap();
        self.frames();
        id
    }
}

impl Peer for Origin {
    /// Feeds the origin's bytes, all of which must be used unless there is
    /// an error.
    #[track_caller]
    fn send(&mut self, bytes: &[u8]) -> Result<(), ConnError> {
        let n = self.conn.receive(bytes, self.now, &mut self.events)?;
        assert_eq!(n, bytes.len(), "whole frames are all used");
        Ok(())
    }

    fn core_mut(&mut self) -> &mut ConnCore {
        &mut self.conn.core
    }

    fn after_goaway(&mut self, last: &Out, code: ErrorCode) {
        assert_eq!(
            frame::read_u32(&last.payload),
            0,
            "a client processed no stream of the origin's"
        );
        assert_eq!(self.conn.error(), Some(code));
        assert!(self.conn.is_closed());
    }

    /// The caller is told of the reset too.
    fn after_reset(&mut self, stream: StreamId, code: ErrorCode) {
        assert_eq!(self.events(), [Ev::Reset(stream, code)]);
    }
}

/// What a request looked like to the server.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Request {
    stream: StreamId,
    method: Vec<u8>,
    pub(super) protocol: Option<Vec<u8>>,
    authority: Option<Vec<u8>>,
    path: Option<Vec<u8>>,
    fields: Fields,
    pub(super) end_stream: bool,
}

/// The server end's events.
#[derive(Default)]
pub(super) struct ServerLog {
    pub(super) requests: Vec<Request>,
    pub(super) body: Vec<(StreamId, Vec<u8>, bool)>,
    trailers: Vec<(StreamId, Fields)>,
    resets: Vec<(StreamId, ErrorCode)>,
}

impl Events for ServerLog {
    fn request(&mut self, stream: StreamId, head: &RequestHead, end_stream: bool) {
        self.requests.push(Request {
            stream,
            method: head.method().to_vec(),
            protocol: head.protocol().map(<[u8]>::to_vec),
            authority: head.authority().map(<[u8]>::to_vec),
            path: head.path().map(<[u8]>::to_vec),
            fields: owned(head.fields()),
            end_stream,
        });
    }
    fn data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) {
        self.body.push((stream, data.to_vec(), end_stream));
    }
    fn trailers(&mut self, stream: StreamId, fields: &RequestHead) {
        self.trailers.push((stream, owned(fields.fields())));
    }
    fn reset(&mut self, stream: StreamId, code: ErrorCode) {
        self.resets.push((stream, code));
    }
    fn send_window(&mut self) {}
}

/// A client connection wired to a server connection in memory.
pub(super) struct Pair {
    pub(super) client: ClientConnection,
    pub(super) server: ServerConnection,
    pub(super) cev: Recorder,
    pub(super) sev: ServerLog,
    now: Instant,
}

impl Pair {
    pub(super) fn new(client: ClientLimits, server: ConnLimits) -> Pair {
        let mut p = Pair {
            client: ClientConnection::new(client),
            server: ServerConnection::new(server),
            cev: Recorder::default(),
            sev: ServerLog::default(),
            now: Instant::now(),
        };
        p.pump();
        assert_eq!(p.cev.0[0], Ev::Settings, "the server's SETTINGS");
        p.cev.0.clear();
        p
    }

    /// Moves bytes both ways until neither side has anything to write.
    pub(super) fn pump(&mut self) {
        for _ in 0..1000 {
            let mut slices = [std::io::IoSlice::new(&[]); 64];
            let n = self.client.output_slices(&mut slices);
            let up = joined(&slices[..n]);
            let n = self.server.output_slices(&mut slices);
            let down = joined(&slices[..n]);
            if up.is_empty() && down.is_empty() {
                return;
            }
            self.client.consume_output(up.len());
            self.server.consume_output(down.len());
            let used = self.server.receive(&up, self.now, &mut self.sev).unwrap();
            assert_eq!(used, up.len());
            let used = self.client.receive(&down, self.now, &mut self.cev).unwrap();
            assert_eq!(used, down.len());
        }
        panic!("the two ends never went quiet");
    }

    fn open(&mut self, method: &str, path: &str, end_stream: bool) -> StreamId {
        let fields = [(&b"accept"[..], &b"*/*"[..])];
        self.client
            .open_stream(
                method.as_bytes(),
                b"https",
                b"origin.example",
                path.as_bytes(),
                &mut fields.into_iter(),
                end_stream,
            )
            .unwrap()
    }
}

/// Whatever the client received on `stream`, body bytes joined.
fn body_of(events: &[Ev], stream: StreamId) -> Vec<u8> {
    events
        .iter()
        .filter_map(|e| match e {
            Ev::Data(s, d, _) if *s == stream => Some(d.as_slice()),
            _ => None,
        })
        .flatten()
        .copied()
        .collect()
}

#[test]
fn the_preface_settings_and_window_update_go_out_first() {
    let o = Origin::fresh(limits());
    let mut want = PREFACE.to_vec();
    want.extend(settings(&[(2, 0), (4, 65_535), (5, 16_384), (6, 8192)]));
    want.extend(window_update(0, (1 << 20) - 65_535));
    assert_eq!(o.conn.output(), &want[..]);

    let mut l = limits();
    l.header_table_size = 1024;
    l.initial_connection_window = 65_535;
    let o = Origin::fresh(l);
    let mut want = PREFACE.to_vec();
    want.extend(settings(&[
        (2, 0),
        (4, 65_535),
        (5, 16_384),
        (6, 8192),
        (1, 1024),
    ]));
    assert_eq!(
        o.conn.output(),
        &want[..],
        "no WINDOW_UPDATE at the default window"
    );
}

#[test]
fn the_origins_settings_and_pings_are_acked() {
    let mut o = Origin::fresh(limits());
    o.frames();
    o.send(&settings(&[(3, 10), (0x99, 7)])).unwrap();
    let f = o.one(kind::SETTINGS);
    assert_eq!((f.flags, f.payload.len()), (flag::ACK, 0));
    assert_eq!(o.events(), [Ev::Settings]);
    assert_eq!(o.conn.available_streams(), 4, "our own limit is lower");
    o.send(&frame(kind::PING, 0, 0, b"abcdefgh")).unwrap();
    let f = o.one(kind::PING);
    assert_eq!(
        (f.flags, f.payload.as_slice()),
        (flag::ACK, &b"abcdefgh"[..])
    );

    // Our PING is acked; acks of ours are not inert frames.
    for _ in 0..30 {
        o.conn.ping(*b"12345678");
        assert_eq!(o.one(kind::PING).flags, 0);
        o.send(&frame(kind::PING, flag::ACK, 0, b"12345678"))
            .unwrap();
    }
    assert_eq!(o.conn.pings_in_flight(), 0);
}

#[test]
fn a_request_head_is_encoded_per_rfc_7541() {
    let mut o = Origin::new(limits());
    let fields = [
        (&b"user-agent"[..], &b"pier"[..]),
        (b"cookie", b"a=1"),
        (b"authorization", b"Basic c2VjcmV0"),
    ];
    let id = o
        .conn
        .open_stream(
            b"GET",
            b"https",
            b"example.com",
            b"/",
            &mut fields.into_iter(),
            true,
        )
        .unwrap();
    assert_eq!(id, 1);
    let f = o.one(kind::HEADERS);
    assert_eq!(
        (f.stream, f.flags),
        (1, flag::END_HEADERS | flag::END_STREAM)
    );
    let b = &f.payload;
    // :method GET, :scheme https and :path / are static entries 2, 7, 4
    // (one octet each, §6.1); :authority is a literal with incremental
    // indexing of static name 1 (§6.2.1).
    assert_eq!(&b[..3], [0x82, 0x87, 0x41]);
    // cookie (static 32) and authorization (static 23) are never indexed
    // (§6.2.3, §7.1.3): 0001 1111 then the rest of the index.
    let never = |index: u8| b.windows(2).any(|w| w == [0x1f, index - 15]);
    assert!(never(32) && never(23), "{b:02x?}");
    let mut got = Vec::new();
    let mut decoder = Decoder::new(4096);
    decoder
        .decode(b, &mut |n, v| got.push((n.to_vec(), v.to_vec())))
        .unwrap();
    let want: Fields = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/"),
        ("user-agent", "pier"),
        ("cookie", "a=1"),
        ("authorization", "Basic c2VjcmV0"),
    ]
    .iter()
    .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
    .collect();
    assert_eq!(got, want);

    // The second request finds the authority in the dynamic table, where
    // the first put it before user-agent (so at index 63: 0x80 | 63).
    let id = o
        .conn
        .open_stream(
            b"GET",
            b"https",
            b"example.com",
            b"/",
            &mut std::iter::empty(),
            true,
        )
        .unwrap();
    assert_eq!(id, 3);
    let f = o.one(kind::HEADERS);
    assert_eq!(f.payload, [0x82, 0x87, 0xbf, 0x84]);
    let mut got = Vec::new();
    decoder
        .decode(&f.payload, &mut |n, v| got.push((n.to_vec(), v.to_vec())))
        .unwrap();
    assert_eq!(got, want[..4]);
}

#[test]
fn a_large_request_head_spans_continuations() {
    let mut o = Origin::new(limits());
    let long = vec![b'v'; 20_000];
    let fields = [(&b"x-long"[..], &long[..])];
    o.conn
        .open_stream(
            b"GET",
            b"https",
            b"example.com",
            b"/",
            &mut fields.into_iter(),
            true,
        )
        .unwrap();
    let f = o.frames();
    assert_eq!(
        (f[0].kind, f[0].flags, f[0].payload.len()),
        (kind::HEADERS, flag::END_STREAM, 16_384)
    );
    assert_eq!(
        (f[1].kind, f[1].flags),
        (kind::CONTINUATION, flag::END_HEADERS)
    );
    let mut joined = f[0].payload.clone();
    joined.extend(&f[1].payload);
    let mut n = 0;
    Decoder::new(4096)
        .decode(&joined, &mut |_, _| n += 1)
        .unwrap();
    assert_eq!(n, 5);
}

#[test]
fn streams_open_within_the_limits_and_not_after_goaway() {
    let mut o = Origin::new(limits());
    o.send(&settings(&[(frame::setting::MAX_CONCURRENT_STREAMS, 2)]))
        .unwrap();
    o.frames();
    assert_eq!(o.conn.available_streams(), 2);
    let a = o.open("GET", true);
    o.open("GET", true);
    assert!(!o.conn.can_open());
    let r = o
        .conn
        .open_stream(b"GET", b"https", b"a", b"/", &mut std::iter::empty(), true);
    assert_eq!(r, Err(OpenError::AtLimit));
    o.send(&headers(a, &response_block("204", &[]), true))
        .unwrap();
    assert_eq!(o.conn.open_streams(), 1);
    assert_eq!(o.conn.available_streams(), 1);
    // The origin lowers the limit under what is open: nothing opens.
    o.send(&settings(&[(frame::setting::MAX_CONCURRENT_STREAMS, 0)]))
        .unwrap();
    assert_eq!(o.conn.available_streams(), 0);
    o.send(&settings(&[(frame::setting::MAX_CONCURRENT_STREAMS, 100)]))
        .unwrap();
    assert_eq!(o.conn.available_streams(), 3, "ours is 4");
    o.frames();

    o.conn.goaway(ErrorCode::NoError);
    let f = o.one(kind::GOAWAY);
    assert_eq!(frame::read_u32(&f.payload), 0);
    let r = o
        .conn
        .open_stream(b"GET", b"https", b"a", b"/", &mut std::iter::empty(), true);
    assert_eq!(r, Err(OpenError::GoingAway));
    assert_eq!(o.conn.available_streams(), 0);
    assert!(!o.conn.is_closed(), "stream 3 is still open");

    // The last stream id, then none.
    let mut o = Origin::new(limits());
    o.conn.next_stream = MAX_STREAM_ID;
    assert_eq!(o.conn.available_streams(), 1);
    assert_eq!(o.open("GET", true), MAX_STREAM_ID);
    let r = o
        .conn
        .open_stream(b"GET", b"https", b"a", b"/", &mut std::iter::empty(), true);
    assert_eq!(r, Err(OpenError::StreamIdsExhausted));
}

#[test]
fn a_get_round_trips_through_the_server() {
    let mut p = Pair::new(limits(), limits());
    let id = p.open("GET", "/a?b", true);
    p.pump();
    assert_eq!(
        p.sev.requests,
        [Request {
            stream: id,
            method: b"GET".to_vec(),
            authority: Some(b"origin.example".to_vec()),
            path: Some(b"/a?b".to_vec()),
            protocol: None,
            fields: vec![(b"accept".to_vec(), b"*/*".to_vec())],
            end_stream: true,
        }]
    );
    let fields = [(&b"content-type"[..], &b"text/plain"[..])];
    p.server
        .send_headers(id, 200, &mut fields.into_iter(), false);
    assert_eq!(p.server.send_data(id, b"hello", true), 5);
    p.pump();
    assert_eq!(
        p.cev.0,
        [
            Ev::Response {
                stream: id,
                status: 200,
                fields: vec![(b"content-type".to_vec(), b"text/plain".to_vec())],
                end_stream: false,
            },
            Ev::Data(id, b"hello".to_vec(), true),
        ]
    );
    assert_eq!((p.client.open_streams(), p.server.open_streams()), (0, 0));
}

#[test]
fn an_empty_owned_buffer_with_end_stream_ends_the_request() {
    let mut p = Pair::new(limits(), limits());
    let id = p.open("POST", "/up", false);
    assert_eq!(
        p.client
            .send_data_owned(id, bytes::Bytes::from_static(b"abc"), false),
        3
    );
    assert_eq!(p.client.send_data_owned(id, bytes::Bytes::new(), true), 0);
    p.pump();
    assert!(
        p.sev.body.last().is_some_and(|b| b.2),
        "the server saw END_STREAM: {:?}",
        p.sev.body
    );
}

#[test]
fn large_bodies_flow_over_several_windows_both_ways() {
    let mut cl = limits();
    cl.initial_stream_window = 20_000;
    cl.initial_connection_window = 65_535;
    let mut sl = limits();
    sl.initial_stream_window = 30_000;
    sl.initial_connection_window = 65_535;
    let mut p = Pair::new(cl, sl);
    let upload: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let id = p.open("POST", "/up", false);
    let mut sent = 0;
    let mut released = 0;
    for round in 0..1000 {
        let end = (sent + p.client.send_capacity(id)).min(upload.len());
        let last = end == upload.len();
        // Every other round as an owned buffer, which goes out without a
        // copy.
        sent += if round % 2 == 0 {
            p.client.send_data(id, &upload[sent..end], last)
        } else {
            let owned = bytes::Bytes::copy_from_slice(&upload[sent..end]);
            p.client.send_data_owned(id, owned, last)
        };
        p.pump();
        // The server's driver consumes what arrived, reopening the windows.
        let got: usize = p.sev.body.iter().map(|b| b.1.len()).sum();
        p.server.release(id, got - released);
        released = got;
        p.pump();
        if p.sev.body.last().is_some_and(|b| b.2) {
            break;
        }
    }
    let received: Vec<u8> = p.sev.body.iter().flat_map(|b| b.1.clone()).collect();
    assert_eq!(received, upload, "the upload arrived whole and in order");
    assert!(p.sev.body.len() > 10, "in many DATA frames");

    p.server
        .send_headers(id, 200, &mut std::iter::empty(), false);
    let download: Vec<u8> = upload.iter().rev().copied().collect();
    let mut sent = 0;
    let mut released_client = 0;
    for _ in 0..1000 {
        if sent < download.len() {
            sent += p.server.send_data(id, &download[sent..], true);
        }
        p.pump();
        let got = body_of(&p.cev.0, id).len();
        p.client.release(id, got - released_client);
        released_client = got;
        p.pump();
        if matches!(p.cev.0.last(), Some(Ev::Data(_, _, true))) {
            break;
        }
    }
    assert_eq!(body_of(&p.cev.0, id), download);
    assert!(
        p.cev.0.iter().filter(|e| matches!(e, Ev::Data(..))).count() > 10,
        "in many DATA frames"
    );
    assert_eq!((p.client.open_streams(), p.server.open_streams()), (0, 0));
}

#[test]
fn trailers_go_both_ways() {
    let mut p = Pair::new(limits(), limits());
    let id = p.open("POST", "/grpc.Svc/Call", false);
    assert_eq!(p.client.send_data(id, b"request", false), 7);
    let te = [(&b"x-checksum"[..], &b"abc"[..])];
    p.client.send_trailers(id, &mut te.into_iter());
    assert_eq!(p.client.send_data(id, b"late", true), 0, "ended");
    p.pump();
    assert_eq!(p.sev.body, [(id, b"request".to_vec(), false)]);
    assert_eq!(
        p.sev.trailers,
        [(id, vec![(b"x-checksum".to_vec(), b"abc".to_vec())])]
    );
    p.server
        .send_headers(id, 200, &mut std::iter::empty(), false);
    p.server.send_data(id, b"reply", false);
    let t = [(&b"grpc-status"[..], &b"0"[..])];
    p.server.send_trailers(id, &mut t.into_iter());
    p.pump();
    assert_eq!(
        p.cev.0[1..],
        [
            Ev::Data(id, b"reply".to_vec(), false),
            Ev::Trailers(id, vec![(b"grpc-status".to_vec(), b"0".to_vec())]),
        ]
    );
    assert_eq!(p.client.open_streams(), 0);
}

#[test]
fn interim_heads_come_before_the_final_one() {
    let mut p = Pair::new(limits(), limits());
    let id = p.open("GET", "/", true);
    p.pump();
    let link = [(&b"link"[..], &b"</style.css>; rel=preload"[..])];
    p.server.send_headers(id, 103, &mut link.into_iter(), false);
    p.server
        .send_headers(id, 100, &mut std::iter::empty(), false);
    p.server
        .send_headers(id, 200, &mut std::iter::empty(), true);
    p.pump();
    let statuses: Vec<(u16, bool)> = p
        .cev
        .0
        .iter()
        .map(|e| match e {
            Ev::Response {
                status, end_stream, ..
            } => (*status, *end_stream),
            e => panic!("{e:?}"),
        })
        .collect();
    assert_eq!(statuses, [(103, false), (100, false), (200, true)]);
    assert_eq!(p.client.open_streams(), 0);
}

#[test]
fn resets_go_both_ways() {
    let mut p = Pair::new(limits(), limits());
    let a = p.open("POST", "/", false);
    let b = p.open("GET", "/", true);
    p.pump();
    p.client.reset_stream(a, ErrorCode::Cancel);
    p.server.reset_stream(b, ErrorCode::InternalError);
    p.pump();
    assert_eq!(p.sev.resets, [(a, ErrorCode::Cancel)]);
    assert_eq!(p.cev.0, [Ev::Reset(b, ErrorCode::InternalError)]);
    assert_eq!((p.client.open_streams(), p.server.open_streams()), (0, 0));
    assert_eq!(p.client.send_data(a, b"x", true), 0);
}

#[test]
fn goaway_refuses_the_streams_above_its_last_and_lets_the_rest_finish() {
    let mut p = Pair::new(limits(), limits());
    let a = p.open("GET", "/", true);
    let b = p.open("GET", "/", true);
    p.pump();
    p.server.goaway(ErrorCode::NoError);
    // Crosses the GOAWAY: the server never takes it.
    let c = p.open("GET", "/", true);
    p.pump();
    assert_eq!(
        p.cev.0,
        [
            Ev::GoAway(b, ErrorCode::NoError),
            Ev::Reset(c, ErrorCode::RefusedStream),
        ]
    );
    assert_eq!(p.sev.requests.len(), 2);
    assert!(!p.client.can_open());
    p.cev.0.clear();
    for id in [a, b] {
        p.server
            .send_headers(id, 204, &mut std::iter::empty(), true);
    }
    p.pump();
    assert_eq!(p.cev.0.len(), 2);
    assert!(p.client.is_closed(), "going away and nothing left open");
}

#[test]
fn an_early_complete_response_then_no_error_stops_the_upload() {
    let mut p = Pair::new(limits(), limits());
    let id = p.open("POST", "/up", false);
    assert_eq!(p.client.send_data(id, b"part", false), 4);
    p.pump();
    // The server answers before the body ends and asks the client to stop
    // sending (RFC 9113 §8.1).
    p.server
        .send_headers(id, 413, &mut std::iter::empty(), true);
    p.server.reset_stream(id, ErrorCode::NoError);
    p.pump();
    assert!(matches!(
        p.cev.0[..],
        [
            Ev::Response {
                status: 413,
                end_stream: true,
                ..
            },
            Ev::Reset(_, ErrorCode::NoError)
        ]
    ));
    assert_eq!(p.client.open_streams(), 0);
    assert_eq!(p.client.send_capacity(id), 0);
    assert_eq!(p.client.send_data(id, b"more", true), 0);
}

#[test]
fn padding_is_released_at_once() {
    let mut l = limits();
    l.initial_stream_window = 100;
    let mut o = Origin::new(l);
    let id = o.open("GET", true);
    o.send(&headers(id, &response_block("200", &[]), false))
        .unwrap();
    o.events();
    let mut p = vec![59];
    p.extend([b'x'; 10]);
    p.extend([0; 59]);
    o.send(&frame(kind::DATA, flag::PADDED, id, &p)).unwrap();
    assert_eq!(o.events(), [Ev::Data(id, vec![b'x'; 10], false)]);
    let f = o.one(kind::WINDOW_UPDATE);
    assert_eq!(
        (f.stream, frame::read_u32(&f.payload)),
        (id, 60),
        "pad byte and padding"
    );
}

#[test]
fn an_idle_connection_holds_no_buffers_but_its_hpack_tables() {
    let mut l = limits();
    l.max_header_list_size = 32_768;
    let mut p = Pair::new(l, limits());
    let long = vec![b'v'; 20_000];
    let id = p.open("GET", "/", true);
    p.pump();
    let fields = [(&b"x-long"[..], &long[..])];
    p.server
        .send_headers(id, 200, &mut fields.into_iter(), false);
    p.server.send_data(id, b"body", true);
    // The head spans a CONTINUATION: the client joins it in its block.
    p.pump();
    assert_eq!(p.cev.0.len(), 2);
    p.client.release_idle_buffers();
    assert_eq!(p.client.core.out.capacity(), 0);
    assert_eq!(p.client.core.block.capacity(), 0);
    assert_eq!(p.client.core.streams.capacity(), 0);
    assert!(p.client.head.list.buffers_released());
}
