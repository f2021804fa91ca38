#!/usr/bin/env python
"""The rate a real model trains at, fed by each pipeline: Keras's tutorial CNN on a CPU.

Standalone script (never part of the test suite). It

1. builds, once, 1,200 photos (random crops of scikit-learn's two bundled sample photos,
   nothing downloaded): 640x480 and 800x600, three JPEG (quality 90) to one PNG, in 5
   class folders;
2. trains the CNN of Keras's "image classification from scratch" tutorial (Rescaling,
   Conv2D 16/32/64 with max pooling, global average pooling, Dense) at 180x180, batch
   64, for 3 epochs per run, each run in a fresh process (this script with the hidden
   `--part`), fed by `keras.utils.image_dataset_from_directory`, by kerasgen's generator
   in one of its settings (`model.fit(gen)`), or by the tf.data dataset that
   `kg.image_dataset_from_directory` returns (the same call as Keras's, the import
   swapped); the rounds interleave the feeds, so slow drift hits them alike;
3. prints images/s over epochs 2-3 of each run (the first pays for tracing and the new
   process), their medians, the slowest epoch seen, and the ratios the project targets.

Every feed gives the model pixels 0-255 and the model rescales, as the tutorial does;
kerasgen's uint8 row hands over uint8 batches, the others float32. Nothing else is
tuned: each feed runs as a user would call it. kerasgen's default keeps decoded images
in RAM for later epochs (cache="auto": up to 1 GiB, here 117 MB), so two info rows make
the comparison like for like: kerasgen cache=None (decoding every epoch, as the peer does
by default), and image_dataset_from_directory with tf.data's .cache() (the peer cached).

Run from the repository root, as a module:

    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.fit_cnn            # 3 rounds
    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.fit_cnn --quick    # smoke run
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import cv2  # noqa: E402

from benchmarks.data import DATA_DIR, make_photo, warm_page_cache  # noqa: E402
from benchmarks.machine import CpuMeter, add_quiet_options, wait_for_quiet  # noqa: E402

MODULE = "benchmarks.fit_cnn"  # what the child processes run: python -m MODULE --part ...

IMAGE_SIZE = (180, 180)
BATCH_SIZE = 64
NUM_CLASSES = 5
NUM_FILES = 1200
SIZES = ((640, 480), (800, 600))  # (width, height), alternating
DEFAULT_DATA = DATA_DIR / "cnn-photos"

IDFD = "image_dataset_from_directory"
KG = "kerasgen (defaults, float32)"
KG_U8 = "kerasgen dtype='uint8'"
KG_THREADS = "kerasgen workers=2 (threads)"
KG_PROCESSES = "kerasgen workers=2, use_multiprocessing=True"
KG_NO_CACHE = "kerasgen cache=None (info)"
IDFD_CACHE = "image_dataset_from_directory + .cache() (info)"
KG_TF = "kg.image_dataset_from_directory (tf.data)"
KG_TF_NO_CACHE = "kg.image_dataset_from_directory cache=None (info)"
# the feeds made by an image_dataset_from_directory call: Keras's, or kerasgen's (its
# keyword arguments beyond Keras's)
DATASET_FEEDS = {IDFD: None, IDFD_CACHE: None, KG_TF: {}, KG_TF_NO_CACHE: {"cache": None}}
FEEDS = {  # name: keyword arguments of kg.ImageFolderGenerator, or of DATASET_FEEDS
    IDFD: None,
    KG_TF: {},
    KG: {},
    KG_U8: {"dtype": "uint8"},
    KG_THREADS: {"workers": 2},
    KG_PROCESSES: {"workers": 2, "use_multiprocessing": True},
    KG_NO_CACHE: {"cache": None},
    IDFD_CACHE: None,
    KG_TF_NO_CACHE: {"cache": None},
}
TARGETS = [  # label, numerator, denominator, target
    ("model.fit kerasgen / image_dataset_from_directory", KG, IDFD, 1.1),
    ("model.fit kg.image_dataset_from_directory / Keras's", KG_TF, IDFD, 1.5),
    ("model.fit kg.image_dataset_from_directory / kerasgen generator", KG_TF, KG, 0.95),
    ("model.fit kg.image_dataset_from_directory cache=None / Keras's", KG_TF_NO_CACHE, IDFD,
     None),
    ("model.fit kerasgen uint8 / image_dataset_from_directory", KG_U8, IDFD, None),
    ("model.fit kerasgen worker processes / worker threads", KG_PROCESSES, KG_THREADS, 0.9),
    ("model.fit kerasgen worker threads / one worker", KG_THREADS, KG, None),
    ("model.fit kerasgen cache=None / image_dataset_from_directory", KG_NO_CACHE, IDFD, None),
    ("model.fit kerasgen / image_dataset_from_directory + .cache()", KG, IDFD_CACHE, None),
]


def file_name(i):
    return f"class_{i % NUM_CLASSES}/img_{i:05d}.{'png' if i % 4 == 3 else 'jpg'}"


def build_data(folder):
    """Writes the files missing from `folder`; returns how many it wrote."""
    folder = Path(folder)
    missing = [i for i in range(NUM_FILES) if not (folder / file_name(i)).exists()]
    if not missing:
        return 0
    from sklearn.datasets import load_sample_images

    photos = load_sample_images().images
    for i in missing:
        target = folder / file_name(i)
        target.parent.mkdir(parents=True, exist_ok=True)
        image = make_photo(photos, i, SIZES[i % 2])
        params = [cv2.IMWRITE_JPEG_QUALITY, 90] if target.suffix == ".jpg" else []
        ok, encoded = cv2.imencode(target.suffix, image, params)
        if not ok:
            raise RuntimeError(f"cv2.imencode failed for {target}")
        partial = target.with_name(target.name + ".part")  # not an image name: never listed
        partial.write_bytes(encoded.tobytes())
        os.replace(partial, target)
    return len(missing)


def tutorial_cnn(image_size=IMAGE_SIZE, num_classes=NUM_CLASSES):
    import keras
    from keras import layers

    inputs = keras.Input(tuple(image_size) + (3,))
    x = layers.Rescaling(1 / 255)(inputs)
    for filters in (16, 32, 64):
        x = layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
        x = layers.MaxPooling2D()(x)
    x = layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inputs, layers.Dense(num_classes)(x))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def feed(name, folder):
    import keras

    import kerasgen as kg

    if name in DATASET_FEEDS:  # the same call, Keras's function or kerasgen's
        function = (keras.utils.image_dataset_from_directory if FEEDS[name] is None
                    else kg.image_dataset_from_directory)
        dataset = function(folder, image_size=IMAGE_SIZE, batch_size=BATCH_SIZE, seed=1,
                           verbose=False, **(FEEDS[name] or {}))
        return dataset.cache() if name == IDFD_CACHE else dataset
    return kg.ImageFolderGenerator(folder, image_size=IMAGE_SIZE, batch_size=BATCH_SIZE,
                                   label_mode="int", seed=1, verbose=0, **FEEDS[name])


def part(args):
    """One run in this fresh process: 3 epochs, epochs 2-3 timed; writes JSON."""
    import keras

    model = tutorial_cnn()
    epochs, meter = [], CpuMeter()

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                meter.__enter__()
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            epochs.append(time.perf_counter() - self.start)
            if epoch == 2:
                meter.__exit__(None, None, None)

    model.fit(feed(args.part, args.data), epochs=3, verbose=0, callbacks=[Timer()])
    with open(args.part_out, "w") as f:
        json.dump({"epoch_seconds": epochs, "own_cores": meter.own_cores,
                   "other_cores": meter.other_cores}, f)


def run_part(args, name):
    with tempfile.TemporaryDirectory(prefix="kerasgen-cnn-") as tmp:
        out = os.path.join(tmp, "part.json")
        quiet = wait_for_quiet(args.max_other, args.quiet_wait)[1]
        code = subprocess.run([sys.executable, "-m", MODULE, "--part", name,
                               "--part-out", out, "--data", args.data],
                              check=False).returncode
        if code != 0 or not os.path.exists(out):
            raise RuntimeError(f"the {name} run failed (exit code {code})")
        with open(out) as f:
            run = json.load(f)
    seconds = run["epoch_seconds"]
    return dict(run, images_per_s=2 * NUM_FILES / sum(seconds[1:]), quiet_before=quiet)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs per feed, interleaved (default 3; 1 with --quick)")
    parser.add_argument("--feeds", nargs="+", choices=list(FEEDS), default=list(FEEDS),
                        metavar="FEED", help="feeds to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="one round")
    parser.add_argument("--data", default=os.fspath(DEFAULT_DATA),
                        help=f"folder of the generated photos (default {DEFAULT_DATA})")
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="also write every number to this JSON file")
    add_quiet_options(parser, quiet_wait=30.0)
    parser.add_argument("--part", choices=list(FEEDS), help=argparse.SUPPRESS)
    parser.add_argument("--part-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    return args


def report(results, repeats):
    """Prints the table and the ratios; returns the ratios as a dict."""
    lines = ["", f"tutorial CNN at {IMAGE_SIZE[0]}x{IMAGE_SIZE[1]}, batch {BATCH_SIZE}, "
             f"{NUM_FILES} photos; images/s over epochs 2-3 of each run, median of "
             f"{repeats} fresh processes; slowest: the slowest single epoch 2 or 3 seen",
             f"{'feed':<48s} {'images/s':>9s} {'min':>7s} {'max':>7s} {'slowest':>8s}"]
    rates = {}
    for name, runs in results.items():
        if isinstance(runs, str):
            lines.append(f"{name:<48s} FAILED: {runs}")
            continue
        per_run = [r["images_per_s"] for r in runs]
        slowest = min(NUM_FILES / s for r in runs for s in r["epoch_seconds"][1:])
        rates[name] = statistics.median(per_run)
        lines.append(f"{name:<48s} {rates[name]:9.1f} {min(per_run):7.1f} "
                     f"{max(per_run):7.1f} {slowest:8.1f}")
    lines.append("")
    out = {}
    for label, top, bottom, target in TARGETS:
        if top not in rates or bottom not in rates:
            continue
        value = rates[top] / rates[bottom]
        verdict = "" if target is None else (
            f"  {'PASS' if value >= target else 'MISS'} (target >= {target:g})")
        lines.append(f"  {label:<60s} {value:5.2f}{verdict}")
        out[label] = {"value": value, "target": target}
    print("\n".join(lines), flush=True)
    return out


def main(argv=None):
    args = parse_args(argv)
    if args.part:
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")
        part(args)
        return None
    written = build_data(args.data)
    print(f"built {written} files in {args.data}" if written
          else f"using the {NUM_FILES} files in {args.data}", flush=True)
    warm_page_cache(sorted(str(p) for p in Path(args.data).rglob("img_*")))
    results = {name: [] for name in args.feeds}
    for rep in range(args.repeats):
        for name in args.feeds:
            if isinstance(results[name], str):
                continue
            try:
                run = run_part(args, name)
            except RuntimeError as error:
                results[name] = str(error)
                continue
            results[name].append(run)
            epochs = ", ".join(f"{NUM_FILES / s:.1f}" for s in run["epoch_seconds"])
            others = run["other_cores"]
            print(f"  round {rep + 1}: {name:<46s} {run['images_per_s']:7.1f} images/s "
                  f"(epochs: {epochs}; cores: {run['own_cores']:.2f}, other processes: "
                  f"{'?' if others is None else f'{others:.2f}'})", flush=True)
    ratios = report(results, args.repeats)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "ratios": ratios}, f, indent=2)
    return ratios


if __name__ == "__main__":
    main()
