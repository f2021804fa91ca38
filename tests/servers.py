"""Real local servers for the remote-data tests, started by the tests themselves (no
internet): an S3 server (moto), an HTTP server of a local folder, and a fault proxy in
front of either (latency, error bursts, truncated bodies, a server that dies and comes
back on the same port).

A test module takes the fixtures by binding them at its top level, where pytest finds
them: `s3, http_folder, fault_proxy = servers.s3, servers.http_folder,
servers.fault_proxy` after `from tests import servers` (an import of the names works as
well, but ruff then flags every test taking one: F811). `s3` needs nothing else: it finds,
or starts, its module's S3 server itself.
"""

import email.utils
import html
import mimetypes
import os
import socket
import socketserver
import sys
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from urllib.parse import quote, unquote, urlsplit

import pytest

HOST = "127.0.0.1"
REGION = "us-east-1"
KEY = SECRET = "testing"  # moto takes any credentials; no real ones are ever read
UPSTREAM_TIMEOUT = 60.0  # seconds the proxy waits on its upstream before giving up
POLL = 0.05  # seconds between a server's checks for stop() while it waits to accept


class _Connections:
    """The connections of a threaded socketserver server and their (daemon) threads, so
    that close() can cut the connections and join the threads: a keep-alive connection
    otherwise keeps its thread alive past the server's end."""

    def __init__(self, server):
        self._lock = threading.Lock()
        self._open, self._threads = set(), []
        shutdown_request = server.shutdown_request

        def process_request(conn, address):
            thread = threading.Thread(target=server.process_request_thread,
                                      args=(conn, address), daemon=True)
            with self._lock:
                self._open.add(conn)
                self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()

        def tracked_shutdown_request(conn):
            with self._lock:  # never cut a socket while its thread closes it
                self._open.discard(conn)
                shutdown_request(conn)

        server.process_request = process_request
        server.shutdown_request = tracked_shutdown_request

    def close(self):
        """Cuts every open connection and waits for every connection's thread to end
        (call it once the server accepts no more)."""
        with self._lock:
            for conn in self._open:
                _shut(conn)
            threads = self._threads
        for thread in threads:
            thread.join()


