"""A Parquet table of JPEG rows in model.fit: kerasgen's TableGenerator against Hugging
Face's `Dataset.to_tf_dataset` and a tf.data pipeline over the same bytes.

The table: `--rows` JPEG photos (benchmarks/data.py's generated crops of scikit-learn's
two sample photos, `--photo-size`, nothing downloaded) with 10 class labels, written by
Hugging Face `datasets` itself (`Image()` and `ClassLabel` features, `Dataset.to_parquet`:
its own row groups), as a dataset on the Hub is. Every feed decodes each image, resizes
it to `--image-size` (bilinear, float32) and batches 32, shuffled each epoch:

- `kg`: `kg.TableGenerator(file, image_col="image", y_col="label", image_size=...)`
  (its row groups fit the default 256 MiB cache: each is read once per process);
  `kg-copy` the same with `max_cache_bytes=64 MiB`, as a table larger than the cache
  is read: the image and label columns copied once into a memory-mapped Arrow file;
- `hf`: `datasets.Dataset.from_parquet(file)` with a transform decoding and resizing
  each batch's images (PIL, as the feature decodes them) and `to_tf_dataset(...,
  shuffle=True)`, as Hugging Face's TensorFlow guide does (its parallel mode,
  `num_workers=2`, failed here: "Data loading worker timed out!" on this table, 31
  images/s on 640 rows);
- `tf`: the Parquet file's image bytes and labels read with pyarrow, then
  `from_tensor_slices -> shuffle -> map(decode_jpeg, resize, AUTOTUNE) -> batch ->
  prefetch(AUTOTUNE)`, the tf.data guide's pipeline.

Each fit runs in a fresh process (epoch 1 warms up, epoch 2 is timed: images/s inside
`model.fit`, and the cores the process used). Models: the Keras image-classification
tutorial's CNN (`cnn`, Rescaling, three Conv2D/MaxPooling, pooling, Dense) and `tiny`
(Flatten, Dense), whose rate is the feed's. A round runs every feed once per model; the
printed ratios are kg against each peer per round, and their median.

    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.tables            # 3 rounds
    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.tables --quick    # smoke
"""

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from benchmarks import machine
from benchmarks.data import DATA_DIR, JPEG_QUALITY, NUM_CLASSES, make_photo

FEEDS = ("kg", "kg-copy", "hf", "tf")
KG_FEEDS = ("kg", "kg-copy")
SMALL_CACHE = 64 * 2**20  # kg-copy's max_cache_bytes: below the image column's size
MODELS = ("cnn", "tiny")
BATCH_SIZE = 32
SEED = 0


def table_path(rows, photo_size):
    return DATA_DIR / f"table-{rows}-{photo_size[0]}x{photo_size[1]}" / "train.parquet"


def build_table(rows, photo_size):
    """The Parquet file (made once): `rows` JPEG rows, row i of class i % 10, written by
    `datasets` with its Image and ClassLabel features."""
    path = table_path(rows, photo_size)
    if path.exists():
        return path
    import cv2
    import datasets
    from sklearn.datasets import load_sample_images

    photos = load_sample_images().images
    params = [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY]

    def encode(i):
        ok, data = cv2.imencode(".jpg", make_photo(photos, i, tuple(photo_size)), params)
        assert ok, i
        return data.tobytes()

    with ThreadPoolExecutor(2) as pool:
        images = list(pool.map(encode, range(rows)))
    names = [f"class_{c:02d}" for c in range(NUM_CLASSES)]
    features = datasets.Features({"image": datasets.Image(),
                                  "label": datasets.ClassLabel(names=names)})
    ds = datasets.Dataset.from_dict(
        {"image": [{"bytes": b, "path": None} for b in images],
         "label": [i % NUM_CLASSES for i in range(rows)]}, features=features)
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    ds.to_parquet(str(part))
    os.replace(part, path)
    return path


def make_feed(name, path, image_size):
    height, width = image_size
    if name in KG_FEEDS:
        import kerasgen as kg

        cache = {"max_cache_bytes": SMALL_CACHE} if name == "kg-copy" else {}
        return kg.TableGenerator(str(path), image_col="image", y_col="label",
                                 image_size=image_size, batch_size=BATCH_SIZE, seed=SEED,
                                 verbose=0, **cache)
    if name == "hf":
        import datasets
        from PIL import Image

        cache = path.parent / "hf-cache"
        ds = datasets.Dataset.from_parquet(str(path), cache_dir=str(cache))

        def transform(batch):
            batch["pixel_values"] = [
                np.asarray(image.convert("RGB").resize((width, height), Image.BILINEAR),
                           dtype="float32") for image in batch["image"]]
            return batch

        ds = ds.with_transform(transform)
        return ds.to_tf_dataset(columns="pixel_values", label_cols="label",
                                batch_size=BATCH_SIZE, shuffle=True)
    import pyarrow.parquet as pq
    import tensorflow as tf

    table = pq.read_table(str(path), columns=["image", "label"])
    images = [cell["bytes"] for cell in table.column("image").to_pylist()]
    labels = np.asarray(table.column("label").to_numpy(), dtype="int64")

    def decode(data, label):
        image = tf.io.decode_jpeg(data, channels=3)
        return tf.image.resize(image, image_size), label

    return (tf.data.Dataset.from_tensor_slices((images, labels))
            .shuffle(len(images), seed=SEED, reshuffle_each_iteration=True)
            .map(decode, num_parallel_calls=tf.data.AUTOTUNE)
            .batch(BATCH_SIZE).prefetch(tf.data.AUTOTUNE))


