//! The peer's control stream (RFC 9114 §6.2.1): SETTINGS first and once
//! (the frame parser enforces that), then GOAWAY, MAX_PUSH_ID and
//! CANCEL_PUSH, whose ids are checked here against the ones before them
//! (§5.2, §7.2.3, §7.2.7), and a client's PRIORITY_UPDATE (RFC 9218 §7.2).
//! Closing the stream is a connection error.

use super::frame_reader::{FrameEvent, FrameLimits, FrameReader, StreamKind};
use super::settings::Settings;
use super::{Error, ErrorCode, Role};
use crate::http::priority::Priority;

/// What the peer's control stream said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlEvent {
    /// The peer's settings, once, first.
    Settings(Settings),
    /// The peer is going away: a server names the first client stream it
    /// will not process, a client the first push id it refuses.
    Goaway(u64),
    /// A client allows pushes up to this id.
    MaxPushId(u64),
    /// A push is cancelled.
    CancelPush(u64),
    /// The client changed a request's priority (RFC 9218 §7.2): the
    /// request stream's id and its new priority.
    PriorityUpdate(u64, Priority),
}

/// The state of the peer's control stream.
#[derive(Debug)]
pub struct ControlStream {
    frames: FrameReader,
    role: Role,
    last_goaway: Option<u64>,
    /// The largest push id allowed: the client's MAX_PUSH_ID at a server;
    /// at a client, the one it sent (none: this client takes no push).
    max_push_id: Option<u64>,
}

impl ControlStream {
    /// The peer's control stream, read on the `role` side.
    pub fn new(role: Role, limits: FrameLimits) -> Self {
        ControlStream {
            frames: FrameReader::new(StreamKind::Control, role, limits),
            role,
            last_goaway: None,
            max_push_id: None,
        }
    }

    /// Reads from `input` as [`FrameReader::read`] does: how many bytes were
    /// taken and the event, if any.
    pub fn read(&mut self, input: &[u8]) -> Result<(usize, Option<ControlEvent>), Error> {
        let (n, event) = self.frames.read(input)?;
        let event = match event {
            None => None,
            Some(FrameEvent::Settings(s)) => Some(ControlEvent::Settings(s)),
            Some(FrameEvent::Goaway(id)) => {
                self.check_goaway(id)?;
                Some(ControlEvent::Goaway(id))
            }
            Some(FrameEvent::MaxPushId(id)) => {
                if self.max_push_id.is_some_and(|max| id < max) {
                    return Err(Error::connection(
                        ErrorCode::IdError,
                        "The client lowered its MAX_PUSH_ID.",
                    ));
                }
                self.max_push_id = Some(id);
                Some(ControlEvent::MaxPushId(id))
            }
            Some(FrameEvent::CancelPush(id)) => {
                if self.max_push_id.is_none_or(|max| id > max) {
                    return Err(Error::connection(
                        ErrorCode::IdError,
                        "The peer cancelled a push id that was never allowed.",
                    ));
                }
                Some(ControlEvent::CancelPush(id))
            }
            Some(FrameEvent::PriorityUpdate {
                push: false,
                id,
                value,
            }) => {
                if id % 4 != 0 {
                    return Err(Error::connection(
                        ErrorCode::IdError,
                        "A PRIORITY_UPDATE names a stream that is not a client request stream.",
                    ));
                }
                Some(ControlEvent::PriorityUpdate(
                    id,
                    Priority::from_field_lines([value]),
                ))
            }
            Some(FrameEvent::PriorityUpdate { push: true, id, .. }) => {
                if self.max_push_id.is_none_or(|max| id > max) {
                    return Err(Error::connection(
                        ErrorCode::IdError,
                        "A PRIORITY_UPDATE names a push id that was never allowed.",
                    ));
                }
                // Nothing is pushed here: there is no push to reorder.
                None
            }
            Some(_) => unreachable!("the parser lets only control frames through"),
        };
        Ok((n, event))
    }

    /// The frame credits this stream's frames cost since the last call
    /// ([`super::frame_budget`]).
    pub fn take_spent(&mut self) -> u64 {
        self.frames.take_spent()
    }

    /// The peer closed its control stream: always a connection error
    /// (§6.2.1).
    pub fn finished(&self) -> Error {
        Error::connection(
            ErrorCode::ClosedCriticalStream,
            "The peer closed its control stream.",
        )
    }

