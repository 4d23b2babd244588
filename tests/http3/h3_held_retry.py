"""An HTTP/3 client on aioquic that holds its answer to a Retry: once the
server's Retry has come and the Initial carrying its token is ready, it
prints 'held' and sends nothing more until a line arrives on stdin; then
it sends the Initial, asks for PATH and prints one JSON object: the
answer's status (null if none) and the code the server closed the
connection with (null if it did not).

usage: h3_held_retry.py HOST PORT PATH
"""

import asyncio
import json
import ssl
import sys

from aioquic.asyncio.client import connect
from aioquic.h3.connection import H3_ALPN
from aioquic.quic.configuration import QuicConfiguration

from h3_client import Client


class Holding(Client):
    """Holds every datagram after the Retry until stdin says go."""

    last = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.held = None
        self.released = False
        Holding.last = self

    def transmit(self):
        if self.released or not self._quic._retry_count:
            super().transmit()
            return
        if self.held is None:
            self.held = []
            print("held", flush=True)
            asyncio.ensure_future(self.release())
        self.held.extend(self._quic.datagrams_to_send(now=self._loop.time()))

    async def release(self):
        await asyncio.get_event_loop().run_in_executor(None, sys.stdin.readline)
        self.released = True
        for data, addr in self.held:
            self._transport.sendto(data, addr)
        self.transmit()


async def main():
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.verify_mode = ssl.CERT_NONE
    config.server_name = "localhost"
    report = {"status": None, "closed_with": None}
    try:
        async with connect(host, port, configuration=config,
                           create_protocol=Holding) as client:
            try:
                answer = await asyncio.wait_for(
                    client.request("GET", f"localhost:{port}", path), 10)
                report["status"] = answer["status"]
            except (ConnectionError, asyncio.TimeoutError):
                pass
            if client.closed.done():
                report["closed_with"] = client.closed.result()
    except ConnectionError:
        # Closed during the handshake.
        closed = Holding.last.closed
        if closed.done():
            report["closed_with"] = closed.result()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
