//! Extensible Priorities (RFC 9218) on the server: the `priority` field of
//! a request, PRIORITY_UPDATE frames and their errors, and the order in
//! which streams are granted send capacity.

use super::tests::*;
use super::*;
use crate::http::priority::Priority;
use crate::http2::frame::{flag, kind, PREFACE};
use crate::http2::shared::schedule::INCREMENTAL_CHUNK;

fn get_with_priority(priority: &str) -> Vec<u8> {
    let mut f = GET.to_vec();
    f.push(("priority", priority));
    block(&f)
}

fn priority_update(on: u32, stream: u32, value: &str) -> Vec<u8> {
    let mut payload = stream.to_be_bytes().to_vec();
    payload.extend_from_slice(value.as_bytes());
    frame(kind::PRIORITY_UPDATE, 0, on, &payload)
}

fn priority_of(c: &Client, stream: StreamId) -> Option<Priority> {
    c.conn.core.streams.get(stream).map(|s| s.priority)
}

fn p(urgency: u8, incremental: bool) -> Priority {
    Priority {
        urgency,
        incremental,
    }
}

#[test]
fn the_priority_field_sets_a_streams_priority() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_with_priority("u=0"), true))
        .unwrap();
    c.send(&headers(3, &get_with_priority("u=5, i"), true))
        .unwrap();
    c.send(&headers(5, &get_block(), true)).unwrap();
    c.send(&headers(7, &get_with_priority("u=9, i=x"), true))
        .unwrap();
    assert_eq!(priority_of(&c, 1), Some(p(0, false)));
    assert_eq!(priority_of(&c, 3), Some(p(5, true)));
    assert_eq!(priority_of(&c, 5), Some(Priority::default()));
    assert_eq!(priority_of(&c, 7), Some(Priority::default()));
}

#[test]
fn priority_update_applies_to_open_and_idle_streams() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_with_priority("u=4"), true))
        .unwrap();
    c.events();
    c.send(&priority_update(0, 1, "u=1, i")).unwrap();
    assert_eq!(priority_of(&c, 1), Some(p(1, true)));
    assert_eq!(
        c.events(),
        vec![Ev::SendWindow],
        "waiting streams look again"
    );
    // A value that is not a dictionary changes nothing.
    c.send(&priority_update(0, 1, "u=2,")).unwrap();
    assert_eq!(priority_of(&c, 1), Some(p(1, true)));
    // Before its HEADERS: kept, and it wins over the field.
    c.send(&priority_update(0, 3, "u=6")).unwrap();
    c.send(&headers(3, &get_with_priority("u=0"), true))
        .unwrap();
    assert_eq!(priority_of(&c, 3), Some(p(6, false)));
    // For a closed stream, or a push stream: dropped.
    c.conn.send_headers(1, 200, &mut std::iter::empty(), true);
    c.send(&priority_update(0, 1, "u=0")).unwrap();
    c.send(&priority_update(0, 2, "u=0")).unwrap();
    assert_eq!(priority_of(&c, 1), None);
    assert!(c.frames().iter().all(|f| f.kind != kind::GOAWAY));
}

#[test]
fn a_priority_update_off_stream_0_or_for_stream_0_is_a_protocol_error() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_block(), false)).unwrap();
    c.frames();
    c.expect_goaway(&priority_update(1, 1, "u=0"), ErrorCode::ProtocolError);
    let mut c = Client::new(limits());
    c.expect_goaway(&priority_update(0, 0, "u=0"), ErrorCode::ProtocolError);
    let mut c = Client::new(limits());
    c.expect_goaway(
        &frame(kind::PRIORITY_UPDATE, 0, 0, &[0, 0, 1]),
        ErrorCode::FrameSizeError,
    );
}

#[test]
fn priority_updates_are_counted_as_inert_frames() {
    let mut c = Client::new(limits());
    let update = priority_update(0, 1, "u=2");
    for _ in 0..limits().max_inert_frames {
        c.send(&update).unwrap();
    }
    c.expect_goaway(&update, ErrorCode::EnhanceYourCalm);
}

