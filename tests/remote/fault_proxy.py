#!/usr/bin/python3
"""A small HTTP/1.1 reverse proxy that injects faults, for the remote-shard tests.

Stdlib only, one thread per client connection. Started by servers.sh:

    fault_proxy.py PORT_FILE NAME=HOST:PORT [NAME=HOST:PORT ...]

listens on 127.0.0.1, one port (chosen by the kernel) per upstream, and
writes "NAME PORT" lines to PORT_FILE (whole, by rename) once all listen.
Requests and responses pass byte for byte: the request head (Host,
Authorization, x-amz-*, Range all unchanged, so a SigV4 signature made for
the proxy's address verifies at the upstream), bodies streamed in 64 KiB
pieces, never held whole (a response body of known length that no fault
edits goes socket to socket by splice(2), in the kernel). Keep-alive on
both sides: one upstream connection per client connection, reopened when
the upstream closed it.

Control (GF_TEST_PROXY_CONTROL = http://127.0.0.1:PORT/__fault, on any of
the ports: one table for all; control requests are not counted):
    GET  /__fault            -> JSON {"requests": {path: n}, "total": n,
                                "faults_applied": n, "rules": [{"id", "match",
                                "fault", "times", "left", "fired", args...}]}
    POST /__fault/rule?match=SUB&fault=KIND[&times=N][&args]  -> {"id": n}
    GET  /__fault/fired?id=N -> the times rule N fired, a plain decimal line
    GET  /__fault/count?path=P -> requests seen for path P (query left off;
                                no path: all), a plain decimal line
    POST /__fault/clear      -> rules and counters cleared
A rule applies to requests whose path (query included) contains SUB ("" =
all), to the next N of them (times, default 1; 0 = every one). Rules are
tried in order; a request takes at most one rule of each kind. Kinds:
    reset_after  bytes=B          the response's head and B body bytes, then
                                  an abortive close (SO_LINGER 0: RST)
    stall_after  bytes=B seconds=S [then=close]   B body bytes, a pause of
                                  S seconds, then the rest (or a close)
    status       code=C           not forwarded: C with a small body
    latency      ms=M             M ms before the response's first byte
                                  (before the upstream is asked: its time adds)
    change_object                 the object "replaced": ETag changed (a
                                  different quoted hex value), the first body
                                  byte XOR 0x01, lengths kept
    strip_validators              the object "replaced" by one without ETag and
                                  Last-Modified: both dropped, every body
                                  byte XOR 0x5A
    range_shift  bytes=B          the request's Range moved B bytes later (the
                                  answer names, and holds, other bytes)
    range_from_zero               a Range from byte F > 0 asked from byte 0, as
                                  long (a resume answered from the start)
    trickle      bytes=B rate=R   B body bytes, then the rest R bytes a second
                                  (in pieces of R/10 bytes, at least 1, on a
                                  clock: a rate that beats a stall rule holds)
    claim_size   bytes=N          the response's Content-Range total said as N
    endless_head                  a status line, then a header line every 0.5 s,
                                  never the blank line (until 120 s)
Any rule takes skip=K: the first K requests it matches pass untouched (a
resume's fault after a cut: reset_after on the first, skip=1 on the next).
reset_after and stall_after cut bodies with a Content-Length (nginx's and
Swift's objects); a chunked one passes whole. A rule of a kind that does not
apply to the response (a cut of a HEAD) still counts as fired.
"""
import fcntl
import hashlib
import json
import os
import select
import socket
import struct
import sys
import threading
import time
import urllib.parse

IDLE_S = 60.0  # a silent client or upstream connection is closed after this
lock = threading.Lock()
rules, requests = [], {}
state = {"next_id": 1, "applied": 0, "total": 0}


class Closed(Exception):
    pass


def read_head(f):
    """Reads a head up to its blank line: (raw bytes, first line, {lower name: value})."""
    raw = f.readline(65537)
    if not raw:
        raise Closed()
    first, headers = raw.decode("latin-1").strip(), {}
    while True:
        line = f.readline(65537)
        if not line:
            raise Closed()
        raw += line
        if line in (b"\r\n", b"\n"):
            return raw, first, headers
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
        if len(raw) > 262144:
            raise Closed()


