"""s3:// objects read through obstore (kerasgen/storage/object_get.py) against the
tests' own S3 server behind the fault proxy, which here also notes each forwarded
request's User-Agent (obstore's "object_store/...", botocore's "Botocore/..."): the
bytes are fsspec's, a missing object is FileNotFoundError naming it, a 503 is retried
by kerasgen's budget alone (obstore's retries off: the proxy counts every request), a
refusal is named at once, options obstore cannot express exactly (and
KERASGEN_OBSTORE=0) read through fsspec, worker processes read through obstore too, and
no secret reaches an error."""

import os
import pickle
import traceback

import numpy as np
import pytest

import kerasgen as kg
from kerasgen.storage import object_get as _object_get
from kerasgen.storage import remote as _remote
from tests import servers
from tests.test_remote import assert_same, batches

pytest.importorskip("obstore")

s3 = servers.s3
COMMON = dict(image_size=(8, 8), batch_size=4, seed=3, cache=None, shuffle=False)
KEY, SECRET = "AKIAKGOBSTORE0001", "kg-Obstore-Secret-9Qx"


class AgentProxy(servers.FaultProxy):
    """A FaultProxy noting the User-Agent and target of each request it forwards."""

    def __init__(self, *args):
        super().__init__(*args)
        self.agents = []

    def _forward(self, head, body, head_only):
        with self._lock:
            self.agents.append((head.get("user-agent"), head.start.split(" ")[1]))
        return super()._forward(head, body, head_only)

    def clients(self, part):
        """{"obstore", "botocore"}: which clients asked for a target holding `part`."""
        return {("obstore" if agent.startswith("object_store") else "botocore")
                for agent, target in self.agents if part in target}


@pytest.fixture
def proxy(s3):
    started = AgentProxy(s3.server.host, s3.server.port).start()
    yield started
    started.stop()


@pytest.fixture
def bucket(s3, image_folder):
    """The image folder (without its text file) in `s3` under images/."""
    (image_folder / "cat" / "notes.txt").unlink()
    s3.upload_folder(image_folder, "images")
    return s3


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch):
    monkeypatch.delenv(_object_get.SWITCH, raising=False)


def local_bytes(folder, url):
    return (folder / url.split("/images/", 1)[1]).read_bytes()


def test_s3_objects_come_through_obstore_with_fsspecs_bytes(bucket, image_folder, proxy,
                                                            monkeypatch):
    options = bucket.storage_options_via(proxy)
    gen = kg.ImageFolderGenerator(f"{bucket.url}/images", storage_options=options, **COMMON)
    assert_same(batches(gen), batches(kg.ImageFolderGenerator(image_folder, **COMMON)))
    assert proxy.clients(".png") == proxy.clients(".jpg") == {"obstore"}
    store = _remote.Store(options)
    urls = [url for _, url in store.find(f"{bucket.url}/images")]
    assert len(urls) == 12
    through = [store.read(url).tobytes() for url in urls]
    assert store.gets.used == 12
    monkeypatch.setenv("KERASGEN_OBSTORE", "0")
    plain = _remote.Store(options)
    assert [plain.read(url).tobytes() for url in urls] == through
    assert plain.gets.used == 0
    assert through == [local_bytes(image_folder, url) for url in urls]


def test_keys_obstore_would_write_otherwise_are_read_through_fsspec(s3, proxy):
    names = ["a b&c+d=e.png", "caf\u00e9.png", "p%20q.png", "x{1}.png"]
    for k, name in enumerate(names):
        s3.put(f"odd/{name}", bytes([k]) * (10 + k))
    store = _remote.Store(s3.storage_options_via(proxy))
    urls = dict(store.find(f"{s3.url}/odd"))
    assert sorted(urls) == sorted(names)
    for k, name in enumerate(names):
        assert store.read(urls[name]).tobytes() == bytes([k]) * (10 + k)
    assert store.gets.used == 2  # the first two: their paths are their keys