#[test]
fn no_rfc7540_priorities_is_announced_when_asked() {
    let mut l = limits();
    l.no_rfc7540_priorities = true;
    let c = Client::fresh(l);
    let mut want = settings(&[(3, 4), (4, 65_535), (5, 16_384), (6, 8192), (9, 1)]);
    want.extend(window_update(0, (1 << 20) - 65_535));
    assert_eq!(c.conn.output(), &want[..]);
}

/// A client with large stream windows, streams 1, 3, 5 and 7 open with
/// their response heads sent, and the connection's send window spent, so
/// every stream that asks to send is told to wait.
fn four_streams_waiting(priorities: [&str; 4]) -> Client {
    let mut c = Client::fresh(limits());
    let mut hello = PREFACE.to_vec();
    hello.extend(settings(&[(4, 1 << 20)]));
    hello.extend(frame(kind::SETTINGS, flag::ACK, 0, &[]));
    c.send(&hello).unwrap();
    for (i, priority) in priorities.into_iter().enumerate() {
        let id = 2 * i as u32 + 1;
        c.send(&headers(id, &get_with_priority(priority), true))
            .unwrap();
        c.conn.send_headers(id, 200, &mut std::iter::empty(), false);
    }
    let spend = vec![0; 65_535];
    assert_eq!(c.conn.grant_send(7, 65_535, usize::MAX), 65_535);
    assert_eq!(c.conn.send_data(7, &spend, false), 65_535);
    for id in [1, 3, 5, 7] {
        assert_eq!(c.conn.grant_send(id, 100_000, usize::MAX), 0);
    }
    assert_eq!(c.conn.next_sender(), None, "no window");
    c.send(&window_update(0, 1 << 24)).unwrap();
    c.frames();
    c
}

#[test]
fn the_lowest_urgency_sends_first() {
    let mut c = four_streams_waiting(["u=5", "u=3", "u=0", "u=3"]);
    assert_eq!(c.conn.next_sender(), Some(5));
    for id in [1, 3, 7] {
        assert_eq!(c.conn.grant_send(id, 100_000, usize::MAX), 0, "{id}");
    }
    assert_eq!(c.conn.grant_send(5, 100_000, usize::MAX), 100_000);
    assert_eq!(c.conn.send_data(5, &[0; 10], true), 10);
    // Urgency 3 next, in stream order (non-incremental: one at a time).
    assert_eq!(c.conn.next_sender(), Some(3));
    assert_eq!(c.conn.grant_send(7, 100_000, usize::MAX), 0);
    assert_eq!(c.conn.grant_send(3, 100_000, usize::MAX), 100_000);
    assert_eq!(c.conn.send_data(3, &[0; 100_000], false), 100_000);
    assert_eq!(
        c.conn.grant_send(3, 100_000, usize::MAX),
        100_000,
        "3 goes on"
    );
    assert_eq!(c.conn.send_data(3, &[0; 10], true), 10);
    assert_eq!(c.conn.next_sender(), Some(7));
    assert_eq!(c.conn.grant_send(1, 100_000, usize::MAX), 0);
    assert_eq!(c.conn.grant_send(7, 100_000, usize::MAX), 100_000);
    assert_eq!(c.conn.send_data(7, &[], true), 0);
    assert_eq!(c.conn.next_sender(), Some(1));
    assert_eq!(c.conn.grant_send(1, 100_000, usize::MAX), 100_000);
}

#[test]
fn a_small_body_at_once_waits_for_a_stream_that_goes_first() {
    let mut c = four_streams_waiting(["u=5", "u=3", "u=0", "u=3"]);
    assert!(
        !c.conn.send_data_at_once(1, b"hello", usize::MAX),
        "5 first"
    );
    assert!(c.output_bytes().is_empty());
    assert_eq!(c.conn.next_sender(), Some(5));
    assert!(c.conn.send_data_at_once(5, b"hello", usize::MAX));
    let f = c.frames();
    assert_eq!(f.len(), 1);
    assert_eq!(
        (f[0].kind, f[0].flags, f[0].stream),
        (kind::DATA, flag::END_STREAM, 5)
    );
    assert_eq!(c.conn.next_sender(), Some(3));
    assert!(
        !c.conn.send_data_at_once(7, b"hello", usize::MAX),
        "3 first"
    );
    assert!(c.conn.send_data_at_once(3, b"hello", usize::MAX));
    assert_eq!(c.conn.next_sender(), Some(7));
}

