"""Special files where a regular file is expected (issue 30): a FIFO, a link to a device,
a folder named as a file. Each is refused at once with an error naming the argument or
the file, never a hang (a FIFO blocks an open or a read forever) and never a read
without end (/dev/zero). Also: a CSV cell over Python's field limit, a compressed
TFRecord file, and a concatenation of image sources of different sizes."""

import csv
import gzip
import os
import zlib

import numpy as np
import pytest

import kerasgen as kg

from .conftest import write_image

pytestmark = pytest.mark.timeout(60)  # a FIFO read blocks forever: fail, never hang


@pytest.fixture(params=["fifo", "dev_zero", "folder"])
def special(request, tmp_path):
    """A path that exists and is not a regular file, with the words that name it."""
    path = tmp_path / "special"
    if request.param == "fifo":
        os.mkfifo(path)
        return path, "a FIFO"
    if request.param == "dev_zero":
        if not os.path.exists("/dev/zero"):
            pytest.skip("no /dev/zero on this system")
        os.symlink("/dev/zero", path)
        return path, "a character device"
    path.mkdir()
    return path, "a folder"


def test_a_cache_path_that_is_not_a_regular_file_is_refused_at_once(image_folder, special):
    path, kind = special
    match = ("`cache` must be a file name, not a folder" if kind == "a folder" else
             rf"`cache` must be a regular file or a new name. Received: cache='{path}'. It "
             rf"exists and is {kind}")
    with pytest.raises(ValueError, match=match):
        kg.ImageFolderGenerator(image_folder, image_size=8, cache=str(path))


def test_a_cache_in_a_missing_folder_names_it(image_folder, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"`cache` must be a path in an existing "
                                                r"folder.*No such folder"):
        kg.ImageFolderGenerator(image_folder, image_size=8, cache=str(tmp_path / "no" / "c"))


def test_a_checkpoint_that_is_a_fifo_or_a_device_is_refused_not_read(tmp_path, special):
    path, kind = special
    gen = kg.ArrayGenerator(np.zeros((8, 2), "float32"), np.arange(8) % 2, batch_size=4,
                            seed=0)
    with pytest.raises(ValueError, match=rf"Cannot read the checkpoint {path}: it is {kind}"):
        kg.callbacks.restore(gen, path)
    assert gen.get_state()["epoch"] == 0  # left as it was


def test_a_checkpoint_callback_refuses_a_fifo_or_device_before_training(tmp_path, special):
    """Writing the state would replace a FIFO or a device node (/dev/null as root):
    refused when the callback is made, as a folder is."""
    path, kind = special
    match = ("must be a file name, not a folder" if kind == "a folder" else
             rf"`path` must be a regular file or a new name. Received: path='{path}'. It is "
             rf"{kind}")
    with pytest.raises(ValueError, match=match):
        kg.callbacks.GeneratorCheckpoint(path, every_n_batches=1)


def test_a_csv_that_is_a_fifo_or_a_device_is_refused(tmp_path, special):
    path, kind = special
    with pytest.raises(ValueError, match=rf"Cannot read the CSV file {path}: it is {kind}"):
        kg.CSVGenerator(str(path), image_size=8)


def test_a_csv_cell_over_pythons_field_limit_names_the_file_and_line(tmp_path):
    write_image(str(tmp_path / "a.png"))
    path = tmp_path / "list.csv"
    long_cell = "x" * (csv.field_size_limit() + 10)
    path.write_text(f'filename,label\na.png,cat\n"{long_cell}.png,dog\n')
    with pytest.raises(ValueError, match=rf"Cannot read the row starting on line 3 of the CSV "
                                         rf"file {path}: field larger than field limit.*a "
                                         r"quote \(\"\) left open"):
        kg.CSVGenerator(path, directory=tmp_path, image_size=8)


def test_a_sqlite_path_that_is_not_a_regular_file_is_refused(special):
    path, kind = special
    with pytest.raises(ValueError, match=rf"`db` must be a regular SQLite file. Received: "
                                         rf"db='{path}'. It is {kind}"):
        kg.SQLFeatureGenerator(path, "SELECT 1 AS a, 0 AS label", x_col=["a"])


def tfrecord_bytes():
    tf = pytest.importorskip("tensorflow")
    example = tf.train.Example(features=tf.train.Features(feature={
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[1])),
        "values": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 2.0]))}))
    return example.SerializeToString(), tf


