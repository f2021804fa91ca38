#!/usr/bin/env python
"""A typical augmentation pipeline, kerasgen against albumentations + tf.data, in one run.

Standalone script (never part of the test suite). Every pipeline does the same work per
image: read the JPEG, decode it, resize it to 256x256 (bilinear), apply
`kg.augment.typical((224, 224))` (albumentations: HorizontalFlip, RandomResizedCrop to
224x224, ColorJitter) to the uint8 image, and return float32 batches of 32 scaled by 1/255:

- kerasgen:  `kg.ImageFolderGenerator(dir, image_size=(256, 256), augment=typical,
             rescale=1/255, shuffle=False, label_mode="int")`, `gen[i]` for every i;
- tf.data:   the recipe of the albumentations docs: from_tensor_slices(paths, labels)
             -> map(read_file, decode_jpeg, resize 256x256, AUTOTUNE)
             -> map(tf.numpy_function(albumentations), AUTOTUNE) -> set_shape
             -> batch(32) -> prefetch(AUTOTUNE), iterated eagerly with `.numpy()`;
- plain Sequence: a `keras.utils.PyDataset` doing cv2.imread + resize + albumentations per
             file in `__getitem__`, as tutorials write it.

Data: the benchmark photo folder of benchmarks/images.py (`benchmarks/.data/photos`, 2000
JPEGs of about 500x375 in 10 class folders; `photos-300` with --quick), built by
benchmarks/data.py when missing.

Each timed pass runs in a fresh child process (this script with the hidden `--part`), so
no pipeline inherits another's threads, caches or process-wide settings (glibc's malloc
thresholds, which kerasgen can tune: the table says whether the kerasgen child ran with them
raised). A child imports everything, makes one untimed warm-up pass over a few batches,
waits until other processes use less than `--max-other` cores (at most `--quiet-wait`
seconds, then notes that it gave up), and times building the pipeline plus one pass over
every file. A pass during which other processes used more than `--max-other` cores is run
again, up to `--retries` times. Passes go round robin over the pipelines, `--repeats`
times; the median images/s is reported.

Run from the repository root, as a module:

    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.augment            # full
    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.augment --quick    # smoke run

The script sets NO_ALBUMENTATIONS_UPDATE=1 for itself and its children (unless already
set), so albumentations' update check does no network request at import.
"""

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")

from benchmarks.data import (DEFAULT_NUM_FILES, ROOT, build_data,  # noqa: E402
                             default_folder, list_files, warm_page_cache)
from benchmarks.machine import (CpuMeter, add_quiet_options, usable_cores,  # noqa: E402
                                wait_for_quiet)

MODULE = "benchmarks.augment"  # what the child processes run: python -m MODULE --part ...

LOAD_SIZE = (256, 256)   # (height, width) every image is resized to before augmenting
CROP_SIZE = (224, 224)   # what RandomResizedCrop returns
BATCH_SIZE = 32
SEED = 0
TARGET = 1.5             # kerasgen / tf.data
QUICK_NUM_FILES = 300
WARMUP_BATCHES = 3
PIPELINES = ("kerasgen", "tf.data", "plain Sequence")


# ---------------------------------------------------------------------------- data
def ensure_data(folder, num_files, given):
    """Builds the benchmark folder of benchmarks/images.py (benchmarks/data.py) when files are
    missing (a folder given with --data is used as it is); returns what was done."""
    folder = Path(folder)
    if folder.is_dir() and (given or len(list_files(folder)[0]) >= num_files):
        return f"reused {folder}"
    seconds, written = build_data(folder, num_files)
    return f"built {folder}: wrote {written} files in {seconds:.1f} s"


# ---------------------------------------------------------------------------- pipelines
def make_kerasgen(folder, transform):
    import kerasgen as kg

    return kg.ImageFolderGenerator(folder, image_size=LOAD_SIZE, batch_size=BATCH_SIZE,
                                   shuffle=False, seed=SEED, label_mode="int",
                                   augment=transform, rescale=1 / 255, verbose=0)


def make_tf_dataset(paths, labels, transform):
    """The albumentations + TensorFlow recipe (albumentations docs, "Using albumentations
    with TensorFlow"), with the same decode and resize as the other pipelines."""
    import numpy as np
    import tensorflow as tf

    def load(path, label):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        image = tf.image.resize(image, LOAD_SIZE)  # bilinear, float32 in [0, 255]
        return tf.cast(tf.round(image), tf.uint8), label

    def augment(image):
        return transform(image=image)["image"].astype(np.float32) / np.float32(255)

    def process(image, label):
        return tf.numpy_function(augment, [image], tf.float32), label

    def set_shapes(image, label):
        image.set_shape(CROP_SIZE + (3,))
        label.set_shape([])
        return image, label

    return (tf.data.Dataset.from_tensor_slices((paths, labels))
            .map(load, num_parallel_calls=tf.data.AUTOTUNE)
            .map(process, num_parallel_calls=tf.data.AUTOTUNE)
            .map(set_shapes)
            .batch(BATCH_SIZE)
            .prefetch(tf.data.AUTOTUNE))


