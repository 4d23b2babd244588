"""WebSocket over HTTP/3 (RFC 9220) client for tests/websocket_h3.rs.

`ws_h3_client.py HOST PORT`: one QUIC connection (PyPI `aioquic`; the
server's certificate is not checked) on which WebSockets are opened by
extended CONNECT and spoken over the request stream with `websockets`'
sans-IO protocol; prints one JSON object of what it saw, in the shape
tests/websocket_h2/ws_peer.py prints for HTTP/2.

`ws_h3_client.py HOST PORT quiet SECONDS [PATH]`: one WebSocket (on PATH,
/ws/quiet by default) left quiet that long, then a message on it; prints
what came back and whether the connection is still up.
"""

import asyncio
import json
import ssl
import sys
import time

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection, Setting
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamReset
from websockets.frames import Close
from websockets.protocol import Protocol, Side


class Client(QuicConnectionProtocol):
    """One HTTP/3 connection; events are kept per stream."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.events = {}
        self.changed = asyncio.Event()

    def quic_event_received(self, event):
        if isinstance(event, StreamReset):
            self.events.setdefault(event.stream_id, []).append(event)
        for ev in self.h3.handle_event(event):
            sid = getattr(ev, "stream_id", None)
            if sid is not None:
                self.events.setdefault(sid, []).append(ev)
        self.changed.set()

    async def wait(self, timeout):
        self.changed.clear()
        try:
            await asyncio.wait_for(self.changed.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    async def take(self, sid, kind, timeout=10):
        """The first event of `kind` on `sid`, or a reset seen instead."""
        until = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self.events.get(sid, [])):
                if isinstance(ev, (kind, StreamReset)):
                    return self.events[sid].pop(i)
            left = until - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {kind.__name__} on stream {sid}")
            await self.wait(left)

    async def open(self, path, extra=(), protocol="websocket", method="CONNECT", drop=()):
        sid = self._quic.get_next_available_stream_id()
        fields = [
            (":method", method),
            (":protocol", protocol),
            (":scheme", "https"),
            (":authority", "localhost"),
            (":path", path),
        ]
        fields = [f for f in fields if f[0] not in drop]
        fields += [("sec-websocket-version", "13"), *extra]
        self.h3.send_headers(sid, [(n.encode(), v.encode()) for n, v in fields])
        self.transmit()
        ev = await self.take(sid, HeadersReceived)
        if isinstance(ev, StreamReset):
            return sid, {"reset": ev.error_code}
        return sid, {k.decode(): v.decode() for k, v in ev.headers}

    def send(self, sid, data, end=False):
        self.h3.send_data(sid, data, end_stream=end)
        self.transmit()


async def websocket_events(c, sid, ws, want):
    """Feeds the stream's DATA to `ws` until `want` frames came, or the
    stream ended; returns the frames and whether it ended (FIN or reset)."""
    frames, ended = [], False
    until = time.monotonic() + 10
    while len(frames) < want and not ended and time.monotonic() < until:
        pending = c.events.get(sid, [])
        while pending:
            ev = pending.pop(0)
            if isinstance(ev, DataReceived):
                ws.receive_data(ev.data)
                ended |= ev.stream_ended
            if isinstance(ev, StreamReset):
                ended = True
        frames += ws.events_received()
        for d in ws.data_to_send():
            if d:
                c.send(sid, d)
        if len(frames) < want and not ended:
            await c.wait(until - time.monotonic())
    return frames, ended


async def say(c, path, text):
    """Opens a WebSocket on `path` and sends `text`: the stream and the
    texts that came back in one frame."""
    sid, _ = await c.open(path, [("sec-websocket-protocol", "chat")])
    ws = Protocol(Side.CLIENT)
    ws.send_text(text.encode())
    for d in ws.data_to_send():
        c.send(sid, d)
    frames, _ = await websocket_events(c, sid, ws, 1)
    return sid, [bytes(f.data).decode() for f in frames]


async def echo_session(c, out):
    """A WebSocket on /ws/echo with the subprotocol "chat": messages both
    ways, one of 200 kB, then the close handshake."""
    sid, head = await c.open("/ws/echo", [("sec-websocket-protocol", "chat")])
    out["status"] = head.get(":status")
    out["subprotocol"] = head.get("sec-websocket-protocol")
    out["accept_sent"] = "sec-websocket-accept" in head
    out["content_length_sent"] = "content-length" in head
    ws = Protocol(Side.CLIENT, max_size=None)
    big = bytes(range(256)) * 800
    messages = ["hello", "w\u00f6rld", big, "last"]
    for m in messages:
        if isinstance(m, str):
            ws.send_text(m.encode())
        else:
            ws.send_binary(m)
    for d in ws.data_to_send():
        c.send(sid, d)
    frames, _ = await websocket_events(c, sid, ws, len(messages))
    got = []
    for f in frames:
        data = bytes(f.data)
        got.append(data.decode() if f.opcode.name == "TEXT" else {"binary": len(data), "same": data == big})
    out["echo"] = got

    # The close handshake, then the upstream closes: FIN both ways.
    ws.send_close(1000, "bye")
    for d in ws.data_to_send():
        if d:
            c.send(sid, d)
    frames, ended = await websocket_events(c, sid, ws, 1)
    closes = [Close.parse(bytes(f.data)).code for f in frames if f.opcode.name == "CLOSE"]
    out["close"] = closes[0] if closes else None
    until = time.monotonic() + 10
    while not ended and time.monotonic() < until:
        for ev in c.events.pop(sid, []):
            if isinstance(ev, StreamReset):
                ended = "reset"
            elif isinstance(ev, DataReceived) and ev.stream_ended:
                ended = True
        if not ended:
            await c.wait(until - time.monotonic())
    out["ended"] = ended
    c.send(sid, b"", end=True)


def client_config():
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.verify_mode = ssl.CERT_NONE
    config.server_name = "localhost"
    return config


async def quiet(host, port, seconds, path):
    """A WebSocket on `path` quiet for `seconds`, then a message on it."""
    out = {}
    async with connect(host, port, configuration=client_config(), create_protocol=Client,
                       wait_connected=True) as c:
        sid, head = await c.open(path, [("sec-websocket-protocol", "chat")])
        out["status"] = head.get(":status")
        out["subprotocol"] = head.get("sec-websocket-protocol")
        await asyncio.sleep(seconds)
        ws = Protocol(Side.CLIENT)
        ws.send_text(b"still here")
        for d in ws.data_to_send():
            c.send(sid, d)
        frames, _ = await websocket_events(c, sid, ws, 1)
        out["echo"] = [bytes(f.data).decode() for f in frames]
        out["closed"] = c._quic._close_event is not None
    print(json.dumps(out))


async def run(host, port):
    config = client_config()
    out = {}
    async with connect(host, port, configuration=config, create_protocol=Client,
                       wait_connected=True) as c:
        until = time.monotonic() + 5
        while c.h3.received_settings is None and time.monotonic() < until:
            await c.wait(0.1)
        settings = c.h3.received_settings or {}
        out["enable_connect_protocol"] = settings.get(Setting.ENABLE_CONNECT_PROTOCOL)

        await echo_session(c, out)

        # A route that is not a proxy does not take the protocol.
        _, head = await c.open("/static/")
        out["not_proxy"] = head.get(":status")
        # An upstream that does not upgrade: its answer as it is.
        sid, head = await c.open("/refused")
        out["upstream_refused"] = head.get(":status")
        body = b""
        while True:
            ev = await c.take(sid, DataReceived)
            if isinstance(ev, StreamReset):
                break
            body += ev.data
            if ev.stream_ended:
                break
        out["upstream_refused_body"] = body.decode(errors="replace")
        # Only a WebSocket is relayed.
        _, head = await c.open("/ws/echo", protocol="connect-udp")
        out["other_protocol"] = head.get(":status")

        # Malformed extended CONNECTs: the stream reset with H3_MESSAGE_ERROR.
        _, head = await c.open("/ws/echo", drop=(":path",))
        out["no_path"] = head.get("reset")
        _, head = await c.open("/ws/echo", drop=(":scheme",))
        out["no_scheme"] = head.get("reset")
        _, head = await c.open("/ws/echo", method="GET")
        out["protocol_on_get"] = head.get("reset")

        # The client resets a tunnel: the upstream connection is closed.
        sid, out["before_reset"] = await say(c, "/ws/reset", "before the reset")
        c._quic.reset_stream(sid, 0x10C)
        c.transmit()

        # A tunnel idle past the group's read_timeout is reset.
        sid, head = await c.open("/ws/idle", [("sec-websocket-protocol", "chat")])
        out["idle_status"] = head.get(":status")
        started = time.monotonic()
        ev = await c.take(sid, DataReceived, timeout=10)
        while isinstance(ev, DataReceived) and not ev.stream_ended:
            ev = await c.take(sid, DataReceived, timeout=10)
        out["idle_reset"] = ev.error_code if isinstance(ev, StreamReset) else None
        out["idle_after_s"] = round(time.monotonic() - started, 2)

        # max_in_flight = 1 on /busy/: an open tunnel is the one request in
        # flight; beside it 503, after its close a tunnel again.
        held, head = await c.open("/busy/held", [("sec-websocket-protocol", "chat")])
        out["busy_held"] = head.get(":status")
        _, head = await c.open("/busy/beside", [("sec-websocket-protocol", "chat")])
        out["busy_beside"] = head.get(":status")
        c._quic.reset_stream(held, 0x10C)
        c.transmit()
        until = time.monotonic() + 5
        while time.monotonic() < until:
            sid, head = await c.open("/busy/after", [("sec-websocket-protocol", "chat")])
            if head.get(":status") != "503":
                break
            await asyncio.sleep(0.05)
        out["busy_after"] = head.get(":status")
        c._quic.reset_stream(sid, 0x10C)
        c.transmit()

        # The connection still serves after all of that.
        _, out["again"] = await say(c, "/ws/echo", "again")
    print(json.dumps(out))


if __name__ == "__main__":
    if sys.argv[3:4] == ["quiet"]:
        path = sys.argv[5] if len(sys.argv) > 5 else "/ws/quiet"
        asyncio.run(quiet(sys.argv[1], int(sys.argv[2]), float(sys.argv[4]), path))
    else:
        asyncio.run(run(sys.argv[1], int(sys.argv[2])))