def _shut(sock):
    """Shuts `sock` down both ways (wakes a thread blocked on it); quiet if it is gone."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _url(port):
    """The URL of a server of this module at `port`."""
    return f"http://{HOST}:{port}"


# ---------------------------------------------------------------------------------------
# S3 (moto)


class _QuietRequests:
    """Handler mixin: no log line per request (werkzeug writes one to stderr)."""

    def log_request(self, *args):
        pass


def _boto3_client(endpoint):
    """A boto3 S3 client of `endpoint` that reads no AWS configuration or credential file
    and no profile: every setting is explicit."""
    import boto3
    import botocore.config
    import botocore.configprovider
    import botocore.session

    core = botocore.session.Session()
    core.set_config_variable("config_file", os.devnull)
    core.set_config_variable("credentials_file", os.devnull)
    core.get_component("config_store").set_config_provider(  # no AWS_PROFILE
        "profile", botocore.configprovider.ConstantProvider(None))
    session = boto3.session.Session(aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                                    region_name=REGION, botocore_session=core)
    config = botocore.config.Config(s3={"addressing_style": "path"})
    return session.client("s3", endpoint_url=endpoint, config=config)


def s3_storage_options(endpoint):
    """fsspec/s3fs options for an S3 server at `endpoint`: credentials, region and path
    addressing explicit, so that no AWS credentials are read and no AWS setting of the
    environment or ~/.aws sends the requests elsewhere."""
    return {"key": KEY, "secret": SECRET,
            "client_kwargs": {"endpoint_url": endpoint, "region_name": REGION},
            "config_kwargs": {"s3": {"addressing_style": "path"}}}


class S3Server:
    """moto's S3 server on 127.0.0.1 and a free port, quiet, for s3fs and boto3.

    moto keeps its buckets in the process, shared by every server of it: give each test
    its own bucket (the `s3` fixture does). Keys are written "bucket/key".
    """

    def __init__(self):
        self._moto = None
        self._connections = None
        self._client = None
        self.host, self.port = HOST, None

    def start(self):
        """Starts the server (a fraction of a second); returns self."""
        from moto.server import ThreadedMotoServer

        self._moto = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)
        self._moto.start()
        server = self._moto._server
        server.RequestHandlerClass = type(
            "QuietMotoRequestHandler", (_QuietRequests, server.RequestHandlerClass), {})
        self._connections = _Connections(server)
        self.port = self._moto.get_host_and_port()[1]
        return self

    def stop(self):
        """Stops the server: its thread and listening socket (werkzeug closes it as its
        loop ends), every open connection and the boto3 client's."""
        if self._moto is None:
            return
        self._moto.stop()
        self._connections.close()
        if self._client is not None:
            self._client.close()
        self._moto = self._client = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    @property
    def endpoint(self):
        """The server's URL, "http://127.0.0.1:PORT"."""
        return _url(self.port)

    @property
    def storage_options(self):
        """fsspec/s3fs options reaching this server directly."""
        return s3_storage_options(self.endpoint)

    def storage_options_via(self, proxy):
        """fsspec/s3fs options reaching this server through `proxy` (a FaultProxy)."""
        return s3_storage_options(proxy.endpoint)

    @property
    def client(self):
        """A boto3 S3 client of this server (made once)."""
        if self._client is None:
            self._client = _boto3_client(self.endpoint)
        return self._client

    def create_bucket(self, name):
        """Creates the bucket `name` (in us-east-1: moto refuses s3fs's mkdir elsewhere)."""
        self.client.create_bucket(Bucket=name)

    def delete_bucket(self, name):
        """Deletes the bucket `name` with every object in it."""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=name)
        for page in pages:
            for item in page.get("Contents", ()):
                self.client.delete_object(Bucket=name, Key=item["Key"])
        self.client.delete_bucket(Bucket=name)

    def put(self, key, data):
        """Writes the bytes `data` at "bucket/key"."""
        bucket, name = key.split("/", 1)
        self.client.put_object(Bucket=bucket, Key=name, Body=data)

    def delete(self, key):
        """Deletes the object at "bucket/key"."""
        bucket, name = key.split("/", 1)
        self.client.delete_object(Bucket=bucket, Key=name)

    def upload_folder(self, local_dir, prefix):
        """Copies every file under `local_dir` to "bucket/prefix/<its relative path>"
        (`prefix` may be a bare bucket); returns the number of objects written."""
        count = 0
        for folder, _, names in os.walk(local_dir):
            for name in names:
                path = os.path.join(folder, name)
                relative = os.path.relpath(path, local_dir).replace(os.sep, "/")
                with open(path, "rb") as f:
                    self.put(f"{prefix.rstrip('/')}/{relative}", f.read())
                count += 1
        return count


class S3Bucket:
    """A bucket of an S3Server, for one test: its name, URL, options and writes."""

    def __init__(self, server, name):
        self.server, self.name = server, name

    @property
    def url(self):
        """"s3://<name>"."""
        return f"s3://{self.name}"

    @property
    def storage_options(self):
        """fsspec/s3fs options reaching the server directly."""
        return self.server.storage_options

    def storage_options_via(self, proxy):
        """fsspec/s3fs options reaching the server through `proxy` (a FaultProxy)."""
        return self.server.storage_options_via(proxy)

    def put(self, key, data):
        """Writes the bytes `data` at `key` of this bucket."""
        self.server.put(f"{self.name}/{key}", data)

    def upload_folder(self, local_dir, prefix=""):
        """Copies `local_dir` under `prefix` of this bucket; returns the object count."""
        return self.server.upload_folder(local_dir, f"{self.name}/{prefix}".rstrip("/"))


