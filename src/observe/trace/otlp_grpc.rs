//! OTLP/gRPC: each batch is one `TraceService/Export` call, an HTTP/2 stream
//! on one kept connection without TLS (prior knowledge), driven blockingly
//! by the exporter thread over Pier's own HTTP/2 client codec
//! ([`ClientConnection`]). The request is the protobuf message behind gRPC's
//! 5-byte prefix (not compressed, its length big-endian); the call succeeded
//! when `grpc-status` is 0, in the trailers or in a trailers-only answer.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::collector_endpoint::{connect, Endpoint};
use crate::http2::client::{ClientConnection, ClientEvents, ClientLimits, ResponseHead, StreamId};
use crate::http2::ErrorCode;

/// Bytes read from the socket at once.
const READ_CHUNK: usize = 16 * 1024;
/// How long one call may take in all: a collector that keeps sending
/// without ending its answer does not hold the exporter.
const CALL_DEADLINE: Duration = Duration::from_secs(10);
/// Most characters of a collector's `grpc-message` put in the log.
const MESSAGE_MAX: usize = 200;

/// What the exporter announces and enforces: one call at a time, small
/// answers.
fn limits() -> ClientLimits {
    ClientLimits {
        max_concurrent_streams: 1,
        initial_stream_window: 64 * 1024,
        initial_connection_window: 64 * 1024,
        max_frame_size: 16 * 1024,
        header_table_size: 4096,
        max_header_list_size: 16 * 1024,
        max_header_fields: 512,
        max_control_frames: 200,
        max_error_resets: 16,
        max_empty_frames: 200,
        max_inert_frames: 2000,
        enable_connect_protocol: false,
        no_rfc7540_priorities: false,
    }
}

/// The exporter's HTTP/2 connection to an OTLP/gRPC collector.
pub struct OtlpGrpc {
    endpoint: Endpoint,
    conn: Option<GrpcConnection>,
    /// The framed message, reused from call to call.
    message: Vec<u8>,
}

/// How a call failed.
enum CallError {
    /// The connection failed: it is dropped, and a call on a kept one is
    /// tried once more on a new one.
    Connection(io::Error),
    /// The collector did not process the call (REFUSED_STREAM, as a GOAWAY
    /// read late makes it): it goes once more on a new connection.
    Refused(io::Error),
    /// The collector answered with an error; the connection goes on.
    Answer(io::Error),
}

impl OtlpGrpc {
    /// A link to `endpoint`, connected at the first export.
    pub fn new(endpoint: Endpoint) -> OtlpGrpc {
        OtlpGrpc {
            endpoint,
            conn: None,
            message: Vec::new(),
        }
    }

    /// Exports one encoded `ExportTraceServiceRequest`.
    pub fn export(&mut self, body: &[u8]) -> io::Result<()> {
        let Ok(len) = u32::try_from(body.len()) else {
            return Err(io::Error::other(
                "the batch is too large for one gRPC message",
            ));
        };
        self.message.clear();
        self.message.push(0);
        self.message.extend_from_slice(&len.to_be_bytes());
        self.message.extend_from_slice(body);
        let reused = self.conn.is_some();
        let r = match self.call() {
            Err(CallError::Connection(_)) if reused => self.call(),
            Err(CallError::Refused(_)) => self.call(),
            r => r,
        };
        match r {
            Ok(()) => Ok(()),
            Err(CallError::Answer(e)) => Err(e),
            Err(CallError::Connection(e) | CallError::Refused(e)) => {
                self.conn = None;
                Err(e)
            }
        }
    }

    /// One call on the kept connection (made first if there is none).
    fn call(&mut self) -> Result<(), CallError> {
        let conn = match &mut self.conn {
            Some(c) => c,
            None => {
                let socket = connect(&self.endpoint).map_err(CallError::Connection)?;
                self.conn.insert(GrpcConnection {
                    socket,
                    codec: ClientConnection::new(limits()),
                    input: Vec::new(),
                })
            }
        };
        let answer = conn.call(&self.endpoint, &self.message);
        if answer.as_ref().map_or(true, |a| a.goaway) || conn.codec.is_closed() {
            self.conn = None;
        }
        let answer = answer.map_err(CallError::Connection)?;
        if answer.reset == Some(ErrorCode::RefusedStream) {
            // Not processed (a GOAWAY the idle connection had not read yet).
            self.conn = None;
            let e = io::Error::other("the collector refused the call unprocessed");
            return Err(CallError::Refused(e));
        }
        answer.outcome().map_err(CallError::Answer)
    }
}

/// A connection's socket and codec.
struct GrpcConnection {
    socket: TcpStream,
    codec: ClientConnection,
    /// Bytes read and not yet taken by the codec (less than a frame).
    input: Vec<u8>,
}

