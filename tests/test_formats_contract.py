"""The formats contract (issue 49): every shard format read through its indexed generator
and through the streamed path gives the same samples (decoded pixels) and labels, for
every compression and for the label fields whose meaning the readers once disagreed on
(" cat " with spaces, "dog\\n", a field named `lbl`, JSON strings and ints, txt, cls).

Each check also compares with the values written, so two readers agreeing on a wrong
answer fail too.
"""

import gzip
import io
import os
import shutil
import struct
import subprocess
import tarfile
import zlib

import cv2
import google_crc32c
import numpy as np
import pytest

import kerasgen as kg
from kerasgen.formats import labels
from kerasgen.formats.tfrecord import masked_crc

pytest.importorskip("tensorflow")
from tensorflow.core.example.example_pb2 import Example  # noqa: E402

NAMES = ["cat", "dog"]
COUNT = 6
COMMON = dict(image_size=(4, 4), dtype="uint8", batch_size=COUNT, shuffle=False)
STREAM = dict(num_streams=1, **COMMON)


def pixels(i):
    """The RGB pixels of sample i: one colour per sample."""
    image = np.zeros((4, 4, 3), np.uint8)
    image[..., 0], image[..., 1], image[..., 2] = 10 * i, 255 - 7 * i, 3 * i + 1
    image[0, 0] = (i, i, i)  # and a pixel of its own
    return image


def png(i):
    return cv2.imencode(".png", cv2.cvtColor(pixels(i), cv2.COLOR_RGB2BGR))[1].tobytes()


EXPECTED_X = np.stack([pixels(i) for i in range(COUNT)])
EXPECTED_Y = [i % 2 for i in range(COUNT)]  # class ids: cat, dog, cat, ...