def make_plain_sequence(paths, labels, transform):
    import cv2
    import keras
    import numpy as np

    class PlainSequence(keras.utils.PyDataset):
        """A Sequence as tutorials write it: cv2 + albumentations per file."""

        def __init__(self, paths, labels, **kwargs):
            super().__init__(**kwargs)
            self.paths, self.labels = paths, np.asarray(labels, dtype="int32")

        def __len__(self):
            return math.ceil(len(self.paths) / BATCH_SIZE)

        def __getitem__(self, idx):
            lo, hi = idx * BATCH_SIZE, (idx + 1) * BATCH_SIZE
            images = []
            for path in self.paths[lo:hi]:
                image = cv2.cvtColor(cv2.imread(path), cv2.COLOR_BGR2RGB)
                image = cv2.resize(image, (LOAD_SIZE[1], LOAD_SIZE[0]))
                images.append(transform(image=image)["image"])
            return np.array(images, dtype=np.float32) / 255.0, self.labels[lo:hi]

    return PlainSequence(paths, labels)


def build(name, folder, paths, labels, transform):
    if name == "kerasgen":
        return make_kerasgen(folder, transform)
    if name == "tf.data":
        return make_tf_dataset(paths, labels, transform)
    return make_plain_sequence(paths, labels, transform)


def iterate(pipeline, max_batches=None):
    """One pass (or its first `max_batches` batches); returns (images, first batch shape,
    dtype, min, max)."""
    seen, first = 0, None
    if hasattr(pipeline, "as_numpy_iterator"):  # tf.data, iterated eagerly
        batches = ((x.numpy(), y) for x, y in pipeline)
    else:
        batches = (pipeline[i] for i in range(len(pipeline)))
    for i, (x, _) in enumerate(batches):
        if first is None:
            first = (list(x.shape), str(x.dtype), float(x.min()), float(x.max()))
        seen += len(x)
        if max_batches is not None and i + 1 >= max_batches:
            break
    return seen, first


def child(args):
    """Times one pass of one pipeline in this process; writes a JSON result."""
    import kerasgen as kg

    folder = str(args.data)
    paths, labels = list_files(folder)
    transform = kg.augment.typical(CROP_SIZE)
    # Untimed warm-up: imports, TF runtime, thread pools, albumentations' first calls.
    warm = build(args.part, folder, paths[:WARMUP_BATCHES * BATCH_SIZE],
                 labels[:WARMUP_BATCHES * BATCH_SIZE], transform)
    iterate(warm, WARMUP_BATCHES)
    del warm
    discarded = []
    while True:
        waited, quiet = wait_for_quiet(args.max_other, args.quiet_wait)
        with CpuMeter() as meter:
            pipeline = build(args.part, folder, paths, labels, transform)
            seen, first = iterate(pipeline)
        del pipeline
        result = {"pipeline": args.part, "seconds": meter.wall, "images": seen,
                  "images_per_s": seen / meter.wall, "own_cores": meter.own_cores,
                  "other_cores": meter.other_cores, "waited_s": waited, "quiet": quiet,
                  "first_batch": first}
        disturbed = (meter.other_cores or 0.0) > args.max_other
        if not disturbed or len(discarded) >= args.retries:
            break
        discarded.append(result)  # other processes took CPU during the pass: run again
    result["disturbed"] = disturbed
    result["discarded"] = discarded
    if args.part == "kerasgen":
        from kerasgen.arrays import malloc as _malloc

        result["mallopt"] = _malloc.times_applied() > 0
    import albumentations
    import keras
    import tensorflow as tf

    result["versions"] = {"tensorflow": tf.__version__, "keras": keras.__version__,
                          "albumentations": albumentations.__version__}
    Path(args.out).write_text(json.dumps(result))
    return 0


