"""Pipeline stats, `kerasgen inspect` / `bench` and TFRecordGenerator (SQLGenerator:
test_sql.py)."""

import json
import os
import subprocess
import sys

import cv2
import keras
import numpy as np
import pytest

import kerasgen as kg

from .test_contract import ids

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args):
    return subprocess.run([sys.executable, "-m", "kerasgen.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=240, cwd=ROOT,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


def test_stats_time_each_stage(image_folder):
    gen = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4, stats=True,
                                  augment=lambda x, rng: x[::-1])
    for i in range(len(gen)):
        gen[i]
    stats = gen.stats()
    assert stats["batches"] == 3 and stats["samples"] == 12
    assert stats["stages_s"]["decode"] > 0 and stats["stages_s"]["augment"] > 0
    assert stats["stages_s"]["assemble"] > 0 and stats["stages_s"]["list"] > 0
    assert stats["busy_s"] > 0 and stats["batches_per_s"] > 0
    with pytest.raises(ValueError, match="stats=True"):
        kg.ImageFolderGenerator(image_folder).stats()


def test_pipeline_stats_callback_logs_each_epoch(image_folder, tmp_path):
    gen = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4, stats=True,
                                  label_mode="int")
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callback = kg.callbacks.PipelineStats()
    history = model.fit(gen, epochs=2, verbose=0, callbacks=[callback])
    for key in ("data/wait_s", "data/batches_per_s", "data/decode_s"):
        assert len(history.history[key]) == 2, key
    assert all(w >= 0 for w in history.history["data/wait_s"])
    assert gen.fit_wait_s is not None and len(callback.history) == 2


def test_fit_wait_measures_a_slow_pipeline():
    from kerasgen.stats import fit_wait

    # batches made at 1, 2, 3 s; steps end 0.1 s after each: the model waited 1 s each
    assert fit_wait([1.0, 2.0, 3.0], 0.0, [1.1, 2.1, 3.1]) == pytest.approx(2.8)
    # batches ready ahead of the steps: no wait
    assert fit_wait([0.1, 0.2, 0.3], 0.0, [1.0, 2.0, 3.0]) == pytest.approx(0.1)


def test_inspect_reports_classes_sizes_and_corrupt_files(image_folder):
    (image_folder / "fox" / "broken.jpg").write_bytes(b"\xff\xd8 no")
    report = kg.inspect(image_folder, verbose=0)
    assert report["files"] == 13 and report["classes"] == {"cat": 4, "dog": 3, "fox": 6}
    assert report["imbalance_ratio"] == 2.0
    assert report["size"]["most_common"] == [["12x16", 12]]
    assert report["formats"] == {"png": 7, "jpeg": 6}
    assert [os.path.basename(c["path"]) for c in report["corrupt"]] == ["broken.jpg"]
    text = cli("inspect", image_folder)
    assert text.returncode == 0, text.stderr[-2000:]
    assert "3 classes, imbalance ratio 2.0" in text.stdout and "corrupt files: 1" in text.stdout
    as_json = json.loads(cli("inspect", image_folder, "--json").stdout)
    assert as_json["classes"] == report["classes"]


def test_inspect_a_csv(csv_file):
    report = kg.inspect(csv_file, verbose=0)
    assert report["classes"] == {"cat": 4, "dog": 3, "fox": 5} and not report["corrupt"]


def test_bench_prints_images_per_second_and_stages(image_folder):
    result = cli("bench", image_folder, "--image-size", 16, "--batch-size", 4, "--workers",
                 2, "--cache", "memory", "--epochs", 2, "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert len(report["epochs"]) == 2 and report["images"] == 12
    assert all(e["images_per_s"] > 0 for e in report["epochs"])
    assert report["epochs"][0]["stages_s"]["decode"] > 0
    plain = cli("bench", image_folder, "--image-size", 16, "--epochs", 1)
    assert "images/s" in plain.stdout and "decode" in plain.stdout


@pytest.fixture
def records(tmp_path):
    import tensorflow as tf

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
    np.testing.assert_array_equal(
        ids(identity.predict(threads, verbose=0)),
        np.concatenate([ids(gen.at_epoch(0)[i][0]) for i in range(len(gen))]))
    numeric = kg.TFRecordGenerator(records, {"values": "float", "label": "label"},
                                   batch_size=14, shuffle=False, label_mode="int", verbose=0)
    xn, yn = numeric[0]
    np.testing.assert_array_equal(xn, [[k, 2 * k] for k in range(14)])


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
    with pytest.raises(ValueError, match=r"`features\['image'\]` must be one of"):
        kg.TFRecordGenerator(records, {"image": "png"}, verbose=0)


def test_tfrecord_without_tensorflow_says_how_to_install(records, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow.core.example.example_pb2", None)
    with pytest.raises(ImportError, match=r'pip install "kerasgen3\[tensorflow\]"'):
        kg.TFRecordGenerator(records, {"image": "image"}, verbose=0)
