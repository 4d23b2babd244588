#!/usr/bin/env python3
"""bench/soak's own clients, one kind per process (each with its own GIL): they
run until a deadline and write one JSON summary. A request whose answer is the
route's normal one counts as `ok`; any other ending is recorded with its start
and end time, its route and how it ended, and bench/soak decides afterwards
whether a fault or an operation in force at that moment allows it.

usage: soak_clients.py KIND --target JSON --until EPOCH --out FILE
"""

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
from soak_http import Connection, Ended, tls_context  # noqa: E402

# Requests that did not get their normal answer are kept for judging up to
# this many per client kind; past it they count as unexpected (unjudged).
MAX_RECORDS = 500_000


class Tally:
    """Counts of one client kind, shared by its threads."""

    def __init__(self, kind, protocol):
        self.kind, self.protocol = kind, protocol
        # Streams of the tcp listener are not HTTP requests: the access log
        # and /metrics do not count them.
        self.http = kind != "tcp"
        self.lock = threading.Lock()
        self.requests = self.answered = self.ok = self.retried = self.unrecorded = 0
        self.routes = {}
        self.answered_routes = {}
        self.records = []

    def add(self, route, t0, outcome, answered):
        t1 = time.time()
        with self.lock:
            self.requests += 1
            self.answered += 1 if answered else 0
            self.routes[route] = self.routes.get(route, 0) + 1
            if answered:
                self.answered_routes[route] = self.answered_routes.get(route, 0) + 1
            if outcome == "ok":
                self.ok += 1
            elif len(self.records) < MAX_RECORDS:
                self.records.append([round(t0, 3), round(t1, 3), route, outcome])
            else:
                self.unrecorded += 1

    def summary(self):
        return {"client": self.kind, "protocol": self.protocol, "requests": self.requests,
                "answered": self.answered, "ok": self.ok, "http": self.http,
                "unrecorded": self.unrecorded, "retried": self.retried,
                "routes": self.routes, "answered_routes": self.answered_routes,
                "records": self.records}


class Session:
    """A keep-alive connection that is reopened when it ends; a request on a
    reused connection closed before any byte of its answer is sent again on a new
    one, once (the crossing of a request with a keep-alive close)."""

    def __init__(self, target, tls=False, sni=None):
        self.port = target["https"] if tls else target["http"]
        self.tls, self.sni, self.conn = tls, sni, None

    def exchange(self, tally, *args, **kw):
        for attempt in (0, 1):
            if self.conn is None or self.conn.closed:
                self.conn = Connection("127.0.0.1", self.port, tls=self.tls, sni=self.sni)
            reused = self.conn.requests_done > 0
            try:
                return self.conn.exchange(*args, **kw)
            except Ended as e:
                self.conn.close()
                self.conn = None
                if e.outcome in ("closed", "reset") and reused and attempt == 0:
                    with tally.lock:
                        tally.retried += 1
                    continue
                raise

    def drop(self):
        if self.conn:
            self.conn.close()
            self.conn = None


def run_request(tally, route, fn):
    """Runs one request through `fn` (returning an outcome string) and counts it."""
    t0 = time.time()
    try:
        outcome = fn()
        answered = True
    except Ended as e:
        answered = e.status is not None
        outcome = e.outcome + (f":{e.status}" if e.status else "")
    except OSError as e:
        answered = False
        outcome = f"connect:{type(e).__name__}"
    tally.add(route, t0, outcome, answered)


def expect(resp, statuses, check=None):
    if resp.status not in statuses:
        return f"status:{resp.status}"
    if check is not None and not check(resp):
        return f"bad-body:{resp.status}"
    return "ok"


# ---------------------------------------------------------------- kinds


def faults(target, until, tally, tls):
    """The fault route, through the fault-injecting origin; every answer recorded."""
    s = Session(target, tls=tls)
    i = 0
    while time.time() < until:
        i += 1
        path = f"/fault/{i % 50}"

        def one():
            r = s.exchange(tally, "GET", path)
            return expect(r, (200,), lambda r: r.body == fault_body(path))
        run_request(tally, "fault", one)
        time.sleep(0.02)
    s.drop()


def fault_body(path):
    return (f"fault-ok {path}\n" * 100).encode()


def cache_walker(target, until, tally):
    """Many keys of the cached route (more than its memory and disk tiers hold),
    popular ones more often: stores, hits, evictions, a disk tier that fills."""
    s = Session(target)
    keys = target["cache_objects"]
    while time.time() < until:
        n = min(int(random.paretovariate(1.1)) - 1, keys - 1)
        path = f"/cached/obj{n}"
        size = target["cache_sizes"][n]
        run_request(tally, "cached", lambda: expect(
            s.exchange(tally, "GET", path), (200,), lambda r: len(r.body) == size))
        time.sleep(0.005)
    s.drop()


