"""Remote paths through fsspec, in process (memory://): listing order, CSV files and
their rows as URLs, masks, errors naming the object, the image cache's key, and the
local copies' cache (RemoteCache). The same against real servers (S3, HTTP, faults):
tests/test_remote_servers.py."""

import multiprocessing
import os
import uuid

import cv2
import fsspec
import numpy as np
import pytest

import kerasgen as kg
from kerasgen.storage import remote as _remote
from kerasgen.storage.remote_cache import RemoteCache

from tests.conftest import CLASSES, write_image


def upload(local_root, url_root):
    """Copies the folder `local_root` to the memory filesystem under `url_root`."""
    fs = fsspec.filesystem("memory")
    base = url_root.split("://", 1)[1]
    for folder, _, names in os.walk(local_root):
        for name in names:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, local_root).replace(os.sep, "/")
            with open(path, "rb") as f:
                fs.pipe(f"/{base}/{rel}", f.read())
    return url_root


@pytest.fixture
def memory_root():
    root = f"memory://kg-{uuid.uuid4().hex[:8]}"
    yield root
    fs = fsspec.filesystem("memory")
    base = "/" + root.split("://", 1)[1]
    if fs.exists(base):
        fs.rm(base, recursive=True)


def batches(gen):
    return [gen[i] for i in range(len(gen))]


def assert_same(a, b):
    assert len(a) == len(b)
    for one, other in zip(a, b):
        for x, y in zip(one, other):
            np.testing.assert_array_equal(x, y)


def test_a_remote_folder_is_listed_as_the_local_walk_and_gives_the_same_batches(
        image_folder, memory_root):
    (image_folder / "cat" / ".hidden.png").write_bytes(b"x")  # left out, as locally
    url = upload(image_folder, memory_root + "/images")
    common = dict(image_size=(8, 8), batch_size=4, seed=3, cache=None)
    local, remote = (kg.ImageFolderGenerator(d, **common) for d in (image_folder, url))
    assert remote.class_names == local.class_names == list(CLASSES)
    rel = [os.path.relpath(p, image_folder).replace(os.sep, "/") for p in local.file_paths]
    assert [p.split("/images/", 1)[1] for p in remote.file_paths] == rel
    np.testing.assert_array_equal(remote.labels, local.labels)
    for epoch in range(2):
        assert_same(batches(remote), batches(local))
        remote.on_epoch_end()
        local.on_epoch_end()


@pytest.mark.parametrize("kwargs", [dict(labels=None), dict(class_names=["fox", "cat"]),
                                    dict(validation_split=0.4, subset="validation")])
def test_remote_folder_options_match_the_local_folder(image_folder, memory_root, kwargs):
    url = upload(image_folder, memory_root + "/images")
    common = dict(image_size=(8, 8), batch_size=3, seed=5, **kwargs)
    local, remote = (kg.ImageFolderGenerator(d, **common) for d in (image_folder, url))
    assert [p.split("/images/", 1)[1] for p in remote.file_paths] == [
        os.path.relpath(p, image_folder).replace(os.sep, "/") for p in local.file_paths]
    assert_same(batches(remote), batches(local))


def test_image_dataset_from_directory_reads_a_url_and_trains(image_folder, memory_root):
    keras = pytest.importorskip("keras")
    url = upload(image_folder, memory_root + "/images")
    train, val = kg.image_dataset_from_directory(
        url, validation_split=0.25, subset="both", seed=1, image_size=(8, 8), batch_size=4)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Flatten(), keras.layers.Dense(3)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(train, validation_data=val, epochs=2, verbose=0,
                        shuffle=False)  # the dataset shuffles itself (Keras warns)
    assert np.isfinite(history.history["loss"]).all()
    assert len(history.history["val_loss"]) == 2


def test_a_remote_folder_that_is_missing_or_holds_no_class_is_named(memory_root):
    with pytest.raises(FileNotFoundError, match=r"directory='memory://.*nothing found"):
        kg.ImageFolderGenerator(memory_root + "/nowhere")
    fsspec.filesystem("memory").pipe(f"/{memory_root[9:]}/flat/a.png", b"x")
    with pytest.raises(ValueError, match="No class subfolders"):
        kg.ImageFolderGenerator(memory_root + "/flat")
    with pytest.raises(ValueError, match=r"not found: \['dog'\]"):
        kg.ImageFolderGenerator(memory_root, class_names=["dog"])


