"""`remote_cache` never serves a changed object in silence (docs/remote.md, "A local
cache of remote objects"): an object overwritten in the store (same name, new content,
same size here: uncompressed BMP files) is read anew from the next epoch of the same
generator, and by the next run, against the S3 server and the HTTP server of
tests/servers.py; a store that gives no version is not cached, with a warning; a shard
replaced in the store is fetched again by the next run, and a generator whose shard
changed under it says so instead of mixing two versions."""

import io
import os
import pickle
import tarfile

import cv2
import numpy as np
import pytest

import kerasgen as kg
from tests import servers

s3 = servers.s3
http_folder = servers.http_folder
fault_proxy = servers.fault_proxy

COMMON = dict(image_size=(6, 6), batch_size=4, shuffle=False, cache=None, label_mode=None)


def bmp(value):
    """An uncompressed 6x6 image of one value: every such file has the same size."""
    return cv2.imencode(".bmp", np.full((6, 6, 3), value, np.uint8))[1].tobytes()


def values(batch):
    """The value of each image of a batch (one value per image)."""
    return [int(image[0, 0, 0]) for image in batch]


@pytest.fixture
def folder(tmp_path):
    """a/0.bmp a/1.bmp b/0.bmp b/1.bmp of values 10, 20, 30, 40."""
    root = tmp_path / "images"
    for k, rel in enumerate(["a/0.bmp", "a/1.bmp", "b/0.bmp", "b/1.bmp"]):
        os.makedirs(root / rel.split("/")[0], exist_ok=True)
        (root / rel).write_bytes(bmp(10 * (k + 1)))
    return root


def serve(kind, folder, s3, http_folder, fault_proxy):
    """(URL of the folder, options, overwrite(rel, value), the proxy counting requests)."""
    if kind == "s3":
        s3.upload_folder(folder, "images")
        proxy = fault_proxy(s3.server)

        def overwrite(rel, value):
            s3.put(f"images/{rel}", bmp(value))
        return f"{s3.url}/images", s3.storage_options_via(proxy), overwrite, proxy
    proxy = fault_proxy(http_folder(folder))

    def overwrite(rel, value):
        (folder / rel).write_bytes(bmp(value))
    return proxy.url + "/", None, overwrite, proxy


@pytest.mark.parametrize("kind", ["s3", "http"])
def test_an_object_overwritten_is_read_anew_from_the_next_epoch_and_the_next_run(
        kind, folder, tmp_path, s3, http_folder, fault_proxy):
    url, options, overwrite, proxy = serve(kind, folder, s3, http_folder, fault_proxy)
    cache = tmp_path / "cache"
    gen = kg.ImageFolderGenerator(url, storage_options=options, remote_cache=cache, **COMMON)
    assert values(gen[0]) == [10, 20, 30, 40]
    size = len(bmp(10))
    overwrite("a/1.bmp", 99)
    assert len(bmp(99)) == size  # same name, same size, new content
    gen.on_epoch_end()
    assert values(gen[0]) == [10, 99, 30, 40]  # the same generator, its next epoch
    fresh = kg.ImageFolderGenerator(url, storage_options=options, **COMMON)
    assert values(fresh[0]) == [10, 99, 30, 40]  # as read without the cache
    overwrite("b/0.bmp", 77)
    again = kg.ImageFolderGenerator(url, storage_options=options, remote_cache=cache,
                                    **COMMON)  # the next run, the same cache folder
    before = len(proxy.seen)
    assert values(again[0]) == [10, 99, 77, 40]
    gets = [line for line in proxy.seen[before:] if line.startswith("GET /")
            and ".bmp" in line]
    assert len(gets) == 1 and "b/0.bmp" in gets[0], gets  # the others from the cache


def test_a_warm_epoch_asks_versions_cheaply_one_listing_per_folder_or_a_head_per_object(
        folder, tmp_path, s3, http_folder, fault_proxy):
    for kind, each in (("s3", "GET /kg-"), ("http", "HEAD /")):
        url, options, _, proxy = serve(kind, folder, s3, http_folder, fault_proxy)
        gen = kg.ImageFolderGenerator(url, storage_options=options,
                                      remote_cache=tmp_path / kind, **COMMON)
        gen[0]
        before = len(proxy.seen)
        gen.on_epoch_end()  # S3: the listings start here, in the background
        gen[0]
        asked = proxy.seen[before:]
        if kind == "s3":  # one listing of each of the 2 folders, no object
            assert len(asked) == 2 and all("list-type=2" in a for a in asked), asked
        else:  # no listing gives a version: one HEAD per object, no GET
            assert sorted(asked) == sorted(f"HEAD /{r}" for r in
                                           ["a/0.bmp", "a/1.bmp", "b/0.bmp", "b/1.bmp"])
            assert all(a.startswith(each) for a in asked)