def test_a_missing_object_is_file_not_found_naming_it(bucket, proxy):
    options = bucket.storage_options_via(proxy)
    gen = kg.ImageFolderGenerator(f"{bucket.url}/images", storage_options=options, **COMMON)
    bucket.server.delete(f"{bucket.name}/images/dog/dog_1.jpg")
    with pytest.raises(FileNotFoundError, match=rf"{bucket.url}/images/dog/dog_1\.jpg"):
        gen[1]
    store = _remote.Store(options)
    with pytest.raises(FileNotFoundError, match=rf"not found: {bucket.url}/images/no\.png"):
        store.read(f"{bucket.url}/images/no.png")
    assert proxy.count("no.png") == 1 and store.gets.used == 1


def test_a_transient_503_or_a_cut_body_is_retried_by_kerasgens_budget(bucket, proxy):
    store = _remote.Store(bucket.storage_options_via(proxy))
    url = f"{bucket.url}/images/dog/dog_1.jpg"
    proxy.fail_next(2, status=503, path="dog_1.jpg")
    first = store.read(url).tobytes()
    assert proxy.count("dog_1.jpg") == 3 and store.gets.used == 3  # obstore's own: none
    again = _remote.Store(bucket.storage_options_via(proxy))
    proxy.truncate_next(1, keep=5, path="dog_1.jpg")
    assert again.read(url).tobytes() == first
    assert proxy.count("dog_1.jpg") == 5 and again.gets.used == 2


def test_a_persistent_failure_is_a_connection_error_naming_object_and_attempts(
        bucket, image_folder, proxy):
    gen = kg.ImageFolderGenerator(f"{bucket.url}/images",
                                  storage_options=bucket.storage_options_via(proxy), **COMMON)
    proxy.fail_next(10**6, status=503, path="dog_1.jpg")
    with pytest.raises(ConnectionError, match=r"dog/dog_1\.jpg: ObjectStoreError: SlowDown: "
                                              r"503 Service Unavailable \(after 4 attempts"):
        gen[1]
    assert proxy.count("dog_1.jpg") == 4
    proxy.fail_next(0)
    assert_same([gen[1]], [batches(kg.ImageFolderGenerator(image_folder, **COMMON))[1]])


def test_a_refusal_is_not_retried_and_names_the_store(bucket, proxy):
    store = _remote.Store(bucket.storage_options_via(proxy))
    proxy.fail_next(10**6, status=403, path="cat_1.jpg")
    with pytest.raises(PermissionError, match=rf"cat_1\.jpg: Forbidden: 403 Forbidden, "
                       rf"from {bucket.url} at {proxy.endpoint}"):
        store.read(f"{bucket.url}/images/cat/cat_1.jpg")
    assert proxy.count("cat_1.jpg") == 1
    proxy.fail_next(0)


@pytest.mark.parametrize("status,code", [(400, "ExpiredToken"),
                                         (403, "SignatureDoesNotMatch")])
def test_a_refusal_in_s3s_words_is_not_retried(bucket, proxy, status, code):
    """An expired token is a 400 with S3's code: a refusal, as s3fs sorts it, not a
    transient error to ask again until the deadline."""
    store = _remote.Store(bucket.storage_options_via(proxy))
    proxy.fail_next(10**6, status=status, path="cat_1.jpg", code=code)
    with pytest.raises(PermissionError, match=rf"cat_1\.jpg: {code}: {status} .*, from "
                                              rf"{bucket.url} at {proxy.endpoint}"):
        store.read(f"{bucket.url}/images/cat/cat_1.jpg")
    assert proxy.count("cat_1.jpg") == 1 and store.gets.used == 1
    proxy.fail_next(0)


def test_a_bucket_in_another_region_is_read_through_fsspec(bucket, image_folder, proxy):
    """S3's answer that the bucket lies in another region: botocore follows it, obstore
    does not, so that read and the bucket's next ones go through fsspec."""
    store = _remote.Store(bucket.storage_options_via(proxy))
    url, other = (f"{bucket.url}/images/cat/cat_1.jpg", f"{bucket.url}/images/dog/dog_1.jpg")
    proxy.fail_next(1, status=301, path="cat_1.jpg", code="PermanentRedirect")
    assert store.read(url).tobytes() == local_bytes(image_folder, url)
    assert proxy.clients("cat_1.jpg") == {"botocore"} and store.gets.used == 1
    assert store.read(other).tobytes() == local_bytes(image_folder, other)
    assert proxy.clients("dog_1.jpg") == {"botocore"} and store.gets.used == 1


