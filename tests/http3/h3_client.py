"""An HTTP/3 client on aioquic for tests/http3.rs: opens one QUIC
connection to HOST:PORT (certificate not verified: the server's is
self-signed), sends each request given as METHOD PATH on it (several at
once when --parallel), and prints one JSON object: the ALPN, and per
request its status, headers (the first value of each), every field in
order, the interim heads before it, the trailers after it, and its body
(as text and as hex)."""

import argparse
import asyncio
import json
import ssl

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated


class MethodAwareH3(H3Connection):
    """aioquic's H3Connection holds every response to its content-length;
    the answer to a HEAD has none to hold (RFC 9110 §9.3.2, RFC 9114
    §4.1.2), which a client knows from the method it sent."""

    def __init__(self, quic):
        super().__init__(quic)
        self.head_streams = set()

    def _check_content_length(self, stream):
        if stream.stream_id in self.head_streams:
            return
        super()._check_content_length(stream)


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = MethodAwareH3(self._quic)
        self.waiting = {}
        self.answers = {}
        self.goaway = None
        self.closed = asyncio.get_event_loop().create_future()

    async def request(self, method, authority, path, headers=(), body=b"",
                      trailers=()):
        stream_id = self._quic.get_next_available_stream_id()
        fields = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", path.encode()),
            (b"user-agent", b"aioquic-test"),
        ] + [(n.encode(), v.encode()) for n, v in headers]
        if method == "HEAD":
            self.h3.head_streams.add(stream_id)
        self.h3.send_headers(stream_id, fields, end_stream=not body and not trailers)
        if body:
            self.h3.send_data(stream_id, body, end_stream=not trailers)
        if trailers:
            self.h3.send_headers(
                stream_id, [(n.encode(), v.encode()) for n, v in trailers], end_stream=True)
        done = asyncio.get_event_loop().create_future()
        self.waiting[stream_id] = done
        self.answers[stream_id] = {"heads": [], "body": b"", "trailers": []}
        self.transmit()
        await done
        answer = self.answers.pop(stream_id)
        # Heads before the final one are interim (1xx).
        heads = [[(n.decode(), v.decode()) for n, v in h] for h in answer["heads"]]
        final = heads[-1] if heads else []
        headers = {}
        for n, v in final:
            headers.setdefault(n, v)
        return {
            "status": int(headers.pop(":status", "0")),
            "headers": headers,
            "fields": [[n, v] for n, v in final if not n.startswith(":")],
            "interim": [{"status": int(dict(h).get(":status", "0")),
                         "fields": [[n, v] for n, v in h if not n.startswith(":")]}
                        for h in heads[:-1]],
            "trailers": {n.decode(): v.decode() for n, v in answer["trailers"]},
            "body": answer["body"].decode("utf-8", "replace"),
            "body_hex": answer["body"].hex(),
            "stream": stream_id,
        }

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            self.goaway = event.error_code
            for fut in self.waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(event.reason_phrase))
            if not self.closed.done():
                self.closed.set_result(event.error_code)
            return
        for h3_event in self.h3.handle_event(event):
            sid = getattr(h3_event, "stream_id", None)
            if sid not in self.answers:
                continue
            answer = self.answers[sid]
            if isinstance(h3_event, HeadersReceived):
                last = dict(answer["heads"][-1]) if answer["heads"] else {}
                if not last.get(b":status", b"1").startswith(b"1"):
                    answer["trailers"].extend(h3_event.headers)
                else:
                    answer["heads"].append(h3_event.headers)
            elif isinstance(h3_event, DataReceived):
                answer["body"] += h3_event.data
            if getattr(h3_event, "stream_ended", False):
                fut = self.waiting.pop(sid)
                if not fut.done():
                    fut.set_result(None)


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("requests", nargs="+", help="METHOD PATH pairs, e.g. GET /a")
    p.add_argument("--parallel", action="store_true")
    p.add_argument("--authority", default=None)
    p.add_argument("--header", action="append", default=[], help="name: value")
    p.add_argument("--trailer", action="append", default=[],
                   help="name: value, sent after the body")
    p.add_argument("--body", default="")
    p.add_argument("--body-size", type=int, default=0,
                   help="send a body of this many bytes ('x' repeated) instead")
    p.add_argument("--wait-close", type=float, default=0.0,
                   help="after the answers, print 'answered' and wait this long "
                        "for the server to close the connection")
    args = p.parse_args()
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.verify_mode = ssl.CERT_NONE
    config.server_name = "localhost"
    authority = args.authority or f"localhost:{args.port}"
    headers = [tuple(s.strip() for s in h.split(":", 1)) for h in args.header]
    trailers = [tuple(s.strip() for s in t.split(":", 1)) for t in args.trailer]
    pairs = list(zip(args.requests[0::2], args.requests[1::2]))
    async with connect(args.host, args.port, configuration=config,
                       create_protocol=Client, wait_connected=True) as client:
        alpn = client._quic.tls.alpn_negotiated
        body = b"x" * args.body_size if args.body_size else args.body.encode()
        if args.parallel:
            answers = await asyncio.gather(*[
                client.request(m, authority, path, headers, body, trailers)
                for m, path in pairs])
        else:
            answers = [await client.request(m, authority, path, headers, body, trailers)
                       for m, path in pairs]
        closed_by_server = None
        if args.wait_close > 0:
            # The answers are in: the caller may now make the server drain.
            print("answered", flush=True)
            try:
                closed_by_server = await asyncio.wait_for(client.closed, args.wait_close)
            except asyncio.TimeoutError:
                closed_by_server = None
    print(json.dumps({"alpn": alpn, "answers": answers, "closed": closed_by_server}))


if __name__ == "__main__":
    asyncio.run(main())
