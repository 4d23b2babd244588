//! The fast path of `pier bench http`: plain HTTP/1.1, keep-alive, closed loop
//! (any pipelining depth) — the shape of every throughput comparison — driven
//! by one edge-triggered epoll loop per client thread, as wrk is, but without
//! wrk's two `epoll_ctl` calls per request.
//!
//! On loopback the kernel's TCP path is most of a request's cost for client and
//! server alike, so what the client adds on top decides whether it can keep up
//! with the server it measures. This loop adds one `send` and one `recv` per
//! request (the socket stays registered for input and output once, and a short
//! read means drained), a share of `epoll_wait`, and no scheduler: an event
//! carries the connection's index, and the connection's state is a slot in a
//! vector. Parsing and accounting are the general (tokio) engine's, from
//! [`super::http_conn`]: the shared response codec, the same `Slot` counts and
//! the same error kinds. TLS, `--rate` and `--new-conn` go through the general
//! engine, where the handshake or the timer dominates anyway.

use std::io;
use std::time::Duration;

use rustix::buffer::spare_capacity;
use rustix::event::epoll;
use rustix::fd::OwnedFd;
use rustix::io::Errno;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use tokio::time::Instant;

use super::http_conn::{ConnState, ParseStep, Slot, ThreadCtx, MAX_CONNECT_FAILURES};
use super::io::classify;
use super::stats::FailureKind;

/// Events taken per `epoll_wait`.
const EVENTS: usize = 1024;

/// One connection of the loop, in the slot of the same index.
struct Conn {
    fd: Option<OwnedFd>,
    /// Bumped on every close, so an event for an old socket is recognised.
    generation: u32,
    connecting: bool,
    /// Bytes of the last batch not yet accepted by the socket.
    unsent: usize,
    /// Consecutive failed connects.
    failures: u32,
    /// When to try connecting again after a failure.
    retry_at: Option<Instant>,
    /// The share is done; nothing more to do.
    done: bool,
    st: ConnState,
}

/// The epoll instance, created before the run so a failure is reported early.
pub fn create() -> io::Result<OwnedFd> {
    Ok(epoll::create(epoll::CreateFlags::CLOEXEC)?)
}

/// Runs the thread's connections until their shares are done or the deadline;
/// returns when the run ended.
pub fn run(ctx: &ThreadCtx, slots: &[std::rc::Rc<Slot>], ep: OwnedFd) -> Instant {
    let plan = &*ctx.plan;
    let mut conns: Vec<Conn> = slots
        .iter()
        .map(|_| Conn {
            fd: None,
            generation: 0,
            connecting: false,
            unsent: 0,
            failures: 0,
            retry_at: None,
            done: false,
            st: ConnState::new(plan.depth),
        })
        .collect();
    let mut lp = Loop {
        ctx,
        slots,
        ep,
        conns: &mut conns,
        done: 0,
    };
    for i in 0..slots.len() {
        lp.connect(i);
    }
    let tick = (plan.timeout / 8).clamp(Duration::from_millis(1), Duration::from_millis(50));
    let mut next_tick = Instant::now() + tick;
    let mut events: Vec<epoll::Event> = Vec::with_capacity(EVENTS);
    loop {
        let now = Instant::now();
        if ctx.expired(now) {
            return ctx.deadline.unwrap_or(now);
        }
        if now >= next_tick {
            lp.watchdog(now);
            next_tick = now + tick;
        }
        if lp.done == lp.conns.len() {
            return now;
        }
        let mut wake = next_tick;
        if let Some(d) = ctx.deadline {
            wake = wake.min(d);
        }
        let wait = wake.saturating_duration_since(now);
        let timeout = rustix::event::Timespec {
            tv_sec: wait.as_secs() as i64,
            tv_nsec: i64::from(wait.subsec_nanos()),
        };
        events.clear();
        match epoll::wait(&lp.ep, spare_capacity(&mut events), Some(&timeout)) {
            Ok(_) => {}
            Err(Errno::INTR) => continue,
            Err(_) => {
                // Cannot wait any more: end the run rather than spin.
                return Instant::now();
            }
        }
        for ev in &events {
            let data = ev.data.u64();
            let i = (data & 0xffff_ffff) as usize;
            let generation = (data >> 32) as u32;
            if lp.conns.get(i).is_some_and(|c| c.generation == generation) {
                lp.event(i, ev.flags);
            }
        }
    }
}

struct Loop<'a> {
    ctx: &'a ThreadCtx,
    slots: &'a [std::rc::Rc<Slot>],
    ep: OwnedFd,
    conns: &'a mut Vec<Conn>,
    /// Connections whose share is done.
    done: usize,
}

