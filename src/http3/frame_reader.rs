//! The incremental frame parser of one stream: takes the stream's bytes
//! split anywhere, checks each frame type against the stream it came on
//! (RFC 9114 §7.2 and its table in Appendix A.2), and hands out frames.
//!
//! DATA payloads are handed out as slices of the input, never buffered.
//! Other frames are held whole, within limits fixed up front: a HEADERS or
//! PUSH_PROMISE payload over its limit is skipped and reported (the request
//! is answered 431 rather than the connection closed), any other frame over
//! its limit is H3_EXCESSIVE_LOAD; no length the peer declares is ever
//! allocated. Unknown and reserved frame types are skipped unread (§9).
//! What each frame costs the connection's [`super::frame_budget`] is
//! counted here, for the driver to take.

use super::frame::{self, is_http2_only};
use super::frame_budget::frame_cost;
use super::settings::Settings;
use super::varint::PartialVarint;
use super::{Error, ErrorCode, Role};

/// What a stream carries, which decides the frames it may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// The peer's control stream: SETTINGS first, then GOAWAY, MAX_PUSH_ID,
    /// CANCEL_PUSH.
    Control,
    /// A request stream: HEADERS, DATA, and PUSH_PROMISE toward a client.
    Request,
    /// A push stream toward a client: HEADERS and DATA.
    Push,
}

/// The most a stream holds of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLimits {
    /// The largest HEADERS (or PUSH_PROMISE field section) held whole.
    pub max_field_section: usize,
    /// The largest other frame held whole (SETTINGS, GOAWAY, ...).
    pub max_control_payload: usize,
}

impl Default for FrameLimits {
    fn default() -> Self {
        FrameLimits {
            max_field_section: 64 * 1024,
            max_control_payload: 4096,
        }
    }
}