def relay(src, dst, n, tap=None):
    """Copies n bytes (None: until src closes) from file src to socket dst; tap(piece) may edit."""
    while n is None or n > 0:
        piece = src.read1(65536 if n is None else min(n, 65536))
        if not piece:
            if n is None:
                return
            raise Closed()
        if n is not None:
            n -= len(piece)
        dst.sendall(tap(piece) if tap else piece)


# bench/remote.sh measures a client on the same machine as this proxy:
# Python copying every byte took the client's CPU: 0.75 s per 290 MB,
# 0.54 s by splice (bench/RESULTS.md, 2026-12-02 afternoon).
SPLICE = hasattr(os, "splice")
PIPE_BYTES = 1 << 20


def wait_fd(fd, event):
    p = select.poll()
    p.register(fd, event)
    if not p.poll(IDLE_S * 1000):
        raise Closed()


def relay_body(src, src_sock, dst, n, tap, pipe):
    """relay() of a response body of n bytes; without a tap, what src has
    buffered and then the rest by splice(2) through pipe ([r, w])."""
    if tap or not pipe:
        return relay(src, dst, n, tap)
    if n > 0:
        piece = src.read(min(len(src.peek(1)), n))  # buffered (or one read)
        if not piece:
            raise Closed()
        dst.sendall(piece)
        n -= len(piece)
    fin, fout = src_sock.fileno(), dst.fileno()
    while n > 0:
        try:  # the sockets have timeouts, so are non-blocking
            got = os.splice(fin, pipe[1], min(n, PIPE_BYTES))
        except BlockingIOError:
            wait_fd(fin, select.POLLIN)
            continue
        if got == 0:
            raise Closed()
        n -= got
        while got:
            try:
                got -= os.splice(pipe[0], fout, got)
            except BlockingIOError:
                wait_fd(fout, select.POLLOUT)


def new_pipe():
    """[r, w] for relay_body, or None (no splice: relay() then)."""
    if not SPLICE:
        return None
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:  # over /proc/sys/fs/pipe-max-size: the default then
        pass
    return [r, w]


