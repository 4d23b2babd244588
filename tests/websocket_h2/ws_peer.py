"""WebSocket over HTTP/2 (RFC 8441) peers for tests/websocket_h2.rs.

`server DIR`: a WebSocket echo server (PyPI `websockets`) on 127.0.0.1, its
port printed on the first line; it refuses the path /refused with 403 and
requires the subprotocol "chat" (a request without it gets its 400). As each
connection ends it appends "PATH CLOSE_CODE" to DIR/closed.

`client HOST:PORT [tls]`: an HTTP/2 client (PyPI `h2`), with prior knowledge
or, given `tls`, over TLS with ALPN h2 (the server's certificate is not
checked), that opens WebSockets by extended CONNECT and speaks the WebSocket
protocol over the stream with `websockets`' sans-IO protocol; prints one JSON
object of what it saw.
"""

import asyncio
import json
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings
from websockets.frames import Close
from websockets.protocol import Protocol, Side


def serve(markers):
    from websockets.asyncio.server import serve as ws_serve
    from websockets.http11 import Response
    from websockets.datastructures import Headers

    async def echo(ws):
        try:
            async for message in ws:
                await ws.send(message)
        finally:
            with open(f"{markers}/closed", "a") as f:
                f.write(f"{ws.request.path} {ws.close_code}\n")

    def refuse(connection, request):
        if request.path == "/refused":
            return Response(403, "Forbidden", Headers([("Content-Length", "7")]), b"refused")
        return None

    async def main():
        async with ws_serve(
            echo, "127.0.0.1", 0, process_request=refuse, subprotocols=["chat"], max_size=None
        ) as server:
            port = server.sockets[0].getsockname()[1]
            print(port, flush=True)
            await asyncio.get_running_loop().create_future()

    asyncio.run(main())


class Client:
    """One HTTP/2 connection; events are read into per-stream lists."""

    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.authority = addr
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        if TLS:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            self.sock = ctx.wrap_socket(self.sock, server_hostname="localhost")
            assert self.sock.selected_alpn_protocol() == "h2"
        # Malformed heads are sent on purpose: the server must refuse them.
        config = h2.config.H2Configuration(client_side=True, validate_outbound_headers=False)
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.initiate_connection()
        self.flush()
        self.events = {}
        self.settings = None
        while self.settings is None:
            self.read()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def read(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("server closed the connection")
        for ev in self.conn.receive_data(data):
            if isinstance(ev, h2.events.RemoteSettingsChanged):
                self.settings = {int(k): v.new_value for k, v in ev.changed_settings.items()}
            sid = getattr(ev, "stream_id", None)
            if sid:
                self.events.setdefault(sid, []).append(ev)
            if isinstance(ev, h2.events.DataReceived):
                self.conn.acknowledge_received_data(ev.flow_controlled_length, sid)
        self.flush()

    def take(self, sid, kind, timeout=10):
        """The first event of `kind` on `sid`, or a reset/end seen instead."""
        until = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self.events.get(sid, [])):
                if isinstance(ev, (kind, h2.events.StreamReset)):
                    return self.events[sid].pop(i)
            if time.monotonic() > until:
                raise TimeoutError(f"no {kind.__name__} on stream {sid}")
            self.read()

    def open(self, path, extra=(), protocol="websocket", method="CONNECT", drop=()):
        sid = self.conn.get_next_available_stream_id()
        fields = [
            (":method", method),
            (":protocol", protocol),
            (":scheme", "http"),
            (":authority", self.authority),
            (":path", path),
        ]
        fields = [f for f in fields if f[0] not in drop and f[1] is not None]
        fields += [("sec-websocket-version", "13"), *extra]
        self.conn.send_headers(sid, fields)
        self.flush()
        ev = self.take(sid, h2.events.ResponseReceived)
        if isinstance(ev, h2.events.StreamReset):
            return sid, {"reset": int(ev.error_code)}
        return sid, {k.decode(): v.decode() for k, v in ev.headers}

    def send(self, sid, data, end=False):
        """DATA within the windows, waiting for WINDOW_UPDATEs."""
        while data:
            room = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
            if room == 0:
                self.read()
                continue
            self.conn.send_data(sid, data[:room])
            data = data[room:]
            self.flush()
        if end:
            self.conn.end_stream(sid)
            self.flush()


def websocket_events(client, sid, ws, want):
    """Feeds the stream's DATA to `ws` until `want` frames came, or the
    stream ended; returns the frames and whether END_STREAM came."""
    frames, ended = [], False
    until = time.monotonic() + 10
    while len(frames) < want and not ended and time.monotonic() < until:
        pending = client.events.get(sid, [])
        while pending:
            ev = pending.pop(0)
            if isinstance(ev, h2.events.DataReceived):
                ws.receive_data(ev.data)
            if isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                ended = True
        frames += ws.events_received()
        data = ws.data_to_send()
        for d in data:
            if d:
                client.send(sid, d)
        if len(frames) < want and not ended:
            client.read()
    return frames, ended


