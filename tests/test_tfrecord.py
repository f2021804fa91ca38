"""TFRecordGenerator: random access to tf.train.Example records, CRC-checked, kinds strict."""

import struct
import sys

import cv2
import keras
import numpy as np
import pytest

import kerasgen as kg

from .test_contract import ids

tf = pytest.importorskip("tensorflow")


@pytest.fixture
def records(tmp_path):
    def example(image, label, values):
        ok, encoded = cv2.imencode(".png", image)
        feature = {
            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded.tobytes()])),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            "values": tf.train.Feature(float_list=tf.train.FloatList(value=values)),
        }
        return tf.train.Example(features=tf.train.Features(feature=feature))

    paths = [str(tmp_path / f"part-{k}.tfrecord") for k in range(2)]
    n = 0
    for path in paths:
        with tf.io.TFRecordWriter(path) as writer:
            for _ in range(7):
                image = np.full((10, 12, 3), 10 * n, np.uint8)
                writer.write(example(image, n % 3, [n, 2.0 * n]).SerializeToString())
                n += 1
    return paths


def test_tfrecord_generator_random_access(records):
    gen = kg.TFRecordGenerator(records, {"image": "image", "label": "label"},
                               image_size=(6, 6), batch_size=5, seed=3, label_mode="int",
                               verbose=0)
    assert gen.num_samples == 14 and gen.class_names == ["0", "1", "2"]
    seen = []
    for i in range(len(gen)):
        x, y = gen[i]
        batch_ids = ids(x)
        np.testing.assert_array_equal(y, batch_ids % 3)
        seen += batch_ids.tolist()
    assert sorted(seen) == list(range(14)) and seen != list(range(14))  # shuffled
    identity = keras.Sequential([keras.Input((6, 6, 3)), keras.layers.Identity()])
    threads = kg.TFRecordGenerator(records, {"image": "image", "label": "label"},
                                   image_size=(6, 6), batch_size=5, seed=3, workers=2,
                                   verbose=0)
    with pytest.warns(UserWarning, match=r"model\.predict\(\) reads TFRecordGenerator in "
                                         r"the order of epoch 0"):  # as this test expects
        predicted = identity.predict(threads, verbose=0)
    np.testing.assert_array_equal(
        ids(predicted), np.concatenate([ids(gen.at_epoch(0)[i][0]) for i in range(len(gen))]))
    numeric = kg.TFRecordGenerator(records, {"values": "float", "label": "label"},
                                   batch_size=14, shuffle=False, label_mode="int", verbose=0)
    xn, yn = numeric[0]
    np.testing.assert_array_equal(xn, [[k, 2 * k] for k in range(14)])


def test_smote_on_tfrecords_searches_the_features_given(records):
    # class 2 holds records 2, 5, 8 and 11 (4 samples, the others 5): SMOTE adds one a
    # epoch. In `emb`, 2 and 11 are each other's nearest, and 5 and 8 (in pixels 2's
    # nearest is 5): every synthetic sample is a blend of such a pair.
    emb = np.zeros((14, 2), np.float32)
    emb[:, 0] = np.arange(14) * 100.0
    emb[[2, 11, 8, 5], 1] = [0.0, 1.0, 500.0, 501.0]
    emb[[2, 11, 8, 5], 0] = 0.0
    gen = kg.TFRecordGenerator(records, {"image": "image", "label": "label"},
                               features=emb, sampler=kg.samplers.SMOTE(k_neighbors=1),
                               image_size=(6, 6), batch_size=15, seed=0, verbose=0)
    pairs = set()
    for epoch in range(6):
        plan = gen.epoch_plan(epoch)
        indices, partners, lams = plan.batch(0, len(plan))
        synthetic = np.flatnonzero(partners >= 0)
        assert len(plan) == 15 and len(synthetic) == 1
        pairs |= {(int(indices[k]), int(partners[k])) for k in synthetic}
        if epoch == 0:
            x, y = gen[0]
            k = synthetic[0]
            i, j = indices[k], partners[k]
            np.testing.assert_allclose(x[k], 10 * i + lams[k] * (10 * j - 10 * i), atol=0.5)
            assert np.bincount(y).tolist() == [5, 5, 5]
    assert pairs <= {(2, 11), (11, 2), (5, 8), (8, 5)} and pairs & {(2, 11), (11, 2)}


