"""Shared pieces of the benchmark scripts: installing peers, rendering their
configs, starting them pinned to a CPU, checking readiness, measuring CPU time
and memory from /proc, and stopping every started process by its own group."""

import atexit
import http.client
import os
import resource
import shutil
import signal
import socket
import ssl
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PEERS = BENCH / "peers"
BODY = b"Hello, World!"

ALL_SERVERS = ["pier", "nginx", "h2o", "lighttpd", "haproxy", "hitch", "stunnel"]
PEER_SERVERS = ALL_SERVERS[1:]
# bench/compare's reference servers, never counted as peers: `floor` (bench/floor.c,
# the kernel's own cost per request), `proxy-floor` (bench/proxy_floor.c, the same
# for a proxied request) and `pier-base` (a second Pier binary, the one before a
# change, run with Pier's templates).
FLOOR = "floor"
PROXY_FLOOR = "proxy-floor"
BASELINE = "pier-base"
REFERENCE_SERVERS = [FLOOR, PROXY_FLOOR, BASELINE]
# The floors, each built from its C source; a workload has at most one of them.
FLOOR_SOURCES = {FLOOR: BENCH / "floor.c", PROXY_FLOOR: BENCH / "proxy_floor.c"}
# The templates and command line a server uses when it is not its own name.
SERVER_KIND = {BASELINE: "pier"}
ALL_WORKLOADS = ["fixed", "guarded", "static", "https", "https-bulk", "handshake", "proxy",
                 "tls-small", "tls-bulk"]
WORKLOAD_PATH = {"fixed": "/", "guarded": "/", "static": "/hello.txt", "https": "/hello",
                 "https-bulk": "/big.bin", "handshake": "/hello", "proxy": "/", "tls-small": "/",
                 "tls-bulk": "/big.bin"}
# TLS workloads share one peer template per server (`<server>-https.<ext>`) and an
# ECDSA P-256 certificate made with openssl for each server instance.
TLS_WORKLOADS = {"https", "https-bulk", "handshake"}
# TLS terminator workloads: the server decrypts and forwards the stream to a plain
# origin; one template per server and workload, a certificate per instance too.
TERMINATOR_WORKLOADS = {"tls-small", "tls-bulk"}
# Workloads that put an nginx origin behind the server under test, and the CPU
# the origin runs on: the reverse proxy's origin shares CPU 1 with the load
# generator; a TLS terminator and its plain origin share CPU 0.
ORIGIN_CPU = {"proxy": "1", "tls-small": "0", "tls-bulk": "0"}
# Which servers each workload compares; the others are skipped (with a note only
# when a listed server cannot run).
WORKLOAD_SERVERS = {
    "fixed": ["pier", "floor", "nginx", "h2o", "lighttpd", "haproxy"],
    # The fixed route with three header rules, an allow list and a rate limit that
    # is not hit: Pier against its own `fixed` row, no peer.
    "guarded": ["pier"],
    "static": ["pier", "floor", "nginx", "h2o", "lighttpd"],
    "https": ["pier", "nginx", "h2o", "haproxy"],
    "https-bulk": ["pier", "nginx", "h2o", "haproxy"],
    "handshake": ["pier", "nginx", "h2o", "haproxy"],
    "proxy": ["pier", "proxy-floor", "nginx", "haproxy"],
    "tls-small": ["pier", "hitch", "stunnel", "haproxy"],
    "tls-bulk": ["pier", "hitch", "stunnel", "haproxy"],
}
# The file of the bulk workloads (https-bulk at the server, tls-bulk at the origin).
BULK_FILE_BYTES = 100 * 1000 * 1000

