"""Remote data against real servers the tests start (tests/servers.py): an S3 endpoint
(moto's server mode) read through s3fs, a plain HTTP folder server read through
fsspec's HTTP filesystem, and a proxy in front of either that adds latency, 5xx bursts,
truncated bodies and a server that dies. Every fault ends in the right batch (a retry)
or in an error naming the object; never in a batch silently missing a sample."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import kerasgen as kg
from tests import servers
from tests.conftest import CLASSES
from tests.test_remote import assert_same, batches

s3 = servers.s3
http_folder = servers.http_folder
fault_proxy = servers.fault_proxy


def tiny_model(classes=3, size=8):
    import keras
    model = keras.Sequential([keras.Input((size, size, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Flatten(), keras.layers.Dense(classes)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


COMMON = dict(image_size=(8, 8), batch_size=4, seed=3, cache=None)


def test_an_s3_folder_gives_the_local_folders_batches_and_trains(s3, image_folder):
    s3.upload_folder(image_folder, "images")
    local = kg.ImageFolderGenerator(image_folder, **COMMON)
    remote = kg.ImageFolderGenerator(f"{s3.url}/images", storage_options=s3.storage_options,
                                     **COMMON)
    assert remote.class_names == list(CLASSES)
    assert remote.file_paths[0] == f"{s3.url}/images/cat/cat_0.png"
    assert_same(batches(remote), batches(local))
    history = tiny_model().fit(remote, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


@pytest.mark.slow
def test_s3_batches_are_identical_in_worker_processes(s3, image_folder):
    s3.upload_folder(image_folder, "images")
    local = kg.ImageFolderGenerator(image_folder, **COMMON)
    remote = kg.ImageFolderGenerator(f"{s3.url}/images", storage_options=s3.storage_options,
                                     workers=2, use_multiprocessing=True, **COMMON)
    assert_same(batches(remote), batches(local))


def test_an_s3_csv_whose_rows_name_s3_images_trains(s3, image_folder, tmp_path):
    s3.upload_folder(image_folder, "images")
    rows = ["filename,label"] + [
        f"{s3.url}/images/{name}/{name}_{i}.{'png' if i % 2 == 0 else 'jpg'},{name}"
        for name, n in (("cat", 4), ("dog", 3)) for i in range(n)]
    s3.put("lists/train.csv", ("\n".join(rows) + "\n").encode())
    gen = kg.CSVGenerator(f"{s3.url}/lists/train.csv", storage_options=s3.storage_options,
                          **COMMON)
    assert gen.class_names == ["cat", "dog"]
    assert len(gen.file_paths) == 7 and gen.file_paths[0].startswith(s3.url + "/images/")
    history = tiny_model(2).fit(gen, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_an_http_folder_is_listed_from_its_pages_and_gives_the_local_batches(
        http_folder, image_folder):
    server = http_folder(image_folder)
    local = kg.ImageFolderGenerator(image_folder, **COMMON)
    remote = kg.ImageFolderGenerator(f"{server.url}/", **COMMON)
    assert remote.class_names == list(CLASSES)
    assert_same(batches(remote), batches(local))


def test_a_5xx_burst_is_retried_and_the_batches_stay_exact(s3, image_folder, fault_proxy,
                                                          http_folder):
    s3.upload_folder(image_folder, "images")
    expected = batches(kg.ImageFolderGenerator(image_folder, **COMMON))
    proxy = fault_proxy(s3.server)
    gen = kg.ImageFolderGenerator(f"{s3.url}/images",
                                  storage_options=s3.storage_options_via(proxy), **COMMON)
    proxy.fail_next(6, status=503)  # s3fs's own retries and ours ride it out
    assert_same(batches(gen), expected)
    web = fault_proxy(http_folder(image_folder))  # fsspec's HTTP raises at once: ours retry
    gen = kg.ImageFolderGenerator(web.url + "/", **COMMON)
    web.fail_next(2, status=502)
    assert_same(batches(gen), expected)


def test_a_truncated_body_is_fetched_again_or_named(http_folder, image_folder, fault_proxy):
    expected = batches(kg.ImageFolderGenerator(image_folder, **COMMON))
    proxy = fault_proxy(http_folder(image_folder))
    gen = kg.ImageFolderGenerator(proxy.url + "/", **COMMON)
    proxy.truncate_next(1, keep=10, path=".png")
    assert_same(batches(gen), expected)
    proxy.truncate_next(1000, keep=10, path="fox_2.png")
    with pytest.raises(ConnectionError, match=r"fox/fox_2\.png.*after 4 attempts"):
        batches(gen)


def test_a_missing_key_is_named_or_skipped_never_dropped(s3, image_folder):
    s3.upload_folder(image_folder, "images")
    options = s3.storage_options
    gen = kg.ImageFolderGenerator(f"{s3.url}/images", storage_options=options,
                                  **dict(COMMON, batch_size=12))
    s3.server.delete(f"{s3.name}/images/dog/dog_1.jpg")
    with pytest.raises(FileNotFoundError, match=r"dog/dog_1\.jpg"):
        gen[0]
    gen = kg.ImageFolderGenerator(f"{s3.url}/images", storage_options=options,
                                  on_error="skip", **dict(COMMON, batch_size=11))
    assert len(gen.file_paths) == 11  # listed after the delete: not there, not missing
    rows = "filename,label\n" + f"{s3.url}/images/dog/dog_1.jpg,dog\n"
    s3.put("one.csv", rows.encode())
    with pytest.raises(FileNotFoundError, match=r"dog_1\.jpg \(line 2 of s3://"):
        kg.CSVGenerator(f"{s3.url}/one.csv", storage_options=options)


def test_a_server_that_dies_mid_epoch_stops_fit_naming_the_object_then_comes_back(
        s3, image_folder, fault_proxy):
    s3.upload_folder(image_folder, "images")
    proxy = fault_proxy(s3.server)
    options = s3.storage_options_via(proxy)
    options["config_kwargs"] = dict(options["config_kwargs"], connect_timeout=1,
                                    retries={"max_attempts": 1})
    gen = kg.ImageFolderGenerator(f"{s3.url}/images", storage_options=options,
                                  **dict(COMMON, shuffle=False))
    gen[0]
    proxy.stop()
    with pytest.raises(ConnectionError, match=rf"{s3.url}/images/\w+/\w+\.(png|jpg).*"
                                              "attempts"):
        tiny_model().fit(gen, epochs=1, verbose=0)
    proxy.start()
    assert_same(batches(gen), batches(kg.ImageFolderGenerator(image_folder,
                                                              **dict(COMMON, shuffle=False))))


def test_a_warm_remote_cache_reads_no_object_from_the_server(s3, image_folder, fault_proxy,
                                                            tmp_path):
    s3.upload_folder(image_folder, "images")
    proxy = fault_proxy(s3.server)
    common = dict(COMMON, storage_options=s3.storage_options_via(proxy),
                  remote_cache=kg.RemoteCache(tmp_path / "objects"))
    first = batches(kg.ImageFolderGenerator(f"{s3.url}/images", **common))
    before = proxy.requests
    again = kg.ImageFolderGenerator(f"{s3.url}/images", **common)
    assert_same(batches(again), first)
    assert proxy.requests - before <= 2  # the listing only (a page, maybe a retry)


def test_each_s3_object_is_one_request_and_a_warm_cache_none(s3, image_folder,
                                                              fault_proxy, tmp_path):
    s3.upload_folder(image_folder, "images")
    proxy = fault_proxy(s3.server)
    common = dict(COMMON, storage_options=s3.storage_options_via(proxy))
    gen = kg.ImageFolderGenerator(f"{s3.url}/images", **common)
    count = len(gen.file_paths)
    before = proxy.requests
    expected = batches(gen)
    assert proxy.requests - before == count, "\n".join(proxy.seen[before:])  # GETs, no HEAD
    cached = kg.ImageFolderGenerator(f"{s3.url}/images", **common,
                                     remote_cache=kg.RemoteCache(tmp_path / "objects"))
    assert_same(batches(cached), expected)
    before = proxy.requests
    cached.on_epoch_end()
    again = batches(cached)  # a second epoch, in another order: no object read
    asked = proxy.seen[before:]  # the versions asked again: one listing per folder
    assert len(asked) == 4 and all("list-type=2" in line for line in asked), asked
    gen.on_epoch_end()
    assert_same(again, batches(gen))


def test_an_s3_folders_filenames_are_relative_as_the_local_folders(s3, image_folder):
    s3.upload_folder(image_folder, "images")
    local = kg.ImageFolderGenerator(image_folder, **COMMON)
    remote = kg.ImageFolderGenerator(f"{s3.url}/images", storage_options=s3.storage_options,
                                     **COMMON)
    assert remote.filenames == local.filenames
    assert "fox/nested/fox_4.png" in remote.filenames


def _write_tfrecords(folder, image_folder, compression):
    options = tf.io.TFRecordOptions(compression_type=compression)
    files = sorted(p for p in pathlib.Path(image_folder).rglob("*") if p.suffix in (".png", ".jpg"))
    for shard in range(2):
        with tf.io.TFRecordWriter(str(folder / f"part-{shard}.tfrecord.gz"), options) as w:
            for path in files[shard::2]:
                feature = {
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[path.read_bytes()])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[CLASSES.index(path.parent.name if path.parent.name in CLASSES
                                             else path.parent.parent.name)]))}
                w.write(tf.train.Example(features=tf.train.Features(
                    feature=feature)).SerializeToString())


def test_gzip_tfrecord_and_webdataset_shards_on_s3_train(s3, image_folder, tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    _write_tfrecords(shards, image_folder, "GZIP")
    wds = pytest.importorskip("webdataset")
    files = sorted(p for p in pathlib.Path(image_folder).glob("*/*") if p.suffix == ".png")
    with wds.TarWriter(str(shards / "pets-000000.tar")) as sink:
        for k, path in enumerate(files):
            sink.write({"__key__": f"{k:04d}", "png": path.read_bytes(),
                        "cls": CLASSES.index(path.parent.name)})
    s3.upload_folder(shards, "shards")
    options = s3.storage_options
    records = kg.TFRecordGenerator(f"{s3.url}/shards/part-*.tfrecord.gz",
                                   feature_spec={"image": "image", "label": "label"},
                                   compression_type="GZIP", storage_options=options,
                                   image_size=(8, 8), batch_size=4, seed=0, num_classes=3)
    assert records.paths == [f"{s3.url}/shards/part-0.tfrecord.gz",
                             f"{s3.url}/shards/part-1.tfrecord.gz"]
    tars = kg.WebDatasetGenerator(f"{s3.url}/shards/pets-{{000000..000000}}.tar",
                                  storage_options=options, image_size=(8, 8), batch_size=4,
                                  seed=0, class_names=["0", "1", "2"], verbose=0)
    for gen in (records, tars):
        history = tiny_model().fit(gen, epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"]).all()


SCRIPT = pathlib.Path(__file__).resolve().parent / "keras_io" / (
    "image_classification_from_scratch.py")


@pytest.mark.slow
def test_keras_io_image_classification_from_scratch_trains_from_s3(s3, tmp_path):
    """The keras.io example, its PetImages uploaded to the S3 server after the example's
    own filter, read by `kg.image_dataset_from_directory("s3://<bucket>/PetImages", ...)`:
    the path is the only change to the example; credentials and the endpoint come from
    the environment, as on a machine with AWS configured."""
    source = SCRIPT.read_text(encoding="utf-8")
    upload = (
        "# ---- the S3 upload (not in the original): PetImages/ after the filter ----\n"
        "import boto3\n"
        "_s3 = boto3.client('s3')\n"
        "for _folder, _, _names in os.walk('PetImages'):\n"
        "    for _name in _names:\n"
        "        _path = os.path.join(_folder, _name)\n"
        f"        _s3.upload_file(_path, {s3.name!r}, _path.replace(os.sep, '/'))\n"
        "# ---- end of the upload ----\n\n")
    marker = "# ## Generate a `Dataset`\n"
    call = '    "PetImages",\n    validation_split=0.2,'
    assert marker in source and call in source
    script = source.replace(marker, upload + marker).replace(
        call, f'    "s3://{s3.name}/PetImages",\n    validation_split=0.2,')
    path = tmp_path / "from_s3.py"
    path.write_text(script, encoding="utf-8")
    env = dict(os.environ, KERAS_IO_LOADER="kerasgen", TF_CPP_MIN_LOG_LEVEL="2",
               MPLBACKEND="Agg", TMPDIR=str(tmp_path), AWS_ACCESS_KEY_ID=servers.KEY,
               AWS_SECRET_ACCESS_KEY=servers.SECRET, AWS_DEFAULT_REGION=servers.REGION,
               AWS_ENDPOINT_URL=s3.server.endpoint, AWS_CONFIG_FILE=os.devnull,
               AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    env.pop("AWS_PROFILE", None)
    result = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-6000:]
    assert "Found 80 files belonging to 2 classes." in result.stdout, result.stdout[-6000:]
    assert "Using 64 files for training." in result.stdout, result.stdout[-6000:]


def test_an_http_folder_whose_subfolder_page_fails_is_an_error_not_fewer_classes(
        http_folder, image_folder, fault_proxy):
    proxy = fault_proxy(http_folder(image_folder))
    proxy.fail_next(2, status=503, path="/dog/")  # retried: every class, every image
    gen = kg.ImageFolderGenerator(proxy.url + "/", **COMMON)
    assert gen.class_names == list(CLASSES) and len(gen.file_paths) == 12
    proxy.fail_next(1000, status=503, path="/dog/")
    with pytest.raises(ConnectionError, match=r"/dog/.*after 4 attempts"):
        kg.ImageFolderGenerator(proxy.url + "/", **COMMON)


def test_an_http_5xx_at_the_existence_check_is_never_taken_for_a_missing_file(
        http_folder, image_folder, fault_proxy, tmp_path):
    proxy = fault_proxy(http_folder(image_folder))
    rows = "filename,label\n" + "".join(
        f"{proxy.url}/dog/dog_{i}.{'png' if i % 2 == 0 else 'jpg'},dog\n" for i in range(3))
    (tmp_path / "dogs.csv").write_text(rows)
    proxy.fail_next(1000, status=503, path="/dog")
    with pytest.raises(ConnectionError, match="503"):
        kg.CSVGenerator(tmp_path / "dogs.csv", on_missing="skip", **COMMON)
    proxy.fail_next(0)


def test_http_names_with_spaces_percent_signs_and_accents_match_the_local_folder(
        http_folder, tmp_path):
    from tests.conftest import write_image
    root = tmp_path / "odd"
    for k, rel in enumerate(["zebra/c d.png", "zebra/c%20d.png", "élan/a#1.png",
                             "élan/q?x.png", "my data/x.png"]):
        write_image(str(root / rel), value=20 * k + 10)
    local = kg.ImageFolderGenerator(root, **COMMON)
    server = http_folder(root)
    remote = kg.ImageFolderGenerator(server.url + "/", **COMMON)
    assert remote.class_names == local.class_names == ["my data", "zebra", "élan"]
    assert_same(batches(remote), batches(local))
    rows = "filename,label\n" + "".join(f"{rel},{rel.split('/')[0]}\n" for rel in [
        "zebra/c d.png", "zebra/c%20d.png", "élan/a#1.png", "élan/q?x.png"])
    (root / "list.csv").write_text(rows, encoding="utf-8")
    local_csv = kg.CSVGenerator(root / "list.csv", **COMMON)
    remote_csv = kg.CSVGenerator(server.url + "/list.csv", **COMMON)
    assert_same(batches(remote_csv), batches(local_csv))


def test_a_url_cell_leaving_a_url_directory_is_refused(http_folder, image_folder, tmp_path):
    server = http_folder(image_folder.parent)
    (tmp_path / "out.csv").write_text(
        f"filename,label\n{server.url}/images/cat/../dog/dog_0.png,dog\n")
    with pytest.raises(ValueError, match="leaves `directory`"):
        kg.CSVGenerator(tmp_path / "out.csv", directory=server.url + "/images/cat",
                        **COMMON)