def test_tfrecord_features_dict_is_the_old_name_of_feature_spec(records):
    spec = {"values": "float", "label": "label"}
    new = kg.TFRecordGenerator(records, feature_spec=spec, shuffle=False, batch_size=14,
                               verbose=0)
    with pytest.warns(DeprecationWarning, match=r"features=\{key: kind\}\) is deprecated: "
                                                 r"the spec is now `feature_spec=`"):
        old = kg.TFRecordGenerator(records, features=spec, shuffle=False, batch_size=14,
                                   verbose=0)
    np.testing.assert_array_equal(old[0][0], new[0][0])
    with pytest.warns(DeprecationWarning, match="use `feature_spec`"):
        assert old.features == spec == new.feature_spec
    with pytest.raises(TypeError, match="two feature specs: `feature_spec` and a dict "
                                        "`features`"):
        kg.TFRecordGenerator(records, spec, features=spec, verbose=0)
    with pytest.raises(TypeError, match=r"`feature_spec` must be a dict \{feature key: "
                                        r"kind\}. Received: feature_spec=None"):
        kg.TFRecordGenerator(records, verbose=0)


def test_tfrecord_errors(records, tmp_path):
    with pytest.raises(ValueError, match=r"has no feature 'caption'.*\['image', 'label'"):
        kg.TFRecordGenerator(records, {"image": "image", "caption": "label"}, verbose=0)
    truncated = tmp_path / "cut.tfrecord"
    truncated.write_bytes(open(records[0], "rb").read()[:-7])
    with pytest.raises(ValueError, match="cut.tfrecord is truncated"):
        kg.TFRecordGenerator([str(truncated)], {"image": "image"}, verbose=0)
    with pytest.raises(FileNotFoundError, match="nope.tfrecord"):
        kg.TFRecordGenerator(str(tmp_path / "nope.tfrecord"), {"image": "image"})
    with pytest.raises(ValueError, match="either one 'image' key or numeric"):
        kg.TFRecordGenerator(records, {"label": "label"}, verbose=0)
    with pytest.raises(ValueError, match=r"`feature_spec\['image'\]` must be one of"):
        kg.TFRecordGenerator(records, {"image": "png"}, verbose=0)
    with pytest.raises(TypeError, match=r"^TFRecordGenerator\(\) takes its labels from the "
                                        r"feature of kind 'label' in `feature_spec`"):
        kg.TFRecordGenerator(records, {"image": "image"}, labels=[0] * 14, verbose=0)