def test_a_stopped_store_is_named_in_botocores_words(bucket, proxy):
    store = _remote.Store(bucket.storage_options_via(proxy), deadline=1.0)
    store.find(f"{bucket.url}/images")
    proxy.stop()
    with pytest.raises(ConnectionError, match=r"cat_0\.png: ObjectStoreError: Could not "
                                              r"connect to the endpoint URL"):
        store.read(f"{bucket.url}/images/cat/cat_0.png")


@pytest.mark.parametrize("extra", [{"profile": "other"}, {"requester_pays": True},
                                   {"version_aware": False}, {"use_ssl": False},
                                   {"s3_additional_kwargs": {}}])
def test_options_obstore_cannot_express_read_through_fsspec(bucket, proxy, extra):
    options = {**bucket.storage_options_via(proxy), **extra}
    store = _remote.Store(options)
    assert store.gets.client(f"{bucket.url}/images/cat/cat_0.png") is None
    if "profile" not in extra and "use_ssl" not in extra:  # those botocore cannot use here
        assert store.read(f"{bucket.url}/images/cat/cat_0.png").size > 0
        assert store.gets.used == 0 and proxy.clients("cat_0.png") == {"botocore"}


def test_the_switch_turns_obstore_off(bucket, image_folder, proxy, monkeypatch):
    monkeypatch.setenv("KERASGEN_OBSTORE", "0")
    gen = kg.ImageFolderGenerator(f"{bucket.url}/images",
                                  storage_options=bucket.storage_options_via(proxy), **COMMON)
    assert_same(batches(gen), batches(kg.ImageFolderGenerator(image_folder, **COMMON)))
    assert proxy.clients(".png") == {"botocore"}


ENDPOINT = "http://127.0.0.1:9000"
BASE = {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": ENDPOINT,
                                                      "region_name": "eu-west-1"}}


@pytest.mark.parametrize("options,environ,expected", [
    (BASE, {}, {"access_key_id": "k", "secret_access_key": "s", "region": "eu-west-1",
                "endpoint": ENDPOINT, "virtual_hosted_style_request": False}),
    ({**BASE, "token": "t", "config_kwargs": {"s3": {"addressing_style": "path"},
                                              "max_pool_connections": 32}},
     {"AWS_SESSION_TOKEN": "x"}, {"session_token": "t"}),
    ({"anon": True, "endpoint_url": ENDPOINT, "client_kwargs": {"region_name": "us-east-1"}},
     {"AWS_CA_BUNDLE": "/x"}, {"skip_signature": True, "endpoint": ENDPOINT}),
    ({"client_kwargs": {"endpoint_url": ENDPOINT, "region_name": "us-east-1"}},
     {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}, {"region": "us-east-1"}),
    ({"client_kwargs": {"endpoint_url": ENDPOINT, "region_name": "us-east-1"}}, {}, None),
    ({**BASE, "config_kwargs": {"s3": {"addressing_style": "virtual"}}}, {}, None),
    ({**BASE, "config_kwargs": {"connect_timeout": 1}}, {}, None),
    ({**BASE, "client_kwargs": {"endpoint_url": ENDPOINT}}, {}, None),  # no region
    ({**BASE, "client_kwargs": {"endpoint_url": ENDPOINT + "/base", "region_name": "x"}},
     {}, None),
    ({**BASE, "client_kwargs": {"endpoint_url": "ftp://h", "region_name": "x"}}, {}, None),
    ({**BASE, "client_kwargs": {**BASE["client_kwargs"], "verify": False}}, {}, None),
    ({**BASE, "endpoint_url": "http://elsewhere:1"}, {}, None),
    ({**BASE, "key": None}, {}, None),
    ({**BASE, "anon": True}, {}, None),
    (BASE, {"AWS_SESSION_TOKEN": "x"}, None),  # obstore would send it; botocore not
    (BASE, {"AWS_PROFILE": "p"}, None),
    (BASE, {"AWS_ENDPOINT_URL_S3": "http://other"}, None),
    (BASE, {"HTTPS_PROXY": "http://proxy:3128"}, None),
    ({**BASE, "client_kwargs": {**BASE["client_kwargs"], "endpoint_url": "https://h"}},
     {"AWS_CA_BUNDLE": "/x"}, None),  # botocore's certificates, not obstore's
])
def test_the_mapping_of_s3fs_options_is_exact_or_none(options, environ, expected):
    config = _object_get.s3_config(options, "bucket", environ)
    if expected is None:
        assert config is None
    else:
        assert config is not None and expected.items() <= config.items(), config
        assert config["retry_config"] == {"max_retries": 0}
        client = config["client_options"]
        assert client["connect_timeout"].total_seconds() == 5.0
        assert client["read_timeout"].total_seconds() == 15.0
        assert client.get("allow_http") is True


