"""Abusive HTTP/3 clients on aioquic for tests/http3_limits.rs, each on one
connection to HOST:PORT; prints one JSON object.

  streams N PATH   sends N requests for PATH at once and reports the
                   stream limit the server announced, its HTTP/3 SETTINGS
                   (by number), and each answer's status
  reset N PATH     opens N request streams for PATH, resetting each (RESET_STREAM
                   and STOP_SENDING, H3_REQUEST_CANCELLED) as soon as its head
                   is sent, in batches of 10; reports how many were sent before
                   the server closed the connection, and its error code
  unknown N PATH   opens a unidirectional stream of a reserved type and
                   sends on it, then asks for PATH with N frames of reserved
                   types between its HEADERS and its end; reports the code
                   of the server's STOP_SENDING for the first, if any, and
                   the answer's status
  tiny N PATH      sends a POST to PATH whose N-byte body goes out one byte
                   per STREAM frame, as many frames to a packet as fit
  tinydata N PATH  sends a POST to PATH whose body is N DATA frames of no
                   byte or one byte each
  greasecontrol N PATH  sends N frames of reserved types on its control
                   stream, then asks for PATH
  greaseuni N PATH opens N unidirectional streams of reserved types, one
                   after another, then asks for PATH
                   (these four report the error code the server closed the
                   connection with, if it did, and the answer's status)
  noread N PATH SECS  asks for PATH on N streams with a receive window of
                   1 KiB per stream and 16 KiB for the connection, reads
                   nothing more for SECS seconds (printing 'holding' first),
                   then reports what arrived
"""

import argparse
import asyncio
import json
import ssl
import sys

from aioquic.asyncio.client import connect
from aioquic.h3.connection import H3_ALPN
from aioquic.buffer import encode_uint_var
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StopSendingReceived

from h3_client import Client

REQUEST_CANCELLED = 0x10C


