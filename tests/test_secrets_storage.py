"""Secrets kept out of what the storage layer stores and logs (kerasgen/storage/remote.py,
_remote_cache.py): a URL's password, a token or a signed URL's signature in its query,
and storage_options' key and secret never appear in any byte of the remote cache's
folder, in any log record of the storage libraries at DEBUG level, in the Store's own
errors (also as stored by a fetch ahead, before any boundary redacts them), nor in the
error of storage_options of a wrong type. A cache entry is keyed by the URL without its
secrets, so a URL signed again (a new token) finds the entries of the old one. The
boundaries (constructors, gen[i], the command line) are tests/test_secrets.py's."""

import logging
import os
import traceback

import pytest

import kerasgen as kg
from kerasgen.storage import remote as _remote
from tests import servers
from tests.conftest import write_image

s3 = servers.s3
http_folder = servers.http_folder
fault_proxy = servers.fault_proxy

PASSWORD = "pw-Zq81kd02xx"
TOKEN = "tok-3f9a0c77e1"
SIGNATURE = "sig-77ab12cd9e"
KEY, SECRET = "AKIAKGSTORAGE01", "kg-Secret-Hq7Lm2Vp9"
SECRETS = (PASSWORD, TOKEN, SIGNATURE, KEY, SECRET)
COMMON = dict(image_size=(8, 8), batch_size=3, shuffle=False, cache=None)


def assert_nowhere(folder, records=(), errors=()):
    """No secret in any byte of any file under `folder`, in any name there, in any log
    record, nor in any error as printed (message, notes, causes, contexts)."""
    for where, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(where, name)
            with open(path, "rb") as f:
                data = f.read()
            for secret in SECRETS:
                assert secret.encode() not in data, (path, secret)
                assert secret not in path
    for record in records:
        text = record.getMessage() + repr(record.args)
        assert not any(s in text for s in SECRETS), text[:2000]
    for error in errors:
        text = "".join(traceback.format_exception(error))
        assert not any(s in text for s in SECRETS), text[:3000]


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    for name in ("cat", "dog"):
        for k in range(3):
            write_image(str(root / name / f"{k}.png"), seed=k)
    return root


def test_a_password_in_the_url_is_in_no_cache_file_and_no_log_record(site, tmp_path,
                                                                      http_folder, caplog):
    server = http_folder(site)  # it ignores the credentials, as a public server
    caplog.set_level(logging.DEBUG)
    cache = tmp_path / "cache"
    url = f"http://kguser:{PASSWORD}@127.0.0.1:{server.port}/"
    gen = kg.ImageFolderGenerator(url, remote_cache=cache, **COMMON)
    assert gen.file_paths[0].startswith(url)  # the user's own paths, as given
    for i in range(len(gen)):
        gen[i]
    gen.on_epoch_end()
    gen[0]
    assert len(kg.RemoteCache(cache).entries()) == 6
    os.remove(site / "dog" / "2.png")
    gen.on_epoch_end()
    with pytest.raises(FileNotFoundError, match=r"http://\*\*\*@127\.0\.0\.1:\d+/dog/2\.png"
                       ) as missing:
        gen[1]
    store = gen.loader.store
    assert caplog.records  # fsspec and aiohttp did log at DEBUG
    assert_nowhere(cache, caplog.records, [missing.value])
    with pytest.raises(FileNotFoundError) as direct:  # the Store's own message
        store.read(url + "dog/2.png")
    assert_nowhere(cache, errors=[direct.value])


