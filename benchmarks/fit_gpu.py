#!/usr/bin/env python
"""GPU fit benchmark: the images/s model.fit trains at, fed by kerasgen and its peers.

Standalone script (never part of the test suite), made to run once, as one command, on a
machine with one GPU (an H200 with 16 cores in issue 12). It

1. builds, once, the benchmarks' photo folder (benchmarks/data.py: JPEG 500x375, quality
   90, random crops of scikit-learn's two bundled sample photos; nothing is downloaded),
   4,096 files by default, on a thread pool;
2. standalone rows (no model): one pass over every file by a bare cv2 thread pool over all
   cores (cv2.imread + cv2.resize; the practical limit), by a kerasgen generator read
   with gen[i], and by a torch DataLoader (16 workers) when torch is installed; each after
   an untimed warm-up pass;
3. for each model (keras.applications MobileNetV2 and ResNet50, weights=None: nothing is
   downloaded), builds and compiles it once, then feeds that same compiled model from each
   feed in turn: `model.fit(feed, epochs=2)`, timing the second epoch (the first pays for
   compiling, the first model compiles there, and the feed's start-up). Every feed gives
   batches of one shape and dtype, so the train step compiles once per model; the script
   counts the backend's compilations in each epoch and flags a feed that caused one;
4. prints a table (images/s, and the ratio to the in-memory ceiling) and the ratios the
   project targets on the GPU, marked PASS / MISS / n/a, and writes every number as JSON
   (`--json`, after every row, so a run cut short keeps what it measured).

Feeds (each a fresh object per row; kerasgen with cache=None, so each epoch decodes every
file as the peers do, except the info row that keeps kerasgen's default cache="auto"):

- ceiling: a keras.utils.PyDataset returning one fixed in-memory batch (`--input-dtype`:
  uint8 by default, the dtype every feed hands over);
- kerasgen-w1: kg.ImageFolderGenerator with its defaults (workers=1);
- kerasgen-threads: workers=4 (threads);
- kerasgen-processes: workers=4, use_multiprocessing=True (kerasgen's own processes);
- torch: a torch Dataset (cv2.imread, BGR to RGB, cv2.resize) in a
  torch.utils.data.DataLoader(batch_size, shuffle=True, num_workers=16), passed to
  model.fit as is (Keras turns its batches into numpy for JAX); skipped, with the reason,
  when torch is missing;
- gpu-decode: decoder="nvimgcodec" with workers=4 threads (nvImageCodec on the GPU where
  CUDA and nvJPEG are found, else its CPU backend: the row says which); skipped when
  nvImageCodec is not installed;
- kerasgen-cache (info): kerasgen's defaults with cache="auto" (epoch 2 from RAM);
- the ceiling again, last (info): how much the GPU's rate drifted over the model's rows.

The model: Input(uint8) -> Rescaling(1/127.5, offset=-1) -> the application (include_top
False, pooling "avg") -> Dense(10, float32), Adam, sparse categorical cross-entropy;
mixed_bfloat16 on a GPU, float32 on a CPU (`--precision`). JAX backend unless
KERAS_BACKEND says otherwise.

Run from the repository root, as a module (PYTHONUNBUFFERED=1 when only the output's
tail comes back):

    KERAS_BACKEND=jax python -m benchmarks.fit_gpu --json fit_gpu.json     # full (GPU)
    KERAS_BACKEND=jax python -m benchmarks.fit_gpu --quick                 # CPU smoke run

`--time-budget` seconds after the start, rows that are left (or predicted to end past it)
are skipped with a printed note; `--grace` seconds after that the script prints what it
has, writes the JSON and exits (code 3), so a device run never times out silently.
"""

import argparse
import gc
import json
import os
import platform
import sys
import threading
import time
import traceback
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from benchmarks.machine import CpuMeter, git_state, usable_cores  # noqa: E402 (stdlib only)

NUM_CLASSES = 10  # benchmarks/data.py's folder: 10 class subfolders

MODELS = {"mobilenetv2": "MobileNetV2", "resnet50": "ResNet50"}

CEILING = "ceiling"
KG_W1 = "kerasgen-w1"
KG_THREADS = "kerasgen-threads"
KG_PROCESSES = "kerasgen-processes"
TORCH = "torch"
GPU_DECODE = "gpu-decode"
KG_CACHE = "kerasgen-cache"
CEILING_AGAIN = "ceiling-again"
FEEDS = [CEILING, KG_W1, KG_THREADS, KG_PROCESSES, TORCH, GPU_DECODE, KG_CACHE]
KERASGEN_CPU = [KG_W1, KG_THREADS, KG_PROCESSES]  # the rows the CPU-decode targets judge