class Watching(Client):
    """The HTTP/3 client, noting the STOP_SENDING codes the server sent."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stopped = {}

    def quic_event_received(self, event):
        if isinstance(event, StopSendingReceived):
            self.stopped[event.stream_id] = event.error_code
        super().quic_event_received(event)


def configuration(**kwargs):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, **kwargs)
    config.verify_mode = ssl.CERT_NONE
    config.server_name = "localhost"
    return config


async def streams(client, authority, n, path):
    limit = client._quic._remote_max_streams_bidi
    answers = await asyncio.wait_for(asyncio.gather(
        *[client.request("GET", authority, path) for _ in range(n)]), 30)
    settings = client.h3.received_settings or {}
    return {"announced": limit, "statuses": [a["status"] for a in answers],
            "settings": {str(k): v for k, v in settings.items()}}


async def reset(client, authority, n, path):
    quic = client._quic
    sent = 0
    while sent < n and not client.closed.done():
        for _ in range(10):
            sid = quic.get_next_available_stream_id()
            client.h3.send_headers(sid, [
                (b":method", b"GET"), (b":scheme", b"https"),
                (b":authority", authority.encode()), (b":path", path.encode()),
            ])
            quic.reset_stream(sid, REQUEST_CANCELLED)
            quic.stop_stream(sid, REQUEST_CANCELLED)
            sent += 1
        client.transmit()
        await asyncio.sleep(0.005)
    try:
        code = await asyncio.wait_for(asyncio.shield(client.closed), 3)
    except asyncio.TimeoutError:
        code = None
    return {"sent": sent, "closed_with": code}


async def unknown(client, authority, n, path):
    quic = client._quic
    # Reserved types are 0x1f * N + 0x21 (RFC 9114 §6.2.3, §7.2.8).
    uni = quic.get_next_available_stream_id(is_unidirectional=True)
    quic.send_stream_data(uni, encode_uint_var(0x1F * 7 + 0x21) + b"x" * 1000)
    client.transmit()
    sid = quic.get_next_available_stream_id()
    done = asyncio.get_event_loop().create_future()
    client.waiting[sid] = done
    client.answers[sid] = {"heads": [], "body": b"", "trailers": []}
    client.h3.send_headers(sid, [
        (b":method", b"GET"), (b":scheme", b"https"),
        (b":authority", authority.encode()), (b":path", path.encode()),
    ])
    for k in range(n):
        payload = b"y" * (k % 5)
        quic.send_stream_data(
            sid, encode_uint_var(0x1F * k + 0x21) + encode_uint_var(len(payload)) + payload)
    quic.send_stream_data(sid, b"", end_stream=True)
    client.transmit()
    await asyncio.wait_for(done, 10)
    heads = client.answers[sid]["heads"]
    status = int(dict(heads[-1]).get(b":status", b"0")) if heads else 0
    for _ in range(100):
        if uni in client.stopped:
            break
        await asyncio.sleep(0.01)
    return {"stopped_uni": client.stopped.get(uni), "status": status}


def one_byte_stream_frames(quic, sid):
    """Makes stream `sid` go out one byte per STREAM frame, packed as many
    to a packet as fit."""
    write_one = quic._write_stream_frame

    def write(builder, space, stream, max_offset):
        if stream.stream_id != sid:
            return write_one(builder=builder, space=space, stream=stream,
                             max_offset=max_offset)
        get_frame = stream.sender.get_frame
        stream.sender.get_frame = lambda size, offset=None: get_frame(min(size, 1), offset)
        used = 0
        try:
            while builder.remaining_flight_space > 32 and not stream.sender.buffer_is_empty:
                n = write_one(builder=builder, space=space, stream=stream,
                              max_offset=max_offset)
                if n == 0:
                    break
                used += n
        finally:
            del stream.sender.get_frame
        return used

    quic._write_stream_frame = write


def start_request(client, authority, method, path, end_stream):
    sid = client._quic.get_next_available_stream_id()
    done = asyncio.get_event_loop().create_future()
    client.waiting[sid] = done
    client.answers[sid] = {"heads": [], "body": b"", "trailers": []}
    client.h3.send_headers(sid, [
        (b":method", method.encode()), (b":scheme", b"https"),
        (b":authority", authority.encode()), (b":path", path.encode()),
    ], end_stream=end_stream)
    return sid, done


async def outcome(client, sid, done):
    """The answer's status (None if there was none) and the code the
    server closed the connection with (None if it did not)."""
    status = None
    try:
        await asyncio.wait_for(done, 10)
        heads = client.answers[sid]["heads"]
        status = int(dict(heads[-1]).get(b":status", b"0")) if heads else 0
    except (ConnectionError, asyncio.TimeoutError):
        pass
    try:
        code = await asyncio.wait_for(asyncio.shield(client.closed), 0.5)
    except asyncio.TimeoutError:
        code = None
    return {"status": status, "closed_with": code}


async def send_in_batches(client, pieces, send):
    """Sends `pieces` with `send`, 200 at a time, until done or closed;
    whether all went."""
    for k, piece in enumerate(pieces):
        if client.closed.done():
            return False
        try:
            send(piece)
        except RuntimeError:
            # The server reset or stopped the stream.
            return False
        if k % 200 == 199:
            client.transmit()
            await asyncio.sleep(0.002)
    client.transmit()
    return True


async def tiny(client, authority, n, path):
    sid, done = start_request(client, authority, "POST", path, False)
    one_byte_stream_frames(client._quic, sid)
    client.h3.send_data(sid, b"t" * n, end_stream=True)
    client.transmit()
    return await outcome(client, sid, done)


async def tinydata(client, authority, n, path):
    quic = client._quic
    sid, done = start_request(client, authority, "POST", path, False)
    client.transmit()
    frames = [b"\x00\x01d" if k % 2 else b"\x00\x00" for k in range(n)]
    if await send_in_batches(client, frames, lambda f: quic.send_stream_data(sid, f)):
        quic.send_stream_data(sid, b"", end_stream=True)
        client.transmit()
    return await outcome(client, sid, done)


async def greasecontrol(client, authority, n, path):
    quic = client._quic
    control = client.h3._local_control_stream_id
    frames = [encode_uint_var(0x1F * k + 0x21) + encode_uint_var(k % 3) + b"g" * (k % 3)
              for k in range(n)]
    await send_in_batches(client, frames, lambda f: quic.send_stream_data(control, f))
    sid, done = start_request(client, authority, "GET", path, True)
    client.transmit()
    return await outcome(client, sid, done)


async def greaseuni(client, authority, n, path):
    quic = client._quic
    for k in range(n):
        if client.closed.done():
            break
        uni = quic.get_next_available_stream_id(is_unidirectional=True)
        quic.send_stream_data(uni, encode_uint_var(0x1F * k + 0x21) + b"u", end_stream=True)
        client.transmit()
        # Stream credit returns once the server has stopped the streams.
        await asyncio.sleep(0.001 if k % 4 else 0.01)
    sid, done = start_request(client, authority, "GET", path, True)
    client.transmit()
    return await outcome(client, sid, done)


async def noread(client, authority, n, path, secs):
    # aioquic raises its windows as data arrives: held at what was first
    # announced, the server can send no more than that.
    client._quic._write_stream_limits = lambda *args, **kwargs: None
    client._quic._write_connection_limits = lambda *args, **kwargs: None
    tasks = [asyncio.ensure_future(client.request("GET", authority, path))
             for _ in range(n)]
    await asyncio.sleep(0.5)
    print("holding", flush=True)
    await asyncio.sleep(secs)
    done = sum(1 for t in tasks if t.done())
    for t in tasks:
        t.cancel()
    return {"streams": n, "answered": done}


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("mode", choices=["streams", "reset", "unknown", "noread", "tiny",
                                    "tinydata", "greasecontrol", "greaseuni"])
    p.add_argument("n", type=int)
    p.add_argument("path")
    p.add_argument("secs", type=float, nargs="?", default=1.0)
    args = p.parse_args()
    authority = f"localhost:{args.port}"
    if args.mode == "noread":
        config = configuration(max_stream_data=1024, max_data=16384)
    else:
        config = configuration()
    async with connect(args.host, args.port, configuration=config,
                       create_protocol=Watching) as client:
        if args.mode == "streams":
            report = await streams(client, authority, args.n, args.path)
        elif args.mode == "reset":
            report = await reset(client, authority, args.n, args.path)
        elif args.mode == "unknown":
            report = await unknown(client, authority, args.n, args.path)
        elif args.mode in ("tiny", "tinydata", "greasecontrol", "greaseuni"):
            flood = globals()[args.mode]
            report = await flood(client, authority, args.n, args.path)
        else:
            report = await noread(client, authority, args.n, args.path, args.secs)
    print(json.dumps(report), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
