"""tests/servers.py, the local servers of the remote-data tests, through the real client
libraries: s3fs against moto's S3 server, fsspec's HTTPFileSystem against the folder
server, and the fault proxy's latency, error bursts, truncated bodies and restarts as
those clients see them (what each client raises is pinned here, for kerasgen to rely on).
"""

import http.client
import logging
import socket
import threading
import time

import aiohttp
import botocore.exceptions
import fsspec
import pytest
import s3fs

from tests import servers
from tests.servers import HOST, FaultProxy, HTTPFolderServer, S3Server

s3, http_folder, fault_proxy = servers.s3, servers.http_folder, servers.fault_proxy  # fixtures

LATENCY = 0.1  # seconds: small, for a fast file; bounds below are generous


def s3_fs(options, attempts=None):
    """A fresh s3fs filesystem (no instance or listing cache); `attempts` caps botocore's
    tries per request (its default retries connection errors for seconds)."""
    if attempts is not None:
        options["config_kwargs"]["retries"] = {"total_max_attempts": attempts}
    return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **options)


def http_fs():
    """A fresh fsspec HTTP filesystem (no instance or listing cache)."""
    return fsspec.filesystem("http", skip_instance_cache=True, use_listings_cache=False)


@pytest.fixture
def folder(tmp_path):
    """A small tree: two top files (one hidden), a folder with a nested folder, a name
    with a space."""
    root = tmp_path / "site"
    (root / "cat" / "nested").mkdir(parents=True)
    (root / "dog").mkdir()
    files = {"top.bin": bytes(range(256)), ".hidden": b"h", "cat/a.png": b"A" * 100,
             "cat/nested/b.jpg": b"B" * 50, "dog/c d.txt": b"hello world"}
    for name, data in files.items():
        (root / name).write_bytes(data)
    (tmp_path / "outside.txt").write_bytes(b"not served")
    return root


# ---------------------------------------------------------------------------------------
# S3Server through s3fs


def test_s3fs_writes_lists_and_reads_the_s3_server(s3, folder):
    assert s3.upload_folder(folder, "site") == 5
    fs = s3_fs(s3.storage_options)
    fs.pipe(f"{s3.name}/piped.bin", b"piped")
    fs.put(str(folder / "dog" / "c d.txt"), f"{s3.name}/put/c d.txt")
    s3.put("direct/one.bin", b"one")
    found = fs.find(s3.url)
    assert sorted(found) == sorted(
        f"{s3.name}/{key}" for key in ["site/top.bin", "site/.hidden", "site/cat/a.png",
                                       "site/cat/nested/b.jpg", "site/dog/c d.txt",
                                       "piped.bin", "put/c d.txt", "direct/one.bin"])
    assert fs.ls(f"{s3.name}/site/cat", detail=False) == [
        f"{s3.name}/site/cat/a.png", f"{s3.name}/site/cat/nested"]
    assert fs.cat(f"{s3.url}/site/top.bin") == bytes(range(256))
    assert fs.cat_file(f"{s3.name}/site/top.bin", start=10, end=13) == bytes([10, 11, 12])
    assert fs.cat(f"{s3.name}/put/c d.txt") == b"hello world"
    s3.server.delete(f"{s3.name}/direct/one.bin")
    assert not fs.exists(f"{s3.name}/direct/one.bin")


def test_each_test_gets_a_fresh_empty_bucket_and_the_server_logs_no_requests(s3, caplog):
    caplog.set_level(logging.INFO, logger="werkzeug")  # where werkzeug's request lines go
    assert s3_fs(s3.storage_options).find(s3.url) == []
    s3.put("k", b"v")
    assert [record for record in caplog.records if record.name == "werkzeug"] == []


# ---------------------------------------------------------------------------------------
# HTTPFolderServer through fsspec's HTTPFileSystem, and on the wire