def test_a_token_or_a_signature_in_the_query_is_kept_out_and_a_new_one_finds_the_cache(
        site, tmp_path, http_folder, fault_proxy, caplog):
    proxy = fault_proxy(http_folder(site))
    caplog.set_level(logging.DEBUG)
    cache = tmp_path / "cache"

    def table(name, token, signature):
        rows = ["filename,label"] + [
            f"{proxy.url}/{label}/{k}.png?token={token}&X-Amz-Date=20260101T000000Z"
            f"&X-Amz-Signature={signature},{label}" if k % 2 else
            f"{proxy.url}/{label}/{k}.png?X-Amz-Signature={signature},{label}"
            for label in ("cat", "dog") for k in range(3)]
        (tmp_path / name).write_text("\n".join(rows) + "\n")
        return tmp_path / name

    gen = kg.CSVGenerator(table("a.csv", TOKEN, SIGNATURE), remote_cache=cache, **COMMON)
    first = [gen[i] for i in range(len(gen))]
    assert_nowhere(cache, caplog.records)
    signed_again = kg.CSVGenerator(table("b.csv", "tok-new-2027", "sig-new-2027"),
                                   remote_cache=cache, **COMMON)
    before = len(proxy.seen)
    again = [signed_again[i] for i in range(len(signed_again))]
    gets = [line for line in proxy.seen[before:] if line.startswith("GET")]
    assert gets == [], gets  # the same entries, their versions asked (HEAD)
    for one, other in zip(first, again):
        assert (one[0] == other[0]).all()
    assert_nowhere(cache, caplog.records)


def test_s3_credentials_are_in_no_cache_file_log_record_or_error(s3, site, tmp_path,
                                                                  caplog):
    s3.upload_folder(site, "site")
    caplog.set_level(logging.DEBUG)
    options = dict(s3.storage_options, key=KEY, secret=SECRET)  # moto takes any
    cache = tmp_path / "cache"
    gen = kg.ImageFolderGenerator(f"{s3.url}/site", storage_options=options,
                                  remote_cache=cache, **COMMON)
    gen[0]
    s3.server.delete(f"{s3.name}/site/dog/1.png")
    gen.on_epoch_end()
    with pytest.raises(FileNotFoundError, match=r"site/dog/1\.png") as missing:
        gen[1]
    assert any(r.name.startswith(("botocore", "aiobotocore", "s3fs"))
               for r in caplog.records)
    assert_nowhere(cache, caplog.records, [missing.value])


@pytest.mark.parametrize("options, shown", [
    (f"key={KEY}&secret={SECRET}", "a str"),
    ([("key", KEY), ("secret", SECRET)], "a list"),
])
def test_storage_options_of_a_wrong_type_are_named_never_echoed(options, shown):
    with pytest.raises(TypeError, match=rf"`storage_options` must be a dict .*Received: "
                                        rf"{shown}\.$") as caught:
        kg.ImageFolderGenerator("s3://bucket/images", storage_options=options)
    assert_nowhere(os.devnull, errors=[caught.value])
    with pytest.raises(TypeError) as direct:  # the check itself, before any boundary
        _remote.Store(options)
    assert_nowhere(os.devnull, errors=[direct.value])


def test_a_failed_fetch_ahead_holds_no_secret_before_any_boundary(site, http_folder,
                                                                   fault_proxy):
    proxy = fault_proxy(http_folder(site))
    url = f"http://kguser:{PASSWORD}@127.0.0.1:{proxy.port}/cat/0.png?token={TOKEN}"
    store = _remote.Store()
    proxy.fail_next(10**6, status=503)
    store.prefetch([url])
    error = store._pending[url].exception(timeout=30)  # kept until a read takes it
    assert isinstance(error, ConnectionError) and "503" in str(error)
    assert_nowhere(os.devnull, errors=[error])
    proxy.fail_next(0)


def test_the_warning_of_a_store_without_versions_shows_no_password(site, tmp_path,
                                                                    http_folder):
    server = http_folder(site, versions=False)
    url = f"http://kguser:{PASSWORD}@127.0.0.1:{server.port}/"
    gen = kg.ImageFolderGenerator(url, remote_cache=tmp_path / "cache", **COMMON)
    with pytest.warns(UserWarning, match=r"http://127\.0\.0\.1:\d+ gives no version \(ETag.*"
                                         r"\) of http://\*\*\*@127") as caught:
        gen[0]
    assert not any(s in str(w.message) for w in caught for s in SECRETS)
