"""bench/soak's accounting and report: which answers the faults and operations
in force allowed, the access log against the clients and /metrics, resource
growth after warm-up, the server's own log, and the Markdown report with SVG
charts of the resource curves."""

import json
import os
import re
import statistics
from pathlib import Path

# What each fault of the origin lets the fault route answer, besides its normal
# 200: bench/soak_origin.py's faults as Pier maps them (502 for a refused,
# reset or malformed upstream, 504 for a stall past response_timeout, the
# origin's own 5xx relayed, a body cut short when the origin resets mid-body).
FAULT_ALLOWS = {
    "refused": {"status:502", "status:503"},
    "reset_before": {"status:502"},
    "reset_mid": {"truncated:200", "status:502"},
    "stall": {"status:504", "status:503"},
    "drip": set(),
    "burst5xx": {"status:500", "status:503"},
    "malformed": {"status:502", "status:503"},
    "restart": {"status:502", "status:503", "truncated:200"},
}
# Faults the origin's /health shows: the active check marks the server down
# (503 without trying it) until `rise` checks pass after the fault ends.
HEALTH_VISIBLE = {"refused", "stall", "burst5xx", "malformed", "restart"}
HEALTH_RECOVERY = 7.0  # interval 1 s x rise 2, a 3 s timeout, a check in flight
# Operations: a keep-alive connection closed by a drain can cross a request
# (no byte of it answered; HTTP clients send it again, as ours do once, so
# this is what a second crossing looks like). A drain lasts one keepalive
# timeout (5 s) plus drain_timeout (10 s) at most.
OP_ALLOWS = {"reload": {"closed", "reset"}, "upgrade": {"closed", "reset"}}
DRAIN = 16.0
# Statuses of the load generators' routes.
ROUTE_STATUSES = {"hello": {200}, "app": {200}, "cached": {200}, "static": {200}, "h2": {200},
                  "h2load": {200}}
# Resource growth after warm-up: more than 5% and more than an absolute slack
# fails. The slack is noise a short run cannot tell from a trend: RSS settling,
# descriptors of connections in flight, and upstream connections, which count
# busy ones too (slow readers and writers hold theirs for seconds) and idle ones
# a reload's drained pools close at their idle_timeout (the pools may keep 24
# idle per worker, app's 16 and faulty's 8).
GROWTH = 0.05
SLACK = {"rss_kib": 4096, "fds": 32, "threads": 2, "upstream_conns": 24}
# A run whose processes live less than the two minutes RSS takes to settle
# (--short: 20 s of warm-up) sees it still settling: up to 3.5 MiB in its
# second minute on the 2-core machine. It fails only past twice the slack.
SHORT_RSS_SLACK = 8192
RESOURCE_NAMES = {"rss_kib": "RSS (KiB)", "fds": "open descriptors", "threads": "threads",
                  "upstream_conns": "upstream connections"}
# ERROR lines of Pier that an injected fault explains: the disk tier's tmpfs
# filling up.
EXPLAINED_ERRORS = [(re.compile(r"the cache's disk tier .*keeps to memory"), "tmpfs full")]


# ---------------------------------------------------------------- parsing


def parse_metrics(text):
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)", line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        try:
            out.append((m.group(1), labels, float(m.group(4))))
        except ValueError:
            continue
    return out


def metric_sum(metrics, name, **labels):
    return sum(v for n, l, v in metrics
               if n == name and all(l.get(k) == w for k, w in labels.items()))


