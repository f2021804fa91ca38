"""Pipeline stats, `kerasgen inspect` / `bench` (SQL and TFRecord sources: test_sql.py,
test_tfrecord.py)."""

import json
import os
import subprocess
import sys

import keras
import pytest

import kerasgen as kg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args):
    return subprocess.run([sys.executable, "-m", "kerasgen.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=240, cwd=ROOT,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


def tiny_model():
    """A model of the fixture's 8x8 images and 3 classes, compiled."""
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


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
    model = tiny_model()
    callback = kg.callbacks.PipelineStats()
    history = model.fit(gen, epochs=2, verbose=0, callbacks=[callback])
    for key in ("data/wait_s", "data/batches_per_s", "data/decode_s"):
        assert len(history.history[key]) == 2, key
    assert all(w >= 0 for w in history.history["data/wait_s"])
    assert gen.fit_wait_s is not None and len(callback.history) == 2


def test_fit_wait_measures_a_slow_pipeline():
    from kerasgen._stats import fit_wait

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
    assert text.returncode == 1, text.stderr[-2000:]  # bad files: scripts and CI see it
    assert "3 classes, imbalance ratio 2.0" in text.stdout and "corrupt files: 1" in text.stdout
    as_json = json.loads(cli("inspect", image_folder, "--json").stdout)
    assert as_json["classes"] == report["classes"]


def test_inspect_a_csv(csv_file):
    report = kg.inspect(csv_file, verbose=0)
    assert report["classes"] == {"cat": 4, "dog": 3, "fox": 5} and not report["corrupt"]


@pytest.mark.slow
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


def test_stats_after_fit_count_the_steps_fit_trained_on(image_folder):
    """Keras's adapter peeks at batch 0 and the work-ahead makes batches early: neither
    counts as a step; PipelineStats logs each epoch without resetting the record."""
    gen = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4, stats=True,
                                  label_mode="int")
    model = tiny_model()
    callback = kg.callbacks.PipelineStats()
    history = model.fit(gen, epochs=2, verbose=0, callbacks=[callback])
    stats = gen.stats()
    assert stats["batches"] == 2 * len(gen) == 6 and stats["samples"] == 24
    assert stats["made"] >= stats["batches"]
    assert [entry["batches"] for entry in callback.history] == [3, 3]
    logged = {k for k in history.history if k.startswith("data/")}
    assert {"data/wait_s", "data/batches_per_s", "data/decode_s"} <= logged
    assert not {"data/read_s", "data/busy_s"} & logged  # no zero stage, the few numbers
    again = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4,
                                    stats=True, label_mode="int")
    model.fit(again, epochs=1, verbose=0)  # no callback: the same count
    assert again.stats()["batches"] == 3


def test_stats_cross_to_worker_processes(image_folder):
    gen = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4, stats=True,
                                  workers=2, use_multiprocessing=True, label_mode="int")
    for i in range(len(gen)):
        gen[i]
    stats = gen.stats()
    # the batches made in the workers are not counted here (the first, not foreseen, is)
    assert stats["batches"] == 3 and stats["made"] < 3
