#!/usr/bin/env python3
"""The origins bench/soak writes for itself.

`faulty PORT SCHEDULE`: an HTTP/1.1 origin (asyncio) that follows a schedule of
faults, each a window of wall-clock time: `refused` (its listening socket
closed), `reset_before` (a reset instead of an answer), `reset_mid` (the head
and half the body, then a reset), `stall` (no answer), `drip` (the body a few
bytes at a time, within the proxy's read timeout), `burst5xx` (500 and 503
answers), `malformed` (a head that is not HTTP). Outside faults every request
gets `fault_body(path)`. `/health` answers 200, except under `stall`,
`burst5xx`, `malformed` and `refused`, so the proxy's health checks see those.
(An origin restart is the harness' doing: it kills and starts this process.)

`websocket PORT`: a WebSocket echo server (the `websockets` library) at /ws.
"""

import asyncio
import json
import socket
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
from soak_clients import fault_body  # noqa: E402

HEALTH_FAULTS = {"stall", "burst5xx", "malformed"}


class Schedule:
    def __init__(self, windows):
        self.windows = windows

    def now(self):
        t = time.time()
        for w in self.windows:
            if w["start"] <= t < w["end"]:
                return w["kind"]
        return None


def reset(writer):
    sock = writer.get_extra_info("socket")
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    except OSError:
        pass
    writer.transport.abort()


async def read_request(reader):
    """The path of the next request (its body read and dropped), or None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    if length:
        await reader.readexactly(length)
    return parts[1] if len(parts) > 1 else "/"


def answer(status, body, extra=""):
    reason = {200: "OK", 500: "Internal Server Error", 503: "Service Unavailable"}[status]
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


async def serve_connection(reader, writer, schedule):
    burst = 0
    try:
        while True:
            path = await read_request(reader)
            if path is None:
                break
            fault = schedule.now()
            if path == "/health" and fault not in HEALTH_FAULTS:
                fault = None
            body = b"up\n" if path == "/health" else fault_body(path)
            if fault == "reset_before":
                reset(writer)
                return
            if fault == "reset_mid":
                data = answer(200, body)
                writer.write(data[: len(data) - len(body) // 2])
                await writer.drain()
                await asyncio.sleep(0.1)
                reset(writer)
                return
            if fault == "stall":
                # Until the proxy gives up (it closes) or the fault is long over.
                try:
                    await asyncio.wait_for(reader.read(1), 60)
                except asyncio.TimeoutError:
                    pass
                break
            if fault == "malformed":
                writer.write(b"HTTP/1.1 2OO OK\r\nContent-Length: banana\r\n\r\n")
                await writer.drain()
                break
            if fault == "burst5xx":
                burst += 1
                writer.write(answer(500 if burst % 2 else 503, b"injected failure\n"))
                await writer.drain()
                continue
            if fault == "drip":
                data = answer(200, body)
                step = max(1, len(data) // 40)
                for i in range(0, len(data), step):
                    writer.write(data[i:i + step])
                    await writer.drain()
                    await asyncio.sleep(0.05)
                continue
            writer.write(answer(200, body))
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.transport.abort() if writer.transport.is_closing() else writer.close()


async def run_faulty(port, schedule_path):
    schedule = Schedule(json.loads(Path(schedule_path).read_text()))

    async def handler(r, w):
        await serve_connection(r, w, schedule)

    server = None
    print("ready", flush=True)
    while True:
        refused = schedule.now() == "refused"
        if refused and server is not None:
            server.close()
            server = None
        elif not refused and server is None:
            server = await asyncio.start_server(handler, "127.0.0.1", port, reuse_address=True,
                                                backlog=1024)
        await asyncio.sleep(0.05)


async def run_websocket(port):
    from websockets.asyncio.server import serve

    async def echo(ws):
        async for msg in ws:
            await ws.send(msg)

    async with serve(echo, "127.0.0.1", port, max_size=1 << 20):
        print("ready", flush=True)
        await asyncio.Future()


def main():
    if sys.argv[1] == "faulty":
        asyncio.run(run_faulty(int(sys.argv[2]), sys.argv[3]))
    elif sys.argv[1] == "websocket":
        asyncio.run(run_websocket(int(sys.argv[2])))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