CV2_POOL = "cv2-pool"
KG_ITER = "kerasgen"
TORCH_ITER = "torch"
STANDALONE = [CV2_POOL, KG_ITER, TORCH_ITER]


def feed_label(feed, args):
    return {
        CEILING: f"fixed in-memory {args.input_dtype} batch (ceiling)",
        KG_W1: "kerasgen, workers=1 (defaults)",
        KG_THREADS: f"kerasgen, workers={args.workers} threads",
        KG_PROCESSES: f"kerasgen, {args.workers} worker processes",
        TORCH: f"torch DataLoader, {args.torch_workers} workers, cv2",
        GPU_DECODE: f"kerasgen, decoder='nvimgcodec', workers={args.workers} threads",
        KG_CACHE: "kerasgen, cache='auto' (info)",
        CEILING_AGAIN: "ceiling again, last (info: drift)",
    }[feed]


def standalone_label(row, args):
    return {
        CV2_POOL: f"bare cv2 thread pool, {args.threads} threads",
        KG_ITER: "kerasgen gen[i], workers=1 (defaults)",
        TORCH_ITER: f"torch DataLoader, {args.torch_workers} workers, cv2",
    }[row]


def say(text):
    print(text, flush=True)


# ---------------------------------------------------------------------------- arguments

def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Feeds: " + ", ".join(FEEDS) + ". Standalone rows: "
               + ", ".join(STANDALONE) + ". See benchmarks/README.md.")
    parser.add_argument("--quick", action="store_true",
                        help="a CPU smoke run: 128 files, 64x64, batch 16, MobileNetV2 "
                             "alpha=0.35 (each unless given)")
    parser.add_argument("--num-files", type=int, default=None,
                        help="photos in the folder (default 4096; 128 with --quick)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="batch size (default 64; 16 with --quick)")
    parser.add_argument("--image-size", type=int, default=None,
                        help="square image size the photos are resized to (default 224; "
                             "64 with --quick)")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=None,
                        help="models (default: mobilenetv2 resnet50; mobilenetv2 with "
                             "--quick)")
    parser.add_argument("--alpha", type=float, default=None,
                        help="MobileNetV2's width multiplier (default 1.0; 0.35 with "
                             "--quick)")
    parser.add_argument("--feeds", nargs="+", choices=FEEDS, default=list(FEEDS),
                        metavar="FEED", help="fit feeds, in this order (default: all)")
    parser.add_argument("--standalone", nargs="+", choices=STANDALONE,
                        default=list(STANDALONE), metavar="ROW",
                        help="standalone rows (default: all)")
    parser.add_argument("--no-standalone", action="store_true",
                        help="skip the standalone rows")
    parser.add_argument("--no-ceiling-again", action="store_true",
                        help="do not run the ceiling again after each model's rows")
    parser.add_argument("--workers", type=int, default=4,
                        help="kerasgen's workers for the threads and processes rows "
                             "(default 4)")
    parser.add_argument("--torch-workers", type=int, default=16,
                        help="the torch DataLoader's num_workers (default 16)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads of the bare cv2 pool (default: the usable cores)")
    parser.add_argument("--input-dtype", choices=["uint8", "float32"], default="uint8",
                        help="dtype of every feed's batches; the model's Input takes it "
                             "and rescales (default uint8)")
    parser.add_argument("--precision", choices=["auto", "mixed_bfloat16", "float32"],
                        default="auto", help="Keras's global dtype policy (auto: "
                        "mixed_bfloat16 when the backend sees a GPU, else float32)")
    parser.add_argument("--time-budget", type=float, default=480.0, metavar="SECONDS",
                        help="after this many seconds from the start, skip the rows left, "
                             "and those predicted to end past it (default 480; 0: none)")
    parser.add_argument("--grace", type=float, default=90.0, metavar="SECONDS",
                        help="this long after the budget, print what was measured, write "
                             "the JSON and exit with code 3 (default 90; 0: never)")
    parser.add_argument("--data", default=None,
                        help="folder of the generated photos (default: "
                             "benchmarks/.data/photos-N for N files)")
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="write every number here (rewritten after every row)")
    args = parser.parse_args(argv)
    quick = args.quick
    for name, full, small in (("num_files", 4096, 128), ("batch_size", 64, 16),
                              ("image_size", 224, 64), ("alpha", 1.0, 0.35)):
        if getattr(args, name) is None:
            setattr(args, name, small if quick else full)
    if args.models is None:
        args.models = ["mobilenetv2"] if quick else list(MODELS)
    if args.threads is None:
        args.threads = usable_cores()
    for name in ("num_files", "batch_size", "image_size", "workers", "torch_workers",
                 "threads"):
        value = getattr(args, name)
        if value < 1:
            parser.error(f"`--{name.replace('_', '-')}` must be a positive integer. "
                         f"Received: {value}")
    if args.image_size < 32:
        parser.error(f"`--image-size` must be at least 32 (the models' smallest input). "
                     f"Received: {args.image_size}")
    if args.no_standalone:
        args.standalone = []
    return args


