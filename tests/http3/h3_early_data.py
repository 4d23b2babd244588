"""0-RTT with aioquic for tests/http3_handshake.rs: a first connection to
HOST:PORT takes a session ticket (GET /, answer ignored); a second resumes
with it and sends each request given as METHOD PATH at once, before its
handshake is done, so they go out in 0-RTT packets where the ticket allows
early data. With --force-early the ticket is marked as allowing early data
whatever the server said, so the client tries 0-RTT and the server must
refuse it. Prints one JSON object: whether the ticket allowed early data,
whether the second connection sent 0-RTT, resumed and had its early data
accepted, and the answers (as h3_client.py reports them)."""

import argparse
import asyncio
import dataclasses
import json
import ssl

from aioquic.asyncio.client import connect
from aioquic.h3.connection import H3_ALPN
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import HandshakeCompleted
from aioquic import tls

from h3_client import Client

MAX_EARLY_DATA = 0xFFFFFFFF


class Resuming(Client):
    """The HTTP/3 client, noting how its handshake ended."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.handshake = None

    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            self.handshake = event
        super().quic_event_received(event)


def configuration(ticket=None):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.verify_mode = ssl.CERT_NONE
    config.server_name = "localhost"
    config.session_ticket = ticket
    return config


async def take_ticket(host, port, authority):
    tickets = []
    got = asyncio.get_event_loop().create_future()

    def keep(ticket):
        tickets.append(ticket)
        if not got.done():
            got.set_result(None)

    async with connect(host, port, configuration=configuration(),
                       create_protocol=Client, session_ticket_handler=keep) as client:
        await client.request("GET", authority, "/")
        await asyncio.wait_for(got, 5)
    return tickets[0]


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("requests", nargs="+", help="METHOD PATH pairs, e.g. GET /a")
    p.add_argument("--force-early", action="store_true")
    args = p.parse_args()
    authority = f"localhost:{args.port}"
    ticket = await take_ticket(args.host, args.port, authority)
    allowed = ticket.max_early_data_size == MAX_EARLY_DATA
    if args.force_early:
        ticket = dataclasses.replace(ticket, max_early_data_size=MAX_EARLY_DATA)
    pairs = list(zip(args.requests[0::2], args.requests[1::2]))
    async with connect(args.host, args.port, configuration=configuration(ticket),
                       create_protocol=Resuming, wait_connected=False) as client:
        # Every request queues its frames before anything is sent, so all
        # go in the first flight (sent one by one, the client's pacing may
        # hold the later ones until the handshake is done).
        transmit = client.transmit
        client.transmit = lambda: None
        pending = [asyncio.ensure_future(client.request(m, authority, path))
                   for m, path in pairs]
        await asyncio.sleep(0)
        client.transmit = transmit
        client.transmit()
        sent_0rtt = client._quic._cryptos[tls.Epoch.ZERO_RTT].send.is_valid()
        answers = await asyncio.wait_for(asyncio.gather(*pending), 10)
        # An answer from early data may come before the handshake ends.
        for _ in range(500):
            if client.handshake is not None:
                break
            await asyncio.sleep(0.01)
        hs = client.handshake
    print(json.dumps({
        "ticket_allows_early_data": allowed,
        "sent_0rtt": sent_0rtt,
        "resumed": bool(hs and hs.session_resumed),
        "early_data_accepted": bool(hs and hs.early_data_accepted),
        "answers": answers,
    }))


if __name__ == "__main__":
    asyncio.run(main())
