"""bench/soak's configurations: the Pier under test (two variants, A and B, that
a SIGHUP alternates: a route, an upstream's servers and the certificates
differ), the Pier that serves as its healthy origin (HTTP/1.1 and h2), and the
files both serve."""

import os
import subprocess

# `htpasswd -nbB -C 5 soak soak-password`: the basic-auth route's one user.
HTPASSWD = "soak:$2y$05$7OmETmTV2Rz17e8zuxGY7O9GGGnZK3nFl/fpW6SdOmRD/xO0XgKAO\n"
CACHE_OBJECTS = 400
BIG_SIZE = 1 << 20
SMALL_TEXT = b"a small text file of the soak\n"


def cache_sizes():
    """Sizes of /cached/objN: 1 to 64 KiB, about 13 MB in all, more than the
    zone's memory and disk budgets."""
    return [1024 * (1 + (n * 37) % 64) for n in range(CACHE_OBJECTS)]


def certificate(directory, name, cn, sans):
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "7", "-subj", f"/CN={cn}",
         "-addext", "subjectAltName=" + ",".join(sans)],
        check=True, capture_output=True, timeout=60)
    return cert, key


def write_files(tmp):
    """Docroots of the Pier under test and of the origin, certificates, the
    htpasswd file and the ticket key."""
    www = tmp / "www"
    (www / "static").mkdir(parents=True)
    (www / "static" / "small.txt").write_bytes(SMALL_TEXT)
    (www / "static" / "big.bin").write_bytes(os.urandom(BIG_SIZE))
    page = "".join(f"<p>line {i} of a page that compresses well</p>\n" for i in range(3000))
    (www / "static" / "page.html").write_text(f"<!doctype html><title>soak</title>\n{page}")
    origin = tmp / "origin"
    (origin / "cached").mkdir(parents=True)
    (origin / "app").mkdir()
    (origin / "h2").mkdir()
    for n, size in enumerate(cache_sizes()):
        (origin / "cached" / f"obj{n}").write_bytes(bytes([65 + n % 26]) * size)
    (origin / "app" / "item").write_bytes(b"an item from the origin\n")
    (origin / "app" / "big").write_bytes(os.urandom(BIG_SIZE))
    (origin / "h2" / "item").write_bytes(b"an item over h2\n" * 64)
    (tmp / "htpasswd").write_text(HTPASSWD)
    (tmp / "ticket.key").write_bytes(os.urandom(80))
    certs = {}
    for name in ("a", "b"):
        certs[name] = certificate(tmp, f"default-{name}", "localhost",
                                  ["DNS:localhost", "IP:127.0.0.1"])
        certs[f"alt-{name}"] = certificate(tmp, f"alt-{name}", "alt.soak.test",
                                           ["DNS:alt.soak.test"])
    return certs