def tar_bytes(field, label, members=None):
    """An uncompressed WebDataset tar: sample i is {i:03d}.png and {i:03d}.{field}."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(COUNT):
            for name, data in members(i) if members else (
                    (f"{i:03d}.png", png(i)), (f"{i:03d}.{field}", label(i))):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def both_webdataset(path, label_key, stream_path=None):
    """(x, y) of the indexed WebDatasetGenerator and of the streamed StreamGenerator."""
    indexed = kg.WebDatasetGenerator(str(path), image_key="png", label_key=label_key,
                                     class_names=NAMES, verbose=0, **COMMON)
    streamed = kg.StreamGenerator(str(stream_path or path), "webdataset", image_key="png",
                                  label_key=label_key, class_names=NAMES, **STREAM)
    return indexed[0], streamed[0]


def assert_same(indexed, streamed):
    (xi, yi), (xs, ys) = indexed, streamed
    np.testing.assert_array_equal(xi, EXPECTED_X)
    np.testing.assert_array_equal(xs, EXPECTED_X)
    assert np.asarray(yi).tolist() == EXPECTED_Y
    assert np.asarray(ys).tolist() == EXPECTED_Y


# ------------------------------------------------------------------ WebDataset labels
LABEL_FIELDS = {
    "cls": lambda i: str(i % 2).encode(),
    "cls-spaced": lambda i: f" {i % 2}\n".encode(),  # int("1\n") as webdataset reads it
    "txt": lambda i: NAMES[i % 2].encode(),
    "txt-spaced": lambda i: f" {NAMES[i % 2]} ".encode(),  # " cat "
    "txt-newline": lambda i: f"{NAMES[i % 2]}\n".encode(),  # "dog\n", from `echo dog`
    "json-name": lambda i: f'" {NAMES[i % 2]} "'.encode(),  # a JSON string with spaces
    "json-int": lambda i: str(i % 2).encode(),
}


@pytest.mark.parametrize("case", sorted(LABEL_FIELDS))
def test_a_label_field_means_the_same_to_the_indexed_and_the_streamed_reader(tmp_path, case):
    field = case.split("-")[0]
    path = tmp_path / "labels.tar"
    path.write_bytes(tar_bytes(field, LABEL_FIELDS[case]))
    assert_same(*both_webdataset(path, field))


def test_a_label_field_that_holds_no_label_is_refused_by_both_readers(tmp_path):
    """A field named `lbl` is no field webdataset decodes: both refuse it (the streamed
    reader once read it as text)."""
    path = tmp_path / "lbl.tar"
    path.write_bytes(tar_bytes("lbl", lambda i: NAMES[i % 2].encode()))
    message = r"`label_key` must name a field holding a class id .*Received: label_key's " \
              r"field 'lbl'"
    with pytest.raises(ValueError, match=message):
        kg.WebDatasetGenerator(str(path), image_key="png", label_key="lbl",
                               class_names=NAMES, verbose=0, **COMMON)
    with pytest.raises(ValueError, match=message):
        kg.StreamGenerator(str(path), "webdataset", image_key="png", label_key="lbl",
                           class_names=NAMES, **STREAM)


@pytest.mark.parametrize("data", [b"   ", b'"  "', b"\xff", b"[1]", b"1.5"])
def test_a_bad_label_is_refused_by_both_readers_with_the_same_reason(tmp_path, data):
    field = "json" if data.startswith((b"[", b'"')) else "cls" if data == b"1.5" else "txt"
    path = tmp_path / "bad.tar"
    path.write_bytes(tar_bytes(field, lambda i: data if i == 2 else str(i % 2).encode()
                               if field != "txt" else NAMES[i % 2].encode()))
    with pytest.raises(ValueError) as indexed:
        kg.WebDatasetGenerator(str(path), image_key="png", label_key=field,
                               class_names=NAMES, verbose=0, **COMMON)
    with pytest.raises(ValueError) as streamed:
        kg.StreamGenerator(str(path), "webdataset", image_key="png", label_key=field,
                           class_names=NAMES, **STREAM)[0]
    reason = str(indexed.value).split(" must hold ", 1)[1]
    assert "002" in str(indexed.value) and "'002'" in str(streamed.value)
    assert reason.split(". Received")[0] in str(streamed.value)


def test_field_label_is_the_one_rule():
    where = "x"
    assert labels.field_label(b" cat ", "txt", where) == "cat"
    assert labels.field_label(b'" cat "', "json", where) == "cat"
    assert labels.field_label(b"7", "json", where) == 7
    assert labels.field_label(b" 3\n", "seg.cls", where) == 3
    with pytest.raises(ValueError, match="x must hold a class name"):
        labels.field_label(b"\n", "txt", where)
    with pytest.raises(ValueError, match="label_key` must name a field"):
        labels.field_label(b"cat", "lbl", where)


# ------------------------------------------------------------------ tar compressions
def zstd_frame(data):
    """`data` as one zstd frame of raw blocks (what `zstd` would decompress)."""
    # the magic, a frame header (single segment, its size in 4 bytes), the size
    header = b"\x28\xb5\x2f\xfd" + bytes([0xA0]) + struct.pack("<I", len(data))
    blocks = []
    for at in range(0, len(data), 1 << 17):
        block = data[at:at + (1 << 17)]
        last = at + (1 << 17) >= len(data)
        blocks.append(struct.pack("<I", int(last) | len(block) << 3)[:3] + block)
    return header + b"".join(blocks)


COMPRESSORS = {
    "gz": gzip.compress,
    "bz2": lambda data: __import__("bz2").compress(data),
    "xz": lambda data: __import__("lzma").compress(data),
}


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_every_tar_compression_streams_the_samples_of_the_uncompressed_shard(tmp_path, kind):
    plain = tar_bytes("cls", LABEL_FIELDS["cls"])
    (tmp_path / "plain.tar").write_bytes(plain)
    packed = tmp_path / f"packed.tar.{kind}"
    packed.write_bytes(COMPRESSORS[kind](plain))
    assert packed.read_bytes()[:2] != plain[:2]  # compressed indeed
    assert_same(*both_webdataset(tmp_path / "plain.tar", "cls", stream_path=packed))


def test_an_intact_zstd_shard_is_named_as_zstd_by_both_readers(tmp_path):
    """zstandard is not a dependency: no reader decompresses zstd, and every reader says
    what the shard is (the streamed one once called it "not a tar archive")."""
    plain = tar_bytes("cls", LABEL_FIELDS["cls"])
    path = tmp_path / "packed.tar.zst"
    path.write_bytes(zstd_frame(plain))
    if shutil.which("zstd"):  # the frame is intact: zstd gives the tar back
        out = subprocess.run(["zstd", "-d", "-c", str(path)], capture_output=True, check=True)
        assert out.stdout == plain
    with pytest.raises(ValueError, match=r"packed\.tar\.zst is zstd-compressed"):
        kg.WebDatasetGenerator(str(path), image_key="png", verbose=0, **COMMON)
    with pytest.raises(ValueError, match=r"packed\.tar\.zst: it is zstd-compressed, which "
                                         r"kerasgen does not decompress"):
        kg.StreamGenerator(str(path), "webdataset", image_key="png", class_names=NAMES,
                           **STREAM)[0]


# ------------------------------------------------------------------ TFRecord, ArrayRecord
def example(i, label):
    value = example_value(label(i))
    message = Example()
    message.features.feature["image"].bytes_list.value.append(png(i))
    getattr(message.features.feature["label"], value[0]).value.append(value[1])
    return message.SerializeToString()


def example_value(label):
    return ("bytes_list", label) if isinstance(label, bytes) else ("int64_list", label)


def tfrecord_bytes(records):
    out = b""
    for data in records:
        length = struct.pack("<Q", len(data))
        out += (length + struct.pack("<I", masked_crc(length)) + data
                + struct.pack("<I", masked_crc(data)))
    return out


TFRECORD_LABELS = {"int": lambda i: i % 2, "name": lambda i: NAMES[i % 2].encode()}
TFRECORD_COMPRESSIONS = {None: lambda data: data, "GZIP": gzip.compress,
                         "ZLIB": zlib.compress}


@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"])
@pytest.mark.parametrize("label", sorted(TFRECORD_LABELS))
def test_a_tfrecord_file_reads_the_same_indexed_and_streamed(tmp_path, compression, label):
    records = [example(i, TFRECORD_LABELS[label]) for i in range(COUNT)]
    path = tmp_path / "r.tfrecord"
    path.write_bytes(TFRECORD_COMPRESSIONS[compression](tfrecord_bytes(records)))
    indexed = kg.TFRecordGenerator(str(path), {"image": "image", "label": "label"},
                                   compression_type=compression, class_names=NAMES,
                                   verbose=0, **COMMON)
    streamed = kg.StreamGenerator(str(path), "tfrecord", compression_type=compression,
                                  class_names=NAMES, **STREAM)
    assert_same(indexed[0], streamed[0])
    assert google_crc32c.value(b"") == 0  # the CRC module the readers use is the real one


def test_an_arrayrecord_file_reads_the_records_of_the_tfrecord_file(tmp_path):
    module = pytest.importorskip("array_record.python.array_record_module")
    records = [example(i, TFRECORD_LABELS["name"]) for i in range(COUNT)]
    path = tmp_path / "r.array_record"
    writer = module.ArrayRecordWriter(str(path), "group_size:1")
    for data in records:
        writer.write(data)
    writer.close()
    (tmp_path / "r.tfrecord").write_bytes(tfrecord_bytes(records))
    indexed = kg.ArrayRecordGenerator(str(path), {"image": "image", "label": "label"},
                                      class_names=NAMES, verbose=0, **COMMON)
    streamed = kg.StreamGenerator(str(tmp_path / "r.tfrecord"), "tfrecord",
                                  class_names=NAMES, **STREAM)
    assert_same(indexed[0], streamed[0])


# ------------------------------------------------------------------ image options
def example_files(tmp_path, kind, records):
    """A TFRecord or ArrayRecord file of `records` and the generator class reading it."""
    if kind == "tfrecord":
        path = tmp_path / "r.tfrecord"
        path.write_bytes(tfrecord_bytes(records))
        return str(path), kg.TFRecordGenerator
    module = pytest.importorskip("array_record.python.array_record_module")
    path = tmp_path / "r.array_record"
    writer = module.ArrayRecordWriter(str(path), "group_size:1")
    for data in records:
        writer.write(data)
    writer.close()
    return str(path), kg.ArrayRecordGenerator


SPEC = {"image": "image", "label": "label"}
KINDS = ["tfrecord", "arrayrecord"]


def corrupt_example(i):
    message = Example()
    message.features.feature["image"].bytes_list.value.append(b"\xff\xd8\xff not a JPEG")
    message.features.feature["label"].int64_list.value.append(i % 2)
    return message.SerializeToString()


@pytest.mark.parametrize("kind", KINDS)
def test_a_corrupt_image_in_a_record_is_skipped_and_reported(tmp_path, kind):
    records = [corrupt_example(i) if i == 2 else example(i, TFRECORD_LABELS["int"])
               for i in range(COUNT)]
    path, generator = example_files(tmp_path, kind, records)
    raising = generator(path, SPEC, class_names=NAMES, verbose=0, **COMMON)
    with pytest.raises(ValueError, match=r"record 2 .*r\.(tfrecord|array_record)"):
        raising[0]
    skipping = generator(path, SPEC, class_names=NAMES, on_error="skip", verbose=0, seed=0,
                         **COMMON)
    with pytest.warns(UserWarning, match="Skipping an undecodable image"):
        x, y = skipping[0]
    assert len(skipping.skipped) == 1 and skipping.skipped[0].startswith("record 2 ")
    assert np.asarray(y).tolist() == EXPECTED_Y
    assert any(np.array_equal(x[2], EXPECTED_X[k]) for k in (0, 4))  # one of its class
    np.testing.assert_array_equal(np.delete(x, 2, 0), np.delete(EXPECTED_X, 2, 0))


@pytest.mark.parametrize("kind", KINDS)
def test_a_memory_cache_serves_later_epochs_without_reading_the_file(tmp_path, kind):
    path, generator = example_files(tmp_path, kind,
                                    [example(i, TFRECORD_LABELS["int"]) for i in range(COUNT)])
    gen = generator(path, SPEC, class_names=NAMES, cache="memory", verbose=0, **COMMON)
    assert generator(path, SPEC, verbose=0, **COMMON).loader.cache is None  # the default
    np.testing.assert_array_equal(gen[0][0], EXPECTED_X)
    with open(path, "r+b") as f:  # the same file, its bytes spoilt: reading would fail
        f.write(b"\0" * os.path.getsize(path))
    np.testing.assert_array_equal(gen[0][0], EXPECTED_X)  # from the cache


@pytest.mark.parametrize("kind", KINDS)
def test_the_other_image_options_reach_the_loader(tmp_path, kind):
    wide = np.zeros((4, 8, 3), np.uint8)
    wide[:, 2:6] = 200  # the centre, what crop_to_aspect_ratio keeps
    message = Example()
    message.features.feature["image"].bytes_list.value.append(
        cv2.imencode(".png", wide)[1].tobytes())
    message.features.feature["label"].int64_list.value.append(0)
    path, generator = example_files(tmp_path, kind, [message.SerializeToString()] * 2)
    options = dict(image_size=(4, 4), dtype="uint8", batch_size=2, shuffle=False, verbose=0)
    cropped = generator(path, SPEC, crop_to_aspect_ratio=True, decode_threads=1, **options)
    assert cropped.loader.options.decode_threads == 1
    assert (cropped[0][0] == 200).all()
    assert not (generator(path, SPEC, **options)[0][0] == 200).all()  # squeezed
    small = generator(path, SPEC, max_pixels=16, **options)
    with pytest.raises(ValueError, match="max_pixels"):
        small[0]
    with pytest.raises(ValueError, match=r"`on_error` must be one of"):
        generator(path, SPEC, on_error="ignore", **options)


@pytest.mark.parametrize("name", ["zstd", "bzip2", "xz"])
def test_a_tfrecord_file_of_another_compression_is_named_by_both_readers(tmp_path, name):
    plain = tfrecord_bytes([example(i, TFRECORD_LABELS["int"]) for i in range(COUNT)])
    packed = {"zstd": zstd_frame, "bzip2": COMPRESSORS["bz2"], "xz": COMPRESSORS["xz"]}
    path = tmp_path / "r.tfrecord.packed"
    path.write_bytes(packed[name](plain))
    message = rf"it is {name}-compressed, which no TFRecord reader decompresses"
    with pytest.raises(ValueError, match=message):
        kg.TFRecordGenerator(str(path), SPEC, verbose=0, **COMMON)
    with pytest.raises(ValueError, match=message):
        kg.StreamGenerator(str(path), "tfrecord", class_names=NAMES, **STREAM)[0]
    with pytest.raises(ValueError, match=message):  # and named as what it is, not GZIP
        kg.TFRecordGenerator(str(path), SPEC, compression_type="GZIP", verbose=0, **COMMON)
    with pytest.raises(ValueError, match=message):
        kg.StreamGenerator(str(path), "tfrecord", compression_type="GZIP",
                           class_names=NAMES, **STREAM)[0]


def test_an_arrayrecord_file_streams_the_records_it_gives_by_index(tmp_path):
    """ArrayRecord's streamed read (formats.arrayrecord.ArrayRecordRecords, the reader a
    stream of ArrayRecord shards would use) gives the records of its indexed read."""
    pytest.importorskip("array_record.python.array_record_module")
    from kerasgen.formats.arrayrecord import ArrayRecordRecords

    records = [example(i, TFRECORD_LABELS["name"]) for i in range(COUNT)]
    path, _ = example_files(tmp_path, "arrayrecord", records)
    indexed = kg.ArrayRecordGenerator(path, SPEC, class_names=NAMES, verbose=0, **COMMON)
    reader = ArrayRecordRecords([path], None, None)
    reader.batch = 4  # two reads of the file: records cross them in order
    items = list(reader(0))
    assert [(shard, number) for shard, number, _ in items] == [(0, k) for k in range(COUNT)]
    parsed = [reader.parse(raw, f"record {k}") for _, k, raw in items]
    x = np.stack([cv2.cvtColor(cv2.imdecode(np.frombuffer(image, np.uint8),
                                            cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
                  for image, _ in parsed])
    np.testing.assert_array_equal(x, indexed[0][0])
    np.testing.assert_array_equal(x, EXPECTED_X)
    assert [label for _, label in parsed] == [NAMES[k] for k in np.asarray(indexed[0][1])]
    assert [label for _, label in parsed] == [NAMES[k % 2] for k in range(COUNT)]


def test_a_text_label_is_a_class_name_for_both_readers(tmp_path):
    """A "txt" label written as digits is the class *name* "10" for WebDatasetGenerator
    (sorted among the names: "10" before "2"), so the stream reads it as a name too,
    never as the id 10; without class_names the stream, which cannot sort names it has
    not seen, refuses it and says why."""
    names = ["0", "1", "10", "2"]
    path = tmp_path / "digits.tar"
    path.write_bytes(tar_bytes("txt", lambda i: names[i % 4].encode()))
    indexed = kg.WebDatasetGenerator(str(path), image_key="png", label_key="txt",
                                     verbose=0, **COMMON)
    assert indexed.class_names == names  # sorted as text
    streamed = kg.StreamGenerator(str(path), "webdataset", image_key="png",
                                  label_key="txt", class_names=indexed.class_names,
                                  **STREAM)
    expected = [names.index(names[i % 4]) for i in range(COUNT)]
    assert np.asarray(indexed[0][1]).tolist() == expected
    assert np.asarray(streamed[0][1]).tolist() == expected  # "10" is id 2, not 10
    unnamed = kg.StreamGenerator(str(path), "webdataset", image_key="png",
                                 label_key="txt", num_classes=11, **STREAM)
    with pytest.raises(ValueError, match="Text is a class name"):
        unnamed[0]


def test_a_record_label_that_is_no_class_id_or_name_is_refused():
    for value in (True, 1.0, np.float32(2)):
        def one(shard, value=value):
            yield pixels(0), value

        gen = kg.StreamGenerator(["s"], one, num_classes=3, image_size=None, batch_size=1,
                                 shuffle=False, num_streams=1)
        with pytest.raises(ValueError, match="must be a class id or a class name"):
            gen[0]


@pytest.mark.parametrize("generator", ["WebDatasetGenerator", "TFRecordGenerator",
                                       "StreamGenerator"])
def test_uint16_batches_keep_8_bit_pixels_unless_bit_depth_says_16(tmp_path, generator):
    """These generators decoded at 8 bits before ImageOptions: dtype="uint16" alone keeps
    0..255 (bit_depth=8 by default); bit_depth=16 widens 8-bit images (x257)."""
    path = tmp_path / "shard.tar"
    path.write_bytes(tar_bytes("cls", lambda i: str(i % 2).encode()))
    record = tmp_path / "x.tfrecord"
    record.write_bytes(tfrecord_bytes([example(i, lambda i: i % 2) for i in range(COUNT)]))
    common = dict(COMMON, dtype="uint16")

    def make(**options):
        if generator == "WebDatasetGenerator":
            return kg.WebDatasetGenerator(str(path), image_key="png", verbose=0,
                                          **common, **options)
        if generator == "TFRecordGenerator":
            return kg.TFRecordGenerator(str(record), {"image": "image", "label": "label"},
                                        verbose=0, **common, **options)
        return kg.StreamGenerator(str(path), "webdataset", image_key="png", num_classes=2,
                                  num_streams=1, **common, **options)

    np.testing.assert_array_equal(make()[0][0], EXPECTED_X)
    np.testing.assert_array_equal(make(bit_depth=16)[0][0],
                                  EXPECTED_X.astype(np.uint16) * 257)