# ---------------------------------------------------------------------------- parent
def run_child(name, args, out):
    command = [sys.executable, "-m", MODULE, "--part", name, "--data", str(args.data),
               "--out", out, "--max-other", str(args.max_other),
               "--quiet-wait", str(args.quiet_wait), "--retries", str(args.retries)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(Path(out).read_text())


def report(runs, args, num_files, data_note, wall):
    versions = runs["kerasgen"][0]["versions"]
    lines = []
    say = lines.append
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "?"
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "kerasgen"],
                           capture_output=True, text=True).stdout.strip()
    say(f"Augmentation benchmark: {num_files} JPEGs from {args.data} ({data_note})")
    say(f"decode + resize {LOAD_SIZE[0]}x{LOAD_SIZE[1]} + kg.augment.typical("
        f"{CROP_SIZE}) -> float32/255 batches of {BATCH_SIZE}; {args.repeats} repeat(s), "
        f"median")
    say(f"machine: {usable_cores()} cores, {platform.python_implementation()} "
        f"{platform.python_version()}, tensorflow {versions['tensorflow']}, keras "
        f"{versions['keras']}, albumentations {versions['albumentations']}; commit {commit}"
        f"{' (kerasgen/ modified)' if dirty else ''}")
    say("")
    say(f"{'pipeline':<16}{'images/s':>10}{'min':>9}{'max':>9}{'cores':>7}{'others':>8}"
        f"{'waited s':>10}{'redone':>8}")
    medians = {}
    for name in PIPELINES:
        rs = runs[name]
        rates = [r["images_per_s"] for r in rs]
        medians[name] = statistics.median(rates)
        others = max((r["other_cores"] or 0.0) for r in rs)
        notes = []
        not_quiet = sum(not r["quiet"] for r in rs)
        if not_quiet:
            notes.append(f"never quiet before {not_quiet} run(s)")
        disturbed = sum(r["disturbed"] for r in rs)
        if disturbed:
            notes.append(f"{disturbed} run(s) kept although disturbed")
        say(f"{name:<16}{medians[name]:>10.0f}{min(rates):>9.0f}{max(rates):>9.0f}"
            f"{statistics.median(r['own_cores'] for r in rs):>7.2f}{others:>8.2f}"
            f"{max(r['waited_s'] for r in rs):>10.1f}"
            f"{sum(len(r['discarded']) for r in rs):>8d}"
            f"{'  (' + '; '.join(notes) + ')' if notes else ''}")
    say("")
    ratio = medians["kerasgen"] / medians["tf.data"]
    say(f"kerasgen / tf.data + albumentations:  {ratio:.2f}x  (target >= {TARGET}: "
        f"{'PASS' if ratio >= TARGET else 'MISS'})")
    best = max(r["images_per_s"] for r in runs["tf.data"])
    say(f"kerasgen / tf.data's fastest pass:    {medians['kerasgen'] / best:.2f}x  (info)")
    say(f"kerasgen / plain Sequence:            "
        f"{medians['kerasgen'] / medians['plain Sequence']:.2f}x  (info)")
    mallopt = {r.get("mallopt") for r in runs["kerasgen"]}
    say(f"columns: cores = median cores the pipeline's process used; others = most cores "
        f"other processes used during a kept pass; waited = longest wait for a quiet "
        f"machine (<= {args.max_other} other cores, giving up after "
        f"{args.quiet_wait:.0f} s); redone = passes run again because other processes "
        f"used > {args.max_other} cores during them. kerasgen malloc thresholds raised: "
        f"{', '.join(map(str, sorted(mallopt)))}.")
    say(f"wall time {wall:.0f} s")
    print("\n".join(lines))
    return {"commit": commit, "kerasgen_modified": bool(dirty), "num_files": num_files,
            "data": str(args.data), "repeats": args.repeats, "cores": usable_cores(),
            "medians": medians, "ratio": ratio, "ratio_to_fastest_tf_data":
            medians["kerasgen"] / best, "target": TARGET,
            "pass": ratio >= TARGET, "runs": runs, "report": lines}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: {QUICK_NUM_FILES} files, 1 repeat")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed passes per pipeline (default 3; 1 with --quick)")
    parser.add_argument("--data", type=Path, default=None,
                        help="image folder with class subfolders (default "
                             "benchmarks/.data/photos; built when missing)")
    parser.add_argument("--num-files", type=int, default=None,
                        help=f"files of a folder to build (default {DEFAULT_NUM_FILES}; "
                             f"{QUICK_NUM_FILES} with --quick)")
    parser.add_argument("--json", type=Path, default=None, help="write every number here")
    add_quiet_options(parser, quiet_wait=60.0)
    parser.add_argument("--part", choices=PIPELINES, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.part is not None:
        return args
    if args.num_files is None:
        args.num_files = QUICK_NUM_FILES if args.quick else DEFAULT_NUM_FILES
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    args.data_given = args.data is not None
    if args.data is None:
        args.data = default_folder(args.num_files)
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.part is not None:
        return child(args)
    start = time.perf_counter()
    data_note = ensure_data(args.data, args.num_files, args.data_given)
    paths, _ = list_files(args.data)
    warm_page_cache(paths)
    runs = {name: [] for name in PIPELINES}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for name in PIPELINES:  # round robin: slow drift hits every pipeline alike
                result = run_child(name, args, os.path.join(tmp, "result.json"))
                runs[name].append(result)
                print(f"  repeat {repeat + 1}/{args.repeats} {name:<15} "
                      f"{result['images_per_s']:7.0f} images/s  "
                      f"(cores {result['own_cores']:.2f}, others "
                      f"{result['other_cores'] or 0:.2f}, redone "
                      f"{len(result['discarded'])}"
                      f"{', NOT QUIET' if not result['quiet'] else ''}"
                      f"{', DISTURBED' if result['disturbed'] else ''})", flush=True)
    shapes = {name: runs[name][0]["first_batch"] for name in PIPELINES}
    if len({(tuple(s[0]), s[1]) for s in shapes.values()}) != 1:
        sys.exit(f"The pipelines yield different batches: {shapes}")
    print()
    summary = report(runs, args, len(paths), data_note, time.perf_counter() - start)
    if args.json is not None:
        summary["first_batches"] = shapes
        args.json.write_text(json.dumps(summary, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
