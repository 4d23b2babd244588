"""Stalled QUIC handshakes for tests/http3_handshake.rs: from N UDP sockets
(N source ports) each sends an aioquic client's first flight (an Initial
with its ClientHello) to HOST:PORT and then nothing, however the server
answers. Waits SECS seconds reading answers, and prints one JSON object:
how many sockets got a Retry, and how many got any answer."""

import argparse
import json
import socket
import ssl
import time

from aioquic.h3.connection import H3_ALPN
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection


def is_retry(datagram):
    # A long header (bit 7) of type Retry (bits 5-4 = 3) in QUIC v1.
    return len(datagram) > 0 and datagram[0] & 0x80 and (datagram[0] & 0x30) == 0x30


def main():
    p = argparse.ArgumentParser()
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("n", type=int)
    p.add_argument("secs", type=float)
    args = p.parse_args()
    addr = (args.host, args.port)
    socks = []
    for _ in range(args.n):
        config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
        config.verify_mode = ssl.CERT_NONE
        config.server_name = "localhost"
        conn = QuicConnection(configuration=config)
        conn.connect(addr, now=time.time())
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        for data, _ in conn.datagrams_to_send(now=time.time()):
            s.sendto(data, addr)
        socks.append(s)
    retried = set()
    answered = set()
    end = time.time() + args.secs
    while time.time() < end:
        for i, s in enumerate(socks):
            try:
                while True:
                    data = s.recv(65536)
                    answered.add(i)
                    if is_retry(data):
                        retried.add(i)
            except BlockingIOError:
                pass
        time.sleep(0.01)
    print(json.dumps({"sent": args.n, "retried": len(retried), "answered": len(answered)}))


if __name__ == "__main__":
    main()