@pytest.mark.parametrize("kind", ["GZIP", "ZLIB"])
def test_a_compressed_tfrecord_is_called_compressed_not_corrupt(tmp_path, kind):
    record, tf = tfrecord_bytes()
    path = str(tmp_path / f"data.{kind.lower()}.tfrecord")
    with tf.io.TFRecordWriter(path, options=kind) as writer:
        for _ in range(3):
            writer.write(record)
    with open(path, "rb") as f:  # what TensorFlow wrote is GZIP's / ZLIB's stream
        head = f.read(2)
    assert head == b"\x1f\x8b" if kind == "GZIP" else zlib.decompress(open(path, "rb").read())
    with pytest.raises(ValueError, match=rf"{path} is compressed with {kind} "
                                         r"\(compression_type=.*Decompress it"):
        kg.TFRecordGenerator(path, feature_spec={"values": "float", "label": "label"})
    if kind == "GZIP":  # decompressed as the message says, it reads
        plain = tmp_path / "plain.tfrecord"
        plain.write_bytes(gzip.decompress(open(path, "rb").read()))
        gen = kg.TFRecordGenerator(str(plain), feature_spec={"values": "float", "label": "label"})
        assert len(gen) == 1 and gen.num_samples == 3


def test_a_tfrecord_path_that_is_not_a_regular_file_is_refused(special):
    tfrecord_bytes()
    path, kind = special
    with pytest.raises(ValueError, match=rf"Cannot read the TFRecord file {path}: it is "
                                         rf"{kind}"):
        kg.TFRecordGenerator(str(path), feature_spec={"values": "float", "label": "label"})


def test_a_concatenation_of_images_of_different_sizes_is_refused_when_made(image_folder):
    small = kg.ImageFolderGenerator(image_folder, image_size=8)
    large = kg.ImageFolderGenerator(image_folder, image_size=(8, 12))
    gray = kg.ImageFolderGenerator(image_folder, image_size=8, color_mode="grayscale")
    for other, shape in ((large, r"\(8, 12, 3\)"), (gray, r"\(8, 8, 1\)")):
        with pytest.raises(ValueError, match=r"The parts of a concatenation must give "
                                             r"samples of one shape.*part 0 \(first sample "
                                             rf".*\): \(8, 8, 3\); part 1 .*: {shape}"):
            kg.sources.concatenate(small, other)
    arrays = kg.sources.ArraySource(np.zeros((4, 8, 8, 3), "float32"),
                                    labels=["cat", "dog", "fox", "cat"])
    both = kg.Generator(source=kg.sources.concatenate(small, arrays), batch_size=4)
    assert both[0][0].shape == (4, 8, 8, 3)
    with pytest.raises(ValueError, match=r"part 1 .*: \(8, 4, 3\)"):
        kg.sources.concatenate(small, kg.sources.ArraySource(np.zeros((4, 8, 4, 3)),
                                                             labels=["cat"] * 4))


def test_what_a_writer_killed_mid_write_left_is_removed_by_the_next_start(image_folder,
                                                                        tmp_path):
    """A cache or checkpoint is written to a temporary file renamed into place; a process
    killed (SIGKILL) before the rename leaves it behind. The next writer of that path
    removes the files of writers no longer running, and no other file."""
    import signal
    import subprocess
    import sys

    target = tmp_path / "cache.bin"
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from kerasgen import _atomic\n"
        "with _atomic.replacing(sys.argv[1]) as f:\n"
        "    f.write(b'half'); f.flush(); print('writing', flush=True); time.sleep(60)\n"),
        str(target)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "writing"
    left = [n for n in os.listdir(tmp_path) if n.startswith(".cache.bin.")]
    assert len(left) == 1 and f".{writer.pid}." in left[0]
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    alive = tmp_path / f".cache.bin.{os.getppid()}.abcd_123.tmp"  # a writer still running
    alive.write_bytes(b"")
    other = tmp_path / ".cache.bin.notes"
    other.write_bytes(b"")
    users = tmp_path / ".cache.bin.99999999.tmp"  # not mkstemp's name: a user's file
    users.write_bytes(b"")
    deeper = tmp_path / f".cache.bin.20240101.{os.getppid()}.abcdefgh.tmp"  # another target's
    deeper.write_bytes(b"")
    gen = kg.ImageFolderGenerator(image_folder, image_size=8, cache=str(target))
    assert gen[0][0].shape[1:] == (8, 8, 3)
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["cache.bin", alive.name, other.name, users.name, deeper.name, "images"])
