"""One retry budget per object, against real servers (tests/servers.py) behind the fault
proxy, which counts every request: an object that always fails costs its 4 attempts and
no more (the clients' own retries are off: s3fs's, botocore's), a store that answers
only errors, or none at all, is named within its deadline (docs/remote.md: 5 s) with a
bounded number of requests (a store held down sees one probe at a time), and an outage
shorter than the deadline is ridden out with the batches unchanged. Time bounds here are
hang guards, twice what the documentation promises or more."""

import time

import numpy as np
import pytest

import kerasgen as kg
from kerasgen.storage import remote as _remote
from kerasgen.storage import retry as _retry
from tests import servers
from tests.test_remote import assert_same, batches

s3 = servers.s3
http_folder = servers.http_folder
fault_proxy = servers.fault_proxy

COMMON = dict(image_size=(8, 8), batch_size=4, seed=3, cache=None, shuffle=False)


@pytest.fixture
def folder(image_folder):
    """The image folder of tests/conftest.py, without its text file (12 images)."""
    (image_folder / "cat" / "notes.txt").unlink()
    return image_folder


def s3_generator(s3, folder, proxy, **kwargs):
    s3.upload_folder(folder, "images")
    return kg.ImageFolderGenerator(f"{s3.url}/images",
                                   storage_options=s3.storage_options_via(proxy),
                                   **dict(COMMON, **kwargs))


def test_an_s3_object_that_always_fails_costs_four_requests_then_is_named(
        s3, folder, fault_proxy):
    proxy = fault_proxy(s3.server)
    gen = s3_generator(s3, folder, proxy)
    assert gen.file_paths[5].endswith("dog/dog_1.jpg")
    proxy.fail_next(10**6, status=503, path="dog_1.jpg")
    start = time.monotonic()
    with pytest.raises(ConnectionError, match=r"dog/dog_1\.jpg: .*Service Unavailable "
                                              r"\(after 4 attempts in \d"):
        gen[1]
    assert time.monotonic() - start < 10  # measured 0.9 s; it took 307 s (215 requests)
    assert proxy.count("dog_1.jpg") == 4  # s3fs's 5 and botocore's 5 multiplied it
    proxy.fail_next(0)
    assert_same([gen[1]], [batches(kg.ImageFolderGenerator(folder, **COMMON))[1]])


def test_an_object_fetched_ahead_that_failed_is_not_fetched_again_from_scratch(
        s3, folder, fault_proxy):
    proxy = fault_proxy(s3.server)
    gen = s3_generator(s3, folder, proxy)
    proxy.fail_next(10**6, status=503, path="dog_1.jpg")
    gen[0]  # fetches batches 1 and 2 ahead: dog_1 (batch 1) spends its 4 attempts
    deadline = time.monotonic() + 10
    while proxy.count("dog_1.jpg") < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(ConnectionError, match=r"dog_1\.jpg.*after 4 attempts"):
        gen[1]
    assert proxy.count("dog_1.jpg") == 4  # the read took the fetch's error: no 5th
    proxy.fail_next(0)


@pytest.mark.parametrize("kind", ["s3", "http"])
def test_a_store_answering_only_errors_is_named_within_seconds_without_a_storm(
        kind, s3, folder, fault_proxy, http_folder):
    if kind == "s3":
        proxy = fault_proxy(s3.server)
        gen = s3_generator(s3, folder, proxy)
        store = f"{s3.url} at {proxy.endpoint}"
    else:
        proxy = fault_proxy(http_folder(folder))
        gen = kg.ImageFolderGenerator(proxy.url + "/", **COMMON)
        store = proxy.url
    before = proxy.requests
    proxy.fail_next(10**6, status=502)
    start = time.monotonic()
    with pytest.raises(ConnectionError, match=rf"Cannot read image file {kind}://.*"
                                              rf"{store} failed its last \d+ requests"):
        gen[0]
    took, sent = time.monotonic() - start, proxy.requests - before
    assert took < 12, took  # the deadline, 5 s (it took 113 s on S3)
    # 12 objects in flight fail once each, then one probe at a time (before: 587 on S3)
    assert sent <= 30, sent
    proxy.fail_next(0)


def test_fit_on_a_stopped_store_stops_within_seconds_naming_the_store(
        s3, folder, fault_proxy):
    import keras
    proxy = fault_proxy(s3.server)
    gen = s3_generator(s3, folder, proxy, shuffle=True)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    proxy.stop()  # connections refused: the default options, no time-out set
    start = time.monotonic()
    with pytest.raises(ConnectionError, match=rf"Cannot read image file {s3.url}/images/"
                       ) as caught:
        model.fit(gen, epochs=1, verbose=0)
    assert time.monotonic() - start < 12  # it took 111 s
    message = str(caught.value)
    assert "Could not connect" in message, message
    assert f"{s3.url} at {proxy.endpoint} failed its last" in message, message
    proxy.start()
    gen.on_epoch_end()
    model.fit(gen, epochs=1, verbose=0)  # the store back: the same generator trains