# ------------------------------------------------------------------------------- data

def read_rgb(path, size):
    """A file as torch users and the bare pool read it: cv2.imread, RGB, cv2.resize."""
    import cv2

    image = cv2.imread(path)
    if image is None:
        raise OSError(f"cv2.imread could not read {path}")
    image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    return cv2.resize(image, (size, size))  # bilinear, as kerasgen's default


# ------------------------------------------------------------------------------ feeds

def nvimgcodec_missing():
    import importlib.util

    try:
        return importlib.util.find_spec("nvidia.nvimgcodec") is None
    except ImportError:
        return True


def kerasgen_feed(args, **extra):
    import kerasgen as kg

    kwargs = dict(image_size=(args.image_size, args.image_size), batch_size=args.batch_size,
                  label_mode="int", dtype=args.input_dtype, cache=None, seed=1, verbose=0)
    if args.input_dtype == "float32":
        kwargs["rescale"] = 1 / 255
    kwargs.update(extra)
    return kg.ImageFolderGenerator(args.data, **kwargs)


def fixed_batch(args, paths):
    """(x, y): the first batch_size files, decoded once, as every feed hands them over."""
    import numpy as np

    count = min(args.batch_size, len(paths))
    x = np.stack([read_rgb(p, args.image_size) for p in paths[:count]])
    if count < args.batch_size:
        x = np.concatenate([x] * -(-args.batch_size // count))[:args.batch_size]
    if args.input_dtype == "float32":
        x = x.astype("float32") / 255
    y = (np.arange(args.batch_size) % NUM_CLASSES).astype("int32")
    return x, y


def ceiling_feed(args, batch):
    import keras

    steps = -(-args.num_files // args.batch_size)

    class FixedBatch(keras.utils.PyDataset):
        """One in-memory batch, `steps` times: the rate with no input pipeline at all."""

        def __len__(self):
            return steps

        def __getitem__(self, index):
            return batch

    return FixedBatch(), steps * args.batch_size


def torch_feed(args, paths, labels, shuffle=True):
    """A torch DataLoader as torch users write it (cv2 decoding in a Dataset)."""
    import cv2
    import numpy as np
    from torch.utils.data import DataLoader, Dataset

    size, as_float = args.image_size, args.input_dtype == "float32"

    class CvImageFolder(Dataset):
        def __init__(self, paths, labels):
            self.paths, self.labels = paths, labels

        def __len__(self):
            return len(self.paths)

        def __getitem__(self, index):
            image = read_rgb(self.paths[index], size)
            if as_float:
                image = image.astype(np.float32) / 255
            return image, self.labels[index]  # np.int32: batches of int32, as kerasgen's

    def one_cv2_thread(worker_id):  # OpenCV's own pool per worker would oversubscribe
        cv2.setNumThreads(1)

    return DataLoader(CvImageFolder(paths, labels), batch_size=args.batch_size,
                      shuffle=shuffle, num_workers=args.torch_workers,
                      worker_init_fn=one_cv2_thread)


def torch_missing():
    import importlib.util

    return importlib.util.find_spec("torch") is None


# ------------------------------------------------------------------------- standalone

def time_cv2_pool(args, paths):
    """One pass of cv2.imread (straight to RGB where OpenCV can, as kerasgen) + cv2.resize
    over every file on `threads` threads (chunks of 16 files per task; OpenCV's own pool
    set to one thread meanwhile)."""
    from concurrent.futures import ThreadPoolExecutor

    import cv2

    chunks = [paths[i:i + 16] for i in range(0, len(paths), 16)]
    saved = cv2.getNumThreads()
    cv2.setNumThreads(1)

    flag = getattr(cv2, "IMREAD_COLOR_RGB", cv2.IMREAD_COLOR)  # as kerasgen decodes
    size = (args.image_size, args.image_size)

    def decode(chunk):
        for path in chunk:
            cv2.resize(cv2.imread(path, flag), size)
        return len(chunk)

    try:
        with ThreadPoolExecutor(args.threads) as pool:
            sum(pool.map(decode, chunks[:max(1, 2 * args.threads)]))  # warm-up
            with CpuMeter() as meter:
                seen = sum(pool.map(decode, chunks))
    finally:
        cv2.setNumThreads(saved)
    return seen, meter


def time_kerasgen_iter(args):
    gen = kerasgen_feed(args)
    for i in range(len(gen)):  # warm-up pass
        gen[i]
    gen.on_epoch_end()
    with CpuMeter() as meter:
        seen = sum(len(gen[i][0]) for i in range(len(gen)))
    gen.on_epoch_end()
    return seen, meter


def time_torch_iter(args, paths, labels):
    loader = torch_feed(args, paths, labels)
    for _ in loader:  # warm-up pass
        pass
    with CpuMeter() as meter:
        seen = sum(len(x) for x, _ in loader)
    return seen, meter


# ------------------------------------------------------------------------------ model

def accelerator():
    """(the backend's first accelerator in words, or None)."""
    import keras

    backend = keras.backend.backend()
    try:
        if backend == "jax":
            import jax

            devices = [d for d in jax.devices() if d.platform != "cpu"]
            return f"{devices[0].device_kind} ({devices[0].platform})" if devices else None
        if backend == "torch":
            import torch

            return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        if backend == "tensorflow":
            import tensorflow as tf

            gpus = tf.config.list_physical_devices("GPU")
            return gpus[0].name if gpus else None
    except Exception as error:  # noqa: BLE001 (a broken GPU runtime: say so, use the CPU)
        say(f"could not list the backend's devices: {type(error).__name__}: {error}")
    return None


def build_model(name, args):
    import keras

    shape = (args.image_size, args.image_size, 3)
    inputs = keras.Input(shape, dtype=args.input_dtype)
    scale = 1 / 127.5 if args.input_dtype == "uint8" else 2.0
    x = keras.layers.Rescaling(scale, offset=-1.0)(inputs)
    if name == "mobilenetv2":
        base = keras.applications.MobileNetV2(input_shape=shape, alpha=args.alpha,
                                              include_top=False, weights=None,
                                              pooling="avg")
    else:
        base = keras.applications.ResNet50(input_shape=shape, include_top=False,
                                           weights=None, pooling="avg")
    outputs = keras.layers.Dense(NUM_CLASSES, dtype="float32")(base(x))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def model_label(name, args):
    if name == "mobilenetv2" and args.alpha != 1.0:
        return f"MobileNetV2 a={args.alpha:g}"
    return MODELS[name]


class CompileCounter:
    """Counts the backend's compilations (JAX only: jax.monitoring's backend-compile
    event); `count` is None on other backends."""

    def __init__(self):
        self.count = None
        try:
            import jax
            import keras

            if keras.backend.backend() != "jax":
                return
            jax.monitoring.register_event_duration_secs_listener(self._event)
            self.count = 0
        except Exception:  # noqa: BLE001 (an older JAX: no count, nothing else lost)
            self.count = None

    def _event(self, event, duration, *args, **kwargs):
        if event.endswith("backend_compile_duration"):
            self.count += 1


def fit_two_epochs(model, feed, counter, shuffle=True):
    """model.fit(feed, epochs=2); returns (seconds per epoch, CpuMeter of epoch 2,
    compilations per epoch)."""
    import keras

    seconds, compiles, meter = [], [], CpuMeter()

    class EpochTimer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                meter.__enter__()
            self.compiles = counter.count
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            # Keras hands callbacks python floats here: the device has finished the epoch
            seconds.append(time.perf_counter() - self.start)
            compiles.append(None if counter.count is None else counter.count - self.compiles)
            if epoch == 1:
                meter.__exit__(None, None, None)

    model.fit(feed, epochs=2, verbose=0, shuffle=shuffle, callbacks=[EpochTimer()])
    return seconds, meter, compiles


# ---------------------------------------------------------------------------- running

class Run:
    """Results, the JSON file, the time budget and the watchdog of one run."""

    def __init__(self, args):
        self.args = args
        self.start = time.perf_counter()
        self.lock = threading.Lock()
        self.info = {}
        self.standalone = {}  # row -> result dict
        self.fits = {}        # model -> feed -> result dict
        self.notes = []
        self.current = "start-up"
        if args.time_budget > 0 and args.grace > 0:
            timer = threading.Timer(args.time_budget + args.grace, self._overrun)
            timer.daemon = True
            timer.start()

    def elapsed(self):
        return time.perf_counter() - self.start

    def skip_reason(self, predicted):
        """Why the next row must be skipped (the budget), or None."""
        budget = self.args.time_budget
        if budget <= 0:
            return None
        if self.elapsed() >= budget:
            return f"time budget spent ({self.elapsed():.0f} s of {budget:g} s)"
        if predicted and self.elapsed() + predicted > budget:
            return (f"predicted to end past the time budget ({self.elapsed():.0f} s + "
                    f"~{predicted:.0f} s > {budget:g} s)")
        return None

    def note(self, text):
        with self.lock:
            self.notes.append(text)
        say(f"NOTE: {text}")

    def save(self):
        if not self.args.json:
            return
        with self.lock:
            doc = {"info": self.info, "standalone": self.standalone, "fits": self.fits,
                   "ratios": ratios(self), "notes": self.notes,
                   "elapsed_s": round(self.elapsed(), 1)}
        path = Path(self.args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".part")
        partial.write_text(json.dumps(doc, indent=2, default=str) + "\n")
        os.replace(partial, path)

    def _overrun(self):
        self.note(f"{self.args.time_budget + self.args.grace:g} s passed (time budget + "
                  f"grace) during {self.current}: stopping with what was measured")
        try:
            report(self)
            self.save()
        finally:
            sys.stdout.flush()
            os._exit(3)


def record(run, table, key, result):
    with run.lock:
        table[key] = result
    run.save()


def standalone_rows(run, paths, labels):
    args = run.args
    steps = {CV2_POOL: lambda: time_cv2_pool(args, paths),
             KG_ITER: lambda: time_kerasgen_iter(args),
             TORCH_ITER: lambda: time_torch_iter(args, paths, labels)}
    for row in args.standalone:
        label = standalone_label(row, args)
        if row == TORCH_ITER and torch_missing():
            record(run, run.standalone, row, {"status": "skipped",
                                              "reason": "torch is not installed"})
            say(f"standalone {label}: skipped (torch is not installed)")
            continue
        reason = run.skip_reason(None)
        if reason:
            record(run, run.standalone, row, {"status": "skipped", "reason": reason})
            run.note(f"standalone {label}: skipped: {reason}")
            continue
        run.current = f"standalone {label}"
        started = time.perf_counter()
        try:
            seen, meter = steps[row]()
        except Exception as error:  # noqa: BLE001 (recorded; the next rows still run)
            failed(run, run.standalone, row, label, error)
            continue
        result = {"status": "ok", "label": label, "images": seen, "seconds": meter.wall,
                  "images_per_s": seen / meter.wall, "own_cores": meter.own_cores,
                  "other_cores": meter.other_cores,
                  "row_seconds": time.perf_counter() - started}
        record(run, run.standalone, row, result)
        say(f"standalone {label}: {result['images_per_s']:.1f} images/s "
            f"({seen} images in {meter.wall:.2f} s; cores: this process "
            f"{meter.own_cores:.2f}, others {_cores(meter.other_cores)})")


def failed(run, table, key, label, error):
    text = f"{type(error).__name__}: {error}"
    record(run, table, key, {"status": "failed", "error": text,
                             "traceback": traceback.format_exc()})
    say(f"{label}: FAILED: {text}")
    tail = traceback.format_exc().rstrip().splitlines()[-8:]
    print("\n".join("  " + line for line in tail), file=sys.stderr, flush=True)


def _cores(value):
    return "?" if value is None else f"{value:.2f}"


def model_rows(run, name, paths, labels, counter, previous_first):
    """Every feed into one compiled model; returns the seconds its first row took."""
    import keras

    args = run.args
    label = model_label(name, args)
    results = run.fits.setdefault(label, {})
    feeds = list(args.feeds)
    if CEILING in feeds and not args.no_ceiling_again:
        feeds.append(CEILING_AGAIN)
    model, first_seconds, last_seconds = None, None, None
    batch, compiled_before = None, False
    for feed_name in feeds:
        feed_text = f"{label}: {feed_label(feed_name, args)}"
        if feed_name == GPU_DECODE and nvimgcodec_missing():
            record(run, results, feed_name, {"status": "skipped",
                                             "reason": "nvImageCodec is not installed"})
            say(f"{feed_text}: skipped (pip install nvidia-nvimgcodec-cu12[all])")
            continue
        if feed_name == TORCH and torch_missing():
            record(run, results, feed_name, {"status": "skipped",
                                             "reason": "torch is not installed"})
            say(f"{feed_text}: skipped (torch is not installed)")
            continue
        predicted = last_seconds if model is not None else previous_first
        reason = run.skip_reason(predicted)
        if reason:
            record(run, results, feed_name, {"status": "skipped", "reason": reason})
            run.note(f"{feed_text}: skipped: {reason}")
            continue
        run.current = feed_text
        started = time.perf_counter()
        try:
            if model is None:
                say(f"{label}: building and compiling the model (once)")
                model = build_model(name, args)
                say(f"{label}: {model.count_params():,} parameters, dtype policy "
                    f"{keras.config.dtype_policy().name}")
            if feed_name in (CEILING, CEILING_AGAIN):
                if batch is None:
                    batch = fixed_batch(args, paths)
                feed, images = ceiling_feed(args, batch)
            elif feed_name == TORCH:
                feed, images = torch_feed(args, paths, labels), len(paths)
            else:
                extra = {KG_W1: {}, KG_THREADS: {"workers": args.workers},
                         KG_PROCESSES: {"workers": args.workers,
                                        "use_multiprocessing": True},
                         KG_CACHE: {"cache": "auto"},
                         GPU_DECODE: {"decoder": "nvimgcodec",
                                      "workers": args.workers}}[feed_name]
                feed = kerasgen_feed(args, **extra)
                images = feed.num_samples
            # a DataLoader shuffles itself (Keras warns when fit's shuffle is left True)
            seconds, meter, compiles = fit_two_epochs(model, feed, counter,
                                                      shuffle=feed_name != TORCH)
            del feed
            gc.collect()
        except Exception as error:  # noqa: BLE001 (recorded; the next rows still run)
            failed(run, results, feed_name, feed_text, error)
            continue
        row_seconds = time.perf_counter() - started
        result = {"status": "ok", "label": feed_label(feed_name, args), "images": images,
                  "epoch_seconds": seconds, "images_per_s": images / seconds[1],
                  "epoch1_images_per_s": images / seconds[0],
                  "own_cores": meter.own_cores, "other_cores": meter.other_cores,
                  "compiles_per_epoch": compiles, "row_seconds": row_seconds}
        record(run, results, feed_name, result)
        if first_seconds is None:
            first_seconds = row_seconds
        else:
            compiled_before = True
        last_seconds = sum(seconds[1:]) * 2 + 5  # a later row: 2 epochs and start-up
        say(f"{feed_text}: {result['images_per_s']:.1f} images/s (epoch 2: {images} "
            f"images in {seconds[1]:.2f} s; epoch 1 {seconds[0]:.1f} s; cores: this "
            f"process {meter.own_cores:.2f}, others {_cores(meter.other_cores)}; "
            f"compilations per epoch {compiles})")
        if compiles and compiles[1]:
            run.note(f"{feed_text}: the backend compiled {compiles[1]} time(s) during "
                     "the timed epoch")
        if compiles and compiles[0] and compiled_before:
            run.note(f"{feed_text}: the backend compiled {compiles[0]} time(s) in epoch "
                     "1 although the model was compiled by an earlier feed (batches of "
                     "another shape or dtype?)")
    del model
    keras.backend.clear_session()
    gc.collect()
    return first_seconds


# ---------------------------------------------------------------------------- report

TARGET_TEXT = "an H200 with 16 cores, CPU decode"


def _rate(table, key):
    row = table.get(key) if table else None
    return row["images_per_s"] if row and row.get("status") == "ok" else None


def ceiling_rate(results):
    """The ceiling: the faster of its two runs (the stricter for the ratios)."""
    rates = [r for r in (_rate(results, CEILING), _rate(results, CEILING_AGAIN)) if r]
    return max(rates) if rates else None


def ratios(run):
    """[{name, value, target, verdict, note}]: the targets, then info ratios."""
    out = []

    def add(name, top, bottom, target=None, note="", why_na=""):
        value = top / bottom if top and bottom else None
        if value is None:
            verdict = "n/a"
            note = why_na or note
        elif target is None:
            verdict = "info"
        else:
            verdict = "PASS" if value >= target else "MISS"
        out.append({"name": name, "value": value, "target": target, "verdict": verdict,
                    "note": note})

    fits = run.fits
    args = run.args

    def best_kerasgen(results):
        rates = {k: _rate(results, k) for k in KERASGEN_CPU}
        rates = {k: v for k, v in rates.items() if v}
        if not rates:
            return None, ""
        key = max(rates, key=rates.get)
        return rates[key], feed_label(key, args)

    for name in MODELS:  # every target; n/a, with the reason, for what did not run
        label = model_label(name, args)
        results = fits.get(label, {})
        ceiling = ceiling_rate(results)
        best, which = best_kerasgen(results)
        absent = "model not run (--models)" if name not in args.models else "a row missing"
        if name == "resnet50":
            add(f"{label}: kerasgen in fit / ceiling", best, ceiling, 0.95,
                f"best kerasgen row: {which}", why_na=absent)
        if name == "mobilenetv2":
            torch_absent = absent
            if name in args.models and not _rate(results, TORCH):
                torch_absent = ("no torch row: "
                                + (results.get(TORCH) or {}).get("reason", "not run"))
            add(f"{label}: kerasgen in fit / torch DataLoader", best,
                _rate(results, TORCH), 1.0, f"best kerasgen row: {which}",
                why_na=torch_absent)
        add(f"{label}: kerasgen processes / threads", _rate(results, KG_PROCESSES),
            _rate(results, KG_THREADS), 1.0, why_na=absent)
        if name == "mobilenetv2":
            add(f"{label}: nvimgcodec decode in fit / ceiling", _rate(results, GPU_DECODE),
                ceiling, 0.95, why_na=absent)
    standalone = run.standalone
    add("standalone kerasgen / bare cv2 pool", _rate(standalone, KG_ITER),
        _rate(standalone, CV2_POOL), 0.85, why_na="a standalone row missing")
    for name in run.args.models:  # info: every row against its model's ceiling
        label = model_label(name, args)
        results = fits.get(label, {})
        ceiling = ceiling_rate(results)
        for feed in (KG_W1, KG_THREADS, KG_PROCESSES, TORCH, GPU_DECODE, KG_CACHE):
            if _rate(results, feed):
                add(f"{label}: {feed_label(feed, args)} / ceiling", _rate(results, feed),
                    ceiling)
        if _rate(results, CEILING) and _rate(results, CEILING_AGAIN):
            add(f"{label}: ceiling last / first (drift)", _rate(results, CEILING_AGAIN),
                _rate(results, CEILING))
    if _rate(standalone, TORCH_ITER):
        add("standalone torch DataLoader / bare cv2 pool", _rate(standalone, TORCH_ITER),
            _rate(standalone, CV2_POOL))
    return out


def _cell(row, ceiling):
    if not row:
        return "-"
    status = row.get("status")
    if status == "ok":
        rate = row["images_per_s"]
        value = f"{rate:,.0f}" if rate >= 100 else f"{rate:.1f}"
        return f"{value} ({row['images_per_s'] / ceiling:.2f})" if ceiling else value
    return {"not built": "not built", "skipped": "skipped", "failed": "FAILED"}.get(
        status, status)


def report(run):
    args, info = run.args, run.info
    with run.lock:
        fits = {label: dict(rows) for label, rows in run.fits.items()}
        standalone = dict(run.standalone)
    labels = [model_label(name, args) for name in args.models]
    width = max([24] + [len(label) for label in labels]) + 2
    lines = ["", f"images/s over the second of 2 epochs of model.fit (one full epoch), "
             f"{info.get('backend')} backend, {info.get('policy')}, "
             f"{info.get('accelerator') or 'no accelerator: CPU'}; {args.num_files} JPEG "
             f"500x375 -> {args.image_size}x{args.image_size}, batch {args.batch_size}, "
             f"{args.input_dtype} batches (the model rescales); (x.xx): / the ceiling, "
             "the faster of its two runs",
             f"{'feed':<46s}" + "".join(f"{label:>{width}s}" for label in labels)]
    feeds = list(args.feeds)
    if CEILING in feeds and not args.no_ceiling_again:
        feeds.append(CEILING_AGAIN)
    for feed in feeds:
        cells = []
        for label in labels:
            rows = fits.get(label, {})
            ceiling = None if feed in (CEILING, CEILING_AGAIN) else ceiling_rate(rows)
            cells.append(_cell(rows.get(feed), ceiling))
        lines.append(f"{feed_label(feed, args):<46s}"
                     + "".join(f"{c:>{width}s}" for c in cells))
    if args.standalone:
        pool = _rate(standalone, CV2_POOL)
        lines += ["", f"standalone, no model, {run.args.threads} usable cores; "
                  "(x.xx): / the bare cv2 pool",
                  f"{'pipeline':<46s}{'images/s':>{width}s}"]
        for row in args.standalone:
            cell = _cell(standalone.get(row), None if row == CV2_POOL else pool)
            lines.append(f"{standalone_label(row, args):<46s}{cell:>{width}s}")
    lines += ["", f"targets: issue 12's, for {TARGET_TEXT}; this run: "
              f"{info.get('accelerator') or 'CPU'} (info rows: no target)"]
    for item in ratios(run):
        value = "   n/a" if item["value"] is None else f"{item['value']:6.2f}"
        if item["verdict"] in ("PASS", "MISS"):
            verdict = f"  {item['verdict']} (target >= {item['target']:g})"
        elif item["verdict"] == "n/a" and item["target"] is not None:
            verdict = f"  n/a (target >= {item['target']:g})"
        else:
            verdict = ""
        note = f"; {item['note']}" if item["note"] and item["verdict"] != "info" else ""
        lines.append(f"  {item['name']:<62s}{value}{verdict}{note}")
    if run.notes:
        lines += ["", "notes:"] + [f"  {n}" for n in run.notes]
    lines.append(f"\ntotal {run.elapsed():.0f} s")
    say("\n".join(lines))


# ------------------------------------------------------------------------------ main

def versions():
    import importlib.metadata as metadata

    found = {}
    for name in ("keras", "jax", "jaxlib", "torch", "opencv-python-headless",
                 "opencv-python", "numpy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def main(argv=None):
    args = parse_args(argv)
    from benchmarks import data

    if args.data is None:
        args.data = os.fspath(data.default_folder(args.num_files))
    run = Run(args)
    say(f"fit_gpu: {args.num_files} files, {args.image_size}x{args.image_size}, batch "
        f"{args.batch_size}, models {', '.join(args.models)}, feeds {', '.join(args.feeds)}"
        f"; time budget {args.time_budget:g} s (+{args.grace:g} s grace)")
    seconds, written = data.build_data(args.data, args.num_files, args.threads)
    say(f"built {written} photos in {args.data} in {seconds:.1f} s" if written
        else f"using the {args.num_files} photos in {args.data}")
    paths, labels = data.list_files(args.data)
    if len(paths) != args.num_files:
        raise SystemExit(f"{args.data} holds {len(paths)} JPEG files, not {args.num_files}:"
                         " pass another --data or --num-files")
    data.warm_page_cache(paths)

    import keras

    import kerasgen as kg

    found = accelerator()
    policy = args.precision
    if policy == "auto":
        policy = "mixed_bfloat16" if found else "float32"
    keras.mixed_precision.set_global_policy(policy)
    counter = CompileCounter()
    run.info.update(
        backend=keras.backend.backend(), accelerator=found, policy=policy,
        kerasgen=kg.__version__, versions=versions(), python=platform.python_version(),
        usable_cores=usable_cores(), cpu_count=os.cpu_count(), commit=git_state()[0],
        args=vars(args), torch_installed=not torch_missing(),
        counts_compiles=counter.count is not None)
    say(f"backend {run.info['backend']}, accelerator {found or 'none (CPU)'}, policy "
        f"{policy}, {usable_cores()} usable cores, kerasgen {kg.__version__}, "
        + ", ".join(f"{k} {v}" for k, v in run.info["versions"].items())
        + ("" if run.info["torch_installed"] else "; torch not installed: its rows are "
           "skipped"))
    run.save()

    standalone_rows(run, paths, labels)
    previous_first = None
    for name in args.models:
        first = model_rows(run, name, paths, labels, counter, previous_first)
        previous_first = first or previous_first
    run.current = "the report"
    report(run)
    run.save()
    if args.json:
        say(f"every number written to {args.json}")
    return run


if __name__ == "__main__":
    main()
