//! OTLP/protobuf encoding of finished spans
//! (`opentelemetry/proto/trace/v1/trace.proto`, `collector/trace/v1`), written
//! straight into a reused buffer with `prost`'s wire primitives: a worker
//! encodes a request's spans without building message objects, and the
//! exporter wraps the spans of many requests into one
//! `ExportTraceServiceRequest` by copying bytes.

use std::borrow::Cow;

use prost::encoding::{encode_varint, encoded_len_varint, WireType};

use crate::http::request_trace::SpanEvent;
use crate::http::trace_context::{SpanId, TraceId};

/// `Span.SpanKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// `SPAN_KIND_SERVER`: Pier answering a client.
    Server = 2,
    /// `SPAN_KIND_CLIENT`: Pier asking an upstream.
    Client = 3,
}

/// An attribute value.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    /// A text from the request (bytes that are not UTF-8 are replaced, as
    /// protobuf strings must be UTF-8).
    Str(&'a [u8]),
    /// A text Pier made (an address, a status, a label): ASCII, not checked.
    Ascii(&'a [u8]),
    /// An integer.
    Int(i64),
}

/// One span, as borrowed views of what the request recorded.
pub struct SpanOut<'a> {
    /// The trace.
    pub trace_id: &'a TraceId,
    /// This span.
    pub span_id: &'a SpanId,
    /// The parent span, absent for a trace's root.
    pub parent: Option<&'a SpanId>,
    /// The W3C `tracestate` the trace came with (empty when none).
    pub trace_state: &'a [u8],
    /// The span's name, its parts joined by a space (`GET /api/`).
    pub name: [&'a [u8]; 2],
    /// Server or client.
    pub kind: SpanKind,
    /// Start and end, nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
    /// Attributes already encoded (by [`encode_attribute`]), copied as
    /// they are ahead of `attributes`: those that stay the same from one
    /// request to the next, encoded once.
    pub prepared: &'a [u8],
    /// Attributes, by OpenTelemetry's semantic conventions.
    pub attributes: &'a [(&'static Key, Value<'a>)],
    /// Events, each with its `error.type`.
    pub events: &'a [SpanEvent],
    /// Whether the span's status is an error.
    pub error: bool,
}

/// Field numbers, by message.
mod field {
    pub const REQUEST_RESOURCE_SPANS: u32 = 1;
    pub const RESOURCE_SPANS_RESOURCE: u32 = 1;
    pub const RESOURCE_SPANS_SCOPE_SPANS: u32 = 2;
    pub const RESOURCE_ATTRIBUTES: u32 = 1;
    pub const SCOPE_SPANS_SCOPE: u32 = 1;
    pub const SCOPE_SPANS_SPANS: u32 = 2;
    pub const SCOPE_NAME: u32 = 1;
    pub const SCOPE_VERSION: u32 = 2;
    pub const SPAN_TRACE_ID: u32 = 1;
    pub const SPAN_SPAN_ID: u32 = 2;
    pub const SPAN_TRACE_STATE: u32 = 3;
    pub const SPAN_PARENT_SPAN_ID: u32 = 4;
    pub const SPAN_NAME: u32 = 5;
    pub const SPAN_KIND: u32 = 6;
    pub const SPAN_START: u32 = 7;
    pub const SPAN_END: u32 = 8;
    pub const SPAN_ATTRIBUTES: u32 = 9;
    pub const SPAN_EVENTS: u32 = 11;
    pub const SPAN_STATUS: u32 = 15;
    pub const EVENT_TIME: u32 = 1;
    pub const EVENT_NAME: u32 = 2;
    pub const EVENT_ATTRIBUTES: u32 = 3;
    pub const STATUS_CODE: u32 = 3;
    pub const KEY_VALUE_KEY: u32 = 1;
    pub const KEY_VALUE_VALUE: u32 = 2;
    pub const ANY_STRING: u32 = 1;
    pub const ANY_INT: u32 = 3;
}

/// `Status.StatusCode.STATUS_CODE_ERROR`.
const STATUS_ERROR: u64 = 2;

/// Room for a key's encoded start: the longest semantic-convention key Pier
/// writes is 25 bytes.
const KEY_ROOM: usize = 40;

/// An attribute key with what every `KeyValue` of it starts with written
/// ahead: its `key` field, then the `value` field's tag. Keys are constants
/// (see [`keys`]), so an attribute costs the copy of these bytes.
pub struct Key {
    head: [u8; KEY_ROOM],
    len: u8,
}

impl Key {
    /// `name`'s encoded start (at compile time for the constants).
    pub const fn new(name: &str) -> Key {
        let b = name.as_bytes();
        assert!(b.len() + 3 <= KEY_ROOM);
        let mut head = [0u8; KEY_ROOM];
        head[0] = tag_byte(field::KEY_VALUE_KEY, WireType::LengthDelimited);
        head[1] = b.len() as u8;
        let mut i = 0;
        while i < b.len() {
            head[2 + i] = b[i];
            i += 1;
        }
        head[2 + b.len()] = tag_byte(field::KEY_VALUE_VALUE, WireType::LengthDelimited);
        Key {
            head,
            len: (b.len() + 3) as u8,
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.head[..usize::from(self.len)]
    }
}

pub mod keys {
    //! The attribute keys Pier writes (OpenTelemetry's HTTP semantic
    //! conventions); each constant is its key's name in capitals.
    #![allow(missing_docs)]
    use super::Key;

    pub const HTTP_REQUEST_METHOD: Key = Key::new("http.request.method");
    pub const URL_PATH: Key = Key::new("url.path");
    pub const URL_SCHEME: Key = Key::new("url.scheme");
    pub const NETWORK_PROTOCOL_VERSION: Key = Key::new("network.protocol.version");
    pub const CLIENT_ADDRESS: Key = Key::new("client.address");
    pub const HTTP_ROUTE: Key = Key::new("http.route");
    pub const HTTP_RESPONSE_STATUS_CODE: Key = Key::new("http.response.status_code");
    pub const SERVER_ADDRESS: Key = Key::new("server.address");
    pub const SERVER_PORT: Key = Key::new("server.port");
    pub const USER_AGENT_ORIGINAL: Key = Key::new("user_agent.original");
    pub const CACHE_OUTCOME: Key = Key::new("pier.cache.outcome");
    pub const ERROR_TYPE: Key = Key::new("error.type");
    pub const HTTP_REQUEST_RESEND_COUNT: Key = Key::new("http.request.resend_count");
    pub const SERVICE_NAME: Key = Key::new("service.name");
}

/// A field's key when it fits one byte (field numbers below 16).
const fn tag_byte(tag: u32, wire: WireType) -> u8 {
    assert!(tag < 16);
    ((tag << 3) | wire as u32) as u8
}

/// Writes a field's key: one byte, as every field Pier writes is numbered
/// below 16.
#[inline(always)]
fn put_key(out: &mut Vec<u8>, tag: u32, wire: WireType) {
    out.push(tag_byte(tag, wire));
}

#[inline(always)]
fn put_varint(out: &mut Vec<u8>, v: u64) {
    if v < 0x80 {
        out.push(v as u8);
    } else {
        encode_varint(v, out);
    }
}

fn varint_len(v: u64) -> usize {
    if v < 0x80 {
        1
    } else {
        encoded_len_varint(v)
    }
}

/// A length-delimited field whose body `body` writes: two bytes are kept
/// for the length, which is enough below 16 KiB (a span); a body under 128
/// bytes slides back one byte, a longer one than 16 KiB makes room.
fn nested(out: &mut Vec<u8>, tag: u32, body: impl FnOnce(&mut Vec<u8>)) {
    put_key(out, tag, WireType::LengthDelimited);
    let at = out.len();
    out.extend_from_slice(&[0, 0]);
    let start = out.len();
    body(out);
    let len = out.len() - start;
    if len < 0x80 {
        out[at] = len as u8;
        out.remove(at + 1);
    } else if len < 0x4000 {
        out[at] = (len as u8 & 0x7f) | 0x80;
        out[at + 1] = (len >> 7) as u8;
    } else {
        let mut length = [0u8; 10];
        let mut room = &mut length[..];
        encode_varint(len as u64, &mut room);
        let n = 10 - room.len();
        out.splice(at..at + 2, length[..n].iter().copied());
    }
}

/// A length-delimited field's key and length, its `len` bytes to follow.
#[inline(always)]
fn length_delimited(out: &mut Vec<u8>, tag: u32, len: usize) {
    put_key(out, tag, WireType::LengthDelimited);
    put_varint(out, len as u64);
}

fn bytes_field(out: &mut Vec<u8>, tag: u32, v: &[u8]) {
    length_delimited(out, tag, v.len());
    out.extend_from_slice(v);
}

/// `v` as protobuf takes a string: as it is when UTF-8, else with
/// replacement characters.
fn text(v: &[u8]) -> Cow<'_, [u8]> {
    // Nearly every text is ASCII, which is checked a word at a time.
    if v.is_ascii() {
        return Cow::Borrowed(v);
    }
    match std::str::from_utf8(v) {
        Ok(_) => Cow::Borrowed(v),
        Err(_) => Cow::Owned(String::from_utf8_lossy(v).into_owned().into_bytes()),
    }
}

fn fixed64(out: &mut Vec<u8>, tag: u32, v: u64) {
    put_key(out, tag, WireType::SixtyFourBit);
    out.extend_from_slice(&v.to_le_bytes());
}

fn varint_field(out: &mut Vec<u8>, tag: u32, v: u64) {
    put_key(out, tag, WireType::Varint);
    put_varint(out, v);
}

/// One `KeyValue` as field `tag`: every length is known before it is
/// written, so nothing is moved.
fn key_value(out: &mut Vec<u8>, tag: u32, key: &Key, value: Value<'_>) {
    let checked;
    let (any_key, any_len, s, int) = match value {
        Value::Int(i) => {
            let any_key = tag_byte(field::ANY_INT, WireType::Varint);
            (any_key, 1 + varint_len(i as u64), &[][..], i as u64)
        }
        Value::Str(s) => {
            checked = text(s);
            let s = &checked[..];
            let any_key = tag_byte(field::ANY_STRING, WireType::LengthDelimited);
            (any_key, 1 + varint_len(s.len() as u64) + s.len(), s, 0)
        }
        Value::Ascii(s) => {
            let any_key = tag_byte(field::ANY_STRING, WireType::LengthDelimited);
            (any_key, 1 + varint_len(s.len() as u64) + s.len(), s, 0)
        }
    };
    let kv_len = key.bytes().len() + varint_len(any_len as u64) + any_len;
    put_key(out, tag, WireType::LengthDelimited);
    put_varint(out, kv_len as u64);
    out.extend_from_slice(key.bytes());
    put_varint(out, any_len as u64);
    out.push(any_key);
    if let Value::Int(_) = value {
        put_varint(out, int);
    } else {
        put_varint(out, s.len() as u64);
        out.extend_from_slice(s);
    }
}

/// Appends one span attribute (a `Span.attributes` field), for
/// [`SpanOut::prepared`].
pub fn encode_attribute(out: &mut Vec<u8>, key: &Key, value: Value<'_>) {
    key_value(out, field::SPAN_ATTRIBUTES, key, value);
}

/// Appends `span` as one `ScopeSpans.spans` field: what the exporter later
/// places, as it is, inside a request.
pub fn encode_span(out: &mut Vec<u8>, span: &SpanOut<'_>) {
    nested(out, field::SCOPE_SPANS_SPANS, |out| {
        bytes_field(out, field::SPAN_TRACE_ID, span.trace_id);
        bytes_field(out, field::SPAN_SPAN_ID, span.span_id);
        if !span.trace_state.is_empty() {
            bytes_field(out, field::SPAN_TRACE_STATE, span.trace_state);
        }
        if let Some(p) = span.parent {
            bytes_field(out, field::SPAN_PARENT_SPAN_ID, p);
        }
        let (first, second) = (text(span.name[0]), text(span.name[1]));
        let name_len = first.len()
            + if second.is_empty() {
                0
            } else {
                1 + second.len()
            };
        put_key(out, field::SPAN_NAME, WireType::LengthDelimited);
        put_varint(out, name_len as u64);
        out.extend_from_slice(&first);
        if !second.is_empty() {
            out.push(b' ');
            out.extend_from_slice(&second);
        }
        varint_field(out, field::SPAN_KIND, span.kind as u64);
        fixed64(out, field::SPAN_START, span.start_ns);
        fixed64(out, field::SPAN_END, span.end_ns.max(span.start_ns));
        out.extend_from_slice(span.prepared);
        for (k, v) in span.attributes {
            key_value(out, field::SPAN_ATTRIBUTES, k, *v);
        }
        for e in span.events {
            nested(out, field::SPAN_EVENTS, |out| {
                fixed64(out, field::EVENT_TIME, e.at_ns);
                bytes_field(out, field::EVENT_NAME, e.name.as_bytes());
                let error = Value::Ascii(e.error.as_bytes());
                key_value(out, field::EVENT_ATTRIBUTES, &keys::ERROR_TYPE, error);
            });
        }
        if span.error {
            nested(out, field::SPAN_STATUS, |out| {
                varint_field(out, field::STATUS_CODE, STATUS_ERROR)
            });
        }
    });
}

/// Writes an `ExportTraceServiceRequest` holding `spans` (each made by
/// [`encode_span`]) under one resource named `service_name`. Every length is
/// known before it is written, so the batch is copied once and never moved.
pub fn encode_request(out: &mut Vec<u8>, service_name: &str, spans: &[Vec<u8>]) {
    let mut resource = Vec::new();
    nested(&mut resource, field::RESOURCE_SPANS_RESOURCE, |out| {
        key_value(
            out,
            field::RESOURCE_ATTRIBUTES,
            &keys::SERVICE_NAME,
            Value::Str(service_name.as_bytes()),
        );
    });
    let scope_len = scope_len();
    let scope_spans_len = scope_len + spans.iter().map(Vec::len).sum::<usize>();
    let resource_spans_len =
        resource.len() + 1 + encoded_len_varint(scope_spans_len as u64) + scope_spans_len;
    length_delimited(out, field::REQUEST_RESOURCE_SPANS, resource_spans_len);
    let at = out.len();
    out.extend_from_slice(&resource);
    length_delimited(out, field::RESOURCE_SPANS_SCOPE_SPANS, scope_spans_len);
    let scope_at = out.len();
    nested(out, field::SCOPE_SPANS_SCOPE, |out| {
        bytes_field(out, field::SCOPE_NAME, b"pier");
        bytes_field(
            out,
            field::SCOPE_VERSION,
            env!("CARGO_PKG_VERSION").as_bytes(),
        );
    });
    debug_assert_eq!(out.len() - scope_at, scope_len);
    for s in spans {
        out.extend_from_slice(s);
    }
    debug_assert_eq!(out.len() - at, resource_spans_len);
}

/// Bytes of the `ScopeSpans.scope` field as [`encode_request`] writes it.
fn scope_len() -> usize {
    let version = env!("CARGO_PKG_VERSION").len();
    let body = 2 + 4 + 1 + encoded_len_varint(version as u64) + version;
    1 + encoded_len_varint(body as u64) + body
}

pub mod decoded {
    //! The OTLP messages as `prost` derives them (the fields Pier writes), to
    //! read exported spans back: the encoder's tests and the integration
    //! tests' collector decode with an implementation that is not the
    //! encoder's.
    #![allow(missing_docs)]

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExportTraceServiceRequest {
        #[prost(message, repeated, tag = "1")]
        pub resource_spans: Vec<ResourceSpans>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResourceSpans {
        #[prost(message, optional, tag = "1")]
        pub resource: Option<Resource>,
        #[prost(message, repeated, tag = "2")]
        pub scope_spans: Vec<ScopeSpans>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Resource {
        #[prost(message, repeated, tag = "1")]
        pub attributes: Vec<KeyValue>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ScopeSpans {
        #[prost(message, optional, tag = "1")]
        pub scope: Option<Scope>,
        #[prost(message, repeated, tag = "2")]
        pub spans: Vec<Span>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Scope {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub version: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Span {
        #[prost(bytes = "vec", tag = "1")]
        pub trace_id: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        pub span_id: Vec<u8>,
        #[prost(string, tag = "3")]
        pub trace_state: String,
        #[prost(bytes = "vec", tag = "4")]
        pub parent_span_id: Vec<u8>,
        #[prost(string, tag = "5")]
        pub name: String,
        #[prost(int32, tag = "6")]
        pub kind: i32,
        #[prost(fixed64, tag = "7")]
        pub start_time_unix_nano: u64,
        #[prost(fixed64, tag = "8")]
        pub end_time_unix_nano: u64,
        #[prost(message, repeated, tag = "9")]
        pub attributes: Vec<KeyValue>,
        #[prost(message, repeated, tag = "11")]
        pub events: Vec<Event>,
        #[prost(message, optional, tag = "15")]
        pub status: Option<Status>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Event {
        #[prost(fixed64, tag = "1")]
        pub time_unix_nano: u64,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(message, repeated, tag = "3")]
        pub attributes: Vec<KeyValue>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Status {
        #[prost(string, tag = "2")]
        pub message: String,
        #[prost(int32, tag = "3")]
        pub code: i32,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeyValue {
        #[prost(string, tag = "1")]
        pub key: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<AnyValue>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AnyValue {
        #[prost(oneof = "any_value::Value", tags = "1, 3")]
        pub value: Option<any_value::Value>,
    }
    pub mod any_value {
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Value {
            #[prost(string, tag = "1")]
            StringValue(String),
            #[prost(int64, tag = "3")]
            IntValue(i64),
        }
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::decoded::{any_value, ExportTraceServiceRequest};
    use super::*;

    fn attr(span: &decoded::Span, key: &str) -> Option<any_value::Value> {
        span.attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.clone()?.value)
    }

    #[test]
    fn spans_decode_as_otlp_with_every_field() {
        let trace_id = [7u8; 16];
        let (server, client) = ([1u8; 8], [2u8; 8]);
        let parent = [9u8; 8];
        let mut prepared = Vec::new();
        encode_attribute(
            &mut prepared,
            &keys::HTTP_REQUEST_METHOD,
            Value::Str(b"GET"),
        );
        let mut one = Vec::new();
        encode_span(
            &mut one,
            &SpanOut {
                trace_id: &trace_id,
                span_id: &server,
                parent: Some(&parent),
                trace_state: b"rojo=1",
                name: [b"GET", b"/api/"],
                kind: SpanKind::Server,
                start_ns: 1_000,
                end_ns: 5_000,
                prepared: &prepared,
                attributes: &[
                    (&keys::USER_AGENT_ORIGINAL, Value::Str(b"bad \xff")),
                    (&keys::HTTP_RESPONSE_STATUS_CODE, Value::Int(502)),
                    (&keys::SERVER_ADDRESS, Value::Ascii(b"10.0.0.1")),
                ],
                events: &[SpanEvent {
                    at_ns: 2_000,
                    name: "retry",
                    error: "reset",
                }],
                error: true,
            },
        );
        let mut two = Vec::new();
        encode_span(
            &mut two,
            &SpanOut {
                trace_id: &trace_id,
                span_id: &client,
                parent: Some(&server),
                trace_state: b"",
                name: [b"GET", b""],
                kind: SpanKind::Client,
                start_ns: 1_500,
                end_ns: 1_000,
                prepared: &[],
                attributes: &[(&keys::SERVER_PORT, Value::Int(8080))],
                events: &[],
                error: false,
            },
        );
        let mut out = Vec::new();
        encode_request(&mut out, "edge-\u{e9}", &[one, two]);
        let req = ExportTraceServiceRequest::decode(&out[..]).unwrap();
        assert_eq!(req.resource_spans.len(), 1);
        let rs = &req.resource_spans[0];
        let service = &rs.resource.as_ref().unwrap().attributes[0];
        assert_eq!(service.key, "service.name");
        assert_eq!(
            service.value.clone().unwrap().value,
            Some(any_value::Value::StringValue("edge-\u{e9}".into()))
        );
        let scope = &rs.scope_spans[0];
        assert_eq!(scope.scope.as_ref().unwrap().name, "pier");
        let spans = &scope.spans;
        assert_eq!(spans.len(), 2);
        let s = &spans[0];
        assert_eq!(s.trace_id, trace_id);
        assert_eq!(s.span_id, server);
        assert_eq!(s.parent_span_id, parent);
        assert_eq!(s.trace_state, "rojo=1");
        assert_eq!(s.name, "GET /api/");
        assert_eq!(s.kind, 2);
        assert_eq!(
            (s.start_time_unix_nano, s.end_time_unix_nano),
            (1_000, 5_000)
        );
        assert_eq!(s.status.as_ref().unwrap().code, 2);
        assert_eq!(
            attr(s, "user_agent.original"),
            Some(any_value::Value::StringValue("bad \u{fffd}".into()))
        );
        assert_eq!(
            attr(s, "http.response.status_code"),
            Some(any_value::Value::IntValue(502))
        );
        // The prepared attribute is there as those written one by one.
        assert_eq!(
            attr(s, "http.request.method"),
            Some(any_value::Value::StringValue("GET".into()))
        );
        assert_eq!(
            attr(s, "server.address"),
            Some(any_value::Value::StringValue("10.0.0.1".into()))
        );
        assert_eq!(s.events[0].name, "retry");
        assert_eq!(s.events[0].time_unix_nano, 2_000);
        assert_eq!(s.events[0].attributes[0].key, "error.type");
        let c = &spans[1];
        assert_eq!((c.kind, c.name.as_str()), (3, "GET"));
        assert_eq!(c.parent_span_id, server);
        assert!(c.status.is_none());
        // An end before the start (a clock step) is clamped to the start.
        assert_eq!(c.end_time_unix_nano, 1_500);
        assert_eq!(
            attr(c, "server.port"),
            Some(any_value::Value::IntValue(8080))
        );
    }

    #[test]
    fn long_nested_fields_take_multi_byte_lengths() {
        // A span under 128 bytes, one under 16 KiB and one past it.
        for size in [3, 300, 20_000] {
            let big = vec![b'a'; size];
            let mut one = Vec::new();
            encode_span(
                &mut one,
                &SpanOut {
                    trace_id: &[1; 16],
                    span_id: &[1; 8],
                    parent: None,
                    trace_state: b"",
                    name: [&big, b""],
                    kind: SpanKind::Server,
                    start_ns: 1,
                    end_ns: 2,
                    prepared: &[],
                    attributes: &[(&keys::URL_PATH, Value::Str(&big))],
                    events: &[],
                    error: false,
                },
            );
            let mut out = Vec::new();
            encode_request(&mut out, "pier", &[one]);
            let req = ExportTraceServiceRequest::decode(&out[..]).unwrap();
            let s = &req.resource_spans[0].scope_spans[0].spans[0];
            assert_eq!(s.name.len(), size);
            assert_eq!(
                attr(s, "url.path"),
                Some(any_value::Value::StringValue("a".repeat(size)))
            );
            assert!(s.parent_span_id.is_empty());
        }
    }
}