def test_fsspec_http_lists_finds_and_reads_ranges_of_the_folder(http_folder, folder):
    url = http_folder(folder).url
    fs = http_fs()
    assert fs.ls(url + "/", detail=False) == [
        f"{url}/.hidden", f"{url}/cat/", f"{url}/dog/", f"{url}/top.bin"]
    assert fs.ls(url + "/cat", detail=False) == [f"{url}/cat/a.png", f"{url}/cat/nested/"]
    found = fs.find(url + "/")
    assert found == [f"{url}/.hidden", f"{url}/cat/a.png", f"{url}/cat/nested/b.jpg",
                     f"{url}/dog/c%20d.txt", f"{url}/top.bin"]
    assert fs.cat(found[3]) == fs.cat(f"{url}/dog/c d.txt") == b"hello world"
    assert fs.info(f"{url}/cat/a.png")["size"] == 100
    assert fs.isdir(f"{url}/cat") and not fs.isdir(f"{url}/top.bin")
    top = f"{url}/top.bin"
    assert fs.cat_file(top, start=10, end=13) == bytes([10, 11, 12])
    assert fs.cat_file(top, start=250) == bytes(range(250, 256))
    assert fs.cat_file(top, start=-3) == bytes([253, 254, 255])
    with fs.open(top, block_size=16) as f:
        f.seek(100)
        assert f.read(4) == bytes([100, 101, 102, 103])
    with pytest.raises(FileNotFoundError):
        fs.cat(f"{url}/missing.bin")