# Debian 12 packages. nginx-light is a transitional package in bookworm that only
# pulls in `nginx` (which ships /usr/sbin/nginx) plus an extra module, so the real
# package is installed directly. mod_magnet (lighttpd's fixed response) lives in
# lighttpd-modules-lua.
PACKAGES = {
    "nginx": ["nginx"],
    "h2o": ["h2o"],
    "lighttpd": ["lighttpd", "lighttpd-modules-lua"],
    "haproxy": ["haproxy"],
    "hitch": ["hitch"],
    "stunnel": ["stunnel4"],
    "wrk": ["wrk"],
    "varnish": ["varnish"],
    "squid": ["squid"],
}
BINARY_NAMES = {
    "nginx": "nginx",
    "h2o": "h2o",
    "lighttpd": "lighttpd",
    "haproxy": "haproxy",
    "hitch": "hitch",
    "stunnel": "stunnel4",
    "wrk": "wrk",
    "varnish": "varnishd",
    "squid": "squid",
}
LIGHTTPD_MAGNET = Path("/usr/lib/lighttpd/mod_magnet.so")

CLK_TCK = os.sysconf("SC_CLK_TCK")

_started = []  # every Popen this process started, stopped by stop_all()


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- signals / cleanup


def install_signal_handlers():
    """Turn SIGTERM/SIGHUP into KeyboardInterrupt so `finally` blocks run."""

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def spawn(cmd, **kw):
    """Start a process in a new session (its own process group) and remember it."""
    kw.setdefault("stdin", subprocess.DEVNULL)
    proc = subprocess.Popen(cmd, start_new_session=True, **kw)
    _started.append(proc)
    return proc


def stop(proc, timeout=5.0):
    """SIGTERM the process group created for `proc`, SIGKILL it after `timeout`."""
    if proc is None:
        return
    pgid = proc.pid  # start_new_session=True: the group id is the leader's pid
    if proc.poll() is None:
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    # The leader may be gone while children of its group linger (nginx workers).
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        log(f"warning: pid {proc.pid} did not exit after SIGKILL")
    if proc in _started:
        _started.remove(proc)


def stop_all():
    for proc in list(reversed(_started)):
        stop(proc)


