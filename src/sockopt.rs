//! The kernel's socket knobs an operator sets per listener and per upstream group
//! (what nginx puts on `listen` and HAProxy under `tune.sndbuf.*`): buffer sizes,
//! Nagle, TCP keepalive, deferred accept, Fast Open, IPv6-only and a source
//! address for upstream connects.
//!
//! Listener options are set on the listening sockets only: Linux copies them to
//! every connection it accepts there, so accepting costs no extra system call,
//! and setting them again on a kept socket (reload, binary upgrade) reaches the
//! next connection. Upstream options are set on each connecting socket before
//! `connect`.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use serde::Deserialize;
use socket2::{SockRef, Socket, TcpKeepalive};
use toml::Spanned;

use crate::config::error::{ConfigError, Locator};
use crate::config::value::{in_range, parse_duration, parse_size, RawDuration, RawSize};

/// `socket = { ... }` (or `[listener.socket]`, `[upstream.socket]`) as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSocketOptions {
    /// SO_SNDBUF: bytes or a size such as `"32KiB"`; absent leaves autotuning on.
    pub send_buffer: Option<Spanned<RawSize>>,
    /// SO_RCVBUF, as `send_buffer`.
    pub recv_buffer: Option<Spanned<RawSize>>,
    /// TCP_NODELAY (default on).
    pub tcp_nodelay: Option<bool>,
    /// Listeners: TCP_DEFER_ACCEPT, how long the kernel holds a connection that sent nothing.
    pub defer_accept: Option<Spanned<RawDuration>>,
    /// Listeners: TCP_FASTOPEN queue length (0: off).
    pub fastopen: Option<Spanned<i64>>,
    /// SO_KEEPALIVE.
    pub keepalive: Option<Spanned<bool>>,
    /// TCP_KEEPIDLE: idle time before the first probe.
    pub keepalive_idle: Option<Spanned<RawDuration>>,
    /// TCP_KEEPINTVL: time between probes.
    pub keepalive_interval: Option<Spanned<RawDuration>>,
    /// TCP_KEEPCNT: unanswered probes before the connection is dropped.
    pub keepalive_count: Option<Spanned<i64>>,
    /// Listeners on an IPv6 address: IPV6_V6ONLY (default on).
    pub ipv6_only: Option<Spanned<bool>>,
    /// Upstream groups: the local address connections leave from.
    pub bind: Option<Spanned<String>>,
}

/// TCP keepalive timing; a `None` keeps the kernel's default (net.ipv4.tcp_keepalive_*).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe.
    pub idle: Option<Duration>,
    /// Time between probes.
    pub interval: Option<Duration>,
    /// Probes before giving up.
    pub count: Option<u32>,
}

impl Keepalive {
    fn params(&self) -> TcpKeepalive {
        let mut k = TcpKeepalive::new();
        if let Some(t) = self.idle {
            k = k.with_time(t);
        }
        if let Some(t) = self.interval {
            k = k.with_interval(t);
        }
        if let Some(n) = self.count {
            k = k.with_retries(n);
        }
        k
    }
}

/// Validated socket options of one listener or upstream group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketOptions {
    /// SO_SNDBUF as asked (the kernel doubles it); `None`: autotuned.
    pub send_buffer: Option<usize>,
    /// SO_RCVBUF as asked; `None`: autotuned.
    pub recv_buffer: Option<usize>,
    /// TCP_NODELAY.
    pub tcp_nodelay: bool,
    /// TCP_DEFER_ACCEPT in whole seconds (listeners).
    pub defer_accept: Option<u32>,
    /// TCP_FASTOPEN queue length (listeners).
    pub fastopen: Option<u32>,
    /// SO_KEEPALIVE and its timing; `None`: off.
    pub keepalive: Option<Keepalive>,
    /// IPV6_V6ONLY for an IPv6 listener (default on, as nginx does).
    pub ipv6_only: bool,
    /// Source address of upstream connections.
    pub bind: Option<IpAddr>,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            send_buffer: None,
            recv_buffer: None,
            tcp_nodelay: true,
            defer_accept: None,
            fastopen: None,
            keepalive: None,
            ipv6_only: true,
            bind: None,
        }
    }
}