def test_tfrecord_without_tensorflow_says_how_to_install(records, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow.core.example.example_pb2", None)
    with pytest.raises(ImportError,
                       match=r'needs TensorFlow: pip install "kerasgen3\[tfrecord\]"'):
        kg.TFRecordGenerator(records, {"image": "image"}, verbose=0)


def test_tfrecord_without_crc32c_says_how_to_install(records, monkeypatch):
    from kerasgen.formats import tfrecord  # where the CRC is checked

    monkeypatch.setattr(tfrecord, "google_crc32c", None)
    with pytest.raises(ImportError, match=r'CRC32C.*pip install "kerasgen3\[tfrecord\]" '
                                          r'\(or pip install google-crc32c\)'):
        kg.TFRecordGenerator(records, {"image": "image"}, verbose=0)


def feature(kind, values):
    if kind == "bytes_list":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if kind == "int64_list":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    if kind == "float_list":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature()  # no list at all


def write(path, rows):
    """A TFRecord file of tf.train.Examples, one per {key: (list kind, values)}."""
    with tf.io.TFRecordWriter(str(path)) as writer:
        for row in rows:
            features = {key: feature(*spec) for key, spec in row.items()}
            writer.write(tf.train.Example(features=tf.train.Features(
                feature=features)).SerializeToString())
    return str(path)


def flip(path, old, new):
    """Replaces the one occurrence of bytes `old` in the file by `new`, as a bad disk
    or a bad copy would; returns its byte offset."""
    data = open(path, "rb").read()
    assert data.count(old) == 1
    open(path, "wb").write(data.replace(old, new))
    return data.index(old)


def test_tfrecord_data_crc_is_checked_as_tf_data_does(tmp_path):
    # the case: a flipped payload byte turned 1.5 into 1.0 with no error
    path = write(tmp_path / "values.tfrecord",
                 [{"v": ("float_list", [v])} for v in (0.0, 0.25, 0.5, 1.5, 2.0)])
    clean = kg.TFRecordGenerator(path, {"v": "float"}, shuffle=False, batch_size=5,
                                 verbose=0)
    assert clean[0][:, 0].tolist() == [0.0, 0.25, 0.5, 1.5, 2.0]
    flip(path, struct.pack("<f", 1.5), struct.pack("<f", 1.0))
    with pytest.raises(tf.errors.DataLossError):  # what tf.data says of the same file
        list(tf.data.TFRecordDataset(path))
    with pytest.raises(ValueError, match=r"values\.tfrecord is corrupt: the data of record 3 "
                                         r"\(byte \d+\) fails its CRC32C check"):
        kg.TFRecordGenerator(path, {"v": "float"}, verbose=0)


def test_tfrecord_image_crc_is_checked_when_the_record_is_read(tmp_path):
    rows = []
    for k in range(4):
        ok, png = cv2.imencode(".png", np.full((4, 4, 3), 10 * k, np.uint8))
        rows.append({"img": ("bytes_list", [png.tobytes()])})
    path = write(tmp_path / "images.tfrecord", rows)
    pixels = bytes(rows[2]["img"][1][0])[-40:]  # inside record 2's image bytes
    flip(path, pixels, pixels[:20] + bytes([pixels[20] ^ 1]) + pixels[21:])
    gen = kg.TFRecordGenerator(path, {"img": "image"}, image_size=(4, 4), batch_size=2,
                               shuffle=False, verbose=0)  # only record 0 is read here
    np.testing.assert_array_equal(ids(gen[0]), [0, 1])
    with pytest.raises(ValueError, match=r"images\.tfrecord is corrupt: the data of "
                                         r"record 2 \(byte \d+\) .*CRC32C"):
        gen[1]


def test_tfrecord_length_crc_is_checked_before_the_length_is_trusted(tmp_path):
    path = write(tmp_path / "lengths.tfrecord",
                 [{"v": ("float_list", [float(k)] * (1 + 3 * k))} for k in range(4)])
    data = bytearray(open(path, "rb").read())
    offset = 0
    for _ in range(2):  # to record 2's header
        offset += 12 + struct.unpack("<Q", data[offset:offset + 8])[0] + 4
    data[offset] ^= 4  # its length now claims 4 bytes more or less
    open(path, "wb").write(bytes(data))
    with pytest.raises(ValueError, match=f"lengths\\.tfrecord is corrupt: the length of "
                                         f"record 2 \\(at byte {offset}\\) fails its CRC32C"):
        kg.TFRecordGenerator(path, {"v": "float"}, verbose=0)


LIST_OF = {"image": "bytes_list", "label": "int64_list", "float": "float_list",
           "int": "int64_list"}


@pytest.fixture
def kinds_file(tmp_path):
    ok, png = cv2.imencode(".png", np.full((5, 5, 3), 60, np.uint8))
    row = {"bytes_list": ("bytes_list", [png.tobytes()]), "name": ("bytes_list", [b"cat"]),
           "int64_list": ("int64_list", [3, 4]), "id": ("int64_list", [1]),
           "float_list": ("float_list", [1.5, 2.5]),
           "two": ("int64_list", [1, 2]), "none": ("empty", []),
           "big": ("int64_list", [2 ** 24, -(2 ** 25)]), "x": ("float_list", [0.5])}
    return write(tmp_path / "kinds.tfrecord", [row, row])


def make(path, key, kind):
    """A generator reading feature `key` as `kind` (a label beside numeric x)."""
    features = {"x": "float", key: kind} if kind == "label" else {key: kind}
    return kg.TFRecordGenerator(path, features, image_size=(5, 5), batch_size=2,
                                shuffle=False, verbose=0)


@pytest.mark.parametrize("kind", ["image", "label", "float", "int"])
@pytest.mark.parametrize("found", ["bytes_list", "int64_list", "float_list"])
def test_tfrecord_feature_kind_must_match_the_record(kinds_file, kind, found):
    key = {("label", "bytes_list"): "name", ("label", "int64_list"): "id"}.get(
        (kind, found), found)
    accepted = found == LIST_OF[kind] or (kind, found) == ("label", "bytes_list")
    if not accepted:
        with pytest.raises(ValueError, match=(
                rf"`feature_spec\['{key}'\]` is '{kind}', which reads .*, but feature "
                rf"'{key}' of record 0 \(byte 0\) of .*kinds\.tfrecord is an? {found}\.")):
            make(kinds_file, key, kind)
        return
    gen = make(kinds_file, key, kind)
    x = gen[0][0] if kind == "label" else gen[0]  # unlabeled: x alone
    if kind == "image":
        assert x.shape == (2, 5, 5, 3) and (x == 60).all()
    elif kind == "label":
        name = "cat" if found == "bytes_list" else "1"
        assert [gen.class_names[k] for k in gen.labels] == [name, name]
    elif kind == "float":
        np.testing.assert_array_equal(x, [[1.5, 2.5]] * 2)
    else:
        np.testing.assert_array_equal(x, [[3, 4]] * 2)


@pytest.mark.parametrize("key,kind,match", [
    ("two", "label", r"'label', which takes one value per record, but feature 'two' of "
                     r"record 0 .* holds 2"),
    ("none", "label", "feature 'none' of record 0 .* holds 0"),
    ("none", "image", "feature 'none' of record 0 .* holds 0"),
    ("big", "int", r"Feature 'big' of record 0 .* holds -33554432: .* up to 2\*\*24"),
])


def test_tfrecord_values_a_kind_cannot_hold(kinds_file, key, kind, match):
    with pytest.raises(ValueError, match=match):
        make(kinds_file, key, kind)


def test_tfrecord_kind_mismatch_in_a_later_record(tmp_path):
    ok, png = cv2.imencode(".png", np.zeros((3, 3, 3), np.uint8))
    rows = [{"img": ("bytes_list", [png.tobytes()]), "y": ("int64_list", [0])},
            {"img": ("int64_list", [7]), "y": ("int64_list", [1])}]
    path = write(tmp_path / "mixed.tfrecord", rows)
    with pytest.raises(ValueError, match=r"feature 'img' of record 1 \(byte \d+\) of "
                                         r".*mixed\.tfrecord is an int64_list"):
        kg.TFRecordGenerator(path, {"img": "image", "y": "label"}, verbose=0)
    rows = [{"v": ("float_list", [1.0, 2.0])}, {"v": ("float_list", [1.0, 2.0, 3.0])}]
    path = write(tmp_path / "ragged.tfrecord", rows)
    with pytest.raises(ValueError, match=r"same length in every record: record 0 \(byte 0\)"
                                         r" .* has 2 values, record 1 .* has 3"):
        kg.TFRecordGenerator(path, {"v": "float"}, verbose=0)


def test_a_record_longer_than_max_record_bytes_is_refused_when_indexed(tmp_path):
    path = write(tmp_path / "sizes.tfrecord",
                 [{"v": ("float_list", [float(k)]), "pad": ("bytes_list", [b"x" * 100 * k])}
                  for k in range(3)])
    data, offsets, lengths = open(path, "rb").read(), [], []
    while sum(12 + n + 4 for n in lengths) < len(data):
        offsets.append(sum(12 + n + 4 for n in lengths))
        lengths.append(struct.unpack("<Q", data[offsets[-1]:offsets[-1] + 8])[0])
    limit = lengths[2] - 1
    with pytest.raises(ValueError, match=rf"^Record 2 \(byte {offsets[2]}\) of .*sizes\."
                                         rf"tfrecord declares a length of {lengths[2]:,} "
                                         rf"bytes, more than max_record_bytes={limit:,} "
                                         r"bytes \(a guard against decompression bombs.*"
                                         r"Pass a larger `max_record_bytes`, or "
                                         r"max_record_bytes=None"):
        kg.TFRecordGenerator(path, {"v": "float"}, max_record_bytes=limit, verbose=0)
    for limit in (lengths[2], None):
        gen = kg.TFRecordGenerator(path, {"v": "float"}, max_record_bytes=limit,
                                   batch_size=3, shuffle=False, verbose=0)
        assert gen[0][:, 0].tolist() == [0.0, 1.0, 2.0]