def test_a_remote_csv_whose_rows_name_remote_images(image_folder, csv_file, memory_root):
    url = upload(image_folder, memory_root + "/images")
    common = dict(image_size=(8, 8), batch_size=4, seed=2)
    local = kg.CSVGenerator(csv_file, **common)
    remote = kg.CSVGenerator(url + "/train.csv", **common)
    assert remote.file_paths[0].startswith("memory:///" + url[9:] + "/")
    assert_same(batches(remote), batches(local))


def test_a_local_csv_may_name_urls_and_a_url_directory(image_folder, csv_file, tmp_path,
                                                       memory_root):
    url = upload(image_folder, memory_root + "/images")
    lines = csv_file.read_text().splitlines()
    absolute = tmp_path / "absolute.csv"
    absolute.write_text("\n".join([lines[0]] + [f"{url}/{row}" for row in lines[1:]]) + "\n")
    common = dict(image_size=(8, 8), batch_size=4, seed=2)
    local = kg.CSVGenerator(csv_file, **common)
    assert_same(batches(kg.CSVGenerator(absolute, **common)), batches(local))
    assert_same(batches(kg.CSVGenerator(csv_file, directory=url, **common)), batches(local))


def test_a_missing_remote_file_is_named_or_its_row_skipped(image_folder, csv_file,
                                                          memory_root):
    url = upload(image_folder, memory_root + "/images")
    fsspec.filesystem("memory").rm(f"/{url[9:]}/dog/dog_1.jpg")
    with pytest.raises(FileNotFoundError, match=r"dog/dog_1\.jpg \(line \d+ of memory://"):
        kg.CSVGenerator(url + "/train.csv", image_size=(8, 8))
    with pytest.warns(UserWarning, match="Skipping 1 row"):
        gen = kg.CSVGenerator(url + "/train.csv", image_size=(8, 8), on_missing="skip")
    assert gen.skipped == ["memory:///" + url[9:] + "/dog/dog_1.jpg"]
    assert len(gen.file_paths) == 11


def test_an_object_gone_after_listing_is_a_bad_file_named_or_skipped(image_folder,
                                                                     memory_root):
    url = upload(image_folder, memory_root + "/images")
    gen = kg.ImageFolderGenerator(url, image_size=(8, 8), batch_size=12, shuffle=False,
                                  cache=None)
    gone = gen.file_paths[1]
    fsspec.filesystem("memory").rm(gone.split("://", 1)[1])
    with pytest.raises(FileNotFoundError, match=gone.replace(".", r"\.")):
        gen[0]
    fsspec.filesystem("memory").pipe(gone.split("://", 1)[1], b"\xff\xd8 truncated")
    gen = kg.ImageFolderGenerator(url, image_size=(8, 8), batch_size=12, shuffle=False,
                                  cache=None, on_error="skip")
    fsspec.filesystem("memory").pipe(gone.split("://", 1)[1], b"")  # replaced: shorter
    with pytest.warns(UserWarning, match="Skipping an undecodable image"):
        gen[0]
    assert gen.skipped == [gone]


def test_remote_masks_pair_with_remote_images(tmp_path, memory_root):
    rng = np.random.default_rng(0)
    os.makedirs(tmp_path / "mask")
    for i in range(4):
        write_image(str(tmp_path / "img" / f"{i}.png"), 10, 10, seed=i)
        cv2.imwrite(str(tmp_path / "mask" / f"{i}.png"),
                    rng.integers(0, 3, (10, 10), dtype=np.uint8))
    url = upload(tmp_path, memory_root + "/seg")
    common = dict(image_size=(8, 8), batch_size=2, seed=0, label_mode="mask", num_classes=3)
    local = kg.ImageFolderGenerator(tmp_path / "img", mask_dir=tmp_path / "mask", **common)
    remote = kg.ImageFolderGenerator(url + "/img", mask_dir=url + "/mask", **common)
    assert remote.mask_paths[0].endswith(url[9:] + "/mask/0.png")
    assert_same(batches(remote), batches(local))


def test_a_file_cache_of_remote_images_is_keyed_by_their_versions(image_folder,
                                                                  memory_root, tmp_path):
    url = upload(image_folder, memory_root + "/images")
    common = dict(image_size=(8, 8), batch_size=4, seed=2, cache=str(tmp_path / "c.kgc"))
    first = kg.ImageFolderGenerator(url, **common)
    expected = batches(first)
    assert_same(batches(kg.ImageFolderGenerator(url, **common)), expected)
    key = first.loader.cache.key
    fsspec.filesystem("memory").pipe(first.file_paths[0].split("://", 1)[1],
                                     (image_folder / "dog" / "dog_0.png").read_bytes())
    with pytest.warns(UserWarning, match="was made for other files or settings; rebuilding"):
        assert kg.ImageFolderGenerator(url, **common).loader.cache.key != key