# ---------------------------------------------------------------------------------------
# HTTP server of a folder


class _FolderHTTPServer(socketserver.ThreadingTCPServer):
    """A thread per connection; a client hanging up is no error worth a traceback."""

    allow_reuse_address = True  # as http.server's: its port free again once it stops

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _FolderHandler(BaseHTTPRequestHandler):
    """GET and HEAD of the files under `root` (byte ranges) and of its folders (an HTML
    page of links, as fsspec's HTTPFileSystem lists); 404 for anything else. A file's
    response carries its version, as real servers send it (`versions`): an ETag of its
    modification time (in nanoseconds) and size, and Last-Modified; a conditional
    request (If-None-Match, If-Modified-Since) of an unchanged file is answered 304.
    The request's user information and query (credentials) are ignored."""

    protocol_version = "HTTP/1.1"  # keep-alive, as real servers
    root = None  # set by HTTPFolderServer's subclass
    versions = True  # set by HTTPFolderServer's subclass

    def log_message(self, format, *args):
        pass

    def do_HEAD(self):
        self._serve(send_body=False)

    def do_GET(self):
        self._serve(send_body=True)

    def _serve(self, send_body):
        """Answers a GET (or a HEAD: the same headers, no body)."""
        path = self._local_path()
        if path is not None and os.path.isdir(path):
            self._reply(200, self._listing(path), "text/html; charset=utf-8", send_body)
        elif path is not None and os.path.isfile(path):
            self._serve_file(path, send_body)
        else:
            self._reply(404, b"not found\n", "text/plain", send_body)

    def _local_path(self):
        """The file or folder the request names, or None where it leaves the root."""
        relative = unquote(urlsplit(self.path).path).lstrip("/")
        path = os.path.normpath(os.path.join(self.root, relative))
        inside = path == self.root or path.startswith(self.root + os.sep)
        return path if inside else None

    def _listing(self, folder):
        """An HTML page linking every entry of `folder` (folders end with "/")."""
        relative = os.path.relpath(folder, self.root).replace(os.sep, "/")
        base = "" if relative == "." else "/" + relative
        links = []
        for name in sorted(os.listdir(folder)):
            slash = "/" if os.path.isdir(os.path.join(folder, name)) else ""
            href = quote(f"{base}/{name}{slash}")
            links.append(f'<li><a href="{href}">{html.escape(name + slash)}</a></li>')
        page = "<!DOCTYPE html>\n<html><body><ul>\n" + "\n".join(links) + "\n</ul></body></html>\n"
        return page.encode("utf-8")

    def _serve_file(self, path, send_body):
        """The file, or the byte range the request asks of it (206; 416 past its end)."""
        stat = os.stat(path)
        size = stat.st_size
        kind = mimetypes.guess_type(path)[0] or "application/octet-stream"
        version = {}
        if self.versions:
            version = {"ETag": f'"{stat.st_mtime_ns:x}-{size:x}"',
                       "Last-Modified": email.utils.formatdate(stat.st_mtime, usegmt=True)}
            if self._unchanged(version["ETag"], stat.st_mtime):
                self._reply(304, b"", kind, False, version)
                return
        span = _byte_range(self.headers.get("Range"), size)
        if span is None:
            status, start, stop, extra = 200, 0, size, {}
        elif span == "unsatisfiable":
            self._reply(416, b"", kind, send_body, {"Content-Range": f"bytes */{size}"})
            return
        else:
            (start, stop), status = span, 206
            extra = {"Content-Range": f"bytes {start}-{stop - 1}/{size}"}
        extra.update(version)
        with open(path, "rb") as f:
            f.seek(start)
            body = f.read(stop - start) if send_body else b""
        self._reply(status, body, kind, send_body, extra, length=stop - start)

    def _unchanged(self, etag, mtime):
        """Whether the request's conditions say the client holds this version."""
        match = self.headers.get("If-None-Match")
        if match is not None:
            return match.strip() == "*" or etag in [t.strip() for t in match.split(",")]
        since = self.headers.get("If-Modified-Since")
        if since:
            try:
                return int(mtime) <= email.utils.parsedate_to_datetime(since).timestamp()
            except (TypeError, ValueError):
                return False
        return False

    def _reply(self, status, body, kind, send_body, extra=None, length=None):
        """Sends a response: Content-Length `length` (else the body's), `extra` headers."""
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.send_header("Accept-Ranges", "bytes")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(body)