def echo_session(c, out):
    """A WebSocket on /ws/echo with the subprotocol "chat": several messages
    both ways, one far larger than a window, then the close handshake;
    what was seen goes into `out`."""
    sid, head = c.open("/ws/echo", [("sec-websocket-protocol", "chat")])
    out["status"] = head.get(":status")
    out["subprotocol"] = head.get("sec-websocket-protocol")
    out["accept_sent"] = "sec-websocket-accept" in head
    ws = Protocol(Side.CLIENT, max_size=None)
    big = bytes(range(256)) * 800
    messages = ["hello", "w\u00f6rld", big, "last"]
    for m in messages:
        (ws.send_text if isinstance(m, str) else ws.send_binary)(m.encode() if isinstance(m, str) else m)
    for d in ws.data_to_send():
        c.send(sid, d)
    frames, _ = websocket_events(c, sid, ws, len(messages))
    got = []
    for f in frames:
        data = bytes(f.data)
        got.append(data.decode() if f.opcode.name == "TEXT" else {"binary": len(data), "same": data == big})
    out["echo"] = got

    # The close handshake, then the upstream closes: END_STREAM both ways.
    ws.send_close(1000, "bye")
    for d in ws.data_to_send():
        if d:
            c.send(sid, d)
    frames, ended = websocket_events(c, sid, ws, 1)
    closes = [Close.parse(bytes(f.data)).code for f in frames if f.opcode.name == "CLOSE"]
    out["close"] = closes[0] if closes else None
    if not ended:
        ev = c.take(sid, h2.events.StreamEnded)
        ended = isinstance(ev, h2.events.StreamEnded)
    out["ended"] = ended
    c.send(sid, b"", end=True)


def idle_session(c, out):
    """A WebSocket left idle, which the proxy resets past its read timeout."""
    # A tunnel idle past the group's read_timeout is reset (CANCEL, 8).
    sid, head = c.open("/ws/idle", [("sec-websocket-protocol", "chat")])
    out["idle_status"] = head.get(":status")
    started = time.monotonic()
    ev = c.take(sid, h2.events.StreamEnded, timeout=10)
    out["idle_reset"] = int(ev.error_code) if isinstance(ev, h2.events.StreamReset) else None
    out["idle_after_s"] = round(time.monotonic() - started, 2)


def run_client(addr):
    out = {}
    c = Client(addr)
    out["enable_connect_protocol"] = c.settings.get(h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL)

    # An echo: several messages both ways, one far larger than a window.
    echo_session(c, out)

    # Refused: a route that is not a proxy, an upstream that says 403.
    _, head = c.open("/static/")
    out["not_proxy"] = head.get(":status")
    sid, head = c.open("/refused")
    out["upstream_refused"] = head.get(":status")
    body = b""
    while True:
        ev = c.take(sid, h2.events.DataReceived)
        if isinstance(ev, h2.events.StreamReset):
            break
        body += ev.data
        if ev.stream_ended or any(isinstance(e, h2.events.StreamEnded) for e in c.events.get(sid, [])):
            break
    out["upstream_refused_body"] = body.decode(errors="replace")

    # A protocol other than WebSocket has no HTTP/1.1 form to relay.
    _, head = c.open("/ws/echo", protocol="connect-udp")
    out["other_protocol"] = head.get(":status")

    # Malformed extended CONNECTs: reset with PROTOCOL_ERROR (1).
    _, head = c.open("/ws/echo", drop=(":path",))
    out["no_path"] = head.get("reset")
    _, head = c.open("/ws/echo", drop=(":scheme",))
    out["no_scheme"] = head.get("reset")
    _, head = c.open("/ws/echo", method="GET")
    out["protocol_on_get"] = head.get("reset")

    # The client resets a tunnel: the upstream connection is closed.
    sid, head = c.open("/ws/reset", [("sec-websocket-protocol", "chat")])
    ws = Protocol(Side.CLIENT)
    ws.send_text(b"before the reset")
    for d in ws.data_to_send():
        c.send(sid, d)
    frames, _ = websocket_events(c, sid, ws, 1)
    out["before_reset"] = [bytes(f.data).decode() for f in frames]
    c.conn.reset_stream(sid, 8)
    c.flush()

    idle_session(c, out)

    # The connection still serves after all of that.
    sid, head = c.open("/ws/echo", [("sec-websocket-protocol", "chat")])
    ws = Protocol(Side.CLIENT)
    ws.send_text(b"again")
    for d in ws.data_to_send():
        c.send(sid, d)
    frames, _ = websocket_events(c, sid, ws, 1)
    out["again"] = [bytes(f.data).decode() for f in frames]
    print(json.dumps(out))


# Whether the client speaks TLS (ALPN h2) rather than prior knowledge.
TLS = False

if __name__ == "__main__":
    TLS = sys.argv[3:4] == ["tls"]
    if sys.argv[1] == "server":
        serve(sys.argv[2])
    else:
        run_client(sys.argv[2])