#[test]
fn a_stream_whose_window_is_shut_lets_the_next_send() {
    let mut c = four_streams_waiting(["u=0", "u=1", "u=2", "u=3"]);
    // Stream 1's own window is spent: it holds no one back.
    let window = c.conn.send_capacity(1);
    assert_eq!(c.conn.grant_send(1, window, usize::MAX), window);
    let chunk = vec![0; 1 << 20];
    let mut left = window;
    while left > 0 {
        left -= c.conn.send_data(1, &chunk[..left.min(chunk.len())], false);
    }
    assert_eq!(c.conn.grant_send(1, 10, usize::MAX), 0);
    assert_eq!(c.conn.next_sender(), Some(3));
    assert_eq!(c.conn.grant_send(5, 10, usize::MAX), 0);
    assert_eq!(c.conn.grant_send(3, 10, usize::MAX), 10);
    // Its window reopens: first again.
    c.send(&window_update(1, 100)).unwrap();
    assert_eq!(c.conn.next_sender(), Some(1));
    assert_eq!(c.conn.grant_send(3, 10, usize::MAX), 0);
}

#[test]
fn incremental_streams_of_one_urgency_take_turns() {
    let mut c = four_streams_waiting(["u=5, i", "u=5, i", "u=5, i", "u=6"]);
    // Stream 7 (urgency 6) is never reached while they have data.
    let mut order = Vec::new();
    for _ in 0..6 {
        let next = c.conn.next_sender().unwrap();
        for other in [1, 3, 5, 7].into_iter().filter(|&id| id != next) {
            assert_eq!(c.conn.grant_send(other, 100_000, usize::MAX), 0);
        }
        let n = c.conn.grant_send(next, 100_000, usize::MAX);
        assert_eq!(n, INCREMENTAL_CHUNK, "one turn's worth");
        assert_eq!(c.conn.send_data(next, &vec![0; n], false), n);
        // The stream comes back for more and waits for the others.
        assert_eq!(c.conn.grant_send(next, 100_000, usize::MAX), 0);
        order.push(next);
    }
    assert_eq!(order, [1, 3, 5, 1, 3, 5]);
}

#[test]
fn non_incremental_go_before_incremental_of_the_same_urgency() {
    let mut c = four_streams_waiting(["u=3, i", "u=3", "u=3, i", "u=3"]);
    assert_eq!(c.conn.next_sender(), Some(3));
    assert_eq!(c.conn.grant_send(1, 10, usize::MAX), 0);
    assert_eq!(c.conn.grant_send(3, 10, usize::MAX), 10);
    assert_eq!(c.conn.send_data(3, &[0; 10], true), 10);
    assert_eq!(c.conn.next_sender(), Some(7));
}

#[test]
fn a_single_stream_is_never_held_back_nor_cut() {
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_with_priority("u=7, i"), true))
        .unwrap();
    c.conn.send_headers(1, 200, &mut std::iter::empty(), false);
    assert_eq!(c.conn.grant_send(1, 60_000, usize::MAX), 60_000);
    assert_eq!(c.conn.next_sender(), None, "it was not told to wait");
}

#[test]
fn a_responses_priority_field_overrides_the_requests() {
    // RFC 9218 §8: the server may take the origin's word over the client's.
    let mut c = Client::new(limits());
    c.send(&headers(1, &get_with_priority("u=5, i"), true))
        .unwrap();
    c.conn.set_response_priority(1, p(0, false));
    assert_eq!(priority_of(&c, 1), Some(p(0, false)));
    c.conn.set_response_priority(1, p(6, true));
    assert_eq!(priority_of(&c, 1), Some(p(6, true)));
}