def test_a_protocol_without_its_package_or_unknown_is_named():
    with pytest.raises(ImportError, match=r"abfs.*kerasgen3\[remote\]"):
        kg.ImageFolderGenerator("abfs://container/images")
    with pytest.raises(ValueError, match="Cannot open nosuchproto://x"):
        kg.ImageFolderGenerator("nosuchproto://x")
    with pytest.raises(TypeError, match="storage_options"):
        kg.ImageFolderGenerator("memory://x", storage_options="key=1")
    with pytest.raises(TypeError, match="remote_cache"):
        kg.ImageFolderGenerator("memory://x", remote_cache=3)


def test_the_remote_cache_keeps_checked_copies_within_its_bound(tmp_path, image_folder,
                                                                memory_root):
    url = upload(image_folder, memory_root + "/images")
    cache = RemoteCache(tmp_path / "objects", max_bytes=4000)
    gen = kg.ImageFolderGenerator(url, image_size=(8, 8), batch_size=12, cache=None,
                                  remote_cache=cache, shuffle=False)
    first = gen[0]
    assert 0 < cache.size() <= 4000
    fs = fsspec.filesystem("memory")
    held = [key for _, _, key in cache.entries()]
    for path in gen.file_paths:  # the cache answers: the objects are not read again
        fs.pipe(path.split("://", 1)[1], b"changed")
    kept = [i for i, p in enumerate(gen.file_paths)
            if RemoteCache.key(p, gen.loader.store.versions[p]) in held]
    assert kept
    data = gen.loader.store.read(gen.file_paths[kept[0]])
    assert data.tobytes() != b"changed"
    np.testing.assert_array_equal(first[0].shape, (12, 8, 8, 3))


def test_a_damaged_cache_entry_is_fetched_again(tmp_path):
    cache = RemoteCache(tmp_path / "c")
    key = RemoteCache.key("memory://x", "1")
    cache.put_bytes(key, b"0123456789", "memory://x")
    assert cache.get_bytes(key) == b"0123456789"
    data = os.path.join(cache.folder, key[:2], key)
    with open(data, "r+b") as f:
        f.write(b"X")  # same size, other bytes
    assert cache.get_bytes(key) is None
    assert not os.path.exists(data)  # removed, fetched again next time
    path = cache.path(key, lambda f: f.write(b"abc"), "memory://x")
    with open(path, "rb") as f:
        assert f.read() == b"abc"
    with open(path, "wb") as f:
        f.write(b"xyz")  # a damaged shard: checked once per process, then trusted
    fresh = RemoteCache(tmp_path / "c")
    assert open(fresh.path(key, lambda f: f.write(b"abc"), "memory://x"), "rb").read() == b"abc"


def test_an_entry_read_before_is_still_checked_and_refetched_when_removed(tmp_path):
    cache = RemoteCache(tmp_path / "c")
    key = RemoteCache.key("memory://x", "1")
    cache.put_bytes(key, b"0123456789", "memory://x")
    assert cache.known(key) and cache.get_bytes(key) == b"0123456789"
    data = os.path.join(cache.folder, key[:2], key)
    RemoteCache(tmp_path / "c").clear()  # another process removes it (evicting, say)
    assert cache.get_bytes(key) is None and not cache.known(key)
    cache.put_bytes(key, b"0123456789", "memory://x")
    with open(data, "wb") as f:
        f.write(b"0123")  # cut short by hand, after this process read it
    assert cache.get_bytes(key) is None
    assert not os.path.exists(data) and not cache.known(key)


def test_entries_read_again_are_marked_used_for_the_least_recently_used_order(
        tmp_path, monkeypatch):
    from kerasgen.storage import remote_cache as _remote_cache
    cache = RemoteCache(tmp_path / "c")
    keys = [RemoteCache.key(f"memory://o{i}") for i in range(2)]
    for i, key in enumerate(keys):
        cache.put_bytes(key, bytes([i]) * 100, f"memory://o{i}")
    for key in keys:  # both used long ago, the first one earlier
        meta = os.path.join(cache.folder, key[:2], key + ".json")
        old = 1000 if key == keys[0] else 2000
        os.utime(meta, (old, old))
    monkeypatch.setattr(_remote_cache, "_TOUCH_EVERY", 0.0)
    assert cache.get_bytes(keys[0]) == bytes([0]) * 100  # known: read, and marked now
    cache.max_bytes = 150
    cache.evict()
    assert cache.get_bytes(keys[0]) is not None and cache.get_bytes(keys[1]) is None