def process_resources(pid, upstream_ports):
    """RSS, descriptors and threads of `pid` from /proc, and its TCP
    connections to the upstream ports (pooled ones, idle most of the time)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))
    inodes = set()
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    upstream = 0
    try:
        for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "01" and f[9] in inodes and int(f[2].split(":")[1], 16) in upstream_ports:
                upstream += 1
    except OSError:
        pass
    return {"rss_kib": rss, "fds": len(fds), "threads": threads, "upstream_conns": upstream}


def parse_bench(stdout):
    try:
        j = json.loads(stdout)
    except ValueError:
        return {"unparsed": True, "status": {}, "errors": {}, "answered": 0}
    status = {int(k): v for k, v in j.get("status", {}).items()}
    errors = {k: v for k, v in j.get("errors", {}).items() if v}
    return {"status": status, "errors": errors, "answered": sum(status.values())}


def parse_h2load(stdout):
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", stdout)
    s = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", stdout)
    if not m or not s:
        return {"unparsed": True, "status": {}, "errors": {}, "answered": 0}
    classes = dict(zip((200, 300, 400, 500), map(int, s.groups())))
    status = {k: v for k, v in classes.items() if v}
    total, _, done, _, failed, errored, timeout = map(int, m.groups())
    errors = {k: v for k, v in (("not answered", total - sum(classes.values()) - timeout),
                                ("timeout", timeout)) if v > 0}
    return {"status": status, "errors": errors, "answered": sum(classes.values())}


# Routes by the start of the request target, as bench/soak_config.py writes them.
ROUTE_PREFIXES = [("/hello", "hello"), ("/generation", "generation"), ("/static/", "static"),
                  ("/old/", "redirect"), ("/private/", "private"), ("/internal", "internal"),
                  ("/limited", "limited"), ("/cached/", "cached"), ("/app/", "app"),
                  ("/h2/", "h2"), ("/test.Echo/", "grpc"), ("/fault/", "fault"), ("/ws", "ws")]
LINE = re.compile(rb'"target":"((?:[^"\\]|\\.)*)",[^\n]*?"status":(\d)\d\d,'
                  rb'[^\n]*?"user_agent":(null|"(?:[^"\\]|\\.)*")')


def route_of(target, user_agent):
    """The route a logged request took; h2load's requests, over several routes,
    count as its own."""
    if user_agent.startswith(b'"h2load'):
        return "h2load"
    path = target.decode("latin-1")
    return next((r for p, r in ROUTE_PREFIXES if path.startswith(p)), "other")


def access_log_lines(path):
    """Lines of one access-log file (JSON lines) by status class and by route.
    A regular expression over the whole file, not a JSON parse per line: the
    files of a long run hold millions of lines."""
    classes, routes = {}, {}
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return classes, routes
    for target, digit, agent in LINE.findall(data):
        k = f"{digit.decode()}xx"
        classes[k] = classes.get(k, 0) + 1
        r = route_of(target, agent)
        routes[r] = routes.get(r, 0) + 1
    lines = data.count(b"\n")
    if lines != sum(classes.values()):
        classes["unparsed"] = lines - sum(classes.values())
    return classes, routes


# ---------------------------------------------------------------- judging


def overlaps(a0, a1, b0, b1):
    return a0 <= b1 and b0 <= a1


class Report:
    def __init__(self, soak, version, machine):
        self.s, self.version, self.machine = soak, version, machine
        self.criteria = []  # (name, ok, detail)

    def check(self, name, ok, detail):
        self.criteria.append((name, bool(ok), detail))

    def allowed(self, route, outcome, t0, t1):
        """The fault or operation that allows `outcome`, or None."""
        for f in self.fault_windows:
            if route == "fault":
                if overlaps(t0, t1, f["start"], f["end"]) and outcome in FAULT_ALLOWS[f["kind"]]:
                    return f["kind"]
                if (f["kind"] in HEALTH_VISIBLE and outcome == "status:503"
                        and overlaps(t0, t1, f["start"], f["end"] + HEALTH_RECOVERY)):
                    return f["kind"] + " (health check)"
        for e in self.s.events:
            allows = OP_ALLOWS.get(e["kind"], set())
            if outcome in allows and overlaps(t0, t1, e["start"], e["end"] + DRAIN):
                return e["kind"]
        return None

    def judge(self):
        s = self.s
        # Planned fault windows; the restart as it happened.
        self.fault_windows = [f for f in s.faults if f["kind"] != "restart"]
        self.fault_windows += [{"kind": "restart", "start": e["start"], "end": e["end"]}
                               for e in s.events if e["kind"] == "restart"]
        self.unexpected, self.expected = {}, {}

        def count(table, key, n=1):
            table[key] = table.get(key, 0) + n

        # The Python clients: every non-ok request by its record.
        self.rows = []
        self.not_http = {c["client"] for c in s.py if not c.get("http", True)}
        for c in s.py:
            unexpected = expected = 0
            for t0, t1, route, outcome in c["records"]:
                why = self.allowed(route, outcome, t0, t1)
                if why:
                    expected += 1
                    count(self.expected, (route, outcome, why))
                else:
                    unexpected += 1
                    count(self.unexpected, (c["client"], route, outcome))
            if c.get("unrecorded"):
                count(self.unexpected, (c["client"], "-", "not recorded, so not judged"),
                      c["unrecorded"])
                unexpected += c["unrecorded"]
            if c.get("failed"):
                count(self.unexpected, (c["client"], "-", "client failed: " + c["failed"][-200:]))
                unexpected += 1
            self.rows.append([c["client"], c["protocol"], c["requests"], c["answered"], c["ok"],
                              expected, unexpected])
        # The load generators: statuses by route, errors only across a drain.
        by_name = {}
        for ch in s.chunks:
            row = by_name.setdefault(ch["name"], [ch["name"], ch["protocol"], 0, 0, 0, 0, 0])
            row[2] += ch["sent"]
            row[3] += ch["answered"]
            good = ROUTE_STATUSES[ch["route"]]
            for code, n in ch["status"].items():
                if code in good:
                    row[4] += n
                else:
                    row[6] += n
                    count(self.unexpected, (ch["name"], ch["route"], f"status:{code}"), n)
            if ch.get("unparsed"):
                row[6] += 1
                count(self.unexpected, (ch["name"], ch["route"],
                                        "no report: " + ch.get("stderr", "")[-150:]))
            missing = ch["sent"] - ch["answered"] - sum(ch["errors"].values())
            if missing > 0 and not ch.get("unparsed"):
                row[6] += missing
                count(self.unexpected, (ch["name"], ch["route"],
                                        "neither answered nor failed"), missing)
            for kind, n in ch["errors"].items():
                drain = next((e["kind"] for e in s.events if e["kind"] in OP_ALLOWS
                              and overlaps(ch["start"], ch["end"], e["start"], e["end"] + DRAIN)),
                             None)
                if drain and kind in ("closed", "reset", "not answered"):
                    row[5] += n
                    count(self.expected, (ch["route"], kind, drain), n)
                else:
                    row[6] += n
                    count(self.unexpected, (ch["name"], ch["route"], kind), n)
        self.rows += list(by_name.values())
        total_unexpected = sum(self.unexpected.values())
        self.check("every answer allowed by its route and the faults and operations in force",
                   total_unexpected == 0, f"{total_unexpected} unexpected")
        self.judge_accounting()
        self.judge_resources()
        self.judge_log()
        failed_ops = [e for e in s.events if str(e.get("detail", "")).startswith("failed")]
        self.check("every operation done (reloads, upgrades, rotations, purges, restarts)",
                   not failed_ops, "; ".join(f"{e['kind']}: {e['detail']}" for e in failed_ops)
                   or f"{len(s.events)} done")
        self.check("Pier exits 0 on SIGTERM at the end", s.exit_status == 0,
                   f"exit status {s.exit_status}")
        return all(ok for _, ok, _ in self.criteria)

    def judge_accounting(self):
        s = self.s
        # Each file has one writer: the process of the generation it was renamed
        # in (at an upgrade, the old process keeps writing the file it has
        # open), and access.log the last process.
        counts = dict(s.log_counts)
        counts["access.log"] = (s.generation, access_log_lines(s.tmp / "access.log"))
        self.log_classes, final, self.log_routes = {}, {}, {}
        for name, (gen, (classes, routes)) in counts.items():
            for k, v in classes.items():
                self.log_classes[k] = self.log_classes.get(k, 0) + v
                if gen == s.generation:
                    final[k] = final.get(k, 0) + v
            for k, v in routes.items():
                self.log_routes[k] = self.log_routes.get(k, 0) + v
        # What the clients saw answered, by route, beside it.
        self.client_routes = {}
        for c in s.py:
            if c.get("http", True):
                for k, v in c.get("answered_routes", {}).items():
                    self.client_routes[k] = self.client_routes.get(k, 0) + v
        for ch in s.chunks:
            self.client_routes[ch["route"]] = self.client_routes.get(ch["route"], 0) + ch["answered"]
        lines = sum(self.log_classes.values())
        answered = sum(r[3] for r in self.rows if r[0] not in self.not_http)
        dropped = metric_sum(s.final_metrics, "pier_log_lines_dropped_total")
        self.answered, self.lines = answered, lines
        differ = ", ".join(f"{r} {self.log_routes.get(r, 0) - self.client_routes.get(r, 0):+d}"
                           for r in sorted(set(self.log_routes) | set(self.client_routes))
                           if self.log_routes.get(r, 0) != self.client_routes.get(r, 0))
        self.check("access-log lines equal the requests the clients saw answered, route by route",
                   lines + dropped == answered and (not differ or dropped > 0),
                   f"{lines} lines + {dropped:.0f} dropped, {answered} answered"
                   + (f" (lines minus answers by route: {differ})" if differ else ""))
        # The last process' own counters against its own lines, by class.
        metric = {}
        for n, l, v in s.final_metrics:
            if n == "pier_requests_total":
                metric[l.get("class", "?")] = metric.get(l.get("class", "?"), 0) + int(v)
        self.final_lines, self.final_metric = final, metric
        self.check("/metrics requests of the last process equal its access-log lines, by class",
                   {k: v for k, v in metric.items() if v} == {k: v for k, v in final.items() if v}
                   and not dropped,
                   f"metrics {dict(sorted(metric.items()))}, log {dict(sorted(final.items()))}")

    def segments(self):
        """Samples by Pier process, each without its warm-up."""
        by_pid = {}
        for smp in self.s.samples:
            by_pid.setdefault(smp["pid"], []).append(smp)
        out = []
        for pid, samples in by_pid.items():
            first = self.s.process_starts.get(pid, samples[0]["t"])
            kept = [x for x in samples if x["t"] >= first + self.s.args.warmup]
            out.append((pid, kept))
        return out

    def judge_resources(self):
        self.growth = []
        bad = []
        for pid, samples in self.segments():
            if len(samples) < 4:
                continue
            for key in SLACK:
                base = statistics.median(x[key] for x in samples[:3])
                final = statistics.median(x[key] for x in samples[-3:])
                growth = (final - base) / base if base else 0.0
                self.growth.append((pid, key, base, final, growth, len(samples)))
                slack = SLACK[key]
                if key == "rss_kib" and self.s.args.warmup < 120:
                    slack = SHORT_RSS_SLACK
                if growth > GROWTH and final - base > slack:
                    bad.append(f"{RESOURCE_NAMES[key]} of pid {pid}: {base} -> {final} "
                               f"(+{growth * 100:.1f}%)")
        judged = len({g[0] for g in self.growth})
        self.check("after warm-up, no resource grows more than 5% (RSS, descriptors, threads, "
                   "upstream connections)", judged > 0 and not bad,
                   "; ".join(bad) or (f"{judged} process segment(s) judged" if judged
                                      else "no segment long enough to judge"))
        over = [x for x in self.s.samples
                if x["cache_memory"] > x["budget_memory"] or x["cache_disk"] > x["budget_disk"]]
        self.check("cache bytes within the zone's budgets (memory and disk)", not over,
                   f"{len(over)} sample(s) over" if over else
                   f"max {max((x['cache_memory'] for x in self.s.samples), default=0) / 1024:.0f} KiB"
                   f" memory, {max((x['cache_disk'] for x in self.s.samples), default=0) / 1024:.0f}"
                   f" KiB disk")

    def judge_log(self):
        text = (self.s.tmp / "pier.log").read_text(errors="replace")
        panics = [l for l in text.splitlines() if "panicked" in l or "worker failed" in l]
        errors, explained = [], {}
        for line in text.splitlines():
            if " ERROR " not in line and '"level":"ERROR"' not in line:
                continue
            why = next((w for pat, w in EXPLAINED_ERRORS if pat.search(line)), None)
            if why:
                explained[why] = explained.get(why, 0) + 1
            else:
                errors.append(line.strip()[:300])
        self.log_errors, self.log_explained = errors, explained
        self.check("no panic, no worker failed", not panics, "; ".join(panics[:3]) or "none")
        self.check("no ERROR line the injected faults do not explain", not errors,
                   "; ".join(errors[:3]) or (", ".join(f"{n} explained ({w})"
                                                       for w, n in explained.items()) or "none"))

    # ------------------------------------------------------------ output

    def summary_text(self):
        lines = [f"{'PASS' if ok else 'FAIL'}  {name}: {detail}" for name, ok, detail in self.criteria]
        return "\n".join(lines)

    def write(self, out_dir, stamp):
        out_dir.mkdir(parents=True, exist_ok=True)
        s = self.s
        base = f"soak-{stamp}"
        charts = []
        for key, title in (("rss_kib", "RSS (KiB)"), ("fds", "open descriptors"),
                           ("threads", "threads"), ("upstream_conns", "upstream connections"),
                           ("cache", "cache bytes (KiB)"), ("rps", "requests/s")):
            svg = self.chart(key, title)
            if svg:
                name = f"{base}-{key}.svg"
                (out_dir / name).write_text(svg)
                charts.append((title, name))
        md = [f"# Soak with faults, {stamp}", "",
              f"`bench/soak {'--short' if s.args.mode == 'short' else f'--duration {s.args.duration:.0f}s'}`"
              f": {s.args.duration:.0f} s of load, warm-up {s.args.warmup:.0f} s per process. "
              f"{self.version}; {self.machine.get('cpu')}, {self.machine.get('nproc')} CPUs, "
              f"kernel {self.machine.get('kernel')}.", "",
              "## Criteria", "", "| criterion | result | detail |", "|---|---|---|"]
        md += [f"| {n} | {'pass' if ok else '**FAIL**'} | {d} |" for n, ok, d in self.criteria]
        md += ["", "## Requests by client and protocol", "",
               "| client | protocol | requests | answered | normal answer | allowed by a fault or operation | unexpected |",
               "|---|---|---:|---:|---:|---:|---:|"]
        md += ["| " + " | ".join(str(x) for x in r) + " |" for r in self.rows]
        tot = [sum(r[i] for r in self.rows) for i in range(2, 7)]
        md += ["| **all** | | " + " | ".join(f"**{x}**" for x in tot) + " |", ""]
        by_protocol = {}
        for r in self.rows:
            p = by_protocol.setdefault(r[1], [0, 0, 0, 0])
            for i in range(4):
                p[i] += r[3 + i]
        md += ["| protocol | answered | normal answer | allowed by a fault or operation | unexpected |",
               "|---|---:|---:|---:|---:|"]
        md += [f"| {p} | " + " | ".join(str(x) for x in v) + " |"
               for p, v in sorted(by_protocol.items())]
        md += ["", "| route | answers the clients counted | access-log lines | difference |",
               "|---|---:|---:|---:|"]
        for r in sorted(set(self.client_routes) | set(self.log_routes)):
            a, b = self.client_routes.get(r, 0), self.log_routes.get(r, 0)
            md.append(f"| {r} | {a} | {b} | {b - a:+d} |")
        md += ["",
               f"Access log: {self.lines} lines ({', '.join(f'{k} {v}' for k, v in sorted(self.log_classes.items()))}); "
               f"the clients saw {self.answered} answers. The last process: /metrics "
               f"{dict(sorted(self.final_metric.items()))}, its log lines {dict(sorted(self.final_lines.items()))}.",
               "", "## Unexpected answers", ""]
        if self.unexpected:
            md += ["| client | route | outcome | count |", "|---|---|---|---:|"]
            md += [f"| {c} | {r} | {o} | {n} |" for (c, r, o), n in sorted(self.unexpected.items())]
        else:
            md += ["None."]
        md += ["", "## Answers a fault or an operation allowed", "",
               "| route | outcome | allowed by | count |", "|---|---|---|---:|"]
        md += [f"| {r} | {o} | {w} | {n} |" for (r, o, w), n in sorted(self.expected.items())]
        md += ["", "## Faults and operations", "",
               "| at (s) | what | detail |", "|---:|---|---|"]
        timeline = [(f["start"], f"fault {f['kind']}", f"{f['end'] - f['start']:.0f} s")
                    for f in s.faults if f["kind"] != "restart"]
        timeline += [(e["start"], e["kind"], e.get("detail", "")) for e in s.events]
        md += [f"| {t - s.start:.0f} | {w} | {d} |" for t, w, d in sorted(timeline)]
        md += ["", "## Resources", "",
               "Per Pier process (a binary upgrade starts a new one), after its warm-up: the "
               "median of the first three samples against the median of the last three.", "",
               "| pid | resource | after warm-up | at the end | growth | samples |",
               "|---:|---|---:|---:|---:|---:|"]
        md += [f"| {p} | {RESOURCE_NAMES[k]} | {b} | {f} | {g * 100:+.1f}% | {n} |"
               for p, k, b, f, g, n in self.growth]
        md += [""] + [f"![{t}]({n})" for t, n in charts]
        if self.log_explained:
            md += ["", "ERROR lines explained by injected faults: " +
                   ", ".join(f"{n} ({w})" for w, n in self.log_explained.items()) + "."]
        if s.notes:
            md += ["", "## Notes", ""] + [f"- {n}" for n in s.notes]
        path = out_dir / f"{base}.md"
        path.write_text("\n".join(md) + "\n")
        return path

    def chart(self, key, title):
        """A line chart of one sampled figure over the run, one line per
        process; dashed verticals at binary upgrades."""
        s = self.s
        pts = []
        for x in s.samples:
            if key == "cache":
                v = (x["cache_memory"] + x["cache_disk"]) / 1024
            else:
                v = x.get(key)
            if v is not None:
                pts.append((x["t"] - s.start, v, x["pid"]))
        if len(pts) < 2:
            return None
        w, h, ml, mb, mt = 640, 220, 60, 30, 24
        xmax = max(p[0] for p in pts) or 1
        ymax = max(p[1] for p in pts) * 1.1 or 1
        sx = lambda x: ml + (w - ml - 10) * x / xmax  # noqa: E731
        sy = lambda y: h - mb - (h - mb - mt) * y / ymax  # noqa: E731
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
               f'font-family="sans-serif" font-size="11">',
               f'<rect width="{w}" height="{h}" fill="white"/>',
               f'<text x="{ml}" y="15" font-size="13">{title}</text>',
               f'<line x1="{ml}" y1="{h - mb}" x2="{w - 10}" y2="{h - mb}" stroke="#888"/>',
               f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{h - mb}" stroke="#888"/>']
        for i in range(5):
            y = ymax * i / 4
            out.append(f'<text x="{ml - 4}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.0f}</text>')
            out.append(f'<line x1="{ml}" y1="{sy(y):.1f}" x2="{w - 10}" y2="{sy(y):.1f}" '
                       f'stroke="#eee"/>')
        for i in range(5):
            x = xmax * i / 4
            out.append(f'<text x="{sx(x):.1f}" y="{h - mb + 14}" text-anchor="middle">{x:.0f} s</text>')
        for e in s.events:
            if e["kind"] == "upgrade":
                x = sx(e["start"] - s.start)
                out.append(f'<line x1="{x:.1f}" y1="{mt}" x2="{x:.1f}" y2="{h - mb}" '
                           f'stroke="#c33" stroke-dasharray="4 3"/>')
        colors = ["#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
        for i, pid in enumerate(dict.fromkeys(p[2] for p in pts)):
            line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y, q in pts if q == pid)
            out.append(f'<polyline fill="none" stroke="{colors[i % len(colors)]}" '
                       f'stroke-width="1.5" points="{line}"/>')
        out.append("</svg>")
        return "\n".join(out) + "\n"