def raise_nofile(want=None):
    """Soft RLIMIT_NOFILE up to the hard limit; as root, the hard limit itself up
    to `want` (bounded by fs.nr_open) when that is higher."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if want and hard != resource.RLIM_INFINITY and want > hard and os.geteuid() == 0:
        try:
            nr_open = int(Path("/proc/sys/fs/nr_open").read_text())
        except (OSError, ValueError):
            nr_open = want
        try:
            target = min(want, nr_open)
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, target))
            soft, hard = target, target
        except (ValueError, OSError):
            pass
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _preexec_nofile():
    # Runs in the child before exec: the server gets the hard limit as well.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ---------------------------------------------------------------- packages


def dpkg_installed(pkg):
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", pkg],
            capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip().endswith("install ok installed")


class _PolicyRcGuard:
    """Keeps package maintainer scripts from starting system services while
    installing: if /usr/sbin/policy-rc.d is absent, a deny-all one is put in place
    for the duration and removed afterwards."""

    PATH = Path("/usr/sbin/policy-rc.d")

    def __enter__(self):
        self.created = False
        if not self.PATH.exists():
            self.PATH.write_text("#!/bin/sh\nexit 101\n")
            self.PATH.chmod(0o755)
            self.created = True
        return self

    def __exit__(self, *exc):
        if self.created:
            try:
                self.PATH.unlink()
            except FileNotFoundError:
                pass


def ensure_packages(wanted, notes, install=True):
    """Install the Debian packages of the `wanted` servers/tools that are missing.
    Returns the set of names whose packages are all installed afterwards."""
    missing = []
    for name in wanted:
        missing += [p for p in PACKAGES.get(name, []) if not dpkg_installed(p)]
    missing = sorted(set(missing))
    if missing and not install:
        notes.append(f"not installing missing packages ({', '.join(missing)}): --no-install")
    elif missing and os.geteuid() != 0:
        notes.append(f"missing packages ({', '.join(missing)}) and not root: not installed")
    elif missing:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        log(f"installing: {' '.join(missing)}")
        with _PolicyRcGuard():
            subprocess.run(["apt-get", "update", "-qq"], env=env, timeout=900,
                           stdout=subprocess.DEVNULL)
            r = subprocess.run(["apt-get", "install", "-y", "-qq", *missing], env=env,
                               timeout=1800, stdout=subprocess.DEVNULL)
            if r.returncode != 0:
                # One bad package must not keep the others out.
                for pkg in missing:
                    if not dpkg_installed(pkg):
                        subprocess.run(["apt-get", "install", "-y", "-qq", pkg], env=env,
                                       timeout=1800, stdout=subprocess.DEVNULL)
    ok = set()
    for name in wanted:
        pkgs = PACKAGES.get(name, [])
        # lighttpd-modules-lua only matters for the fixed workload; checked there.
        required = [p for p in pkgs if p != "lighttpd-modules-lua"]
        bad = [p for p in required if not dpkg_installed(p)]
        if bad:
            notes.append(f"{name}: package(s) {', '.join(bad)} could not be installed; skipped")
        elif find_binary(name) is None:
            notes.append(f"{name}: binary not found after install; skipped")
        else:
            ok.add(name)
    return ok


def find_binary(name):
    path = os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/sbin:/sbin"
    return shutil.which(BINARY_NAMES.get(name, name), path=path)


# ---------------------------------------------------------------- Pier binary


def default_pier():
    return REPO / "target" / "release" / "pier"


def ensure_pier(path, build, notes, timeout=3600):
    """Returns the Pier binary path, building it when it is the default and missing."""
    path = Path(path)
    if path.exists():
        return path
    if build and path == default_pier():
        log("pier: target/release/pier missing, running `cargo build --release`")
        try:
            r = subprocess.run(["cargo", "build", "--release"], cwd=REPO, timeout=timeout)
            if r.returncode != 0:
                notes.append(f"pier: `cargo build --release` failed (exit {r.returncode}); skipped")
        except FileNotFoundError:
            notes.append("pier: cargo not found; skipped")
        except subprocess.TimeoutExpired:
            notes.append(f"pier: `cargo build --release` exceeded {timeout}s; skipped")
        if path.exists():
            return path
        if not notes or not notes[-1].startswith("pier:"):
            notes.append(f"pier: {path} still missing after build; skipped")
        return None
    notes.append(f"pier: binary {path} not found; skipped")
    return None


# ---------------------------------------------------------------- floor


def build_floor(directory, name=FLOOR, timeout=120):
    """Compiles the floor `name` (bench/floor.c or bench/proxy_floor.c) with gcc -O2
    into `directory`; returns (path, None) or (None, why)."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        return None, "gcc is not installed"
    out = Path(directory) / name
    try:
        r = subprocess.run([gcc, "-O2", "-Wall", "-Wextra", "-o", str(out),
                            str(FLOOR_SOURCES[name])],
                           capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"gcc failed: {e}"
    if r.returncode != 0:
        return None, f"gcc exited {r.returncode}: {r.stderr.strip()[-300:]}"
    return out, None


def gcc_version():
    gcc = shutil.which("gcc") or shutil.which("cc")
    try:
        r = subprocess.run([gcc, "--version"], capture_output=True, text=True, timeout=10)
        return r.stdout.splitlines()[0]
    except (OSError, TypeError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


# ---------------------------------------------------------------- versions


def server_version(name, binary):
    if name in FLOOR_SOURCES:
        return f"bench/{FLOOR_SOURCES[name].name}, gcc -O2 ({gcc_version()})"
    name = kind_of(name)
    flag = {"pier": "--version", "hitch": "--version", "stunnel": "-version"}.get(name, "-v")
    try:
        r = subprocess.run([str(binary), flag], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    text = (r.stdout + r.stderr).strip()
    lines = text.splitlines()
    if name == "stunnel":
        # stunnel prints configuration chatter before its version line.
        lines = [l for l in lines if l.startswith("stunnel ")] or lines
    first = lines[0] if lines else "unknown"
    if name == "h2o" and "mruby: YES" in text:
        first += " (mruby)"
    return first


def h2o_has_mruby(binary):
    try:
        r = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "mruby: YES" in (r.stdout + r.stderr)


def machine_info():
    info = {"nproc": os.cpu_count(), "kernel": os.uname().release, "cpu": "unknown"}
    try:
        out = subprocess.run(["nproc"], capture_output=True, text=True, timeout=10)
        info["nproc"] = int(out.stdout.strip())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["memory"] = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return info


# ---------------------------------------------------------------- /proc


def _stat_fields(pid):
    """Fields of /proc/PID/stat after the `comm` field: [0] is field 3 (state)."""
    data = Path(f"/proc/{pid}/stat").read_bytes()
    return data[data.rindex(b")") + 2:].split()


def process_tree(root):
    """`root` and all its descendants that are alive now."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(_stat_fields(entry)[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def tree_cpu_seconds(root):
    """utime + stime (fields 14 and 15 of /proc/PID/stat) over the process tree."""
    return sum(tree_cpu_split(root))


def tree_cpu_split(root):
    """(utime, stime) over the process tree, in seconds: user space and the kernel."""
    user = system = 0
    for pid in process_tree(root):
        try:
            f = _stat_fields(pid)
            user, system = user + int(f[11]), system + int(f[12])
        except (OSError, ValueError, IndexError):
            continue
    return user / CLK_TCK, system / CLK_TCK


def tree_sched_seconds(root):
    """On-CPU time from /proc/PID/task/*/schedstat (ns resolution), as a cross-check."""
    ns = 0
    for pid in process_tree(root):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                ns += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return ns / 1e9


def tree_rss_kib(root):
    total = 0
    for pid in process_tree(root):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
                    break
        except (OSError, ValueError, IndexError):
            continue
    return total


# ---------------------------------------------------------------- servers


def nginx_origin_conf(tmp, servers):
    """A one-worker nginx origin whose `http` block holds `servers` (the
    server blocks, as text), with every path it writes kept under `tmp`."""
    return f"""daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 8192;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    default_type text/plain;
{servers}
}}
"""


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fixed_unsupported(name, binary):
    """Why `name` cannot serve the fixed workload here, or None."""
    if name == "h2o" and not h2o_has_mruby(binary):
        return "h2o was built without mruby, which it needs for a fixed response body"
    if name == "lighttpd" and not LIGHTTPD_MAGNET.exists():
        return "lighttpd mod_magnet missing (package lighttpd-modules-lua)"
    return None


def static_unsupported(name):
    if name == "haproxy":
        return "haproxy does not serve files"
    return None


def kind_of(name):
    """The server whose templates and command line `name` uses (pier for pier-base)."""
    return SERVER_KIND.get(name, name)


def is_peer(name, workload):
    """Whether `name` is one of the servers `workload` compares."""
    return kind_of(name) in WORKLOAD_SERVERS.get(workload, [])


def counts_as_peer(name):
    """Whether `name` competes for "best peer": not Pier, not a reference server."""
    return kind_of(name) != "pier" and name not in REFERENCE_SERVERS


def unsupported(name, binary, workload):
    """Why `name` cannot run `workload` here, or None."""
    if not is_peer(name, workload):
        peers = ", ".join(x for x in WORKLOAD_SERVERS.get(workload, []) if counts_as_peer(x))
        return f"not a peer for this workload (peers: {peers})"
    if workload in TLS_WORKLOADS or workload in TERMINATOR_WORKLOADS:
        if shutil.which("openssl") is None:
            return "openssl (for the test certificate) is not installed"
    if workload in TLS_WORKLOADS:
        if workload == "https-bulk":
            return static_unsupported(name)
        if name == "h2o" and not h2o_has_mruby(binary):
            return "h2o was built without mruby, which it needs for a fixed response body"
        return None
    if workload == "fixed":
        return fixed_unsupported(name, binary)
    if workload == "static":
        return static_unsupported(name)
    return None


def make_certificate(directory):
    """A self-signed ECDSA P-256 certificate for localhost/127.0.0.1, made with
    openssl so every server gets the same kind of key; returns (cert, key, pem),
    pem holding both (for haproxy and hitch)."""
    cert, key, pem = directory / "cert.pem", directory / "key.pem", directory / "both.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "7",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60)
    pem.write_bytes(cert.read_bytes() + key.read_bytes())
    for f in (cert, key, pem):
        f.chmod(0o644)
    return cert, key, pem


_bulk_cache = {}  # size -> one written file, hard-linked into every docroot


def write_bulk_file(path, size=BULK_FILE_BYTES):
    """Puts a `size`-byte file of random bytes at `path`. The bytes are written once
    per process and hard-linked after that: compare keeps every server of a workload
    up at once, and they share one file (and its page cache)."""
    cached = _bulk_cache.get(size)
    if cached is not None and cached.exists():
        try:
            os.link(cached, path)
            return
        except OSError:
            pass  # another file system: write a copy
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
    path.chmod(0o644)
    if cached is None:
        cache_dir = Path(tempfile.mkdtemp(prefix="bench-bulk-"))
        atexit.register(shutil.rmtree, cache_dir, True)
        cached = cache_dir / "bulk.bin"
        try:
            os.link(path, cached)
            _bulk_cache[size] = cached
        except OSError:
            shutil.rmtree(cache_dir, ignore_errors=True)


def resumption_vars(workload):
    """Session resumption on (servers' usual settings) or, for the full-handshake
    workload, off everywhere: no tickets and no session cache."""
    if workload == "handshake":
        return {"nginx_tickets": "off", "nginx_cache": "off",
                "h2o_resumption": "ssl-session-resumption:\n  mode: off",
                "haproxy_tickets": "no-tls-tickets", "haproxy_cache": "0",
                "pier_tickets": "false", "pier_cache": "0"}
    return {"nginx_tickets": "on", "nginx_cache": "none", "h2o_resumption": "",
            "haproxy_tickets": "", "haproxy_cache": "20000",
            "pier_tickets": "true", "pier_cache": "1024"}


class Origin:
    """The plain nginx (one worker) behind the proxy and TLS terminator workloads:
    `/` answers `Hello, World!`; with `bulk`, `/big.bin` is a BULK_FILE_BYTES file
    sent with sendfile."""

    def __init__(self, binary, cpu, bulk=False):
        self.server = Server("nginx", binary, "origin", cpu=cpu)
        if bulk:
            write_bulk_file(self.server.docroot / "big.bin")

    @property
    def port(self):
        return self.server.port

    def start(self):
        self.server.start()
        return self.server.wait_ready()

    def stop(self):
        self.server.stop()
        self.server.cleanup()


class Server:
    """One server instance with its own config and temp dir, pinned to `cpu`.
    `peers_dir` holds the templates when they are not bench/peers/ (pier-base built
    from an older revision uses that revision's)."""

    def __init__(self, name, binary, workload, cpu="0", worker_connections=4096,
                 extra_pier_toml="", extra_vars=None, peers_dir=None):
        self.name, self.binary, self.workload = name, str(binary), workload
        self.kind = kind_of(name)
        self.peers_dir = Path(peers_dir) if peers_dir else PEERS
        self.cpu = cpu
        self.proc = None
        self.tmp = Path(tempfile.mkdtemp(prefix=f"bench-{name}-{workload}-"))
        # Workers that drop privileges (nginx) must still reach the docroot.
        self.tmp.chmod(0o755)
        self.docroot = self.tmp / "www"
        self.docroot.mkdir()
        self.docroot.chmod(0o755)
        (self.docroot / "hello.txt").write_bytes(BODY)
        (self.docroot / "hello.txt").chmod(0o644)
        self.port = free_port()
        self.path = WORKLOAD_PATH.get(workload, "/")
        self.log_path = self.tmp / "server.log"
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if nofile == resource.RLIM_INFINITY:
            nofile = 1 << 20
        self.vars = {
            "port": str(self.port),
            "tmp": str(self.tmp),
            "docroot": str(self.docroot),
            "worker_connections": str(worker_connections),
            "rlimit_nofile": str(nofile),
        }
        self.vars.update({k: str(v) for k, v in (extra_vars or {}).items()})
        self.tls = workload in TLS_WORKLOADS or workload in TERMINATOR_WORKLOADS
        if self.tls:
            cert, key, pem = make_certificate(self.tmp)
            self.vars.update(cert=str(cert), key=str(key), pem=str(pem),
                             **resumption_vars(workload))
            if workload == "https-bulk":
                write_bulk_file(self.docroot / "big.bin")
        self.conf = self._render(extra_pier_toml)

    @property
    def url(self):
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}{self.path}"

    def _render(self, extra_pier_toml):
        if self.kind in FLOOR_SOURCES:
            return None  # no configuration: the ports are its arguments
        ext = {"pier": "toml", "nginx": "conf", "h2o": "yaml", "lighttpd": "conf",
               "haproxy": "cfg", "hitch": "conf", "stunnel": "conf"}[self.kind]
        kind = "https" if self.workload in TLS_WORKLOADS else self.workload
        template = self.peers_dir / f"{self.kind}-{kind}.{ext}"
        if not template.exists():
            template = PEERS / template.name
        text = string.Template(template.read_text()).substitute(self.vars)
        if self.kind == "pier" and extra_pier_toml:
            text += "\n" + extra_pier_toml
        if self.kind == "lighttpd" and self.workload == "fixed":
            shutil.copy(PEERS / "lighttpd-hello.lua", self.tmp / "hello.lua")
        conf = self.tmp / template.name
        conf.write_text(text)
        return conf

    def command(self):
        c, b = str(self.conf), self.binary
        return {
            "pier": [b, "serve", "--config", c, "--workers", "1", "--no-tls"],
            "nginx": [b, "-p", str(self.tmp) + "/", "-e", str(self.tmp / "error.log"), "-c", c],
            "h2o": [b, "-c", c],
            "lighttpd": [b, "-D", "-f", c],
            "haproxy": [b, "-db", "-f", c],
            "hitch": [b, f"--config={c}", "--user=nobody", "--group=nogroup"],
            "stunnel": [b, c],
            FLOOR: [b, str(self.port)],
            PROXY_FLOOR: [b, str(self.port), self.vars.get("origin_port", "")],
        }[self.kind]

    def start(self):
        self._log = open(self.log_path, "wb")
        self.proc = spawn(["taskset", "-c", self.cpu, *self.command()], cwd=self.tmp,
                          stdout=self._log, stderr=subprocess.STDOUT,
                          preexec_fn=_preexec_nofile)
        return self.proc

    @property
    def pid(self):
        return self.proc.pid

    def log_tail(self, n=15):
        texts = []
        for p in (self.log_path, self.tmp / "error.log"):
            try:
                t = p.read_text(errors="replace").strip()
            except OSError:
                continue
            if t:
                texts.append("\n".join(t.splitlines()[-n:]))
        return "\n".join(texts)

    def wait_ready(self, timeout=15.0):
        """(True, None) once the port accepts and GET returns 200 + the expected
        body; (False, reason) otherwise."""
        deadline = time.monotonic() + timeout
        last = "no connection"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False, f"exited with status {self.proc.returncode}"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
            except OSError as e:
                last = f"connect: {e}"
                time.sleep(0.1)
                continue
            # TLS workloads check the small response (`/hello` at the server, `/` at a
            # terminator's origin); the bulk files are checked by size.
            if self.workload in TLS_WORKLOADS:
                path = "/hello"
            elif self.workload == "tls-bulk":
                path = "/"
            else:
                path = self.path
            try:
                if self.tls:
                    ctx = ssl._create_unverified_context()
                    conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=3,
                                                       context=ctx)
                else:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3)
                conn.request("GET", path)
                resp = conn.getresponse()
                body = resp.read()
                if self.workload in ("https-bulk", "tls-bulk") and resp.status == 200:
                    conn.request("HEAD", self.path)
                    head = conn.getresponse()
                    head.read()
                    size = int(head.getheader("content-length") or 0)
                    if size != BULK_FILE_BYTES:
                        conn.close()
                        return False, f"HEAD {self.path}: content-length {size}"
                conn.close()
            except (OSError, http.client.HTTPException, ValueError) as e:
                last = f"GET {path}: {e!r}"
                time.sleep(0.2)
                continue
            if resp.status == 200 and body == BODY:
                return True, None
            return False, f"GET {path} returned {resp.status} with body {body[:80]!r}"
        return False, f"not ready within {timeout:.0f}s ({last})"

    def stop(self):
        stop(self.proc)
        if getattr(self, "_log", None):
            self._log.close()

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