def test_an_outage_shorter_than_the_deadline_is_ridden_out_with_few_requests(
        s3, folder, fault_proxy):
    proxy = fault_proxy(s3.server)
    gen = s3_generator(s3, folder, proxy, batch_size=12)
    expected = batches(kg.ImageFolderGenerator(folder, **dict(COMMON, batch_size=12)))
    before = proxy.requests
    proxy.fail_for(1.0, status=503)  # everything throttled (S3's SlowDown) for 1 s
    assert_same(batches(gen), expected)
    # 12 objects: a failed attempt each, probes 0.5 then 1 s apart, then 12 answered
    assert proxy.requests - before <= 12 + 6 + 12, proxy.seen[before:]


def test_the_clients_own_retries_are_off_and_kerasgens_are_documented():
    store = _remote.Store({"key": "k", "secret": "s"})
    options = store.fs.options("s3")
    assert options["config_kwargs"]["retries"] == {"total_max_attempts": 1,
                                                   "mode": "standard"}
    fs, _ = store.filesystem("s3://bucket/x")
    assert fs.retries == 1  # s3fs's own loop
    mine = _remote.Store({"config_kwargs": {"retries": {"max_attempts": 2}}})
    assert mine.fs.options("s3")["config_kwargs"]["retries"] == {"max_attempts": 2}
    timeout = store.fs.options("https")["client_kwargs"]["timeout"]
    assert (timeout.sock_connect, timeout.sock_read) == (5, 15)  # aiohttp's: 300 s
    retry = store.retry
    assert retry.limit("gs://b/x") == 1 and retry.limit("s3://b/x") == 4  # gcsfs retries
    waits = [_retry.backoff("s3://b/x", n) for n in (1, 2, 3)]
    assert all(base / 2 <= w <= base for w, base in zip(waits, (0.1, 0.2, 0.4))), waits
    spread = {round(_retry.backoff(f"s3://b/{i}", 1), 4) for i in range(20)}
    assert len(spread) > 10  # jitter: objects failing together retry apart


def test_a_held_down_store_lets_one_probe_through_at_a_time(monkeypatch):
    monkeypatch.setattr(_retry, "PROBE_WAITS", (0.05, 0.1, 0.2))
    breaker = _retry.Breaker("s3://b")
    for _ in range(_retry.BREAKER):
        assert breaker.admit(time.monotonic() + 1) is True
        breaker.done(probe=False, failure="503")
    assert breaker.down()
    soon = time.monotonic() + 0.01
    assert breaker.admit(soon) is None  # held down: no request before the probe time
    assert breaker.admit(time.monotonic() + 1) is False  # the probe
    assert breaker.admit(time.monotonic() + 0.02) is None  # one probe at a time
    breaker.done(probe=True, failure=None)  # it got an answer: up again
    assert not breaker.down() and breaker.admit(time.monotonic()) is True
    np.testing.assert_equal(breaker.failures, 0)


def test_a_stream_of_shards_reads_under_the_same_budget(s3, tmp_path, fault_proxy):
    """StreamGenerator reads its shards through the store (ranges, each an object's read
    under the budget and the breaker), not through fsspec's own retrying file: a store
    answering only errors is named within seconds, with few requests."""
    from tests.test_stream import images, write_tar

    for s in range(3):
        s3.put(f"shards/train-{s}.tar",
               open(write_tar(tmp_path / f"t{s}.tar", range(s * 10, s * 10 + 6)), "rb").read())
    proxy = fault_proxy(s3.server)
    shards = [f"{s3.url}/shards/train-{s}.tar" for s in range(3)]
    reference = kg.StreamGenerator(shards, storage_options=s3.storage_options,
                                   **images(batch_size=3))
    gen = kg.StreamGenerator(shards, storage_options=s3.storage_options_via(proxy),
                             **images(batch_size=3))
    np.testing.assert_array_equal(gen[0][0], reference[0][0])  # the same bytes through it
    fresh = kg.StreamGenerator(shards, storage_options=s3.storage_options_via(proxy),
                               **images(batch_size=3))
    before = proxy.requests
    proxy.fail_next(10**6, status=502)
    start = time.monotonic()
    with pytest.raises(ConnectionError, match=r"Cannot read shard s3://.*train-\d\.tar"):
        fresh[0]
    took, sent = time.monotonic() - start, proxy.requests - before
    assert took < 12, took  # the deadline, 5 s; s3fs's own file retried ~25 times a read
    assert sent <= 30, sent
    proxy.fail_next(0)
