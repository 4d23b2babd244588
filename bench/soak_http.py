"""A small HTTP/1.1 client over raw sockets for bench/soak's clients: keep-alive,
pipelining, slow reads and writes, abandoning a body, and telling apart the ways
an exchange can end (a whole answer, a truncated body, a connection closed before
any byte of a head, a reset, a timeout), which library clients hide."""

import socket
import ssl
import time


class Ended(Exception):
    """An exchange that did not end with a whole answer; `outcome` names how."""

    def __init__(self, outcome, status=None):
        super().__init__(outcome)
        self.outcome = outcome
        self.status = status


class Response:
    def __init__(self, status, headers, body, complete=True):
        self.status, self.headers, self.body, self.complete = status, headers, body, complete

    def header(self, name):
        return self.headers.get(name.lower())


def tls_context(alpn=("http/1.1",)):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(list(alpn))
    return ctx


class Connection:
    """One client connection; `requests_done` tells whether it was reused, which
    decides whether a close before any byte may be retried (as HTTP clients do)."""

    def __init__(self, host, port, tls=False, sni=None, timeout=20.0):
        self.host, self.port, self.timeout = host, port, timeout
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls:
            sock = tls_context().wrap_socket(sock, server_hostname=sni or "localhost")
        self.sock = sock
        self.buf = b""
        self.requests_done = 0
        self.closed = False

    def close(self):
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass

    def abort(self):
        """Close with a reset (SO_LINGER 0), as a client killed mid-download does."""
        try:
            raw = self.sock
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        except OSError:
            pass
        self.close()

    def send(self, data):
        try:
            self.sock.sendall(data)
        except socket.timeout:
            raise Ended("timeout")
        except (ConnectionResetError, BrokenPipeError):
            raise Ended("reset")
        except (ssl.SSLError, OSError) as e:
            raise Ended(f"error:{type(e).__name__}")

    def _recv(self, n=65536):
        try:
            data = self.sock.recv(n)
        except socket.timeout:
            raise Ended("timeout")
        except ConnectionResetError:
            raise Ended("reset")
        except ssl.SSLError as e:
            if "EOF" in str(e) or "UNEXPECTED" in str(e):
                return b""
            raise Ended(f"error:{type(e).__name__}")
        except OSError as e:
            raise Ended(f"error:{type(e).__name__}")
        return data

    def _fill(self, need_head):
        data = self._recv()
        if not data:
            return False
        self.buf += data
        return True

    def read_head(self):
        """(status, headers) of the next final answer; 1xx interim answers are
        skipped. Ended("closed") when the connection ends before any byte."""
        while True:
            while b"\r\n\r\n" not in self.buf:
                had = bool(self.buf)
                if not self._fill(True):
                    raise Ended("truncated-head" if had else "closed")
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
                raise Ended("malformed")
            status = int(parts[1])
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                key = name.strip().lower()
                value = value.strip()
                headers[key] = headers[key] + ", " + value if key in headers else value
            if 100 <= status < 200 and status != 101:
                continue
            return status, headers

    def read_body(self, status, headers, method="GET", limit=None, pace=None):
        """The body as framed; with `limit`, stops after that many bytes (the
        caller then abandons the connection); with `pace` (bytes, seconds), reads
        that many bytes per interval, a slow reader."""
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return b"", True
        te = headers.get("transfer-encoding", "").lower()
        if "chunked" in te:
            return self._read_chunked(status)
        length = headers.get("content-length")
        if length is not None:
            want = int(length)
        else:
            want = None  # until close
        body = bytearray()
        while want is None or len(body) < want:
            if limit is not None and len(body) >= limit:
                return bytes(body), False
            if self.buf:
                take = self.buf if want is None else self.buf[: want - len(body)]
                body += take
                self.buf = self.buf[len(take):]
                continue
            if pace:
                time.sleep(pace[1])
            data = self._recv(pace[0] if pace else 262144)
            if not data:
                if want is None:
                    self.closed = True
                    return bytes(body), True
                raise Ended("truncated", status)
            self.buf += data
        return bytes(body), True

    def _read_chunked(self, status):
        body = bytearray()
        while True:
            while b"\r\n" not in self.buf:
                if not self._fill(False):
                    raise Ended("truncated", status)
            line, self.buf = self.buf.split(b"\r\n", 1)
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise Ended("malformed", status)
            if size == 0:
                while b"\r\n\r\n" not in b"\r\n" + self.buf:
                    if not self._fill(False):
                        raise Ended("truncated", status)
                _, self.buf = (b"\r\n" + self.buf).split(b"\r\n\r\n", 1)
                return bytes(body), True
            while len(self.buf) < size + 2:
                if not self._fill(False):
                    raise Ended("truncated", status)
            body += self.buf[:size]
            self.buf = self.buf[size + 2:]

    def exchange(self, method, path, headers=(), body=b"", host="localhost", limit=None,
                 pace=None, body_pace=None):
        """One request and its answer. `body_pace` (bytes, seconds) sends the body
        that slowly, a slow writer."""
        head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n"
        for name, value in headers:
            head += f"{name}: {value}\r\n"
        if body or method in ("POST", "PUT"):
            head += f"Content-Length: {len(body)}\r\n"
        head += "\r\n"
        if body_pace:
            self.send(head.encode())
            for i in range(0, len(body), body_pace[0]):
                time.sleep(body_pace[1])
                self.send(body[i:i + body_pace[0]])
        else:
            self.send(head.encode() + body)
        status, hdrs = self.read_head()
        data, complete = self.read_body(status, hdrs, method, limit=limit, pace=pace)
        self.requests_done += 1
        if "close" in hdrs.get("connection", "").lower():
            self.close()
        return Response(status, hdrs, data, complete)