def _byte_range(header, size):
    """(start, stop) of a "bytes=a-b", "bytes=a-" or "bytes=-n" Range header within a file
    of `size` bytes; None for no (or an unsupported) range, "unsatisfiable" past the end."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[len("bytes="):].strip().partition("-")
    try:
        if first == "":
            start, stop = max(size - int(last), 0), size
        else:
            start = int(first)
            stop = size if last == "" else min(int(last) + 1, size)
    except ValueError:
        return None
    if start >= size or start >= stop:
        return "unsatisfiable"
    return start, stop


class HTTPFolderServer:
    """A threaded, read-only, quiet HTTP/1.1 server of the folder `root` on 127.0.0.1
    and a free port: GET and HEAD, byte ranges (206), folder listings, 404; each file's
    ETag and Last-Modified, and 304 to a conditional request of an unchanged one
    (`versions=False`: none of them, as a server that gives no version)."""

    def __init__(self, root, versions=True):
        self.root = os.path.abspath(os.fspath(root))
        self.versions = versions
        self.host, self.port = HOST, None
        self._server = self._thread = self._connections = None

    def start(self):
        """Starts serving; returns self."""
        handler = type("FolderHandler", (_FolderHandler,), {"root": self.root,
                                                            "versions": self.versions})
        self._server = _FolderHTTPServer((HOST, 0), handler)
        self._connections = _Connections(self._server)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(POLL,),
                                        name=f"HTTPFolderServer:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stops serving: its thread, every open connection and the listening socket."""
        if self._server is None:
            return
        self._server.shutdown()
        self._thread.join()
        self._connections.close()
        self._server.server_close()
        self._server = self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    @property
    def url(self):
        """The server's URL, "http://127.0.0.1:PORT" (the root folder is at "/")."""
        return _url(self.port)


# ---------------------------------------------------------------------------------------
# Fault proxy


class _ProtocolError(Exception):
    """A message the proxy cannot read as HTTP/1.1 (its connection is dropped)."""


class _Head:
    """The start line and headers of an HTTP message."""

    def __init__(self, start, headers):
        self.start, self.headers = start, headers

    def get(self, name, default=""):
        """The value of the header `name` (given in lower case), or `default`."""
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return default

    def without(self, *names):
        """The headers, less those in `names` (lower case)."""
        return [(key, value) for key, value in self.headers if key.lower() not in names]

    @property
    def status(self):
        """The status code of a response."""
        return int(self.start.split(" ", 2)[1])


def _read_head(rfile):
    """The head of the next message of `rfile`; None where the stream ends before one."""
    line = rfile.readline(65537)
    while line in (b"\r\n", b"\n"):
        line = rfile.readline(65537)
    if not line:
        return None
    start, headers = line.decode("latin-1").rstrip("\r\n"), []
    while True:
        line = rfile.readline(65537)
        if not line:
            raise _ProtocolError("the stream ended inside a message head")
        if line in (b"\r\n", b"\n"):
            return _Head(start, headers)
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))


def _read_exact(rfile, n):
    """The next `n` bytes of `rfile`, all of them."""
    data = rfile.read(n)
    if len(data) < n:
        raise _ProtocolError(f"the stream ended {n - len(data)} bytes short of a body")
    return data


