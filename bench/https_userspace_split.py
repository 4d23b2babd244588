"""Splits the user-space instructions of bench/https_userspace's two counted
runs (`callgrind_annotate --inclusive=no` of each) into a request's and a
handshake's, each by where they ran: the TLS library (rustls and aws-lc for
Pier, libssl and libcrypto for nginx), the C library, and the rest (the
server's own code).

Arguments: LABEL N1 ANNOTATION1 N2 ANNOTATION2 CONNECTIONS. The runs had N1 and
N2 requests on CONNECTIONS fresh connections each."""
import re
import sys

LINE = re.compile(r"^\s*([\d,]+)\s+(\S.*?)(?:\s+\[(.*)\])?\s*$")
TLS = ("rustls", "aws-lc", "aws_lc", "libssl", "libcrypto")
LIBC = ("libc.so", "ld-linux", "/glibc")


def split(path):
    """Instructions by part of one annotated dump."""
    total, rows = 0, []
    for line in open(path):
        if "PROGRAM TOTALS" in line:
            total = int(line.split()[0].replace(",", ""))
            continue
        m = LINE.match(line)
        if m and ":" in m.group(2):
            rows.append((int(m.group(1).replace(",", "")), (m.group(2) + " " + (m.group(3) or "")).lower()))
    # A dump taken after zeroing the counters charges the whole run once more
    # to the frames that were on the stack then (thread start-up): not self cost.
    rows = [(n, w) for n, w in rows if n < 0.9 * total]
    parts = {"tls": 0, "libc": 0}
    for n, where in rows:
        if any(k in where for k in TLS):
            parts["tls"] += n
        elif any(k in where for k in LIBC):
            parts["libc"] += n
    parts["rest"] = total - parts["tls"] - parts["libc"]
    parts["total"] = total
    return parts


label, n1, a1, n2, a2, conns = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
p1, p2 = split(a1), split(a2)
per_request = {k: (p2[k] - p1[k]) / (n2 - n1) for k in p1}
per_handshake = {k: (p1[k] - per_request[k] * n1) / conns for k in p1}


def show(d):
    return (f"{d['total']:8.0f} (TLS library {d['tls']:.0f}, C library {d['libc']:.0f}, "
            f"the rest {d['rest']:.0f})")


print(f"{label:<16} instructions per request  {show(per_request)}")
print(f"{'':<16} per handshake (resumed or full as the client does) {show(per_handshake)}")
