#!/usr/bin/env python3
"""An HTTP server on 127.0.0.1 (and 127.0.0.2, the other host that redirects lead to) that
serves the files of a directory with injected faults, for the remote-shard tests
(tests/cli/remote_*.sh) and benchmarks.

Usage: faultserver.py ROOT PORTFILE [--delay-ms N] [--log FILE]

It writes the port it listens on to PORTFILE. GET /MODE/PATH serves ROOT/PATH (a query
string is ignored, but under presigned); MODE says what goes wrong. The counters are per MODE and PATH, and MODE may carry a suffix (reset-2) for
counters of its own, so that each test can start from a first request:
  ok        nothing
  reset     the first answer stops after half the body with a connection reset (RST)
  flaky     every other answer (the 1st, 3rd, ...) does
  stall     the first answer stops after half the body and sends nothing for 30 s
  stallall  every answer does
  503       the first three requests get 503 SlowDown, then the file
  always503 every request gets 503
  truncate  every answer stops after at most 1000 bytes of the body (the connection closes)
  biglen    the first answer announces 100 bytes more than it sends, then closes
  smalllen  the first answer announces (and sends) 100 bytes fewer than the file has
  403, 404  that status, with an S3 error body
  rangereset the first request for a closed range (bytes=N-M, a member read by range) stops
            after half its body with a connection reset
  range404  every request for a closed range gets 404
  replacedK the object is replaced once K requests for a closed range were answered (K 1 if
            not given): later closed-range requests see another ETag, and get 412 when their
            If-Match names the old one
  weakMODE  MODE (ok if none) with weak ETags (W/"..."), which an If-Match never matches
            (RFC 9110 compares strongly): such a request gets 412
  weakchange the first answer stops after half the body with a connection reset, and the
            later answers carry another weak ETag
  longetag  as reset, with an ETag of 400 characters, which the resumed request's If-Match
            must name whole
  presigned every request must carry the query of a presigned URL (X-Amz-Signature=...), else
            403; one whose signature starts with "expired" gets 403 too
  trickle   every answer announces 1 MB more than the file, and after the file sends a zero
            byte every 0.2 s (a whole archive, then a server that never ends)
  redirect  every request (a listing too) gets 307 to the same path under mode ok on another
            host: the server's second address, 127.0.0.2
GET /MODE/BUCKET?list-type=2&prefix=P&delimiter=/ is an S3 ListObjectsV2 of ROOT/BUCKET/P,
two keys a page (continuation tokens are the last key given), so that sharc can list
s3://BUCKET/P/ with AWS_ENDPOINT_URL=http://127.0.0.1:PORT/MODE and no credentials. Under
MODE cycle its continuation tokens cycle (A, B, A, B ...), every page truncated and with the
first two keys.
Range requests (bytes=N- and bytes=N-M) get 206 with a Content-Range; ETag is the file's
size and mtime, and a request whose If-Match names another gets 412 (PreconditionFailed).
--delay-ms delays every answer, for latency benchmarks. --log FILE appends a line per
request once its answer is sent: MODE PATH RANGE BYTES PORT HOST CREDS, RANGE the Range
header ("-" for none), BYTES the body bytes the server wrote (handed to the kernel) and PORT the
client's port (requests over one kept-alive connection share it), HOST the server address
it came to (127.0.0.1, or 127.0.0.2 after a redirect) and CREDS the credential headers it
carried (Authorization, X-Amz-Security-Token, comma-separated; "-" for none), so that tests
can check what was asked for and sent, and that no credential left its endpoint.
"""
import os
import socket
import urllib.parse
from xml.sax.saxutils import escape
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = None
DELAY = 0.0
LOG = None
OTHER = None  # the server on 127.0.0.2 that redirects lead to
CREDENTIAL_HEADERS = ("Authorization", "X-Amz-Security-Token")
counts = {}
closed_ranges = {}
lock = threading.Lock()