def pipeline(target, until, tally):
    """Ten requests in one write, then their ten answers, in order."""
    paths = [("/hello", "hello"), ("/static/small.txt", "static"), ("/generation", "generation"),
             ("/app/item", "app")] * 3
    while time.time() < until:
        batch = paths[: 10]
        try:
            conn = Connection("127.0.0.1", target["http"])
        except OSError as e:
            tally.add("pipeline", time.time(), f"connect:{type(e).__name__}", False)
            time.sleep(0.5)
            continue
        t0 = time.time()
        raw = b"".join(f"GET {p} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode() for p, _ in batch)
        try:
            conn.send(raw)
            for p, route in batch:
                status, headers = conn.read_head()
                body, _ = conn.read_body(status, headers)
                ok = status == 200 and (route != "generation" or body in (b"A", b"B"))
                tally.add(route, t0, "ok" if ok else f"status:{status}", True)
        except Ended as e:
            # The rest of the batch: sent, never answered.
            tally.add("pipeline", t0, e.outcome, False)
        conn.close()
        time.sleep(0.05)


def slow_reader(target, until, tally):
    """Downloads the large file at ~320 KB/s, the proxy's large answers too."""
    size = target["big_size"]
    while time.time() < until:
        for path, route in (("/static/big.bin", "static"), ("/app/big", "app")):
            def one():
                c = Connection("127.0.0.1", target["http"])
                try:
                    r = c.exchange("GET", path, pace=(32768, 0.1))
                finally:
                    c.close()
                return expect(r, (200,), lambda r: len(r.body) == size)
            run_request(tally, route, one)


def slow_writer(target, until, tally):
    """Uploads 64 KiB in 4 KiB pieces 100 ms apart through the proxy."""
    body = os.urandom(65536)
    while time.time() < until:
        def one():
            c = Connection("127.0.0.1", target["http"])
            try:
                return expect(c.exchange("POST", "/app/upload", body=body, body_pace=(4096, 0.1)),
                              (200,))
            finally:
                c.close()
        run_request(tally, "app", one)


def aborter(target, until, tally):
    """Takes the head and a little of large downloads, then resets the connection:
    static (sendfile), cached and proxied bodies, over plain and TLS."""
    cases = [("/static/big.bin", "static", False), ("/app/big", "app", False),
             ("/static/big.bin", "static", True), ("/cached/obj3", "cached", False)]
    while time.time() < until:
        for path, route, tls in cases:
            def one():
                c = Connection("127.0.0.1", target["https"] if tls else target["http"], tls=tls)
                try:
                    r = c.exchange("GET", path, limit=16384)
                finally:
                    c.abort()
                return expect(r, (200,))
            run_request(tally, route, one)
            time.sleep(0.05)


def curl_mix(target, until, tally):
    """curl, a real client, for what it does best: ranges (one and several),
    conditionals (ETag, 304), compression, basic auth, deny, redirect, the rate
    limit, and TLS with SNI and HTTP/2."""
    http = f"http://127.0.0.1:{target['http']}"
    https_sni = f"https://alt.soak.test:{target['https']}"
    resolve = ["--resolve", f"alt.soak.test:{target['https']}:127.0.0.1"]
    etag = {}

    def curl(args, route, want):
        t0 = time.time()
        try:
            out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-D", "-", "-m", "20",
                                  "-w", "\\n%{http_code} %{size_download}", *args],
                                 capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            tally.add(route, t0, "timeout", False)
            return None
        text = out.stdout
        last = text.strip().splitlines()[-1] if text.strip() else "000 0"
        code, size = (int(x) for x in last.split())
        if code == 0:
            tally.add(route, t0, f"curl-exit:{out.returncode}", False)
            return None
        headers = {}
        for line in text.splitlines():
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        verdict = want(code, size, headers)
        tally.add(route, t0, "ok" if verdict else f"status:{code}", True)
        return headers

    small = target["small_size"]
    while time.time() < until:
        curl([f"{http}/static/big.bin", "-r", "0-99"], "static",
             lambda c, n, h: c == 206 and n == 100)
        curl([f"{http}/static/big.bin", "-r", "0-9,100-109"], "static",
             lambda c, n, h: c == 206 and "multipart/byteranges" in h.get("content-type", ""))
        h = curl([f"{http}/static/small.txt"], "static", lambda c, n, h: c == 200 and n == small)
        if h and "etag" in h:
            etag["small"] = h["etag"]
        if "small" in etag:
            curl([f"{http}/static/small.txt", "-H", f"If-None-Match: {etag['small']}"], "static",
                 lambda c, n, h: c == 304)
        curl([f"{http}/static/page.html", "-H", "Accept-Encoding: br"], "static",
             lambda c, n, h: c == 200 and h.get("content-encoding") == "br")
        curl([f"{http}/static/page.html", "--compressed"], "static",
             lambda c, n, h: c == 200 and h.get("content-encoding") in ("gzip", "br", "zstd"))
        curl([f"{http}/private/", "-u", "soak:soak-password"], "private", lambda c, n, h: c == 200)
        curl([f"{http}/private/"], "private", lambda c, n, h: c == 401)
        curl([f"{http}/internal"], "internal", lambda c, n, h: c == 403)
        curl([f"{http}/old/page"], "redirect",
             lambda c, n, h: c == 301 and h.get("location") == "/static/page.html")
        curl([f"{http}/limited"], "limited", lambda c, n, h: c in (200, 429))
        curl([f"{https_sni}/hello", "-k", "--http2", *resolve], "hello",
             lambda c, n, h: c == 200 and h.get("x-soak-request", "") != "")
        curl([f"{https_sni}/static/big.bin", "-k", "--http2", "-r", "5-14", *resolve], "static",
             lambda c, n, h: c == 206 and n == 10)
        curl([f"{http}/cached/obj1", "--http2-prior-knowledge"], "cached",
             lambda c, n, h: c == 200 and "cache-status" in h)