def relay_chunked(src, dst, tap=None):
    """Copies a chunked body with its framing; tap sees the data bytes."""
    while True:
        line = src.readline(4096)
        if not line:
            raise Closed()
        dst.sendall(line)
        size = int(line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        relay(src, dst, size, tap)
        dst.sendall(src.readline(4096))
    while True:  # trailers, then the blank line
        line = src.readline(4096)
        if not line:
            raise Closed()
        dst.sendall(line)
        if line in (b"\r\n", b"\n"):
            return


def pick_faults(path):
    """The rules this request takes, one per kind, counted as fired."""
    chosen = {}
    with lock:
        state["total"] += 1
        key = path.split("?")[0]
        requests[key] = requests.get(key, 0) + 1
        for r in rules:
            if r["match"] in path and r["left"] != 0 and r["fault"] not in chosen:
                if r["skip"] > 0:
                    r["skip"] -= 1
                    continue
                chosen[r["fault"]] = r
                r["fired"] += 1
                state["applied"] += 1
                if r["left"] > 0:
                    r["left"] -= 1
    return chosen


def control(method, target):
    url = urllib.parse.urlsplit(target)
    q = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
    with lock:
        if method == "GET" and url.path.rstrip("/") == "/__fault":
            return 200, {"requests": requests, "total": state["total"],
                         "faults_applied": state["applied"], "rules": rules}
        if method == "GET" and url.path == "/__fault/fired":  # plain numbers, for sh and C
            return 200, sum(r["fired"] for r in rules if str(r["id"]) == q.get("id"))
        if method == "GET" and url.path == "/__fault/count":
            return 200, requests.get(q["path"], 0) if q.get("path") else state["total"]
        if method == "POST" and url.path == "/__fault/clear":
            rules.clear(), requests.clear()
            state.update(applied=0, total=0)
            return 200, {"cleared": True}
        if method == "POST" and url.path == "/__fault/rule":
            kinds = {"reset_after": ("bytes",), "stall_after": ("bytes", "seconds"),
                     "status": ("code",), "latency": ("ms",), "change_object": (),
                     "strip_validators": (), "range_shift": ("bytes",), "range_from_zero": (),
                     "trickle": ("bytes", "rate"), "endless_head": (),
                     "claim_size": ("bytes",)}
            kind = q.get("fault")
            if kind not in kinds or any(a not in q for a in kinds[kind]):
                return 400, {"error": "fault must be one of %s with its arguments" % kinds}
            try:
                times = int(q.get("times", "1"))
                args = {a: float(q[a]) for a in kinds[kind]}
                skip = int(q.get("skip", "0"))
            except ValueError:
                return 400, {"error": "times and the arguments are numbers"}
            r = dict(id=state["next_id"], match=q.get("match", ""), fault=kind, times=times,
                     left=times if times > 0 else -1, fired=0, then=q.get("then", "continue"), skip=skip, **args)
            state["next_id"] += 1
            rules.append(r)
            return 200, {"id": r["id"]}
    return 404, {"error": "GET /__fault, POST /__fault/rule?..., POST /__fault/clear"}


def send_simple(conn, code, obj, keep=True):
    text = isinstance(obj, int)
    body = (str(obj) if text else json.dumps(obj, indent=1)).encode() + b"\n"
    conn.sendall(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n"
                 % (code, b"Fault" if code >= 300 else b"OK",
                    b"text/plain" if text else b"application/json", len(body),
                    b"" if keep else b"Connection: close\r\n") + body)


def body_length(headers, method, code):
    """None: no body; -1: chunked; -2: until close; else the length."""
    if method == "HEAD" or code in (204, 304) or 100 <= code < 200:
        return None
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return -1
    if "content-length" in headers:
        return int(headers["content-length"])
    return -2 if code else None


def serve(conn, upstream):
    conn.settimeout(IDLE_S)
    cf, up, uf = conn.makefile("rb"), None, None
    pipe = None
    try:
        while True:
            raw, first, h = read_head(cf)
            method, target, _ = (first.split(" ") + ["", ""])[:3]
            n = body_length(h, method, 0)
            if target.startswith("/__fault"):
                if n and n > 0:
                    relay(cf, open_null(), n)
                send_simple(conn, *control(method, target))
                continue
            faults = pick_faults(target)
            if "latency" in faults:
                time.sleep(faults["latency"]["ms"] / 1000.0)
            if "endless_head" in faults:
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                for i in range(240):
                    time.sleep(0.5)
                    conn.sendall(b"X-Slow-%d: waiting\r\n" % i)
                return
            if "range_shift" in faults or "range_from_zero" in faults:
                raw = edit_range(raw, faults)
            if "status" in faults:
                if n and n > 0:
                    relay(cf, open_null(), n)
                code = int(faults["status"]["code"])
                send_simple(conn, code, {"fault": "status", "code": code},
                            keep=not (n and n < 0))
                if n and n < 0:
                    return
                continue
            for attempt in (0, 1):  # a kept upstream connection may have been closed meanwhile
                reused = up is not None
                if up is None:
                    up = socket.create_connection(upstream, timeout=IDLE_S)
                    uf = up.makefile("rb")
                try:
                    up.sendall(raw)
                    if "100-continue" in h.get("expect", "").lower():
                        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")  # the upstream's is dropped
                    if n == -1:
                        relay_chunked(cf, up)
                    elif n:
                        relay(cf, up, n)
                    while True:  # interim responses are dropped
                        rraw, rfirst, rh = read_head(uf)
                        code = int(rfirst.split(" ")[1])
                        if code >= 200 or code == 101:
                            break
                    break
                except (Closed, OSError):
                    up.close()
                    up = None
                    if not reused or n:  # a request body cannot be sent twice
                        raise Closed()
            tap = None
            if "change_object" in faults or "strip_validators" in faults:
                rraw = change_etag(rraw) if "change_object" in faults else strip_validators(rraw)
                flipped = [False]

                def tap(piece, flipped=flipped):
                    if flipped[0] or not piece:
                        return piece
                    flipped[0] = True
                    return bytes([piece[0] ^ 1]) + piece[1:]
                if "strip_validators" in faults:  # another object: every byte differs
                    def tap(piece):
                        return bytes(b ^ 0x5A for b in piece)
            if "claim_size" in faults:
                rraw = claim_size(rraw, int(faults["claim_size"]["bytes"]))
            conn.sendall(rraw)
            m = body_length(rh, method, code)
            if pipe is None and m and m > 0:
                pipe = new_pipe()
            cut = faults.get("reset_after") or faults.get("stall_after")
            slow = faults.get("trickle")
            if slow is not None and m is not None and m >= 0:
                first_n = min(int(slow["bytes"]), m)
                relay_body(uf, up, conn, first_n, tap, pipe)
                trickle(uf, conn, m - first_n, slow["rate"], tap)
            elif cut is not None and m is not None and m >= 0:
                first_n = min(int(cut["bytes"]), m)
                relay_body(uf, up, conn, first_n, tap, pipe)
                if cut["fault"] == "reset_after":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                time.sleep(cut["seconds"])
                if cut["then"] == "close":
                    return
                relay_body(uf, up, conn, m - first_n, tap, pipe)
            elif m == -1:
                relay_chunked(uf, conn, tap)
            elif m == -2:
                relay(uf, conn, None, tap)
                return
            elif m:
                relay_body(uf, up, conn, m, tap, pipe)
            if "close" in (rh.get("connection", "").lower(), h.get("connection", "").lower()):
                return
    except (Closed, OSError, ValueError, IndexError):
        pass  # a client or upstream gone, timed out or malformed: this connection ends
    finally:
        for fd in pipe or ():
            os.close(fd)
        for s in (up, conn):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass


def trickle(src, dst, n, rate, tap):
    """relay() of n bytes at rate bytes a second: ten pieces a second (a
    byte a piece at least), each sent when the clock says it is due."""
    piece, due = max(1, int(rate / 10)), time.monotonic()
    while n > 0:
        k = min(piece, n)
        due += k / rate
        time.sleep(max(0.0, due - time.monotonic()))
        relay(src, dst, k, tap)
        n -= k


class open_null:
    """A sink for request bodies the proxy answers itself."""
    def sendall(self, piece):
        pass


def change_etag(raw):
    lines = raw.split(b"\r\n")
    for i, line in enumerate(lines):
        if line.lower().startswith(b"etag:"):
            old = line.split(b":", 1)[1].strip()
            lines[i] = b"ETag: \"%s\"" % hashlib.md5(b"changed" + old).hexdigest().encode()
    return b"\r\n".join(lines)


def claim_size(raw, n):
    lines = raw.split(b"\r\n")
    for i, line in enumerate(lines):
        if line.lower().startswith(b"content-range:") and b"/" in line:
            lines[i] = line.rsplit(b"/", 1)[0] + b"/%d" % n
    return b"\r\n".join(lines)


def strip_validators(raw):
    lines = raw.split(b"\r\n")
    return b"\r\n".join(l for l in lines
                        if not l.lower().startswith((b"etag:", b"last-modified:")))


def edit_range(raw, faults):
    """The request head with its Range moved (range_shift) or asked from 0 (range_from_zero)."""
    lines = raw.split(b"\r\n")
    for i, line in enumerate(lines):
        if not line.lower().startswith(b"range:"):
            continue
        spec = line.split(b"=", 1)[1].strip()
        a, _, b = spec.partition(b"-")
        if not a:
            continue  # a suffix range: left as is
        a, b = int(a), (int(b) if b else None)
        if "range_shift" in faults:
            d = int(faults["range_shift"]["bytes"])
            a, b = a + d, (b + d if b is not None else None)
        elif a > 0:
            a, b = 0, (b - a if b is not None else None)
        lines[i] = b"Range: bytes=%d-%s" % (a, b"" if b is None else b"%d" % b)
    return b"\r\n".join(lines)


def listen(name, upstream):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(256)

    def loop():
        while True:
            try:
                c, _ = s.accept()
            except OSError:  # out of descriptors, say: the listener stays
                time.sleep(0.1)
                continue
            threading.Thread(target=serve, args=(c, upstream), daemon=True).start()
    return name, s.getsockname()[1], loop


def main():
    port_file, specs = sys.argv[1], sys.argv[2:]
    servers = []
    for spec in specs:
        name, _, hostport = spec.partition("=")
        host, _, port = hostport.rpartition(":")
        servers.append(listen(name, (host, int(port))))
    with open(port_file + ".tmp", "w") as f:
        f.writelines("%s %d\n" % (name, port) for name, port, _ in servers)
    os.rename(port_file + ".tmp", port_file)
    threads = [threading.Thread(target=loop, daemon=True) for _, _, loop in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