def _read_chunked(rfile):
    """A chunked body, decoded (trailers dropped)."""
    chunks = []
    while True:
        line = rfile.readline(65537)
        try:
            size = int(line.split(b";")[0], 16)
        except ValueError:
            raise _ProtocolError(f"a chunk size line of {line!r}") from None
        if size == 0:
            while rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(chunks)
        chunks.append(_read_exact(rfile, size))
        _read_exact(rfile, 2)


def _read_body(rfile, head, until_close):
    """The body of the message `head` starts, decoded: chunked, by Content-Length, or
    (`until_close`, a response) up to the end of the stream."""
    if "chunked" in head.get("transfer-encoding").lower():
        return _read_chunked(rfile)
    length = head.get("content-length")
    if length:
        return _read_exact(rfile, int(length))
    return rfile.read() if until_close else b""


def _encode(start, headers, body=b""):
    """The bytes on the wire of a message: start line, headers, blank line, body."""
    lines = [start] + [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


_HOP_BY_HOP = ("connection", "keep-alive", "proxy-connection", "transfer-encoding")
_S3_ERROR_CODES = {500: "InternalError", 503: "SlowDown"}  # S3's (s3fs retries SlowDown)


def _error_response(status, head_only, code=None):
    """An immediate `status` response: an S3 error document (retryable codes for 500 and
    503; `code` when given, as S3 writes an expired token's 400 or a wrong region's 301),
    kept alive."""
    phrase = HTTPStatus(status).phrase
    code = code or _S3_ERROR_CODES.get(status, phrase.replace(" ", ""))
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>Injected by FaultProxy: {phrase}</Message></Error>\n").encode()
    headers = [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))]
    return _encode(f"HTTP/1.1 {status} {phrase}", headers, b"" if head_only else body)


class _Pending:
    """A fault for the next `count` requests whose path holds `path` (any if None)."""

    def __init__(self):
        self.count, self.value, self.path = 0, None, None

    def arm(self, count, value, path):
        """Replaces the pending fault."""
        self.count, self.value, self.path = count, value, path

    def take(self, target):
        """The fault's value, spending one, if it applies to `target`; else None."""
        if self.count > 0 and (self.path is None or self.path in target):
            self.count -= 1
            return self.value
        return None