def websocket(target, until, tally, tls):
    """WebSocket echo sessions through the proxy (the `websockets` asyncio
    client: its threaded client shares one SSL object between a reading and a
    writing thread, and over TLS it now and then never sends its request)."""
    import asyncio
    from websockets.asyncio.client import connect
    scheme, port = ("wss", target["https"]) if tls else ("ws", target["http"])
    ctx = tls_context() if tls else None

    async def sessions():
        while time.time() < until:
            t0 = time.time()
            opened = False
            try:
                async with connect(f"{scheme}://127.0.0.1:{port}/ws", ssl=ctx, open_timeout=10,
                                   close_timeout=5,
                                   server_hostname="localhost" if tls else None) as ws:
                    opened = True
                    ok = True
                    for i in range(10):
                        msg = f"soak {i} " + "x" * random.randint(1, 4000)
                        await ws.send(msg)
                        ok = ok and await asyncio.wait_for(ws.recv(), 10) == msg
                    tally.add("ws", t0, "ok" if ok else "bad-echo", True)
            except Exception as e:  # the library's own exceptions, by name
                # A refused upgrade (InvalidStatus) was answered; a handshake
                # that timed out or broke was not.
                answered = opened or type(e).__name__ == "InvalidStatus"
                stage = "" if opened else "handshake "
                tally.add("ws", t0, f"ws:{stage}{type(e).__name__}", answered)
                await asyncio.sleep(0.2)

    asyncio.run(sessions())


def grpc_calls(target, until, tally):
    """gRPC (grpcio) through the h2 group: unary calls and a server stream."""
    import grpc
    opts = [("grpc.enable_http_proxy", 0)]
    while time.time() < until:
        with grpc.insecure_channel(f"127.0.0.1:{target['http']}", options=opts) as ch:
            unary = ch.unary_unary("/test.Echo/Unary")
            stream = ch.unary_stream("/test.Echo/Stream")
            for i in range(50):
                if time.time() >= until:
                    break
                t0 = time.time()
                try:
                    if i % 10 == 9:
                        got = [m for m in stream(b"5", timeout=10)]
                        ok = got == [f"item{k}".encode() for k in range(5)]
                    else:
                        ok = unary(b"soak%d" % i, timeout=10) == b"echo:soak%d" % i
                    tally.add("grpc", t0, "ok" if ok else "bad-body", True)
                except grpc.RpcError as e:
                    tally.add("grpc", t0, f"grpc:{e.code().name}", True)
                time.sleep(0.01)


def tcp_echo(target, until, tally):
    """Streams through the `tcp` listener to an echo server: bytes come back."""
    while time.time() < until:
        t0 = time.time()
        data = os.urandom(random.randint(1, 65536))
        try:
            with socket.create_connection(("127.0.0.1", target["tcp"]), timeout=20) as s:
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
                got = bytearray()
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
            tally.add("tcp", t0, "ok" if bytes(got) == data else f"bad-echo:{len(got)}", True)
        except OSError as e:
            tally.add("tcp", t0, f"tcp:{type(e).__name__}", False)
        time.sleep(0.02)


KINDS = {
    "faults-plain": ("http/1.1", lambda t, u, y: faults(t, u, y, False), 2),
    "faults-tls": ("http/1.1+tls", lambda t, u, y: faults(t, u, y, True), 1),
    "cache-walker": ("http/1.1", cache_walker, 2),
    "pipeline": ("http/1.1", pipeline, 1),
    "slow-reader": ("http/1.1", slow_reader, 2),
    "slow-writer": ("http/1.1", slow_writer, 2),
    "aborter": ("http/1.1+tls", aborter, 1),
    "curl": ("curl (http/1.1, h2)", curl_mix, 1),
    "websocket": ("ws", lambda t, u, y: websocket(t, u, y, False), 2),
    "websocket-tls": ("wss (h1 upgrade)", lambda t, u, y: websocket(t, u, y, True), 1),
    "grpc": ("grpc (h2c)", grpc_calls, 1),
    "tcp": ("tcp", tcp_echo, 2),
}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=sorted(KINDS))
    p.add_argument("--target", required=True, help="JSON: ports and the corpus' sizes")
    p.add_argument("--until", type=float, required=True, help="stop at this time (epoch s)")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    target = json.loads(Path(a.target).read_text())
    protocol, fn, threads = KINDS[a.kind]
    tally = Tally(a.kind, protocol)
    workers = [threading.Thread(target=fn, args=(target, a.until, tally), daemon=True)
               for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=max(0.0, a.until - time.time()) + 60)
    Path(a.out).write_text(json.dumps(tally.summary()))


if __name__ == "__main__":
    main()