def test_a_server_without_versions_is_never_cached_and_says_so(folder, tmp_path,
                                                                http_folder):
    server = http_folder(folder, versions=False)
    cache = kg.RemoteCache(tmp_path / "cache")
    gen = kg.ImageFolderGenerator(server.url + "/", remote_cache=cache, **COMMON)
    with pytest.warns(UserWarning, match=r"http://127\.0\.0\.1:\d+ gives no version "
                                         r"\(ETag.*not kept in it but read anew"):
        assert values(gen[0]) == [10, 20, 30, 40]
    assert cache.entries() == []
    (folder / "a" / "0.bmp").write_bytes(bmp(55))
    assert values(gen[0]) == [55, 20, 30, 40]  # even within the epoch: read anew


def test_a_copy_in_a_worker_process_hears_of_the_next_epoch(folder, tmp_path, s3):
    s3.upload_folder(folder, "images")
    gen = kg.ImageFolderGenerator(f"{s3.url}/images", storage_options=s3.storage_options,
                                  remote_cache=tmp_path / "cache", **COMMON)
    worker = pickle.loads(pickle.dumps(gen))  # what a worker process gets
    assert values(worker[0]) == [10, 20, 30, 40]
    s3.put("images/a/0.bmp", bmp(66))
    gen.on_epoch_end()  # in the training process only
    assert values(worker[0]) == [66, 20, 30, 40]


def tar_shard(members):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def shard(first):
    return tar_shard([(f"{k:03d}.bmp", bmp(first + k)) for k in range(4)])


def test_a_shard_replaced_in_the_store_is_fetched_again_by_the_next_run(s3, tmp_path):
    s3.put("shards/part-000.tar", shard(10))
    cache = kg.RemoteCache(tmp_path / "cache")
    common = dict(storage_options=s3.storage_options, remote_cache=cache, image_key="bmp",
                  verbose=0, **COMMON)
    url = f"{s3.url}/shards/part-000.tar"
    gen = kg.WebDatasetGenerator(url, **common)
    assert values(gen[0]) == [10, 11, 12, 13]
    s3.put("shards/part-000.tar", shard(50))
    assert values(kg.WebDatasetGenerator(url, **common)[0]) == [50, 51, 52, 53]
    assert values(gen[0]) == [10, 11, 12, 13]  # its copy, whose index it holds
    cache.clear()  # removed by another process's bound: the copy must be made again
    with pytest.raises(ValueError, match=r"part-000\.tar changed since this generator "
                                         r"read it .*Build the generator again"):
        pickle.loads(pickle.dumps(gen))[0]  # a worker process: never a mix of two


def test_a_tfrecord_shard_on_a_server_without_versions_is_never_trusted_across_runs(
        tmp_path, http_folder):
    tf = pytest.importorskip("tensorflow")
    root = tmp_path / "served"
    root.mkdir()

    def write(first):  # 3 records of one int64 each: the same size whatever `first`
        with tf.io.TFRecordWriter(str(root / "part-0.tfrecord")) as writer:
            for k in range(3):
                feature = {"x": tf.train.Feature(int64_list=tf.train.Int64List(
                    value=[first + k]))}
                writer.write(tf.train.Example(features=tf.train.Features(
                    feature=feature)).SerializeToString())
    write(0)
    size = os.path.getsize(root / "part-0.tfrecord")
    server = http_folder(root, versions=False)
    cache = kg.RemoteCache(tmp_path / "cache")
    common = dict(feature_spec={"x": "int"}, remote_cache=cache, batch_size=3,
                  shuffle=False, verbose=0)
    url = server.url + "/part-0.tfrecord"
    with pytest.warns(UserWarning, match="gives no version"):
        assert kg.TFRecordGenerator(url, **common)[0].ravel().tolist() == [0, 1, 2]
    assert cache.entries() == []  # copied for this process only
    write(7)
    assert os.path.getsize(root / "part-0.tfrecord") == size
    with pytest.warns(UserWarning, match="gives no version"):
        assert kg.TFRecordGenerator(url, **common)[0].ravel().tolist() == [7, 8, 9]


def test_a_decoded_image_file_cache_of_an_http_folder_follows_a_changed_object(
        folder, tmp_path, http_folder):
    server = http_folder(folder)  # its folder pages give no version: each object is asked
    common = dict(COMMON, cache=str(tmp_path / "decoded.kgc"))
    assert values(kg.ImageFolderGenerator(server.url + "/", **common)[0]) == [10, 20, 30, 40]
    (folder / "a" / "1.bmp").write_bytes(bmp(88))  # same size
    with pytest.warns(UserWarning, match="was made for other files or settings; rebuilding"):
        gen = kg.ImageFolderGenerator(server.url + "/", **common)
    assert values(gen[0]) == [10, 88, 30, 40]