class FaultProxy:
    """An HTTP/1.1 proxy on 127.0.0.1 and a free port in front of `target_host:target_port`
    that injects faults per request, all changeable while it runs:

    - `latency` (seconds, an attribute): each request waits this long before it is
      forwarded; requests on different connections wait at once, as with a real remote
      store;
    - `fail_next(n, status)`: the next n requests get an immediate error response;
    - `fail_for(seconds, status)`: every request for that long does (a store down a
      while, or throttling everyone);
    - `truncate_next(n, keep)`: the next n responses with a body send the full
      Content-Length, then only `keep` bytes of body, then close the connection;
    - `stop()` / `start()`: the server dies (every connection cut) and comes back on the
      same port.

    Each request is read whole (head, then its body by Content-Length or chunks), sent on
    a fresh upstream connection, and the whole response is read before it is passed on
    (bodies re-framed with a Content-Length). `requests` counts the requests seen, and
    `seen` lists them ("GET /bucket/key?...").
    """

    def __init__(self, target_host, target_port):
        self.target = (target_host, target_port)
        self.host, self.port = HOST, 0
        self.latency = 0.0
        self._lock = threading.Lock()
        self._requests = 0
        self.seen = []  # "METHOD target" of every request read, in order
        self._fail, self._truncate = _Pending(), _Pending()
        self._fail_until, self._fail_status = 0.0, 503
        self._stopping = threading.Event()
        self._stopping.set()
        self._listener = self._acceptor = None
        self._sockets, self._threads = set(), set()

    # lifecycle

    def start(self):
        """Listens (on the port of the last start, if any); returns self."""
        if self._listener is not None:
            return self
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(128)
        listener.settimeout(POLL)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._stopping.clear()
        self._acceptor = threading.Thread(target=self._accept_loop,
                                          name=f"FaultProxy:{self.port}", daemon=True)
        self._acceptor.start()
        return self

    def stop(self):
        """Stops listening and cuts every open connection, as a server dying mid-epoch;
        returns when every thread of the proxy has ended."""
        if self._listener is None:
            return
        self._stopping.set()
        self._acceptor.join()
        self._listener.close()
        self._listener = None
        with self._lock:
            for sock in self._sockets:
                _shut(sock)
            threads = list(self._threads)
        for thread in threads:
            thread.join()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    @property
    def endpoint(self):
        """The proxy's URL, "http://127.0.0.1:PORT"."""
        return _url(self.port)

    url = endpoint

    # faults

    @property
    def requests(self):
        """How many requests the proxy has read (failed and truncated ones included)."""
        with self._lock:
            return self._requests

    def fail_next(self, n=1, status=503, path=None, code=None):
        """The next `n` requests (whose path holds `path`, if given) get an immediate
        `status` response with an S3 error body (S3's error `code`, if given) instead of
        being forwarded."""
        with self._lock:
            self._fail.arm(n, (status, code), path)

    def fail_for(self, seconds, status=503):
        """Every request for the next `seconds` gets an immediate `status` response."""
        with self._lock:
            self._fail_until, self._fail_status = time.monotonic() + seconds, status

    def count(self, part):
        """How many requests so far had `part` in their method and target."""
        with self._lock:
            return sum(part in line for line in self.seen)

    def truncate_next(self, n=1, keep=0, path=None):
        """The next `n` responses with a body (to requests whose path holds `path`, if
        given) promise their full Content-Length, send `keep` bytes of it, then close."""
        with self._lock:
            self._truncate.arm(n, keep, path)

    def _take(self, pending, target):
        """`pending`'s value for a request to `target`, spent; None if it does not apply."""
        with self._lock:
            return pending.take(target)

    # connections

    def _track(self, sock):
        """Registers `sock` to be cut at stop(); False (and closes it) when stopping."""
        with self._lock:
            if self._stopping.is_set():
                sock.close()
                return False
            self._sockets.add(sock)
            return True

    def _untrack(self, sock):
        """Closes `sock`, no longer to be cut at stop()."""
        with self._lock:  # never cut a socket while it is closed here
            self._sockets.discard(sock)
            sock.close()

    def _accept_loop(self):
        """Accepts connections until stop(), a thread each."""
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            if not self._track(conn):
                return
            thread = threading.Thread(target=self._serve_client, args=(conn,),
                                      name=f"FaultProxy:{self.port}:client", daemon=True)
            with self._lock:
                self._threads.add(thread)
            thread.start()

    def _serve_client(self, conn):
        """Answers the requests of one client connection until either side closes it."""
        rfile = conn.makefile("rb")
        try:
            while self._answer(conn, rfile):
                pass
        except (OSError, _ProtocolError, ValueError):
            pass  # a cut connection or a message past reading: drop the connection
        finally:
            rfile.close()
            self._untrack(conn)
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _answer(self, conn, rfile):
        """Reads one request and answers it (a fault, or the upstream response); returns
        whether the connection stays open for another."""
        head = _read_head(rfile)
        if head is None:
            return False
        if head.get("expect").lower() == "100-continue":
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = _read_body(rfile, head, until_close=False)
        method, target = (head.start.split(" ") + ["", ""])[:2]
        with self._lock:
            self._requests += 1
            self.seen.append(f"{method} {target}")
        keep_alive = head.get("connection").lower() != "close"
        status, code = self._take(self._fail, target) or (None, None)
        with self._lock:
            if status is None and time.monotonic() < self._fail_until:
                status = self._fail_status
        if status is not None:
            conn.sendall(_error_response(status, head_only=method == "HEAD", code=code))
            return keep_alive
        if self._stopping.wait(self.latency):
            return False
        response, response_body = self._forward(head, body, head_only=method == "HEAD")
        return self._reply(conn, target, response, response_body) and keep_alive

    def _forward(self, head, body, head_only):
        """Sends the request upstream on a fresh connection; its response's head and body
        (None for a response without one: to HEAD, 204, 304)."""
        upstream = socket.create_connection(self.target, timeout=UPSTREAM_TIMEOUT)
        if not self._track(upstream):
            raise OSError("the proxy is stopping")
        try:
            headers = head.without(*_HOP_BY_HOP, "content-length", "expect")
            headers.append(("Connection", "close"))
            if body or head.get("content-length") or head.get("transfer-encoding"):
                headers.append(("Content-Length", str(len(body))))
            upstream.sendall(_encode(head.start, headers, body))
            with upstream.makefile("rb") as rfile:
                response = _read_head(rfile)
                while response is not None and 100 <= response.status < 200:
                    response = _read_head(rfile)
                if response is None:
                    raise _ProtocolError("the upstream server sent no response")
                if head_only or response.status in (204, 304):
                    return response, None
                return response, _read_body(rfile, response, until_close=True)
        finally:
            self._untrack(upstream)

    def _reply(self, conn, target, response, body):
        """Passes the response on (its body re-framed by Content-Length), truncated if one
        is due; returns whether the connection stays open."""
        if body is None:  # a HEAD's Content-Length is the object's: kept
            conn.sendall(_encode(response.start, response.without(*_HOP_BY_HOP)))
            return True
        headers = response.without(*_HOP_BY_HOP, "content-length")
        headers.append(("Content-Length", str(len(body))))
        keep = self._take(self._truncate, target) if body else None
        if keep is not None:
            conn.sendall(_encode(response.start, headers, body[:keep]))
            return False
        conn.sendall(_encode(response.start, headers, body))
        return True


