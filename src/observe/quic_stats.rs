//! One worker's HTTP/3 and QUIC figures: connections, requests, open
//! streams and GOAWAYs as HTTP/2 has them, and what each QUIC connection's
//! transport counted (handshakes, packets lost, datagrams, UDP sends and
//! RTT), added as the connection goes. Rendered into `/metrics` after the
//! HTTP/2 families.

use std::fmt::Write as _;
use std::time::Duration;

use crate::observe::counter::Counter;
use crate::observe::exposition::family_head;

/// The HTTP/3 and QUIC counters of one worker (its only writer).
#[derive(Default, Debug)]
pub struct QuicStats {
    /// QUIC connections the endpoint accepted.
    pub connections: Counter,
    /// QUIC handshakes completed.
    pub handshakes: Counter,
    /// QUIC connections that ended before their handshake completed.
    pub handshakes_failed: Counter,
    /// Requests answered over HTTP/3.
    pub requests: Counter,
    /// HTTP/3 request streams being answered now (a gauge).
    pub streams_open: Counter,
    /// HTTP/3 GOAWAY frames sent.
    pub goaways: Counter,
    /// QUIC packets declared lost.
    pub packets_lost: Counter,
    /// Datagrams this worker read for a connection another worker owns,
    /// handed to that worker.
    pub packets_steered: Counter,
    /// Connections whose 0-RTT early data was accepted.
    pub early_data: Counter,
    /// Requests in early data answered 425 Too Early (not a safe method).
    pub too_early: Counter,
    /// Retry packets sent to validate a client's address.
    pub retry_sent: Counter,
    /// Connections closed for resetting too many streams before an answer.
    pub reset_floods: Counter,
    /// Connections closed for small or unknown frames past their allowance.
    pub frame_floods: Counter,
    datagrams_sent: Counter,
    datagrams_received: Counter,
    udp_sends: Counter,
    /// Smoothed RTTs sampled (see [`QuicStats::rtt_sample`]), summed in µs.
    pub rtt_sum_us: Counter,
    /// RTT samples taken.
    pub rtt_samples: Counter,
}

/// What a QUIC connection's transport counted since it began.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportFigures {
    /// Packets declared lost.
    pub packets_lost: u64,
    /// UDP datagrams sent.
    pub datagrams_sent: u64,
    /// UDP datagrams received.
    pub datagrams_received: u64,
    /// Send calls (one per GSO batch).
    pub udp_sends: u64,
}

impl QuicStats {
    /// Adds what a connection counted since `reported`, which becomes `now`.
    pub fn absorb(&self, now: TransportFigures, reported: &mut TransportFigures) {
        let add = |c: &Counter, now: u64, before: u64| c.add(now.saturating_sub(before));
        add(&self.packets_lost, now.packets_lost, reported.packets_lost);
        add(
            &self.datagrams_sent,
            now.datagrams_sent,
            reported.datagrams_sent,
        );
        add(
            &self.datagrams_received,
            now.datagrams_received,
            reported.datagrams_received,
        );
        add(&self.udp_sends, now.udp_sends, reported.udp_sends);
        *reported = now;
    }

    /// Notes a connection's smoothed round-trip time.
    pub fn rtt_sample(&self, rtt: Duration) {
        self.rtt_sum_us
            .add(u64::try_from(rtt.as_micros()).unwrap_or(u64::MAX));
        self.rtt_samples.add(1);
    }

    /// A request stream began being answered.
    pub fn stream_opened(&self) {
        self.streams_open.set(self.streams_open.get() + 1);
    }

    /// A request stream's task ended.
    pub fn stream_closed(&self) {
        self.streams_open
            .set(self.streams_open.get().saturating_sub(1));
    }
}

/// A figure of [`QuicStats`], read by the renderer.
pub type Figure = fn(&QuicStats) -> u64;