/// What the options belong to: some keys only mean something on one side.
#[derive(Debug, Clone, Copy)]
pub enum SocketSide<'a> {
    /// A listener on this address.
    Listener(SocketAddr),
    /// An upstream group with these servers.
    Upstream(&'a [SocketAddr]),
}

/// Largest buffer accepted: the kernel stores twice the value in an `int`.
const MAX_BUFFER: u64 = 512 << 20;
/// Longest TCP_KEEPIDLE / TCP_KEEPINTVL the kernel takes (MAX_TCP_KEEPIDLE).
const MAX_KEEPALIVE_SECS: u64 = 32767;

/// Second stage of `socket = { ... }`: every value checked against `side`, with
/// errors naming the file, line and key (`{key}.send_buffer`, ...).
pub fn options_from_raw(
    loc: &Locator<'_>,
    key: &str,
    raw: Option<&Spanned<RawSocketOptions>>,
    side: SocketSide<'_>,
) -> Result<SocketOptions, ConfigError> {
    let mut opts = SocketOptions::default();
    let Some(raw) = raw else { return Ok(opts) };
    let raw = raw.get_ref();
    let name = |k: &str| format!("{key}.{k}");
    let buffer = |v: &Option<Spanned<RawSize>>, k: &str| -> Result<Option<usize>, ConfigError> {
        let Some(v) = v else { return Ok(None) };
        let n = parse_size(v.get_ref()).map_err(|m| loc.error(v.span(), &name(k), m))?;
        if !(1024..=MAX_BUFFER).contains(&n) {
            return Err(loc.error(
                v.span(),
                &name(k),
                format!("{n} bytes is out of range 1KiB..=512MiB"),
            ));
        }
        Ok(Some(n as usize))
    };
    opts.send_buffer = buffer(&raw.send_buffer, "send_buffer")?;
    opts.recv_buffer = buffer(&raw.recv_buffer, "recv_buffer")?;
    opts.tcp_nodelay = raw.tcp_nodelay.unwrap_or(true);

    let secs = |v: &Spanned<RawDuration>, k: &str, range: std::ops::RangeInclusive<u64>| {
        let d = parse_duration(v.get_ref()).map_err(|m| loc.error(v.span(), &name(k), m))?;
        // The kernel counts these in whole seconds; a fraction rounds up.
        let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        if !range.contains(&s) {
            return Err(loc.error(
                v.span(),
                &name(k),
                format!("{s}s is out of range {}s..={}s", range.start(), range.end()),
            ));
        }
        Ok(s)
    };
    // The keys that tune keepalive, each with where it was written.
    let tuned: Vec<(std::ops::Range<usize>, &str)> = [
        raw.keepalive_idle
            .as_ref()
            .map(|v| (v.span(), "keepalive_idle")),
        raw.keepalive_interval
            .as_ref()
            .map(|v| (v.span(), "keepalive_interval")),
        raw.keepalive_count
            .as_ref()
            .map(|v| (v.span(), "keepalive_count")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let on = match raw.keepalive.as_ref().map(|k| *k.get_ref()) {
        Some(false) => {
            if let Some((span, k)) = tuned.first() {
                return Err(loc.error(
                    span.clone(),
                    &name(k),
                    "keepalive is off; remove this key or set keepalive = true",
                ));
            }
            false
        }
        Some(true) => true,
        // Timing alone turns keepalive on: asking for probes means wanting them.
        None => !tuned.is_empty(),
    };
    if on {
        let mut k = Keepalive::default();
        if let Some(v) = &raw.keepalive_idle {
            let s = secs(v, "keepalive_idle", 1..=MAX_KEEPALIVE_SECS)?;
            k.idle = Some(Duration::from_secs(s));
        }
        if let Some(v) = &raw.keepalive_interval {
            let s = secs(v, "keepalive_interval", 1..=MAX_KEEPALIVE_SECS)?;
            k.interval = Some(Duration::from_secs(s));
        }
        if let Some(v) = &raw.keepalive_count {
            k.count = Some(in_range(loc, v, &name("keepalive_count"), 1..=127)? as u32);
        }
        opts.keepalive = Some(k);
    }

    let listener_only = [
        raw.defer_accept
            .as_ref()
            .map(|v| (v.span(), "defer_accept")),
        raw.fastopen.as_ref().map(|v| (v.span(), "fastopen")),
        raw.ipv6_only.as_ref().map(|v| (v.span(), "ipv6_only")),
    ];
    match side {
        SocketSide::Listener(addr) => {
            if let Some(b) = &raw.bind {
                return Err(loc.error(
                    b.span(),
                    &name("bind"),
                    "only an upstream group takes a source address; a listener binds its `listen` address",
                ));
            }
            if let Some(v) = &raw.defer_accept {
                let s = secs(v, "defer_accept", 0..=3600)?;
                opts.defer_accept = (s > 0).then_some(s as u32);
            }
            if let Some(v) = &raw.fastopen {
                let n =
                    in_range(loc, v, &name("fastopen"), 0..=65535).map_err(|e| ConfigError {
                        message: format!("{} (a queue length; 0 is off)", e.message),
                        ..e
                    })?;
                opts.fastopen = (n > 0).then_some(n as u32);
            }
            if let Some(v) = &raw.ipv6_only {
                if addr.is_ipv4() {
                    return Err(loc.error(
                        v.span(),
                        &name("ipv6_only"),
                        format!("{addr} is an IPv4 address; ipv6_only applies to IPv6 listeners such as [::]:80"),
                    ));
                }
                opts.ipv6_only = *v.get_ref();
            }
        }
        SocketSide::Upstream(servers) => {
            if let Some((span, k)) = listener_only.iter().flatten().next() {
                return Err(loc.error(span.clone(), &name(k), "only a listener takes this key"));
            }
            if let Some(b) = &raw.bind {
                let ip: IpAddr = b.get_ref().trim().parse().map_err(|_| {
                    loc.error(
                        b.span(),
                        &name("bind"),
                        format!("{:?} is not an IP address", b.get_ref()),
                    )
                })?;
                if let Some(s) = servers.iter().find(|s| s.is_ipv4() != ip.is_ipv4()) {
                    return Err(loc.error(
                        b.span(),
                        &name("bind"),
                        format!("{ip} cannot reach server {s}: the address families differ"),
                    ));
                }
                opts.bind = Some(ip);
            }
        }
    }
    Ok(opts)
}

/// Options that must precede `bind` and `listen`: IPV6_V6ONLY cannot change on a
/// bound socket, and a receive buffer set after `listen` is not covered by the
/// window scale negotiated in the handshake.
pub fn prepare_listener(sock: &Socket, addr: SocketAddr, opts: &SocketOptions) -> io::Result<()> {
    if addr.is_ipv6() {
        sock.set_only_v6(opts.ipv6_only)?;
    }
    set_buffers(&SockRef::from(sock), opts)
}

fn set_buffers(s: &SockRef<'_>, opts: &SocketOptions) -> io::Result<()> {
    if let Some(n) = opts.recv_buffer {
        s.set_recv_buffer_size(n)?;
    }
    if let Some(n) = opts.send_buffer {
        s.set_send_buffer_size(n)?;
    }
    Ok(())
}

/// Sets every listener option on a listening socket, one just bound or one kept
/// across a reload or handed over by an upgrade. Options the configuration
/// leaves out are turned off where the kernel can (keepalive, deferred accept,
/// Fast Open), so a handed-over socket follows the new file; an explicit buffer
/// size cannot be returned to autotuning (see [`changes_kept_apart`]).
pub fn apply_listener(sock: &impl AsFd, opts: &SocketOptions) -> io::Result<()> {
    let s = SockRef::from(sock);
    set_buffers(&s, opts)?;
    s.set_tcp_nodelay(opts.tcp_nodelay)?;
    match &opts.keepalive {
        Some(k) => s.set_tcp_keepalive(&k.params())?,
        None => s.set_keepalive(false)?,
    }
    let fd = sock.as_fd().as_raw_fd();
    let defer = i32::try_from(opts.defer_accept.unwrap_or(0)).unwrap_or(i32::MAX);
    uapi::setsockopt(fd, uapi::c::IPPROTO_TCP, uapi::c::TCP_DEFER_ACCEPT, &defer)
        .map_err(io::Error::from)?;
    let fastopen = i32::try_from(opts.fastopen.unwrap_or(0)).unwrap_or(i32::MAX);
    if fastopen > 0 || int_option(fd, uapi::c::TCP_FASTOPEN).unwrap_or(0) > 0 {
        uapi::setsockopt(fd, uapi::c::IPPROTO_TCP, uapi::c::TCP_FASTOPEN, &fastopen)
            .map_err(io::Error::from)?;
    }
    Ok(())
}

fn int_option(fd: i32, opt: i32) -> io::Result<i32> {
    let mut v: i32 = 0;
    uapi::getsockopt(fd, uapi::c::IPPROTO_TCP, opt, &mut v).map_err(io::Error::from)?;
    Ok(v)
}

/// Sentences about a change a kept listening socket cannot follow; the new
/// value applies once the address is bound again (a new `listen` address or a
/// restart), so the operator is told rather than left guessing.
pub fn changes_kept_apart(old: &SocketOptions, new: &SocketOptions) -> Vec<String> {
    let mut out = Vec::new();
    if old.ipv6_only != new.ipv6_only {
        out.push(format!(
            "ipv6_only = {} applies when the address is bound again (restart, or change `listen`); the kept sockets stay ipv6_only = {}",
            new.ipv6_only, old.ipv6_only
        ));
    }
    for (what, was, now) in [
        ("send_buffer", old.send_buffer, new.send_buffer),
        ("recv_buffer", old.recv_buffer, new.recv_buffer),
    ] {
        if let (Some(n), None) = (was, now) {
            out.push(format!(
                "{what} was removed, but a kept socket cannot return to autotuning; new connections keep {n} bytes until a restart"
            ));
        }
    }
    out
}

/// What the kernel set on a socket, read back with getsockopt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// SO_SNDBUF as the kernel reports it (twice the value asked, clamped).
    pub send_buffer: usize,
    /// SO_RCVBUF as the kernel reports it.
    pub recv_buffer: usize,
    /// TCP_NODELAY.
    pub tcp_nodelay: bool,
    /// SO_KEEPALIVE with TCP_KEEPIDLE, TCP_KEEPINTVL and TCP_KEEPCNT.
    pub keepalive: Option<(Duration, Duration, u32)>,
    /// TCP_DEFER_ACCEPT in seconds (the kernel rounds up to its retransmission steps).
    pub defer_accept: u32,
    /// TCP_FASTOPEN queue length.
    pub fastopen: u32,
}

/// Reads back the options [`apply_listener`] sets.
pub fn read_back(sock: &impl AsFd) -> io::Result<Applied> {
    let s = SockRef::from(sock);
    let fd = sock.as_fd().as_raw_fd();
    let keepalive = if s.keepalive()? {
        Some((
            s.tcp_keepalive_time()?,
            s.tcp_keepalive_interval()?,
            s.tcp_keepalive_retries()?,
        ))
    } else {
        None
    };
    Ok(Applied {
        send_buffer: s.send_buffer_size()?,
        recv_buffer: s.recv_buffer_size()?,
        tcp_nodelay: s.tcp_nodelay()?,
        keepalive,
        defer_accept: int_option(fd, uapi::c::TCP_DEFER_ACCEPT)?.max(0) as u32,
        fastopen: int_option(fd, uapi::c::TCP_FASTOPEN)?.max(0) as u32,
    })
}

/// The system maximum for an explicit buffer size (net.core.wmem_max / rmem_max),
/// or `None` where /proc does not say.
fn system_max(sysctl: &str) -> Option<u64> {
    let path = format!("/proc/sys/{}", sysctl.replace('.', "/"));
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Warnings for buffer sizes above what the kernel grants: it clamps SO_SNDBUF
/// to net.core.wmem_max (and SO_RCVBUF to rmem_max) before doubling, silently.
pub fn limit_warnings(opts: &SocketOptions) -> Vec<String> {
    let mut out = Vec::new();
    for (what, asked, sysctl) in [
        ("send_buffer", opts.send_buffer, "net.core.wmem_max"),
        ("recv_buffer", opts.recv_buffer, "net.core.rmem_max"),
    ] {
        let (Some(asked), Some(max)) = (asked, system_max(sysctl)) else {
            continue;
        };
        if asked as u64 > max {
            out.push(format!(
                "{what} = {asked} is above the system maximum {sysctl} = {max}, so the kernel grants {max} (reported doubled, {}); raise it with `sysctl -w {sysctl}={asked}`",
                max * 2
            ));
        }
    }
    out
}

/// One log line with what the kernel set on a listener's socket, and a warning
/// per value it would not grant.
pub fn log_listener(listener: &dyn std::fmt::Display, opts: &SocketOptions, sock: &impl AsFd) {
    match read_back(sock) {
        Ok(a) => {
            let buffer = |asked: Option<usize>, got: usize| match asked {
                Some(_) => got.to_string(),
                None => format!("autotuned (from {got})"),
            };
            let keepalive = match a.keepalive {
                None => "off".to_string(),
                Some((idle, interval, count)) => format!(
                    "idle {}s interval {}s count {count}",
                    idle.as_secs(),
                    interval.as_secs()
                ),
            };
            tracing::info!(
                %listener,
                send_buffer = %buffer(opts.send_buffer, a.send_buffer),
                recv_buffer = %buffer(opts.recv_buffer, a.recv_buffer),
                tcp_nodelay = a.tcp_nodelay,
                keepalive = %keepalive,
                defer_accept = a.defer_accept,
                fastopen = a.fastopen,
                "socket options"
            );
        }
        Err(e) => tracing::warn!(%listener, error = %e, "cannot read back the socket options"),
    }
    for w in limit_warnings(opts) {
        tracing::warn!(%listener, "{w}");
    }
}

/// Opens a TCP connection to an upstream server with the group's options: set
/// before `connect`, so the buffers take part in the handshake's window scale
/// and the source address is the one asked for.
pub async fn connect_with_options(
    addr: SocketAddr,
    opts: &SocketOptions,
) -> io::Result<tokio::net::TcpStream> {
    let sock = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    {
        let s = SockRef::from(&sock);
        set_buffers(&s, opts)?;
        s.set_tcp_nodelay(opts.tcp_nodelay)?;
        if let Some(k) = &opts.keepalive {
            s.set_tcp_keepalive(&k.params())?;
        }
    }
    if let Some(ip) = opts.bind {
        if ip.is_ipv4() {
            // The port is picked at connect time from the whole 4-tuple, so a
            // busy group does not run out of ports for the source address.
            let one: i32 = 1;
            let fd = sock.as_fd().as_raw_fd();
            let _ = uapi::setsockopt(
                fd,
                uapi::c::IPPROTO_IP,
                uapi::c::IP_BIND_ADDRESS_NO_PORT,
                &one,
            );
        }
        sock.bind(SocketAddr::new(ip, 0))?;
    }
    sock.connect(addr).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listener::bind_listener;

    /// The options of `[listener.socket]` (or `[upstream.socket]`) in a whole
    /// file around `socket`, through the real loader.
    fn opts(socket: &str, side: SocketSide<'_>) -> Result<SocketOptions, ConfigError> {
        let text = match side {
            SocketSide::Listener(addr) => format!(
                "[[listener]]\nlisten = \"{addr}\"\n[listener.socket]\n{socket}\n\
                 [[route]]\nhandler = \"respond\"\n"
            ),
            SocketSide::Upstream(servers) => format!(
                "[[upstream]]\nname = \"u\"\nservers = [{{ address = \"{}\" }}]\n\
                 [upstream.socket]\n{socket}\n\
                 [[listener]]\nlisten = \"127.0.0.1:0\"\nkind = \"tcp\"\nupstream = \"u\"\n",
                servers[0]
            ),
        };
        let cfg = crate::config::build::load_str("pier.toml", &text)?;
        Ok(match side {
            SocketSide::Listener(_) => cfg.listeners[0].socket.clone(),
            SocketSide::Upstream(_) => cfg.upstreams[0].socket.clone(),
        })
    }

    fn v4() -> SocketSide<'static> {
        SocketSide::Listener("127.0.0.1:0".parse().unwrap())
    }

    #[test]
    fn sizes_take_the_usual_units_and_defaults_leave_autotuning() {
        let o = opts("send_buffer = \"32KiB\"\nrecv_buffer = \"64k\"\n", v4()).unwrap();
        assert_eq!(o.send_buffer, Some(32 * 1024));
        assert_eq!(o.recv_buffer, Some(64 * 1024));
        assert!(o.tcp_nodelay, "tcp_nodelay defaults to on");
        assert_eq!(o.keepalive, None);
        let d = SocketOptions::default();
        assert_eq!(
            (d.send_buffer, d.recv_buffer, d.tcp_nodelay),
            (None, None, true)
        );
    }

    #[test]
    fn errors_name_the_line_and_key() {
        let e = opts("tcp_nodelay = false\nsend_buffer = \"12 parsecs\"\n", v4()).unwrap_err();
        e.assert_at(5, "listener[1].socket.send_buffer");
        let e = opts("recv_buffer = 10\n", v4()).unwrap_err();
        assert!(e.message.contains("out of range"), "{e}");
        let e = opts("keepalive = false\nkeepalive_idle = \"30s\"\n", v4()).unwrap_err();
        e.assert_at(5, "listener[1].socket.keepalive_idle");
        let e = opts("ipv6_only = false\n", v4()).unwrap_err();
        assert!(e.message.contains("IPv4"), "{e}");
        let e = opts("bind = \"127.0.0.2\"\n", v4()).unwrap_err();
        assert_eq!(e.key, "listener[1].socket.bind");
        let e = opts("defer_accept = \"2h\"\n", v4()).unwrap_err();
        assert_eq!(e.key, "listener[1].socket.defer_accept");
    }

    #[test]
    fn counts_out_of_range_name_their_range() {
        for (text, key, message) in [
            (
                "keepalive_count = 500\n",
                "keepalive_count",
                "500 is out of range 1..=127",
            ),
            (
                "fastopen = -1\n",
                "fastopen",
                "-1 is out of range 0..=65535 (a queue length; 0 is off)",
            ),
        ] {
            let e = opts(text, v4()).unwrap_err();
            e.assert_at(4, &format!("listener[1].socket.{key}"));
            assert_eq!(e.message, message);
        }
    }

    #[test]
    fn listener_keys_are_refused_on_upstreams_and_bind_must_match_the_servers() {
        let servers: Vec<SocketAddr> = vec!["127.0.0.1:80".parse().unwrap()];
        let up = SocketSide::Upstream(&servers);
        let e = opts("fastopen = 16\n", up).unwrap_err();
        assert!(e.message.contains("only a listener"), "{e}");
        let e = opts("bind = \"::1\"\n", up).unwrap_err();
        assert!(e.message.contains("families"), "{e}");
        let e = opts("bind = \"nowhere\"\n", up).unwrap_err();
        assert!(e.message.contains("not an IP address"), "{e}");
        let o = opts("bind = \"127.0.0.2\"\nkeepalive_idle = \"1m30s\"\n", up).unwrap();
        assert_eq!(o.bind, Some("127.0.0.2".parse().unwrap()));
        assert_eq!(o.keepalive.unwrap().idle, Some(Duration::from_secs(90)));
    }

    /// Linux copies the listening socket's options to each accepted connection;
    /// Pier relies on that instead of a system call per accept.
    #[test]
    fn accepted_connections_carry_the_listener_options() {
        let o = opts(
            "send_buffer = \"16KiB\"\nrecv_buffer = \"32KiB\"\ntcp_nodelay = false\n\
             keepalive_idle = 77\nkeepalive_interval = 11\nkeepalive_count = 4\n\
             defer_accept = 5\nfastopen = 64\n",
            v4(),
        )
        .unwrap();
        let socks = bind_listener("127.0.0.1:0".parse().unwrap(), 16, &o, 1).unwrap();
        let l = &socks[0];
        let a = read_back(l).unwrap();
        assert_eq!(a.send_buffer, 32 * 1024, "the kernel doubles SO_SNDBUF");
        assert_eq!(a.fastopen, 64);
        assert!(a.defer_accept >= 5, "{}", a.defer_accept);
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        // Deferred accept waits for data.
        std::io::Write::write_all(&mut c, b"x").unwrap();
        l.set_nonblocking(false).unwrap();
        let (accepted, _) = l.accept().unwrap();
        let b = read_back(&accepted).unwrap();
        assert_eq!(b.send_buffer, 32 * 1024);
        assert_eq!(b.recv_buffer, 64 * 1024);
        assert!(!b.tcp_nodelay);
        assert_eq!(
            b.keepalive,
            Some((Duration::from_secs(77), Duration::from_secs(11), 4))
        );

        // A reload sets new values on the kept socket; the next connection has them.
        let next = SocketOptions {
            send_buffer: Some(8 * 1024),
            ..SocketOptions::default()
        };
        apply_listener(l, &next).unwrap();
        let a = read_back(l).unwrap();
        assert_eq!((a.defer_accept, a.fastopen, a.keepalive), (0, 0, None));
        let _c2 = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (accepted, _) = l.accept().unwrap();
        let b = read_back(&accepted).unwrap();
        assert_eq!(b.send_buffer, 16 * 1024);
        assert!(b.tcp_nodelay);
        assert_eq!(b.keepalive, None);
    }

    #[test]
    fn ipv6_only_is_set_before_bind() {
        let o = SocketOptions {
            ipv6_only: false,
            ..SocketOptions::default()
        };
        let Ok(socks) = bind_listener("[::]:0".parse().unwrap(), 16, &o, 1) else {
            return; // no IPv6 on this machine
        };
        assert!(!SockRef::from(&socks[0]).only_v6().unwrap());
        // A dual-stack socket takes IPv4 clients too.
        let port = socks[0].local_addr().unwrap().port();
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    }

    #[test]
    fn upstream_connects_leave_from_the_bound_address_with_the_group_options() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let o = SocketOptions {
            bind: Some("127.0.0.2".parse().unwrap()),
            send_buffer: Some(8 * 1024),
            keepalive: Some(Keepalive {
                idle: Some(Duration::from_secs(33)),
                ..Keepalive::default()
            }),
            tcp_nodelay: false,
            ..SocketOptions::default()
        };
        let stream = rt
            .block_on(connect_with_options(l.local_addr().unwrap(), &o))
            .unwrap();
        let (_, peer) = l.accept().unwrap();
        assert_eq!(peer.ip(), "127.0.0.2".parse::<IpAddr>().unwrap());
        let a = read_back(&stream).unwrap();
        assert_eq!(a.send_buffer, 16 * 1024);
        assert!(!a.tcp_nodelay);
        assert_eq!(a.keepalive.map(|k| k.0), Some(Duration::from_secs(33)));
    }

    #[test]
    fn sizes_above_the_system_maximum_name_the_sysctl() {
        let Some(max) = system_max("net.core.wmem_max") else {
            return;
        };
        let mut o = SocketOptions {
            send_buffer: Some(max as usize + 1),
            ..SocketOptions::default()
        };
        let w = limit_warnings(&o);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("net.core.wmem_max"), "{w:?}");
        o.send_buffer = Some(max as usize);
        assert!(limit_warnings(&o).is_empty());
    }

    #[test]
    fn a_kept_socket_cannot_follow_ipv6_only_or_a_removed_buffer() {
        let old = SocketOptions {
            send_buffer: Some(4096),
            ..SocketOptions::default()
        };
        let new = SocketOptions::default();
        let w = changes_kept_apart(&old, &new);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("send_buffer"));
        assert!(changes_kept_apart(&new, &new).is_empty());
    }
}
