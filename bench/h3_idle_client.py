"""Opens N HTTP/3 connections to 127.0.0.1:PORT with aioquic, asks
`GET /hello` once on each, reads the answer whole, and keeps every
connection open (aioquic answers the server's PINGs and acknowledges) until
its standard input closes. Prints `idle K FAILED` once the connections are
open, then `closed` at the end. The certificate is not verified."""

import asyncio
import contextlib
import ssl
import sys

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.done = asyncio.get_event_loop().create_future()
        self.status = None

    async def get(self, port):
        stream = self._quic.get_next_available_stream_id()
        self.h3.send_headers(stream, [
            (b":method", b"GET"), (b":scheme", b"https"),
            (b":authority", f"localhost:{port}".encode()), (b":path", b"/hello"),
        ], end_stream=True)
        self.transmit()
        await asyncio.wait_for(self.done, 20)
        return self.status

    def quic_event_received(self, event):
        for e in self.h3.handle_event(event):
            if isinstance(e, HeadersReceived):
                self.status = dict(e.headers).get(b":status")
            if isinstance(e, (HeadersReceived, DataReceived)) and e.stream_ended:
                if not self.done.done():
                    self.done.set_result(True)


async def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN,
                               verify_mode=ssl.CERT_NONE, idle_timeout=600.0)
    gate = asyncio.Semaphore(32)
    failed = 0
    async with contextlib.AsyncExitStack() as stack:
        async def one():
            nonlocal failed
            async with gate:
                try:
                    client = await stack.enter_async_context(
                        connect("127.0.0.1", port, configuration=config,
                                create_protocol=Client, wait_connected=True))
                    if await client.get(port) != b"200":
                        failed += 1
                except Exception:
                    failed += 1
        await asyncio.gather(*[one() for _ in range(n)])
        print(f"idle {n - failed} {failed}", flush=True)
        await asyncio.get_event_loop().run_in_executor(None, sys.stdin.read)
    print("closed", flush=True)


asyncio.run(main())