def pier_config(variant, ports, tmp, certs, cache_dir, disk_size):
    """The Pier under test. Variant B differs from A in a route (`/generation`
    answers B, `/b-only` exists), in the servers of `app` (the origin's second
    listener) and in its certificates."""
    other = "b-only" if variant == "b" else "a-only"
    app_port = ports["origin_b"] if variant == "b" else ports["origin_a"]
    cert, key = certs[f"{variant}"] if variant in certs else certs["a"]
    alt_cert, alt_key = certs[f"alt-{variant}"]
    return f"""# bench/soak: the Pier under test, variant {variant.upper()}.
[server]
workers = 2
drain_timeout = "10s"

[admin]
listen = "127.0.0.1:{ports['admin']}"

[access_log]
path = "{tmp}/access.log"
format = "json"
flush_interval = "500ms"

[http]
keepalive_timeout = "5s"
header_read_timeout = "10s"
body_read_timeout = "10s"
write_timeout = "30s"
max_body_bytes = "4M"

[[listener]]
name = "plain"
listen = "127.0.0.1:{ports['http']}"
http2 = true

[[listener]]
name = "tls"
listen = "127.0.0.1:{ports['https']}"
[listener.tls]
cert = "{cert}"
key = "{key}"
session_tickets = true
ticket_key_file = "{tmp}/ticket.key"
[[listener.tls.certificate]]
cert = "{alt_cert}"
key = "{alt_key}"
names = ["alt.soak.test"]

[[listener]]
name = "stream"
listen = "127.0.0.1:{ports['tcp']}"
kind = "tcp"
upstream = "echo"
idle_timeout = "30s"

[[upstream]]
name = "app"
servers = ["127.0.0.1:{app_port}"]
max_idle = 16
idle_timeout = "20s"
response_timeout = "10s"
read_timeout = "10s"

[[upstream]]
name = "h2app"
protocol = "h2"
servers = ["127.0.0.1:{ports['origin_a']}"]
max_idle = 4

[[upstream]]
name = "grpc"
protocol = "h2"
servers = ["127.0.0.1:{ports['grpc']}"]

[[upstream]]
name = "faulty"
servers = ["127.0.0.1:{ports['faulty']}"]
connect_timeout = "3s"
response_timeout = "5s"
read_timeout = "5s"
max_idle = 8
health_check = {{ kind = "http", path = "/health", interval = "1s", timeout = "3s", rise = 2, fall = 2 }}

[[upstream]]
name = "ws"
servers = ["127.0.0.1:{ports['ws']}"]
read_timeout = "30s"

[[upstream]]
name = "echo"
servers = ["127.0.0.1:{ports['echo']}"]

[cache.main]
memory = "4MiB"
max_object = "256KiB"
disk_path = "{cache_dir}"
disk_size = "{disk_size}"

[[route]]
exact_path = "/hello"
handler = "respond"
body = "Hello, soak\\n"
[route.response_headers]
set = {{ "X-Soak-Request" = "{{request_id}}" }}

[[route]]
exact_path = "/generation"
handler = "respond"
body = "{variant.upper()}"

[[route]]
exact_path = "/{other}"
handler = "respond"
body = "{other}"

[[route]]
path = "/static/"
handler = "static"
root = "{tmp}/www"
compress = true
cache_control = "public, max-age=60"
[route.response_headers]
set = {{ "X-Content-Type-Options" = "nosniff" }}
remove = ["X-Powered-By"]

[[route]]
path = "/old/"
handler = "redirect"
location = "/static/page.html"
status = 301

[[route]]
path = "/private/"
handler = "respond"
body = "private\\n"
basic_auth = {{ htpasswd = "{tmp}/htpasswd", realm = "soak" }}

[[route]]
exact_path = "/internal"
handler = "respond"
body = "internal\\n"
deny = ["all"]

[[route]]
exact_path = "/limited"
handler = "respond"
body = "limited\\n"
allow = ["127.0.0.1"]
rate_limit = {{ rate = "20/s", burst = 20 }}

[[route]]
path = "/cached/"
handler = "proxy"
upstream = "app"
cache = "main"

[[route]]
path = "/app/"
handler = "proxy"
upstream = "app"
[route.request_headers]
set = {{ "X-Request-Id" = "{{request_id}}" }}

[[route]]
path = "/h2/"
handler = "proxy"
upstream = "h2app"

[[route]]
path = "/test.Echo/"
handler = "proxy"
upstream = "grpc"

[[route]]
path = "/fault/"
handler = "proxy"
upstream = "faulty"

[[route]]
exact_path = "/ws"
handler = "proxy"
upstream = "ws"
"""


def origin_config(ports, tmp):
    """The healthy origin: a Pier with two plain listeners (variant A's and B's
    `app` servers), both taking HTTP/2 with prior knowledge (the h2 group's)."""
    return f"""# bench/soak: the healthy origin.
[server]
workers = 1

[http]
keepalive_timeout = "30s"
max_body_bytes = "4M"

[[listener]]
listen = "127.0.0.1:{ports['origin_a']}"
http2 = true

[[listener]]
listen = "127.0.0.1:{ports['origin_b']}"
http2 = true

[[route]]
exact_path = "/app/upload"
methods = ["POST"]
handler = "respond"
body = "stored\\n"

[[route]]
path = "/"
handler = "static"
root = "{tmp}/origin"
[route.response_headers]
set = {{ "Cache-Control" = "public, max-age=20" }}
"""


def write_configs(tmp, ports, cache_dir, disk_size):
    certs = write_files(tmp)
    paths = {}
    for variant in ("a", "b"):
        p = tmp / f"pier-{variant}.toml"
        p.write_text(pier_config(variant, ports, tmp, certs, cache_dir, disk_size))
        paths[variant] = p
    paths["origin"] = tmp / "origin.toml"
    paths["origin"].write_text(origin_config(ports, tmp))
    return paths