/// Single-series families: name, type, figure, help.
#[rustfmt::skip]
const FAMILIES: [(&str, &str, Figure, &str); 14] = [
    ("pier_http3_connections_total",     "counter", |q| q.connections.get(),        "QUIC connections accepted for HTTP/3."),
    ("pier_http3_requests_total",        "counter", |q| q.requests.get(),           "Requests answered over HTTP/3 (pier_requests_total counts every protocol)."),
    ("pier_http3_streams_open",          "gauge",   |q| q.streams_open.get(),       "HTTP/3 request streams being answered now."),
    ("pier_http3_goaways_sent_total",    "counter", |q| q.goaways.get(),            "HTTP/3 GOAWAY frames sent (drain)."),
    ("pier_http3_too_early_total",       "counter", |q| q.too_early.get(),          "HTTP/3 requests in 0-RTT early data answered 425 Too Early."),
    ("pier_http3_reset_floods_total",    "counter", |q| q.reset_floods.get(),       "HTTP/3 connections closed for resetting too many streams before their answers."),
    ("pier_http3_frame_floods_total",    "counter", |q| q.frame_floods.get(),       "HTTP/3 connections closed for sending too many small or unknown frames for the data they carried."),
    ("pier_quic_packets_lost_total",     "counter", |q| q.packets_lost.get(),       "QUIC packets declared lost."),
    ("pier_quic_early_data_total",       "counter", |q| q.early_data.get(),         "QUIC connections whose 0-RTT early data was accepted."),
    ("pier_quic_retry_sent_total",       "counter", |q| q.retry_sent.get(),         "QUIC Retry packets sent to validate a client's address."),
    ("pier_quic_datagrams_sent_total",   "counter", |q| q.datagrams_sent.get(),     "UDP datagrams sent by QUIC connections."),
    ("pier_quic_datagrams_received_total", "counter", |q| q.datagrams_received.get(), "UDP datagrams received by QUIC connections."),
    ("pier_quic_udp_sends_total",        "counter", |q| q.udp_sends.get(),          "UDP send calls of QUIC connections; datagrams sent over sends is the mean GSO batch."),
    ("pier_quic_packets_steered_total",  "counter", |q| q.packets_steered.get(),    "Datagrams a worker read for a connection another worker owns (the client's address changed) and handed to it."),
];

/// Writes the HTTP/3 and QUIC families; `sum` adds a figure over the workers.
pub fn render(out: &mut String, sum: &dyn Fn(Figure) -> u64) {
    for (name, kind, figure, help) in FAMILIES {
        family_head(out, name, kind, help);
        let _ = writeln!(out, "{name} {}", sum(figure));
    }
    let name = "pier_quic_handshakes_total";
    family_head(out, name, "counter", "QUIC handshakes, by result.");
    let _ = writeln!(
        out,
        "{name}{{result=\"completed\"}} {}",
        sum(|q| q.handshakes.get())
    );
    let _ = writeln!(
        out,
        "{name}{{result=\"failed\"}} {}",
        sum(|q| q.handshakes_failed.get())
    );
    let name = "pier_quic_rtt_seconds";
    family_head(
        out,
        name,
        "summary",
        "Smoothed round-trip time of QUIC connections, sampled as each HTTP/3 request is answered.",
    );
    let sum_us = sum(|q| q.rtt_sum_us.get());
    let _ = writeln!(out, "{name}_sum {}", sum_us as f64 / 1e6);
    let _ = writeln!(out, "{name}_count {}", sum(|q| q.rtt_samples.get()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_adds_only_what_is_new_since_its_last_report() {
        let q = QuicStats::default();
        let mut seen = TransportFigures::default();
        let mut now = TransportFigures {
            packets_lost: 2,
            datagrams_sent: 10,
            datagrams_received: 7,
            udp_sends: 4,
        };
        q.absorb(now, &mut seen);
        now.datagrams_sent = 15;
        q.absorb(now, &mut seen);
        q.absorb(now, &mut seen);
        assert_eq!(q.datagrams_sent.get(), 15);
        assert_eq!(q.packets_lost.get(), 2);
        assert_eq!(q.udp_sends.get(), 4);
        q.rtt_sample(Duration::from_millis(3));
        let mut out = String::new();
        render(&mut out, &|f| f(&q));
        assert!(out.contains("pier_quic_datagrams_sent_total 15\n"), "{out}");
        assert!(out.contains("pier_quic_rtt_seconds_sum 0.003\n"), "{out}");
        assert!(out.contains("pier_quic_rtt_seconds_count 1\n"), "{out}");
    }
}