impl GrpcConnection {
    /// Sends `message` on a new stream and reads until its answer ends;
    /// `Err` when the connection cannot carry it.
    fn call(&mut self, endpoint: &Endpoint, message: &[u8]) -> io::Result<CallAnswer> {
        let user_agent = concat!("pier/", env!("CARGO_PKG_VERSION")).as_bytes();
        let fields: [(&[u8], &[u8]); 3] = [
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
            (b"user-agent", user_agent),
        ];
        let stream = self
            .codec
            .open_stream(
                b"POST",
                b"http",
                endpoint.authority.as_bytes(),
                endpoint.path.as_bytes(),
                &mut fields.into_iter(),
                false,
            )
            .map_err(|_| io::Error::other("the connection takes no new call"))?;
        let mut answer = CallAnswer::new(stream);
        let mut sent = 0;
        let deadline = Instant::now() + CALL_DEADLINE;
        loop {
            if sent < message.len() && !answer.ended {
                sent += self.codec.send_data(stream, &message[sent..], true);
            }
            self.flush()?;
            if answer.ended {
                break;
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(
                    "the collector did not answer the call in time",
                ));
            }
            self.read(&mut answer)?;
            if answer.ended && sent < message.len() {
                // Answered before the whole request went: the rest is not wanted.
                self.codec.reset_stream(stream, ErrorCode::Cancel);
            }
        }
        Ok(answer)
    }

    /// Writes all the codec's queued output.
    fn flush(&mut self) -> io::Result<()> {
        while self.codec.output_len() > 0 {
            let n = self.socket.write(self.codec.output())?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.codec.consume_output(n);
        }
        Ok(())
    }

    /// Reads once and hands the codec the whole frames there are.
    fn read(&mut self, answer: &mut CallAnswer) -> io::Result<()> {
        let mut chunk = [0u8; READ_CHUNK];
        let n = self.socket.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::other(
                "the collector closed the connection mid-call",
            ));
        }
        self.input.extend_from_slice(&chunk[..n]);
        let used = self
            .codec
            .receive(&self.input, Instant::now(), answer)
            .map_err(|e| {
                io::Error::other(format!(
                    "the collector broke HTTP/2 (error code {})",
                    e.code.to_u32()
                ))
            })?;
        self.input.drain(..used);
        if answer.unreleased > 0 {
            self.codec.release(answer.stream, answer.unreleased);
            answer.unreleased = 0;
        }
        Ok(())
    }
}

/// What the collector answered to one call.
struct CallAnswer {
    stream: StreamId,
    /// The `:status` of the final head.
    status: Option<u16>,
    /// `grpc-status`, from the trailers or a trailers-only head.
    grpc_status: Option<Vec<u8>>,
    /// `grpc-message`, with it.
    grpc_message: Option<Vec<u8>>,
    /// The answer is complete, or the stream was reset.
    ended: bool,
    /// The code the stream was reset with.
    reset: Option<ErrorCode>,
    /// The collector sent GOAWAY: the next call goes on a new connection.
    goaway: bool,
    /// Response bytes to give back to the windows.
    unreleased: usize,
}

impl CallAnswer {
    fn new(stream: StreamId) -> CallAnswer {
        CallAnswer {
            stream,
            status: None,
            grpc_status: None,
            grpc_message: None,
            ended: false,
            reset: None,
            goaway: false,
            unreleased: 0,
        }
    }

    fn take_status(&mut self, fields: &ResponseHead) {
        if let Some(s) = fields.field(b"grpc-status") {
            self.grpc_status = Some(s.to_vec());
            self.grpc_message = fields.field(b"grpc-message").map(<[u8]>::to_vec);
        }
    }

    /// Whether the call succeeded, in a sentence when it did not.
    fn outcome(&self) -> io::Result<()> {
        if let Some(code) = self.reset {
            return Err(io::Error::other(format!(
                "the collector reset the call (HTTP/2 error code {})",
                code.to_u32()
            )));
        }
        match self.status {
            Some(200) => {}
            Some(s) => {
                return Err(io::Error::other(format!(
                    "the collector answered HTTP status {s}"
                )))
            }
            None => return Err(io::Error::other("the collector sent no answer head")),
        }
        let Some(status) = &self.grpc_status else {
            return Err(io::Error::other(
                "the collector's answer has no grpc-status",
            ));
        };
        if status.as_slice() == b"0" {
            return Ok(());
        }
        let code = String::from_utf8_lossy(status);
        let name = std::str::from_utf8(status)
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or("", grpc_status_name);
        let message = self
            .grpc_message
            .as_deref()
            .map(|m| {
                let text: String = String::from_utf8_lossy(m)
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(MESSAGE_MAX)
                    .collect();
                format!(": {text}")
            })
            .unwrap_or_default();
        Err(io::Error::other(format!(
            "the collector answered gRPC status {code}{name}{message}"
        )))
    }
}

/// The name of a gRPC status code, for the log (` (UNAVAILABLE)`).
fn grpc_status_name(code: u32) -> &'static str {
    match code {
        1 => " (CANCELLED)",
        2 => " (UNKNOWN)",
        3 => " (INVALID_ARGUMENT)",
        4 => " (DEADLINE_EXCEEDED)",
        5 => " (NOT_FOUND)",
        7 => " (PERMISSION_DENIED)",
        8 => " (RESOURCE_EXHAUSTED)",
        12 => " (UNIMPLEMENTED)",
        13 => " (INTERNAL)",
        14 => " (UNAVAILABLE)",
        16 => " (UNAUTHENTICATED)",
        _ => "",
    }
}

impl ClientEvents for CallAnswer {
    fn response(&mut self, stream: StreamId, head: &ResponseHead, end_stream: bool) {
        if stream != self.stream || head.is_interim() {
            return;
        }
        self.status = Some(head.status());
        if end_stream {
            // Trailers-only: the status is in the head.
            self.take_status(head);
            self.ended = true;
        }
    }

    fn data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) {
        if stream == self.stream {
            self.unreleased += data.len();
            self.ended |= end_stream;
        }
    }

    fn trailers(&mut self, stream: StreamId, fields: &ResponseHead) {
        if stream == self.stream {
            self.take_status(fields);
            self.ended = true;
        }
    }

    fn reset(&mut self, stream: StreamId, code: ErrorCode) {
        if stream == self.stream && !self.ended {
            self.reset = Some(code);
            self.ended = true;
        }
    }

    fn goaway(&mut self, _last_stream: StreamId, _code: ErrorCode) {
        self.goaway = true;
    }

    fn send_window(&mut self) {}

    fn settings(&mut self) {}
}