def test_a_copy_in_another_process_makes_its_own_clients(bucket, proxy, monkeypatch):
    store = _remote.Store(bucket.storage_options_via(proxy))
    url = f"{bucket.url}/images/cat/cat_0.png"
    data = store.read(url).tobytes()
    copy = pickle.loads(pickle.dumps(store))
    assert copy.gets._clients == {} and copy.gets.used == 0
    assert copy.read(url).tobytes() == data and copy.gets.used == 1
    # after a fork (another pid, the same object), the parent's S3Store is not used
    first = store.gets.client(url)
    parent = os.getpid()
    monkeypatch.setattr(_object_get.os, "getpid", lambda: parent + 1)
    assert store.gets.client(url) is not first
    assert store.read(f"{bucket.url}/images/dog/dog_1.jpg").size > 0 and store.gets.used == 2


@pytest.mark.slow
def test_worker_processes_read_through_obstore(bucket, image_folder, proxy):
    gen = kg.ImageFolderGenerator(f"{bucket.url}/images",
                                  storage_options=bucket.storage_options_via(proxy),
                                  workers=2, use_multiprocessing=True, **COMMON)
    local = kg.ImageFolderGenerator(image_folder, **COMMON)
    assert_same(batches(gen), batches(local))
    assert proxy.clients(".png") == proxy.clients(".jpg") == {"obstore"}


def test_no_secret_reaches_an_error(bucket, proxy):
    options = {**bucket.storage_options_via(proxy), "key": KEY, "secret": SECRET}
    errors = []
    # S3's SignatureDoesNotMatch document repeats the access key and the string signed
    echo = (f"SignatureDoesNotMatch</Code><AWSAccessKeyId>{KEY}</AWSAccessKeyId>"
            f"<StringToSign>{SECRET}</StringToSign><Code>SignatureDoesNotMatch")
    for status, code in ((503, None), (403, None), (400, None), (403, echo), (404, None)):
        store = _remote.Store(options, deadline=1.0)
        if status == 404:
            url = f"{bucket.url}/images/dog/none.jpg"
        else:
            url = f"{bucket.url}/images/dog/dog_1.jpg"
            proxy.fail_next(10**6, status=status, path="dog_1.jpg", code=code)
        with pytest.raises(OSError) as caught:  # ConnectionError, PermissionError, ...
            store.read(url)
        errors.append(caught.value)
        assert store.gets.used > 0
    proxy.fail_next(0)
    for error in errors:
        text = "".join(traceback.format_exception(error))
        assert KEY not in text and SECRET not in text, text


def test_fit_on_s3_through_obstore(bucket, proxy):
    import keras
    gen = kg.ImageFolderGenerator(f"{bucket.url}/images",
                                  storage_options=bucket.storage_options_via(proxy),
                                  **dict(COMMON, shuffle=True))
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Flatten(), keras.layers.Dense(3)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(gen, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert proxy.clients(".png") == {"obstore"}
    assert os.environ.get("KERASGEN_OBSTORE") is None