def request(server, method, path, headers=None):
    """One raw request: (status, headers, body)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_the_folder_server_answers_head_ranges_and_refuses_what_is_not_there(folder):
    with HTTPFolderServer(folder) as server:
        status, headers, body = request(server, "HEAD", "/top.bin")
        assert (status, headers["Content-Length"], body) == (200, "256", b"")
        status, headers, body = request(server, "GET", "/top.bin", {"Range": "bytes=2-4"})
        assert (status, headers["Content-Range"], body) == (206, "bytes 2-4/256", b"\2\3\4")
        status, headers, _ = request(server, "GET", "/top.bin", {"Range": "bytes=300-"})
        assert (status, headers["Content-Range"]) == (416, "bytes */256")
        assert request(server, "GET", "/../outside.txt")[0] == 404
        assert request(server, "GET", "/%2e%2e/outside.txt")[0] == 404
        assert request(server, "GET", "/nope")[0] == 404
        assert request(server, "PUT", "/top.bin")[0] == 501  # read-only


# ---------------------------------------------------------------------------------------
# FaultProxy: passing requests on


def test_the_proxy_passes_uploads_listings_and_reads_through(s3, fault_proxy):
    proxy = fault_proxy(s3.server)
    fs = s3_fs(s3.storage_options_via(proxy))
    big = bytes(range(256)) * 8192  # 2 MiB: botocore sends "Expect: 100-continue"
    fs.pipe({f"{s3.name}/big.bin": big, f"{s3.name}/dir/small.bin": b"small"})
    assert fs.find(s3.url) == [f"{s3.name}/big.bin", f"{s3.name}/dir/small.bin"]
    assert fs.cat(f"{s3.name}/big.bin") == big
    assert fs.cat(f"{s3.name}/dir/small.bin") == b"small"
    assert proxy.requests >= 5


# ---------------------------------------------------------------------------------------
# FaultProxy: latency


def test_latency_delays_each_request_and_concurrent_requests_wait_together(
        s3, fault_proxy):
    keys = [f"{s3.name}/k{i}.bin" for i in range(8)]
    for i, key in enumerate(keys):
        s3.server.put(key, bytes([i]) * 10)
    proxy = fault_proxy(s3.server)
    fs = s3_fs(s3.storage_options_via(proxy))
    fs.cat_file(keys[0], start=0, end=1)  # the client and its connection, before timing
    proxy.latency = LATENCY
    started = time.perf_counter()
    assert fs.cat_file(keys[0], start=0, end=2) == b"\0\0"
    assert time.perf_counter() - started >= LATENCY
    before = proxy.requests
    started = time.perf_counter()
    assert fs.cat(keys) == {key: bytes([i]) * 10 for i, key in enumerate(keys)}
    elapsed, serial = time.perf_counter() - started, (proxy.requests - before) * LATENCY
    assert LATENCY <= elapsed < serial / 2, (elapsed, serial)


def test_latency_applies_to_fsspec_http_and_can_change_while_running(
        http_folder, folder, fault_proxy):
    proxy = fault_proxy(http_folder(folder))
    fs, url = http_fs(), f"{proxy.url}/top.bin"
    for latency in (LATENCY, 3 * LATENCY):
        proxy.latency = latency
        started = time.perf_counter()
        assert fs.cat_file(url, start=0, end=1) == b"\0"
        assert time.perf_counter() - started >= latency


# ---------------------------------------------------------------------------------------
# FaultProxy: error bursts


def test_s3fs_rides_out_a_503_burst_shorter_than_its_retries(s3, fault_proxy):
    s3.put("x.bin", b"hello")
    proxy = fault_proxy(s3.server)
    fs = s3_fs(s3.storage_options_via(proxy))
    before = proxy.requests
    assert fs.cat(f"{s3.name}/x.bin") == b"hello"
    plain = proxy.requests - before
    # s3fs's first request (a HEAD) takes both: botocore retries a 500/503 (4 times by
    # default) after a random exponential backoff (about 1.5 s here)
    proxy.fail_next(2)
    before = proxy.requests
    assert fs.cat(f"{s3.name}/x.bin") == b"hello"
    assert proxy.requests - before == plain + 2


def test_s3fs_raises_once_a_503_burst_outlasts_its_retries(s3, fault_proxy):
    s3.put("x.bin", b"hello")
    proxy = fault_proxy(s3.server)
    fs = s3_fs(s3.storage_options_via(proxy), attempts=1)
    proxy.fail_next(10)
    # s3fs turns botocore's ClientError of a 503 into OSError(errno.EBUSY). With botocore's
    # default 5 attempts this takes 5-12 s; a GET answered SlowDown is retried by s3fs
    # too (5 x 5 attempts, ~40 s), and a 500 becomes OSError(errno.EREMOTEIO)
    with pytest.raises(OSError, match="Service Unavailable"):
        fs.cat(f"{s3.name}/x.bin")


def test_fsspec_http_raises_on_a_503_without_retrying(http_folder, folder, fault_proxy):
    proxy = fault_proxy(http_folder(folder))
    fs, url = http_fs(), f"{proxy.url}/top.bin"
    proxy.fail_next(1)
    # fsspec's HTTPFileSystem has no retries: raise_for_status, aiohttp's error
    with pytest.raises(aiohttp.ClientResponseError) as caught:
        fs.cat(url)
    assert caught.value.status == 503
    assert fs.cat(url) == bytes(range(256))


def test_faults_can_be_aimed_at_one_path_and_the_counter_counts_every_request(
        http_folder, folder, fault_proxy):
    proxy = fault_proxy(http_folder(folder))
    fs = http_fs()
    proxy.fail_next(1, status=500, path="/dog/")
    assert fs.cat(f"{proxy.url}/top.bin") == bytes(range(256))
    assert proxy.requests == 1
    with pytest.raises(aiohttp.ClientResponseError) as caught:
        fs.cat(f"{proxy.url}/dog/c d.txt")
    assert caught.value.status == 500
    assert fs.cat(f"{proxy.url}/dog/c d.txt") == b"hello world"
    assert proxy.requests == 3


# ---------------------------------------------------------------------------------------
# FaultProxy: truncated bodies


def test_s3fs_retries_a_truncated_body_and_raises_when_every_try_is_cut(s3, fault_proxy):
    s3.put("y.bin", b"0123456789" * 100)
    proxy = fault_proxy(s3.server)
    fs = s3_fs(s3.storage_options_via(proxy))
    proxy.truncate_next(1, keep=100)
    assert fs.cat_file(f"{s3.name}/y.bin", start=0, end=1000) == b"0123456789" * 100
    # s3fs retries aiohttp's ClientPayloadError (S3_RETRYABLE_ERRORS) `fs.retries` times
    proxy.truncate_next(fs.retries, keep=100)
    with pytest.raises(aiohttp.ClientPayloadError, match="received 100 of 1000 bytes"):
        fs.cat_file(f"{s3.name}/y.bin", start=0, end=1000)


def test_fsspec_http_raises_on_a_truncated_body(http_folder, folder, fault_proxy):
    proxy = fault_proxy(http_folder(folder))
    fs, url = http_fs(), f"{proxy.url}/top.bin"
    proxy.truncate_next(1, keep=10)
    with pytest.raises(aiohttp.ClientPayloadError, match="received 10 of 256 bytes"):
        fs.cat(url)
    proxy.truncate_next(1, keep=3)
    with pytest.raises(aiohttp.ClientPayloadError, match="received 3 of 50 bytes"):
        fs.cat_file(url, start=100, end=150)
    assert fs.cat_file(url, start=100, end=150) == bytes(range(100, 150))


# ---------------------------------------------------------------------------------------
# FaultProxy: a server that dies and comes back


def test_a_stopped_proxy_fails_s3fs_with_a_connection_error_until_it_starts_again(
        s3, fault_proxy):
    s3.put("x.bin", b"hello")
    proxy = fault_proxy(s3.server)
    fs = s3_fs(s3.storage_options_via(proxy), attempts=1)
    assert fs.cat(f"{s3.name}/x.bin") == b"hello"
    port = proxy.port
    proxy.stop()
    with pytest.raises(botocore.exceptions.EndpointConnectionError):
        fs.cat(f"{s3.name}/x.bin")
    proxy.start()
    assert proxy.port == port
    assert fs.cat(f"{s3.name}/x.bin") == b"hello"


def test_stopping_the_proxy_cuts_a_request_in_flight(http_folder, folder, fault_proxy):
    proxy = fault_proxy(http_folder(folder))
    fs, url = http_fs(), f"{proxy.url}/top.bin"
    proxy.latency = 5.0  # held in the proxy while it stops
    errors = []

    def read():
        try:
            fs.cat(url)
        except aiohttp.ClientConnectionError as error:
            errors.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    while proxy.requests == 0:
        time.sleep(0.005)
    started = time.perf_counter()
    proxy.stop()
    reader.join()
    assert time.perf_counter() - started < 2.5  # stop() does not wait the latency out
    # ServerDisconnectedError or ClientOSError(104, 'Connection reset by peer')
    assert len(errors) == 1
    with pytest.raises(aiohttp.ClientConnectorError):
        fs.cat(url)
    proxy.latency = 0.0
    proxy.start()
    assert fs.cat(url) == bytes(range(256))


def test_stopped_servers_and_proxies_leave_no_thread_and_no_port(folder):
    before = set(threading.enumerate())
    with S3Server() as s3_server, HTTPFolderServer(folder) as http_server:
        with FaultProxy(http_server.host, http_server.port) as proxy:
            s3_server.create_bucket("kg-threads")
            assert http_fs().cat(f"{proxy.url}/top.bin") == bytes(range(256))
            s3_server.delete_bucket("kg-threads")
            ports = [s3_server.port, http_server.port, proxy.port]
    left = [t for t in set(threading.enumerate()) - before
            if not t.name.startswith(("fsspecIO", "asyncio"))]  # fsspec's own event loop
    assert left == []
    for port in ports:  # free to listen on again (SO_REUSEADDR: cut connections wait)
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((HOST, port))
            sock.listen()