# ---------------------------------------------------------------------------------------
# Fixtures

_S3_SERVER = pytest.StashKey()


def _module_s3_server(request):
    """The S3 server of the requesting test's module: started at its first use, stopped
    when the module's tests are done."""
    module = request.node.getparent(pytest.Module)
    server = module.stash.get(_S3_SERVER, None)
    if server is None:
        server = module.stash[_S3_SERVER] = S3Server().start()
        module.addfinalizer(server.stop)
    return server


@pytest.fixture(scope="module")
def s3_server(request):
    """An S3Server for the module's tests (the one `s3` uses)."""
    return _module_s3_server(request)


@pytest.fixture
def s3(request):
    """A fresh, uniquely named, empty bucket of the module's S3 server (an S3Bucket:
    `.server`, `.name`, `.url`, `.storage_options`); deleted with its objects after."""
    server = _module_s3_server(request)
    bucket = S3Bucket(server, f"kg-{uuid.uuid4().hex[:16]}")
    server.create_bucket(bucket.name)
    yield bucket
    server.delete_bucket(bucket.name)


@pytest.fixture
def http_folder():
    """A factory: `http_folder(root, versions=True)` serves the folder `root` (an
    HTTPFolderServer, started); every server it made is stopped after the test."""
    servers = []

    def serve(root, versions=True):
        servers.append(HTTPFolderServer(root, versions).start())
        return servers[-1]

    yield serve
    for server in servers:
        server.stop()


@pytest.fixture
def fault_proxy():
    """A factory: `fault_proxy(server)` starts a FaultProxy in front of `server` (anything
    with `.host` and `.port`, e.g. an S3Server, an S3Bucket's `.server` or an
    HTTPFolderServer) or of a (host, port) pair; every proxy is stopped after the test."""
    proxies = []

    def start(target):
        host, port = target if isinstance(target, tuple) else (target.host, target.port)
        proxies.append(FaultProxy(host, port).start())
        return proxies[-1]

    yield start
    for proxy in proxies:
        proxy.stop()