def s3_error(code, message):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error>").encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def error(self, status, code, message):
        body = s3_error(code, message)
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_request_line(self, mode, rel, rng):
        if LOG:
            creds = ",".join(h for h in CREDENTIAL_HEADERS if self.headers.get(h)) or "-"
            with lock, open(LOG, "a") as f:
                f.write(f"{mode} {rel} {rng or '-'} {self.sent} {self.client_address[1]} "
                        f"{self.server.server_address[0]} {creds}\n")

    def redirect(self, path, query):
        rest = path.lstrip("/").split("/", 1)[1]
        self.send_response(307)
        self.send_header("Location", f"http://{OTHER[0]}:{OTHER[1]}/ok/{rest}" +
                         (f"?{query}" if query else ""))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def list_objects(self, bucket, query, mode):
        q = urllib.parse.parse_qs(query, keep_blank_values=True)
        prefix = q.get("prefix", [""])[0]
        after = q.get("continuation-token", [""])[0]
        base = os.path.join(ROOT, bucket)
        keys, dirs = [], set()
        for d, subdirs, files in os.walk(base):
            for f in files:
                key = os.path.relpath(os.path.join(d, f), base)
                if key.startswith(prefix):
                    rest = key[len(prefix):]
                    if "/" in rest:
                        dirs.add(prefix + rest.split("/", 1)[0] + "/")
                    else:
                        keys.append(key)
        keys.sort()
        if mode == "cycle":
            page, more, token = keys[:2], True, "B" if after == "A" else "A"
        else:
            keys = [k for k in keys if k > after]
            page, more = keys[:2], len(keys) > 2
            token = page[-1] if page else ""
        body = "<ListBucketResult><Name>%s</Name><Prefix>%s</Prefix>" % (bucket, escape(prefix))
        body += "<IsTruncated>%s</IsTruncated>" % ("true" if more else "false")
        body += "".join("<Contents><Key>%s</Key></Contents>" % escape(k) for k in page)
        if not after:
            body += "".join("<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>" % escape(d)
                            for d in sorted(dirs))
        if more:
            body += "<NextContinuationToken>%s</NextContinuationToken>" % escape(token)
        body = (body + "</ListBucketResult>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if DELAY:
            time.sleep(DELAY)
        path, _, query = self.path.partition("?")
        parts = urllib.parse.unquote(path).lstrip("/").split("/", 1)
        self.sent = 0
        if len(parts) == 2 and parts[0].split("-")[0] == "redirect":
            self.redirect(path, query)
            return self.log_request_line(parts[0], parts[1], self.headers.get("Range"))
        if query and "list-type=2" in query and len(parts) == 2 and "/" not in parts[1]:
            return self.list_objects(parts[1], query, parts[0].split("-")[0])
        if len(parts) != 2:
            return self.error(404, "NoSuchKey", "no mode")
        key, rel = parts
        mode = key.split("-")[0]
        weak = mode.startswith("weak")
        if weak:
            mode = mode[4:] or "ok"
        with lock:
            n = counts.get((key, rel), 0)
            counts[(key, rel)] = n + 1
        if mode == "403":
            return self.error(403, "AccessDenied", "Access Denied")
        if mode == "presigned":
            sig = urllib.parse.parse_qs(query).get("X-Amz-Signature", [""])[0]
            if not sig or sig.startswith("expired"):
                return self.error(403, "AccessDenied", "Request has expired")
        if mode == "404" or ".." in rel:
            return self.error(404, "NoSuchKey", "The specified key does not exist.")
        if mode == "always503" or (mode == "503" and n < 3):
            return self.error(503, "SlowDown", "Please reduce your request rate.")
        path = os.path.join(ROOT, rel)
        rng = self.headers.get("Range")
        try:
            self.serve(mode, key, rel, path, n, rng, weak)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped reading (a skip, a closed shard)
        finally:
            self.log_request_line(key, rel, rng)

    def serve(self, mode, key, rel, path, n, rng, weak):
        if not os.path.isfile(path):
            return self.error(404, "NoSuchKey", "The specified key does not exist.")
        st = os.stat(path)
        size = st.st_size
        start, end = 0, size - 1
        closed = False
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            start = int(a)
            if b:
                closed = True
                end = min(int(b), size - 1)
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        etag = f'"{size}-{int(st.st_mtime)}"'
        if weak:
            etag = "W/" + (etag if mode != "change" or n == 0 else '"changed"')
        elif mode == "longetag":
            etag = '"' + etag[1:-1].ljust(398, "e") + '"'
        ranged = 0
        if closed:
            with lock:
                ranged = closed_ranges.get((key, rel), 0)
                closed_ranges[(key, rel)] = ranged + 1
            if mode == "range404":
                return self.error(404, "NoSuchKey", "The specified key does not exist.")
            if mode.startswith("replaced") and ranged >= int(mode[8:] or 1):
                etag = '"replaced"'
        match = self.headers.get("If-Match")
        if match and (match != etag or weak):
            return self.error(412, "PreconditionFailed",
                              "At least one of the pre-conditions you specified did not hold")
        length = end + 1 - start
        announced = length
        first = n == 0
        if mode == "smalllen" and first:
            announced = length - min(100, length)
        elif mode == "biglen" and first:
            announced = length + 100
        elif mode == "trickle":
            announced = length + 1000000
        self.send_response(206 if rng else 200)
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(announced))
        self.send_header("ETag", etag)
        self.end_headers()
        if (((mode == "reset" or mode == "change" or mode == "longetag") and first) or (mode == "flaky" and n % 2 == 0) or
                (mode == "rangereset" and closed and ranged == 0)):
            self.send_file(path, start, length // 2)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        if (mode == "stall" and first) or mode == "stallall":
            self.send_file(path, start, length // 2)
            time.sleep(30)
            self.close_connection = True
            return
        if mode == "trickle":
            self.send_file(path, start, length)
            for _ in range(1000000):
                self.wfile.write(b"\0")
                self.wfile.flush()
                self.sent += 1
                time.sleep(0.2)
            return
        if mode == "truncate":
            self.send_file(path, start, min(1000, length))
            self.close_connection = True
            return
        self.send_file(path, start, min(announced, length))
        if mode == "biglen" and first:
            self.close_connection = True

    def send_file(self, path, start, count):
        # Straight from the file to the socket (sendfile), so that the server costs the
        # benchmarks little CPU; self.sent counts what was handed to the kernel.
        self.wfile.flush()
        with open(path, "rb") as f:
            while count > 0:
                k = os.sendfile(self.connection.fileno(), f.fileno(), start, min(count, 1 << 20))
                if k == 0:
                    break
                start += k
                count -= k
                self.sent += k


def main():
    global ROOT, DELAY, LOG, OTHER
    ROOT = sys.argv[1]
    if "--log" in sys.argv:
        LOG = sys.argv[sys.argv.index("--log") + 1]
    if "--delay-ms" in sys.argv:
        DELAY = float(sys.argv[sys.argv.index("--delay-ms") + 1]) / 1000.0
    ThreadingHTTPServer.daemon_threads = True
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    other = ThreadingHTTPServer(("127.0.0.2", 0), Handler)
    OTHER = other.server_address
    threading.Thread(target=other.serve_forever, daemon=True).start()
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    srv.serve_forever()


if __name__ == "__main__":
    main()