    fn check_goaway(&mut self, id: u64) -> Result<(), Error> {
        if self.role == Role::Client && id % 4 != 0 {
            return Err(Error::connection(
                ErrorCode::IdError,
                "The server's GOAWAY names a stream that is not a client request stream.",
            ));
        }
        if self.last_goaway.is_some_and(|last| id > last) {
            return Err(Error::connection(
                ErrorCode::IdError,
                "The peer's GOAWAY raises the id of an earlier one.",
            ));
        }
        self.last_goaway = Some(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http3::frame::{self, write_goaway, write_id_frame, write_settings};

    fn control(role: Role, frames: &[(u64, u64)]) -> Result<Vec<ControlEvent>, Error> {
        let mut bytes = Vec::new();
        for &(ty, id) in frames {
            write_id_frame(ty, id, &mut bytes);
        }
        read_after_settings(role, &bytes)
    }

    /// The events of a control stream of SETTINGS, then `frames`.
    fn read_after_settings(role: Role, frames: &[u8]) -> Result<Vec<ControlEvent>, Error> {
        let mut bytes = Vec::new();
        write_settings(&Settings::default(), &mut bytes);
        bytes.extend_from_slice(frames);
        let mut c = ControlStream::new(role, FrameLimits::default());
        let mut input = &bytes[..];
        let mut got = Vec::new();
        while !input.is_empty() {
            let (n, e) = c.read(input)?;
            input = &input[n..];
            got.extend(e);
        }
        Ok(got)
    }

    #[test]
    fn goaway_ids_may_only_go_down() {
        let got = control(
            Role::Server,
            &[(frame::GOAWAY, 9), (frame::GOAWAY, 9), (frame::GOAWAY, 3)],
        );
        assert_eq!(got.unwrap().len(), 4);
        let e = control(Role::Server, &[(frame::GOAWAY, 3), (frame::GOAWAY, 4)]).unwrap_err();
        assert_eq!(e.code, ErrorCode::IdError);
    }

    #[test]
    fn a_server_goaway_names_a_client_request_stream() {
        assert!(control(Role::Client, &[(frame::GOAWAY, 8), (frame::GOAWAY, 4)]).is_ok());
        for id in [1, 2, 3, 5] {
            let e = control(Role::Client, &[(frame::GOAWAY, id)]).unwrap_err();
            assert_eq!(e.code, ErrorCode::IdError, "id {id}");
        }
        let mut out = Vec::new();
        write_goaway(0, &mut out);
        assert_eq!(out, [0x07, 0x01, 0x00]);
    }

    #[test]
    fn push_ids_follow_max_push_id() {
        let ok = control(
            Role::Server,
            &[
                (frame::MAX_PUSH_ID, 4),
                (frame::CANCEL_PUSH, 4),
                (frame::MAX_PUSH_ID, 4),
            ],
        );
        assert_eq!(
            ok.unwrap()[1..],
            [
                ControlEvent::MaxPushId(4),
                ControlEvent::CancelPush(4),
                ControlEvent::MaxPushId(4)
            ]
        );
        let lowered = control(
            Role::Server,
            &[(frame::MAX_PUSH_ID, 4), (frame::MAX_PUSH_ID, 3)],
        );
        assert_eq!(lowered.unwrap_err().code, ErrorCode::IdError);
        let beyond = control(
            Role::Server,
            &[(frame::MAX_PUSH_ID, 4), (frame::CANCEL_PUSH, 5)],
        );
        assert_eq!(beyond.unwrap_err().code, ErrorCode::IdError);
        let never = control(Role::Server, &[(frame::CANCEL_PUSH, 0)]);
        assert_eq!(never.unwrap_err().code, ErrorCode::IdError);
        // This client allows no push: any CANCEL_PUSH names a push id never allowed.
        let client = control(Role::Client, &[(frame::CANCEL_PUSH, 0)]);
        assert_eq!(client.unwrap_err().code, ErrorCode::IdError);
    }

    #[test]
    fn priority_updates_name_client_request_streams() {
        let read = |role, ty, id: u64, value: &[u8]| {
            let mut payload = Vec::new();
            crate::http3::varint::write(id, &mut payload);
            payload.extend_from_slice(value);
            let mut bytes = Vec::new();
            frame::write_header(ty, payload.len() as u64, &mut bytes);
            bytes.extend_from_slice(&payload);
            read_after_settings(role, &bytes)
        };
        let update = frame::PRIORITY_UPDATE_REQUEST;
        let got = read(Role::Server, update, 8, b"u=0, i").unwrap();
        let urgent = Priority {
            urgency: 0,
            incremental: true,
        };
        assert_eq!(got[1], ControlEvent::PriorityUpdate(8, urgent));
        // A value that is no dictionary is the default priority.
        let got = read(Role::Server, update, 4, b"u=((").unwrap();
        assert_eq!(got[1], ControlEvent::PriorityUpdate(4, Priority::default()));
        let e = read(Role::Server, update, 2, b"u=1").unwrap_err();
        assert_eq!(e.code, ErrorCode::IdError);
        // No push was allowed.
        let e = read(Role::Server, frame::PRIORITY_UPDATE_PUSH, 0, b"u=1").unwrap_err();
        assert_eq!(e.code, ErrorCode::IdError);
        // A server does not send it.
        let e = read(Role::Client, update, 0, b"u=1").unwrap_err();
        assert_eq!(e.code, ErrorCode::FrameUnexpected);
        // Nor does it come on a request stream.
        let mut r = crate::http3::frame_reader::FrameReader::new(
            crate::http3::frame_reader::StreamKind::Request,
            Role::Server,
            FrameLimits::default(),
        );
        let mut bytes = Vec::new();
        frame::write_priority_update(0, b"u=1", &mut bytes);
        assert_eq!(r.read(&bytes).unwrap_err().code, ErrorCode::FrameUnexpected);
    }

    #[test]
    fn closing_the_control_stream_is_a_connection_error() {
        let c = ControlStream::new(Role::Server, FrameLimits::default());
        assert_eq!(c.finished().code, ErrorCode::ClosedCriticalStream);
    }
}