/// One frame, or one piece of a DATA frame.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameEvent<'a> {
    /// A piece of a DATA frame's payload, in order; an empty DATA frame
    /// comes as one empty piece.
    Data(&'a [u8]),
    /// A whole HEADERS payload: an encoded field section.
    Headers(&'a [u8]),
    /// A HEADERS frame longer than `max_field_section`, with its length:
    /// its payload is skipped.
    HeadersTooLarge(u64),
    /// A PUSH_PROMISE frame (toward a client).
    PushPromise {
        /// The push id promised.
        push_id: u64,
        /// The promised request's encoded field section.
        field_section: &'a [u8],
    },
    /// The peer's SETTINGS.
    Settings(Settings),
    /// CANCEL_PUSH with its push id.
    CancelPush(u64),
    /// GOAWAY with its stream or push id.
    Goaway(u64),
    /// MAX_PUSH_ID with its push id.
    MaxPushId(u64),
    /// PRIORITY_UPDATE (RFC 9218 §7.2): of a request stream, or (`push`)
    /// of a push, with the `priority` field value.
    PriorityUpdate {
        /// The frame names a push id rather than a request stream.
        push: bool,
        /// The request stream's or the push's id.
        id: u64,
        /// The `priority` field value.
        value: &'a [u8],
    },
}

#[derive(Clone, Copy, Debug)]
enum State {
    /// Reading a frame type.
    Type(PartialVarint),
    /// Reading the length of a frame of type `ty`.
    Length { ty: u64, len: PartialVarint },
    /// Handing out a DATA payload.
    Data { remaining: u64 },
    /// Holding a payload of type `ty` until it is whole.
    Hold { ty: u64, remaining: usize },
    /// Skipping an unknown frame's payload, or an oversized HEADERS.
    Skip { remaining: u64 },
}

/// The frame parser of one stream.
#[derive(Debug)]
pub struct FrameReader {
    kind: StreamKind,
    role: Role,
    limits: FrameLimits,
    state: State,
    /// A control stream's first frame was read (it must be SETTINGS).
    first_frame_seen: bool,
    /// Frame credits spent since the driver last took them.
    spent: u64,
    buf: Vec<u8>,
}

impl FrameReader {
    /// A parser for a stream of `kind`, on the `role` side of the
    /// connection.
    pub fn new(kind: StreamKind, role: Role, limits: FrameLimits) -> Self {
        FrameReader {
            kind,
            role,
            limits,
            state: State::Type(PartialVarint::default()),
            first_frame_seen: false,
            spent: 0,
            buf: Vec::new(),
        }
    }

    /// The frame credits this stream's frames cost since the last call
    /// (small and unknown frames, [`frame_cost`]).
    pub fn take_spent(&mut self) -> u64 {
        std::mem::take(&mut self.spent)
    }

    /// Reads from `input` until one event is ready or the input is used up:
    /// how many bytes were taken, and the event if any. Call again with the
    /// rest: a call with input left over always returns an event.
    pub fn read<'a>(
        &'a mut self,
        input: &'a [u8],
    ) -> Result<(usize, Option<FrameEvent<'a>>), Error> {
        let mut pos = 0;
        loop {
            let rest = &input[pos..];
            if rest.is_empty() {
                return Ok((pos, None));
            }
            let is_data = matches!(self.state, State::Data { .. });
            match &mut self.state {
                State::Type(partial) => {
                    let (ty, n) = partial.feed(rest);
                    pos += n;
                    if let Some(ty) = ty {
                        self.check_type(ty)?;
                        self.state = State::Length {
                            ty,
                            len: PartialVarint::default(),
                        };
                    }
                }
                State::Length { ty, len } => {
                    let ty = *ty;
                    let (len, n) = len.feed(rest);
                    pos += n;
                    if let Some(len) = len {
                        if let Some(event) = self.start_payload(ty, len)? {
                            return Ok((pos, Some(event)));
                        }
                    }
                }
                State::Data { remaining } | State::Skip { remaining } => {
                    let take = rest
                        .len()
                        .min(usize::try_from(*remaining).unwrap_or(usize::MAX));
                    *remaining -= take as u64;
                    if *remaining == 0 {
                        self.state = State::Type(PartialVarint::default());
                    }
                    if is_data {
                        return Ok((pos + take, Some(FrameEvent::Data(&rest[..take]))));
                    }
                    pos += take;
                }
                State::Hold { ty, remaining } => {
                    let ty = *ty;
                    let take = rest.len().min(*remaining);
                    self.buf.extend_from_slice(&rest[..take]);
                    *remaining -= take;
                    pos += take;
                    if *remaining > 0 {
                        return Ok((pos, None));
                    }
                    self.state = State::Type(PartialVarint::default());
                    let event = self.held_frame(ty)?;
                    return Ok((pos, Some(event)));
                }
            }
        }
    }

    /// The stream ended cleanly: an error if it ended inside a frame
    /// (§7.1).
    pub fn finish(&self) -> Result<(), Error> {
        match self.state {
            State::Type(partial) if !partial.is_started() => Ok(()),
            _ => Err(Error::connection(
                ErrorCode::FrameError,
                "A stream ended in the middle of a frame.",
            )),
        }
    }

    /// Whether the stream is between frames.
    pub fn at_frame_boundary(&self) -> bool {
        matches!(self.state, State::Type(p) if !p.is_started())
    }

    /// Drops the buffer's allocation, for a stream that goes quiet.
    pub fn release_buffer(&mut self) {
        self.buf = Vec::new();
    }

    /// Checks that a frame of type `ty` may come on this stream now.
    fn check_type(&mut self, ty: u64) -> Result<(), Error> {
        let unexpected = |reason| Err(Error::connection(ErrorCode::FrameUnexpected, reason));
        if is_http2_only(ty) {
            return unexpected("The peer sent an HTTP/2 frame type that HTTP/3 does not have.");
        }
        let first = !self.first_frame_seen;
        self.first_frame_seen = true;
        match self.kind {
            StreamKind::Control => {
                if first && ty != frame::SETTINGS {
                    return Err(Error::connection(
                        ErrorCode::MissingSettings,
                        "The peer's control stream does not open with SETTINGS.",
                    ));
                }
                match ty {
                    frame::SETTINGS if !first => {
                        unexpected("The peer sent a second SETTINGS frame.")
                    }
                    frame::DATA | frame::HEADERS | frame::PUSH_PROMISE => {
                        unexpected("The peer sent a message frame on its control stream.")
                    }
                    frame::MAX_PUSH_ID if self.role == Role::Client => {
                        unexpected("The server sent MAX_PUSH_ID, which only clients send.")
                    }
                    frame::PRIORITY_UPDATE_REQUEST | frame::PRIORITY_UPDATE_PUSH
                        if self.role == Role::Client =>
                    {
                        unexpected("The server sent PRIORITY_UPDATE, which only clients send.")
                    }
                    _ => Ok(()),
                }
            }
            StreamKind::Request | StreamKind::Push => match ty {
                frame::DATA | frame::HEADERS => Ok(()),
                frame::PUSH_PROMISE if self.kind == StreamKind::Request => {
                    if self.role == Role::Server {
                        unexpected("The client sent PUSH_PROMISE, which only servers send.")
                    } else {
                        Ok(())
                    }
                }
                frame::CANCEL_PUSH
                | frame::SETTINGS
                | frame::GOAWAY
                | frame::MAX_PUSH_ID
                | frame::PUSH_PROMISE
                | frame::PRIORITY_UPDATE_REQUEST
                | frame::PRIORITY_UPDATE_PUSH => {
                    unexpected("The peer sent a control frame on a request or push stream.")
                }
                _ => Ok(()),
            },
        }
    }

    /// A frame's header is read: what to do with its `len` bytes of payload.
    fn start_payload(&mut self, ty: u64, len: u64) -> Result<Option<FrameEvent<'static>>, Error> {
        let known = matches!(
            ty,
            frame::HEADERS
                | frame::SETTINGS
                | frame::PUSH_PROMISE
                | frame::GOAWAY
                | frame::MAX_PUSH_ID
                | frame::CANCEL_PUSH
                | frame::PRIORITY_UPDATE_REQUEST
                | frame::PRIORITY_UPDATE_PUSH
        );
        let cost = frame_cost(known || ty == frame::DATA, ty == frame::HEADERS, len);
        self.spent = self.spent.saturating_add(cost);
        if ty == frame::DATA {
            if len == 0 {
                self.state = State::Type(PartialVarint::default());
                return Ok(Some(FrameEvent::Data(&[])));
            }
            self.state = State::Data { remaining: len };
            return Ok(None);
        }
        if !known {
            self.skip(len);
            return Ok(None);
        }
        let limit = match ty {
            frame::HEADERS => self.limits.max_field_section,
            // The push id, then the field section.
            frame::PUSH_PROMISE => self.limits.max_field_section + 8,
            _ => self.limits.max_control_payload,
        };
        if len > limit as u64 {
            if ty == frame::HEADERS {
                self.skip(len);
                return Ok(Some(FrameEvent::HeadersTooLarge(len)));
            }
            return Err(Error::connection(
                ErrorCode::ExcessiveLoad,
                "The peer sent a frame larger than this side holds.",
            ));
        }
        self.buf.clear();
        self.buf.reserve(len as usize);
        self.state = State::Hold {
            ty,
            remaining: len as usize,
        };
        if len == 0 {
            self.state = State::Type(PartialVarint::default());
            return self.held_frame(ty).map(|e| Some(e.into_static()));
        }
        Ok(None)
    }

    fn skip(&mut self, len: u64) {
        self.state = if len == 0 {
            State::Type(PartialVarint::default())
        } else {
            State::Skip { remaining: len }
        };
    }

    /// The frame of type `ty` whose payload is held whole in `buf`.
    fn held_frame(&self, ty: u64) -> Result<FrameEvent<'_>, Error> {
        let payload = &self.buf[..];
        Ok(match ty {
            frame::HEADERS => FrameEvent::Headers(payload),
            frame::SETTINGS => FrameEvent::Settings(Settings::parse(payload)?),
            frame::PUSH_PROMISE => {
                let (push_id, field_section) = frame::parse_push_promise(payload)?;
                FrameEvent::PushPromise {
                    push_id,
                    field_section,
                }
            }
            frame::GOAWAY => FrameEvent::Goaway(frame::parse_id_payload(payload)?),
            frame::MAX_PUSH_ID => FrameEvent::MaxPushId(frame::parse_id_payload(payload)?),
            frame::PRIORITY_UPDATE_REQUEST | frame::PRIORITY_UPDATE_PUSH => {
                let (id, value) = frame::parse_priority_update(payload)?;
                FrameEvent::PriorityUpdate {
                    push: ty == frame::PRIORITY_UPDATE_PUSH,
                    id,
                    value,
                }
            }
            _ => FrameEvent::CancelPush(frame::parse_id_payload(payload)?),
        })
    }
}

impl FrameEvent<'_> {
    /// An event that borrows nothing (an empty payload), with any lifetime.
    fn into_static(self) -> FrameEvent<'static> {
        match self {
            FrameEvent::Data(_) => FrameEvent::Data(&[]),
            FrameEvent::Headers(_) => FrameEvent::Headers(&[]),
            FrameEvent::HeadersTooLarge(n) => FrameEvent::HeadersTooLarge(n),
            FrameEvent::PushPromise { push_id, .. } => FrameEvent::PushPromise {
                push_id,
                field_section: &[],
            },
            FrameEvent::Settings(s) => FrameEvent::Settings(s),
            FrameEvent::CancelPush(id) => FrameEvent::CancelPush(id),
            FrameEvent::Goaway(id) => FrameEvent::Goaway(id),
            FrameEvent::MaxPushId(id) => FrameEvent::MaxPushId(id),
            FrameEvent::PriorityUpdate { push, id, .. } => FrameEvent::PriorityUpdate {
                push,
                id,
                value: &[],
            },
        }
    }
}

#[cfg(test)]
#[path = "frame_reader_tests.rs"]
mod tests;
