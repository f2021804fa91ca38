import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # no update check at import
os.environ.setdefault("MPLBACKEND", "Agg")

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

CLASSES = ("cat", "dog", "fox")

# The tests by Keras backend: one place (docs/backends.md has the table). `make test` runs
# everything on TensorFlow; `make test-jax` runs pytest with KERAS_BACKEND=jax, and off
# TensorFlow only the files of BACKEND_SUITE are collected (they train through `model.fit`
# or check backend-independent contracts). Every other file is left out with its reason,
# listed at the end of the run, never dropped unseen.
BACKEND_SUITE = {
    "test_backends.py": "fit per generator kind and worker mode, fork warning, no TensorFlow",
    "test_contract.py": "the contract over every generator kind",
    "test_sampler_contract.py": "the contract over every sampler",
    "test_order.py": "epoch order and resume state",
    "test_keras_peer.py": "Keras's own tests of image_dataset_from_directory, every backend",
    "test_keras_io_examples.py": "keras.io's examples as written, on the backend they run on",
    "test_worker_matrix.py": "worker threads and processes under every fit and adapter mode",
    "test_multihost.py": "2 JAX processes with keras.distribution (subprocesses on JAX "
                         "whatever the backend)",
    "test_notebook.py": "worker processes in a real Jupyter kernel",
    "test_remote.py": "remote folders and CSV files (fsspec memory://), trained through fit",
    "test_audio.py": "audio folders trained through fit (generator and tf.data), Keras's own "
                     "tests, no TensorFlow on JAX",
    "test_map_and_strings.py": "tf.data's map and string batches, trained through fit",
    "test_sparse.py": "scipy.sparse rows batched sparse (sparse=True), trained through fit",
    "test_stream_tables.py": "Parquet and Arrow IPC shards streamed and trained through fit (no "
                             "TensorFlow)",
    "test_table_copy.py": "Parquet row groups copied to Arrow for shuffled reads, trained "
                          "through fit",
    "test_tables.py": "Arrow, Parquet, Feather and pandas tables trained through fit; worker "
                      "threads and processes",
    "test_text.py": "text folders trained through fit (map_batch on any backend); Keras's own "
                    "tests of text_dataset_from_directory",
    "test_timeseries.py": "windows of a series trained through fit; Keras's function's formats",
}
TENSORFLOW_ONLY = {
    "test_tfdata_errors.py": "the tf.data forms (to_tf_dataset, image_dataset_from_directory's "
                             "dataset) and TensorFlow's errors",
    "test_tfrecord.py": "TFRecordGenerator parses records with TensorFlow's Example proto",
    "test_tfrecord_shards.py": "TFRecord lists, globs, GZIP/ZLIB and remote copies: records "
                               "parsed with TensorFlow's Example proto",
    "test_stream.py": "its TFRecord reader parses records with TensorFlow's Example proto",
    "test_arrayrecord.py": "ArrayRecord records are parsed with TensorFlow's Example proto",
    "test_malloc.py": "undoes the malloc pin of TensorFlow's generator dataset (off "
                      "TensorFlow test_backends.py checks malloc is left alone)",
    "test_distributed.py": "tf.data interop, tf.data service and tf.distribute",
    "test_dropin.py": "compares with tf.image.resize and Keras's tf.data "
                      "image_dataset_from_directory (imports tensorflow)",
    "test_feeding.py": "checks Keras's TensorFlow adapter (its tf.data dataset, autotuning, "
                       "errors re-raised by tf.data)",
    "test_kerashub.py": "KerasHub's detectors take gen.to_tf_dataset() (tf.data); its JAX "
                        "check runs in a KERAS_BACKEND=jax subprocess",
    "test_keras.py": "its Recorder overrides train_step(data), which JAX calls as "
                     "train_step(state, data); test_backends.py covers fit off TensorFlow",
}
OTHER_REASON = "backend-independent or TensorFlow-path checks, run by `make test`"
_left_out = {}


def pytest_ignore_collect(collection_path, config):
    backend = os.environ["KERAS_BACKEND"]
    name = collection_path.name
    if backend == "tensorflow" or not (name.startswith("test_") and name.endswith(".py")):
        return None
    if name in BACKEND_SUITE:
        return None
    _left_out[name] = TENSORFLOW_ONLY.get(name, OTHER_REASON)
    return True


def pytest_terminal_summary(terminalreporter):
    if _left_out:
        backend = os.environ["KERAS_BACKEND"]
        terminalreporter.section(f"not run on the {backend} backend (tests/conftest.py)")
        for name, reason in sorted(_left_out.items()):
            terminalreporter.write_line(f"{name}: {reason}")


def write_image(path, height=12, width=16, value=None, seed=0, ext_params=()):
    """A small colour image whose content encodes `value` (or random noise)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    if value is not None:
        image[...] = value
    assert cv2.imwrite(str(path), image, list(ext_params)), path
    return image


@pytest.fixture
def image_folder(tmp_path):
    """3 classes (cat 4, dog 3, fox 5 images), PNG and JPEG mixed, one nested folder."""
    root = tmp_path / "images"
    counts = {"cat": 4, "dog": 3, "fox": 5}
    k = 0
    for name, count in counts.items():
        for i in range(count):
            ext = ".png" if i % 2 == 0 else ".jpg"
            sub = "nested" if (name == "fox" and i == 4) else ""
            write_image(str(root / name / sub / f"{name}_{i}{ext}"), value=10 * k, seed=k)
            k += 1
    (root / "cat" / "notes.txt").write_text("not an image")
    return root


@pytest.fixture
def csv_file(tmp_path, image_folder):
    """A CSV listing the folder's images with string labels, relative to the folder."""
    lines = ["filename,label,weight"]
    for name in CLASSES:
        for path in sorted((image_folder / name).rglob("*")):
            if path.suffix in (".png", ".jpg"):
                lines.append(f"{path.relative_to(image_folder)},{name},1.0")
    csv_path = image_folder / "train.csv"
    csv_path.write_text("\n".join(lines) + "\n")
    return csv_path


def plant_old_temp_links(target, tmp_path):
    """Symlinks at the temporary names kerasgen once wrote `target` through
    (<target>.tmp-<pid>, around this pid), all leading to a victim file; returns the
    victim and the folder's names with them planted."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    for pid in range(os.getpid() - 5, os.getpid() + 6):
        os.symlink(victim, f"{target}.tmp-{pid}")
    return victim, set(os.listdir(tmp_path))