def _fill(args):
    folder, n = args
    cache = RemoteCache(folder, max_bytes=None)
    for i in range(n):
        key = RemoteCache.key(f"memory://obj{i % 5}")
        cache.put_bytes(key, bytes([i % 5]) * 10000, f"memory://obj{i % 5}")
        got = cache.get_bytes(key)
        assert got is None or len(got) == 10000
    return True


def test_processes_filling_one_cache_leave_complete_entries(tmp_path):
    folder = str(tmp_path / "shared")
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        assert all(pool.map(_fill, [(folder, 40)] * 3))
    cache = RemoteCache(folder)
    assert len(cache.entries()) == 5
    for i in range(5):
        assert cache.get_bytes(RemoteCache.key(f"memory://obj{i}")) == bytes([i]) * 10000
    leftovers = [n for sub in os.listdir(folder) for n in os.listdir(os.path.join(folder, sub))
                 if n.endswith(".tmp")]
    assert leftovers == []


def test_join_url_and_walk_order():
    from kerasgen.storage.paths import join_url
    assert join_url("s3://b/dir", "img/a.jpg") == "s3://b/dir/img/a.jpg"
    assert join_url("s3://b/dir/", "../x.jpg") == "s3://b/x.jpg"
    assert join_url("s3://b/dir", "/top.jpg") == "s3://b/top.jpg"
    assert join_url("memory:///d", "a/b.png") == "memory:///d/a/b.png"
    assert join_url("http://h:8/a/b", "/c.png") == "http://h:8/c.png"
    assert join_url("http://h:8/a", "c d%.png") == "http://h:8/a/c%20d%25.png"
    assert join_url("s3://b/k", "x//y.png") == "s3://b/k/x//y.png"  # a key may hold //
    assert join_url("memory://top", "/x.png") == "memory:///x.png"
    with pytest.raises(ValueError, match=r"'\.\./\.\./o\.png' leaves s3://b"):
        join_url("s3://b/k", "../../o.png")
    rels = ["b/z.png", "a.png", "b/a/x.png", "b/c.png", "c.png"]
    assert sorted(rels, key=_remote.walk_key) == ["a.png", "c.png", "b/c.png", "b/z.png",
                                                  "b/a/x.png"]


def test_a_remote_sqlite_database_and_its_images(image_folder, memory_root, tmp_path):
    import sqlite3
    db = tmp_path / "pets.db"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE pets (filename TEXT, label TEXT)")
        connection.executemany("INSERT INTO pets VALUES (?, ?)", [
            (f"images/{name}/{name}_0.png", name) for name in CLASSES])
    connection.close()
    url = upload(image_folder, memory_root + "/images")
    fsspec.filesystem("memory").pipe(f"/{memory_root[9:]}/pets.db", db.read_bytes())
    gen = kg.SQLGenerator(memory_root + "/pets.db", "SELECT * FROM pets", image_size=(8, 8),
                          shuffle=False)
    assert gen.class_names == list(CLASSES)
    assert gen.file_paths[0] == f"memory:///{url[9:]}/cat/cat_0.png"
    local = kg.SQLGenerator(db, "SELECT * FROM pets", image_size=(8, 8), shuffle=False,
                            directory=image_folder.parent)
    assert_same(batches(gen), batches(local))
    with pytest.raises(ValueError, match=rf"{memory_root}/pets\.db"):
        kg.SQLGenerator(memory_root + "/pets.db", "SELECT nope FROM pets")


def test_objects_fetched_ahead_are_bounded_and_forgotten(monkeypatch, memory_root):
    fs = fsspec.filesystem("memory")
    urls = [f"{memory_root}/o{i}" for i in range(5)]
    for i, url in enumerate(urls):
        fs.pipe(url[9:], bytes([i]))
    monkeypatch.setattr(_remote, "_PENDING_MAX", 2)
    store = _remote.Store()
    store.prefetch(urls)
    assert list(store._pending) == urls[3:]  # the oldest went first
    store.forget()
    assert store._pending == {}
    fs.pipe(urls[0][9:], b"new")
    store.prefetch(urls[:1])
    assert store.read(urls[0]).tobytes() == b"new"
