"""An HTTP/3 client on aioquic for tests/http3_priority.rs: on one QUIC
connection (certificate not verified) it requests IMAGES large images with
the `priority` field IMAGE_PRIORITY, waits until their answers are under
way, then requests CSS with CSS_PRIORITY (and, given --update VALUE, a
PRIORITY_UPDATE frame with VALUE for it, RFC 9218 §7.2). It prints one JSON
object: per answer its status, size and the seconds from the CSS request to
its last byte, and how many image bytes arrived while the CSS was on its
way. Empty priorities send no field."""

import argparse
import asyncio
import json
import ssl
import time

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.buffer import encode_uint_var
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration

PRIORITY_UPDATE_REQUEST = 0xF0700


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.streams = {}
        self.css = None
        self.images_bytes = 0
        self.images_during_css = 0
        self.changed = asyncio.Event()

    def request(self, path, priority):
        sid = self._quic.get_next_available_stream_id()
        fields = [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", b"localhost"),
            (b":path", path.encode()),
        ]
        if priority:
            fields.append((b"priority", priority.encode()))
        self.h3.send_headers(sid, fields, end_stream=True)
        self.streams[sid] = {"path": path, "status": None, "bytes": 0, "done": None}
        return sid

    def priority_update(self, sid, value):
        payload = encode_uint_var(sid) + value.encode()
        frame = encode_uint_var(PRIORITY_UPDATE_REQUEST) + encode_uint_var(len(payload)) + payload
        self._quic.send_stream_data(self.h3._local_control_stream_id, frame)

    def quic_event_received(self, event):
        for ev in self.h3.handle_event(event):
            s = self.streams.get(getattr(ev, "stream_id", None))
            if s is None:
                continue
            if isinstance(ev, HeadersReceived):
                s["status"] = int(dict(ev.headers)[b":status"])
            elif isinstance(ev, DataReceived):
                s["bytes"] += len(ev.data)
                if ev.stream_id != self.css:
                    self.images_bytes += len(ev.data)
                    css = self.streams.get(self.css)
                    if css is not None and css["done"] is None:
                        self.images_during_css += len(ev.data)
            if getattr(ev, "stream_ended", False):
                s["done"] = time.monotonic()
        self.changed.set()

    async def until(self, ready, timeout=60):
        end = time.monotonic() + timeout
        while not ready():
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("the answers did not all come")
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except asyncio.TimeoutError:
                pass


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--images", type=int, default=6)
    p.add_argument("--image-path", default="/files/image{}.bin")
    p.add_argument("--image-priority", default="")
    p.add_argument("--css-path", default="/files/style.css")
    p.add_argument("--css-priority", default="")
    p.add_argument("--update", default=None)
    p.add_argument("--started", type=int, default=65536,
                   help="image bytes to see before the CSS is requested")
    args = p.parse_args()
    # A small receive window keeps what is in flight small beside what waits.
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN,
                               max_data=256 * 1024, max_stream_data=256 * 1024)
    config.verify_mode = ssl.CERT_NONE
    config.server_name = "localhost"
    async with connect(args.host, args.port, configuration=config,
                       create_protocol=Client, wait_connected=True) as c:
        images = [c.request(args.image_path.format(i), args.image_priority)
                  for i in range(args.images)]
        c.transmit()
        await c.until(lambda: c.images_bytes >= args.started)
        requested = time.monotonic()
        c.css = c.request(args.css_path, args.css_priority)
        if args.update is not None:
            c.priority_update(c.css, args.update)
        c.transmit()
        await c.until(lambda: all(s["done"] for s in c.streams.values()))
        answers = {}
        for sid, s in c.streams.items():
            name = "css" if sid == c.css else f"image{images.index(sid)}"
            answers[name] = {
                "status": s["status"],
                "bytes": s["bytes"],
                "ttlb": round(s["done"] - requested, 4),
            }
    print(json.dumps({"answers": answers, "images_during_css": c.images_during_css}))


if __name__ == "__main__":
    asyncio.run(main())
