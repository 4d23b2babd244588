"""An HTTP/2 WebSocket origin (RFC 8441) for tests/websocket_h2_upstream.rs,
and the clients that reach it through Pier.

`server DIR [noconnect]`: an HTTP/2 server with prior knowledge (PyPI `h2`)
on 127.0.0.1, its port printed on the first line. It offers
SETTINGS_ENABLE_CONNECT_PROTOCOL (unless `noconnect`) and answers an
extended CONNECT with :protocol websocket by 200 (with the subprotocol
"chat" when asked for it), then echoes every WebSocket message over the
stream (`websockets`' sans-IO protocol, server side) and ends the stream
after the close handshake; /refused gets 403 and a body. Any other request
gets 200 "plain", fresh for a minute. Each request's head is appended to DIR/requests as a JSON
object.

`client HOST:PORT`: an HTTP/2 client (tests/websocket_h2/ws_peer.py's) that
opens WebSockets by extended CONNECT through Pier; prints one JSON object of
what it saw.

`client1-busy HOST:PORT`: a WebSocket held open on /limited/ws while a
plain GET goes beside it and after it; prints one JSON object.

`client1 HOST:PORT [PATH]`: an HTTP/1.1 WebSocket client (`websockets`)
that echoes through Pier on PATH (/ws/h1); prints one JSON object.
"""

import asyncio
import json
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings
from websockets.protocol import Protocol, Side


class Tunnel:
    """One extended CONNECT stream: a WebSocket echo over its DATA."""

    def __init__(self):
        self.ws = Protocol(Side.SERVER, max_size=None)
        self.out = b""
        self.ended = False


def serve(markers, offer_connect):
    async def handle(reader, writer):
        config = h2.config.H2Configuration(client_side=False, validate_inbound_headers=False)
        conn = h2.connection.H2Connection(config=config)
        conn.initiate_connection()
        if offer_connect:
            conn.update_settings({h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL: 1})
        tunnels = {}

        def pump(sid):
            t = tunnels.get(sid)
            if t is None:
                return
            while t.out:
                room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                if room <= 0:
                    return
                conn.send_data(sid, t.out[:room])
                t.out = t.out[room:]
            if t.ws.close_expected() and not t.ended:
                t.ended = True
                conn.end_stream(sid)

        def on_request(ev):
            head = {k.decode(): v.decode() for k, v in ev.headers}
            with open(f"{markers}/requests", "a") as f:
                f.write(json.dumps(head) + "\n")
            sid = ev.stream_id
            if head.get(":method") == "CONNECT" and head.get(":protocol") == "websocket":
                if head.get(":path") == "/refused":
                    conn.send_headers(sid, [(":status", "403"), ("content-length", "7")])
                    conn.send_data(sid, b"refused", end_stream=True)
                    return
                fields = [(":status", "200")]
                if "chat" in head.get("sec-websocket-protocol", ""):
                    fields.append(("sec-websocket-protocol", "chat"))
                conn.send_headers(sid, fields)
                tunnels[sid] = Tunnel()
                return
            conn.send_headers(
                sid, [(":status", "200"), ("content-length", "5"), ("cache-control", "max-age=60")]
            )
            conn.send_data(sid, b"plain", end_stream=True)

        def on_data(ev):
            sid = ev.stream_id
            conn.acknowledge_received_data(ev.flow_controlled_length, sid)
            t = tunnels.get(sid)
            if t is None:
                return
            t.ws.receive_data(ev.data)
            for frame in t.ws.events_received():
                if frame.opcode.name == "TEXT":
                    t.ws.send_text(bytes(frame.data))
                elif frame.opcode.name == "BINARY":
                    t.ws.send_binary(bytes(frame.data))
            t.out += b"".join(t.ws.data_to_send())

        try:
            while True:
                writer.write(conn.data_to_send())
                await writer.drain()
                data = await reader.read(65536)
                if not data:
                    break
                for ev in conn.receive_data(data):
                    if isinstance(ev, h2.events.RequestReceived):
                        on_request(ev)
                    elif isinstance(ev, h2.events.DataReceived):
                        on_data(ev)
                    elif isinstance(ev, h2.events.StreamEnded):
                        t = tunnels.get(ev.stream_id)
                        if t is not None and not t.ended:
                            t.ended = True
                            conn.end_stream(ev.stream_id)
                    elif isinstance(ev, h2.events.StreamReset):
                        tunnels.pop(ev.stream_id, None)
                        with open(f"{markers}/resets", "a") as f:
                            f.write(f"{ev.stream_id} {int(ev.error_code)}\n")
                for sid in list(tunnels):
                    pump(sid)
        except Exception as e:  # a connection the proxy dropped
            print(f"origin connection ended: {e!r}", file=sys.stderr)
        finally:
            writer.close()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())


def run_h2_client(addr):
    from ws_peer import Client, echo_session, idle_session

    out = {}
    c = Client(addr)
    echo_session(c, out)
    # The origin refuses: its answer as it is.
    _, head = c.open("/refused")
    out["refused"] = head.get(":status")
    # An origin that does not offer extended CONNECT: 501.
    _, head = c.open("/noconnect/ws")
    out["noconnect"] = head.get(":status")
    idle_session(c, out)
    print(json.dumps(out))


def run_h1_client(addr):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    out = {}
    path = sys.argv[3] if len(sys.argv) > 3 else "/ws/h1"
    with connect(f"ws://{addr}{path}", subprotocols=["chat"], max_size=None) as ws:
        out["subprotocol"] = ws.subprotocol
        ws.send("hello over HTTP/1.1")
        out["echo"] = ws.recv(timeout=10)
        big = b"x" * 300000
        ws.send(big)
        out["big_same"] = ws.recv(timeout=10) == big
    try:
        with connect(f"ws://{addr}/noconnect/ws"):
            out["noconnect"] = "opened"
    except InvalidStatus as e:
        out["noconnect"] = e.response.status_code
    print(json.dumps(out))


def run_h1_busy_client(addr):
    """A tunnel holds its group's admission while open: with max_in_flight
    = 1, a request beside it is refused (503), one after it is not."""
    import urllib.error
    import urllib.request
    from websockets.sync.client import connect

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def status():
        try:
            with opener.open(f"http://{addr}/limited/plain", timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    out = {}
    with connect(f"ws://{addr}/limited/ws", subprotocols=["chat"]) as ws:
        ws.send("held")
        out["echo"] = ws.recv(timeout=10)
        out["beside"] = status()
    # The tunnel's end is seen by the proxy a moment after the close.
    deadline = time.monotonic() + 5
    out["after"] = status()
    while out["after"] != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
        out["after"] = status()
    print(json.dumps(out))


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(sys.argv[2], sys.argv[3:4] != ["noconnect"])
    elif sys.argv[1] == "client":
        run_h2_client(sys.argv[2])
    elif sys.argv[1] == "client1-busy":
        run_h1_busy_client(sys.argv[2])
    else:
        run_h1_client(sys.argv[2])