impl Loop<'_> {
    /// Starts a non-blocking connect for connection `i`, or marks it done.
    fn connect(&mut self, i: usize) {
        let (Some(c), Some(slot)) = (self.conns.get_mut(i), self.slots.get(i)) else {
            return;
        };
        if slot.remaining.get() == 0 {
            if !c.done {
                c.done = true;
                self.done += 1;
            }
            return;
        }
        c.retry_at = None;
        let addr = self.ctx.plan.target.addr;
        let family = if addr.is_ipv4() {
            AddressFamily::INET
        } else {
            AddressFamily::INET6
        };
        let opened = rustix::net::socket_with(
            family,
            SocketType::STREAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )
        .and_then(|fd| {
            // Requests are written whole; Nagle would only hold back a batch's tail.
            rustix::net::sockopt::set_tcp_nodelay(&fd, true)?;
            match rustix::net::connect(&fd, &addr) {
                Ok(()) | Err(Errno::INPROGRESS) => Ok(fd),
                Err(e) => Err(e),
            }
        })
        .and_then(|fd| {
            let data = (u64::from(c.generation) << 32) | i as u64;
            epoll::add(
                &self.ep,
                &fd,
                epoll::EventData::new_u64(data),
                epoll::EventFlags::IN
                    | epoll::EventFlags::OUT
                    | epoll::EventFlags::RDHUP
                    | epoll::EventFlags::ET,
            )?;
            Ok(fd)
        });
        match opened {
            Ok(fd) => {
                c.fd = Some(fd);
                c.connecting = true;
                c.st.connect_started(Instant::now());
                slot.busy_since.set(Some(Instant::now()));
            }
            Err(e) => self.connect_failed(i, io::Error::from(e)),
        }
    }

    /// Counts a failed connect and schedules the next attempt (or gives up the
    /// share after repeated failures in a `-n` run, as h2load does).
    fn connect_failed(&mut self, i: usize, _e: io::Error) {
        let (Some(c), Some(slot)) = (self.conns.get_mut(i), self.slots.get(i)) else {
            return;
        };
        close(c);
        slot.busy_since.set(None);
        slot.take(1);
        self.ctx
            .stats
            .borrow_mut()
            .errors
            .add(FailureKind::Connect, 1);
        c.failures += 1;
        if self.ctx.plan.requests.is_some() && c.failures >= MAX_CONNECT_FAILURES {
            let rest = slot.remaining.get();
            slot.take(rest);
            self.ctx
                .stats
                .borrow_mut()
                .errors
                .add(FailureKind::Connect, rest);
        }
        if slot.remaining.get() == 0 {
            if !c.done {
                c.done = true;
                self.done += 1;
            }
        } else {
            c.retry_at = Some(Instant::now() + Duration::from_millis(10 << c.failures.min(5)));
        }
    }

    /// Ends connection `i` after `kind` (what was in flight fails) and opens the next.
    fn fail(&mut self, i: usize, kind: FailureKind) {
        if let (Some(c), Some(slot)) = (self.conns.get_mut(i), self.slots.get(i)) {
            slot.fail(self.ctx, kind);
            close(c);
        }
        self.connect(i);
    }

    fn event(&mut self, i: usize, flags: epoll::EventFlags) {
        let Some(c) = self.conns.get_mut(i) else {
            return;
        };
        if c.connecting {
            let Some(fd) = &c.fd else { return };
            match rustix::net::sockopt::socket_error(fd) {
                Ok(Ok(())) if flags.contains(epoll::EventFlags::OUT) => {
                    c.connecting = false;
                    c.failures = 0;
                    c.st.reset();
                    c.st.connected(&mut self.ctx.stats.borrow_mut(), Instant::now());
                    if let Some(slot) = self.slots.get(i) {
                        slot.busy_since.set(None);
                    }
                    self.send(i, Instant::now());
                    return;
                }
                Ok(Ok(())) => return,
                Ok(Err(e)) | Err(e) => return self.connect_failed(i, io::Error::from(e)),
            }
        }
        if flags.contains(epoll::EventFlags::OUT) && c.unsent > 0 {
            let now = Instant::now();
            self.send(i, now);
        }
        if flags.intersects(
            epoll::EventFlags::IN
                | epoll::EventFlags::ERR
                | epoll::EventFlags::HUP
                | epoll::EventFlags::RDHUP,
        ) {
            self.receive(i);
        }
    }

    /// Reads until the socket is drained, counting every response; then refills
    /// the pipeline.
    fn receive(&mut self, i: usize) {
        let ctx = self.ctx;
        let (Some(c), Some(slot)) = (self.conns.get_mut(i), self.slots.get(i)) else {
            return;
        };
        let Some(fd) = &c.fd else { return };
        let mut now = None;
        loop {
            c.st.make_room();
            let room = c.st.buf.capacity() - c.st.buf.len();
            let got = rustix::net::recv(fd, spare_capacity(&mut c.st.buf), RecvFlags::empty());
            let n = match got {
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => continue,
                Err(e) => return self.fail(i, classify(&io::Error::from(e))),
                Ok((n, _)) => n,
            };
            let t = Instant::now();
            if ctx.expired(t) {
                return;
            }
            now = Some(t);
            if n == 0 {
                if c.st.ends_at_close() {
                    c.st.complete(&mut ctx.stats.borrow_mut(), t, slot);
                }
                return self.fail(i, FailureKind::Closed);
            }
            let step = {
                let mut stats = ctx.stats.borrow_mut();
                stats.bytes_read += n as u64;
                c.st.bytes_arrived(&mut stats, t);
                let step = c.st.parse(ctx.plan.method, &mut stats, t, slot);
                ctx.progress.store(
                    stats.requests + stats.errors.total(),
                    std::sync::atomic::Ordering::Relaxed,
                );
                step
            };
            match step {
                ParseStep::More => {}
                ParseStep::Close => return self.fail(i, FailureKind::Closed),
                ParseStep::Malformed => return self.fail(i, FailureKind::Malformed),
            }
            if n < room {
                break; // a short read drained the socket; the next edge will say when
            }
        }
        if let Some(t) = now {
            slot.busy_since.set((slot.in_flight.get() > 0).then_some(t));
            self.send(i, t);
        }
    }

    /// Finishes a partial write, then fills the pipeline up to the depth.
    fn send(&mut self, i: usize, now: Instant) {
        let plan = &*self.ctx.plan;
        let (Some(c), Some(slot)) = (self.conns.get_mut(i), self.slots.get(i)) else {
            return;
        };
        if c.unsent == 0 {
            // A batch of `depth` once the previous one is all answered.
            let room = if slot.in_flight.get() == 0 {
                (plan.depth as u64).min(slot.remaining.get())
            } else {
                0
            };
            if room == 0 {
                if slot.in_flight.get() == 0 && slot.remaining.get() == 0 {
                    // Share done: close, and this connection is finished.
                    close(c);
                    if !c.done {
                        c.done = true;
                        self.done += 1;
                    }
                }
                return;
            }
            if slot.in_flight.get() == 0 {
                slot.busy_since.set(Some(now));
            }
            for _ in 0..room {
                c.st.sent.push_back(now);
            }
            slot.take(room);
            slot.in_flight.set(slot.in_flight.get() + room);
            c.unsent = room as usize * plan.request_len;
            self.ctx.stats.borrow_mut().bytes_written += c.unsent as u64;
        }
        let Some(fd) = &c.fd else { return };
        // The batch holds `depth` copies, so the unsent tail is always its tail.
        while c.unsent > 0 {
            let from = plan.batch.len() - c.unsent;
            let tail = plan.batch.get(from..).unwrap_or(&[]);
            match rustix::net::send(fd, tail, SendFlags::NOSIGNAL) {
                Ok(n) => c.unsent -= n.min(c.unsent),
                Err(Errno::AGAIN) => return, // the next OUT edge resumes
                Err(Errno::INTR) => continue,
                Err(e) => return self.fail(i, classify(&io::Error::from(e))),
            }
        }
    }

    /// Ends connections that made no progress within the timeout, and retries
    /// failed connects whose back-off has passed.
    fn watchdog(&mut self, now: Instant) {
        let timeout = self.ctx.plan.timeout;
        for i in 0..self.conns.len() {
            let (Some(c), Some(slot)) = (self.conns.get_mut(i), self.slots.get(i)) else {
                continue;
            };
            if c.done {
                continue;
            }
            if c.retry_at.is_some_and(|t| now >= t) {
                self.connect(i);
                continue;
            }
            let Some(since) = slot.busy_since.get() else {
                continue;
            };
            if now.saturating_duration_since(since) < timeout {
                continue;
            }
            if slot.in_flight.get() == 0 {
                // Stuck connecting: that costs one request.
                slot.take(1);
                slot.in_flight.set(1);
            }
            self.fail(i, FailureKind::Timeout);
        }
    }
}

/// Closes the socket (which also removes it from the epoll set).
fn close(c: &mut Conn) {
    c.fd = None;
    c.connecting = false;
    c.unsent = 0;
    c.generation = c.generation.wrapping_add(1);
}