def make_model(name, image_size):
    import keras
    from keras import layers

    from benchmarks.fit_cnn import tutorial_cnn

    if name == "cnn":
        return tutorial_cnn(image_size, NUM_CLASSES)
    inputs = keras.Input(tuple(image_size) + (3,))
    x = layers.Rescaling(1 / 255)(inputs)
    model = keras.Model(inputs, layers.Dense(NUM_CLASSES)(layers.Flatten()(x)))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def fit_part(feed, model_name, rows, photo_size, image_size):
    """One fit in this process: epoch 2's images/s and the cores the process used."""
    import keras

    path = table_path(rows, photo_size)
    data = make_feed(feed, path, image_size)
    model = make_model(model_name, image_size)
    times = []

    class Clock(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.start, self.cpu = time.perf_counter(), os.times()

        def on_epoch_end(self, epoch, logs=None):
            cpu = os.times()
            wall = time.perf_counter() - self.start
            busy = (cpu.user + cpu.system + cpu.children_user + cpu.children_system
                    - self.cpu.user - self.cpu.system - self.cpu.children_user
                    - self.cpu.children_system)
            times.append((wall, busy / wall))

    model.fit(data, epochs=2, verbose=0, callbacks=[Clock()])
    wall, cores = times[-1]
    return {"feed": feed, "model": model_name, "images_per_s": rows / wall, "cores": cores}


def run_child(args, feed, model):
    cmd = [sys.executable, "-m", "benchmarks.tables", "--part", "fit", "--feed", feed,
           "--model", model, "--rows", str(args.rows),
           "--photo-size", *map(str, args.photo_size),
           "--image-size", *map(str, args.image_size)]
    return machine.run_quiet(cmd, args, f"{feed}/{model}")


def report(results, models):
    """The median rate of each feed and kg's ratio to each peer (per round, median)."""
    print("\nimages/s inside model.fit, median of rounds (kg's ratio to each peer; per "
          "round in brackets)")
    for model in models:
        rate = {feed: [r["images_per_s"] for r in results
                       if r["model"] == model and r["feed"] == feed] for feed in FEEDS}
        for feed in FEEDS:
            print(f"  {model:4} {feed:7} {statistics.median(rate[feed]):8.0f} images/s")
        for ours in KG_FEEDS:
            for peer in ("hf", "tf"):
                ratios = [a / b for a, b in zip(rate[ours], rate[peer])]
                print(f"  {model:4} {ours}/{peer:3} ratio {statistics.median(ratios):.2f} "
                      f"({', '.join(f'{r:.2f}' for r in ratios)})")


def main():
    parser = argparse.ArgumentParser(prog="tables.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--photo-size", type=int, nargs=2, default=(320, 240),
                        metavar=("W", "H"), help="the JPEGs' (width, height)")
    parser.add_argument("--image-size", type=int, nargs=2, default=(128, 128),
                        metavar=("H", "W"), help="what every feed resizes to")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--quick", action="store_true", help="smoke: 640 rows, one round")
    parser.add_argument("--json", help="write every result here")
    machine.add_quiet_options(parser, quiet_wait=60)
    parser.add_argument("--part", choices=["fit"], help=argparse.SUPPRESS)
    parser.add_argument("--feed", choices=FEEDS, help=argparse.SUPPRESS)
    parser.add_argument("--model", choices=MODELS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part == "fit":
        print(json.dumps(fit_part(args.feed, args.model, args.rows, args.photo_size,
                                  tuple(args.image_size))))
        return
    if args.quick:
        args.rows, args.rounds = 640, 1
    path = build_table(args.rows, args.photo_size)
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(str(path)).metadata
    commit, dirty = machine.git_state()
    print(f"kerasgen {commit}{' (modified)' if dirty else ''}; {args.rows} JPEG rows of "
          f"{args.photo_size[0]}x{args.photo_size[1]} in {path.name} "
          f"({path.stat().st_size / 2**20:.0f} MB, {meta.num_row_groups} row groups), "
          f"resized to {args.image_size[0]}x{args.image_size[1]}, batch {BATCH_SIZE}; "
          f"{machine.usable_cores()} cores")
    results = []
    for round_ in range(args.rounds):
        for model in args.models:
            for feed in FEEDS:
                result = run_child(args, feed, model)
                result["round"] = round_
                results.append(result)
                print(f"  round {round_ + 1} {model:4} {feed:7} "
                      f"{result['images_per_s']:8.0f} images/s  {result['cores']:.2f} cores",
                      flush=True)
    report(results, args.models)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "commit": commit}, f, indent=1)


if __name__ == "__main__":
    main()
