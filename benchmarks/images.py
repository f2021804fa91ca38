#!/usr/bin/env python
"""Image-folder input pipelines, measured against each other in one run.

Standalone script (never part of the test suite). It

1. builds, once, a folder of real photo content: random crops of scikit-learn's two
   bundled sample photos (china.jpg, flower.jpg), resized to 500x375, saved as JPEG
   quality 90 in 10 class subfolders (cached; later runs reuse it);
2. times one pass over every file at 224x224 RGB, batch 32, for kerasgen (float32 and
   uint8, bilinear default; "area" as an info row), a plain tutorial-style Sequence,
   tf.data by hand, keras.utils.image_dataset_from_directory, the practical limit (bare
   cv2 loop on one core times the core count) and kerasgen's warm decoded-image caches;
3. times one epoch of `model.fit` of a tiny model fed by each pipeline, each epoch in a
   fresh process (see below);
4. prints images/s per pipeline and the ratios the project targets (PASS / MISS).

The standalone passes run in this process with glibc's default malloc, as users run them:
kerasgen touches malloc only inside Keras's epochs (see kerasgen/arrays/malloc.py) or when
`kerasgen.tune_malloc()` is called, and this process does neither (it checks, and
stops if the thresholds were set anyway).

Each model.fit epoch runs in a fresh process (this script with the hidden `--part fit`):
TensorFlow pins glibc's mmap threshold whenever Keras feeds a PyDataset, for the rest of
the process, and kerasgen sets it back during its epochs; in one process, whichever row
ran first would change the malloc every later row runs with. A fresh process per epoch is
also how users run `fit`. The child warms up (2 steps), then fits 2 epochs and times the
second: the steady state of a training run.

`tune_malloc()` is an opt-in that changes glibc's malloc for the whole process, so it is
measured in a child process: this script again with the hidden `--part tuned`, which calls
`kerasgen.tune_malloc()` first, times kerasgen float32 and the bare cv2 loop (info
rows), and writes its results to a JSON file that this process merges. The child runs once
per repeat, after that repeat's round in this process, so drift hits both alike.

Run from the repository root, as a module:

    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.images            # full
    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.images --quick    # smoke run

The photo folder comes from benchmarks/data.py, the pipelines from benchmarks/pipelines.py;
this module runs them (this process and its children) and prints the report.

Each pipeline is timed `--repeats` times (round robin over the pipelines, so slow drift of a
noisy machine hits them alike) and the median images/s is reported. A timed pass includes
building the pipeline object (listing the folder, tracing the tf.data map); the warm-cache
passes time only a pass after the cache was filled.
"""

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.data import (DEFAULT_DATA, DEFAULT_NUM_FILES, JPEG_QUALITY,  # noqa: E402
                             PHOTO_SIZE, build_data, default_folder, list_files,
                             warm_page_cache)
from benchmarks.machine import (CpuMeter, add_quiet_options, git_state, usable_cores,  # noqa: E402
                                wait_for_quiet)
from benchmarks.pipelines import (BATCH_SIZE, IMAGE_SIZE, Unavailable,  # noqa: E402
                                  fit_pipeline, iterate_sequence, iterate_tf,
                                  kerasgen_generator, make_keras_dataset,
                                  make_plain_sequence_class, make_tf_dataset,
                                  practical_limit, timed, tiny_model)

MODULE = "benchmarks.images"  # what the child processes run: python -m MODULE --part ...


# ---------------------------------------------------------------------------- measuring
class Results:
    """The timed runs of one table (standalone or model.fit), by row name; `measure` runs
    one and records it, or why it could not run."""

    def __init__(self, num_files):
        self.num_files = num_files
        self.runs = {}        # name -> list of seconds
        self.unavailable = {}  # name -> reason
        self.errors = {}       # name -> message
        self.shapes = {}       # name -> {"x": [shape, dtype]}
        self.cpu = {}          # name -> list of (this process's cores, other cores)
        self.discarded = {}    # name -> seconds of runs disturbed by other processes
        self.retries, self.max_other = Results.retries, Results.max_other
        self.quiet_wait = Results.quiet_wait

    retries = 2        # set from --retries / --max-other / --quiet-wait in main()
    max_other = 0.3
    quiet_wait = 30.0

    def skip(self, name):
        return name in self.unavailable or name in self.errors

    def measure(self, name, fn, retry=True):
        """Runs fn() -> (seconds, images seen); records it, or why it could not run.

        A run during which other processes used more than `max_other` cores is discarded
        and run again, up to `retries` times (not when `retry` is False: a cache-filling
        pass cannot be repeated).
        """
        if self.skip(name):
            return
        for attempt in range(1 + (self.retries if retry else 0)):
            waited, quiet = wait_for_quiet(self.max_other, self.quiet_wait)
            if not quiet:
                print(f"  (other processes kept using > {self.max_other:g} cores for "
                      f"{self.quiet_wait:g} s; measuring anyway)", flush=True)
            elif waited > 1:
                print(f"  (waited {waited:.0f} s for other processes to quiet down)",
                      flush=True)
            try:
                with CpuMeter() as meter:
                    result = fn()
                seconds, seen = result[:2]
                if len(result) > 2:  # timed in a child process, which measured its cores
                    meter.own_cores, meter.other_cores = result[2]
            except Unavailable as error:
                self.unavailable[name] = str(error)
                print(f"  {name}: not available ({error})", flush=True)
                return
            except Exception as error:  # noqa: BLE001 - report and carry on with the rest
                self.errors[name] = f"{type(error).__name__}: {error}"
                print(f"  {name}: FAILED {type(error).__name__}: {error}", flush=True)
                traceback.print_exc(limit=4)
                return
            finally:
                gc.collect()
            if seen != self.num_files:
                self.errors[name] = f"saw {seen} images, expected {self.num_files}"
                print(f"  {name}: FAILED, saw {seen} images, expected {self.num_files}")
                return
            other = meter.other_cores
            line = (f"  {name:<44s} {seconds:7.2f} s {seen / seconds:8.1f} images/s   "
                    f"(cores: this process {meter.own_cores:.2f}"
                    f"{'' if other is None else f', others {other:.2f}'})")
            disturbed = other is not None and other > self.max_other
            if disturbed and retry and attempt < self.retries:
                print(line + "  disturbed, run again", flush=True)
                self.discarded.setdefault(name, []).append(seconds)
                continue
            print(line + ("  disturbed" if disturbed else ""), flush=True)
            break
        self.runs.setdefault(name, []).append(seconds)
        self.cpu.setdefault(name, []).append((meter.own_cores, meter.other_cores))

    def rate(self, name):
        """Median images/s, or None."""
        if name not in self.runs:
            return None
        return statistics.median(self.num_files / s for s in self.runs[name])

    def as_dict(self):
        out = {}
        for name, seconds in self.runs.items():
            out[name] = {"images_per_s": self.rate(name), "seconds": seconds,
                         "images_per_s_runs": [self.num_files / s for s in seconds],
                         "cores_this_process": [c[0] for c in self.cpu.get(name, [])],
                         "cores_other_processes": [c[1] for c in self.cpu.get(name, [])],
                         "discarded_disturbed_seconds": self.discarded.get(name, [])}
            if name in self.shapes:
                out[name]["first_batch_x"] = self.shapes[name].get("x")
        for name, reason in self.unavailable.items():
            out[name] = {"unavailable": reason}
        for name, message in self.errors.items():
            out[name] = {"error": message}
        return out

    # What the tune_malloc() child hands to this process (through a JSON file).
    _STATE = ("runs", "unavailable", "errors", "shapes", "cpu", "discarded")
    _LISTS = ("runs", "cpu", "discarded")  # name -> list: one child run adds to them

    def state(self):
        return {key: getattr(self, key) for key in ("num_files",) + self._STATE}

    def merge(self, state):
        for key in self._STATE:
            mine = getattr(self, key)
            for name, value in state[key].items():
                if key in self._LISTS:
                    mine.setdefault(name, []).extend(
                        tuple(v) if key == "cpu" else v for v in value)
                else:
                    mine.setdefault(name, value)



# ---------------------------------------------------------------------------- standalone
# Pipeline names (also the keys of the JSON output).
KG_F32 = "kerasgen float32"
KG_F32_NO_CACHE = "kerasgen float32 cache=None"
KG_U8 = "kerasgen uint8"
PLAIN = "plain Sequence (cv2, float32)"
TFDATA = "tf.data (AUTOTUNE, float32)"
IDFD = "image_dataset_from_directory"
LIMIT = "practical limit (bare cv2 loop x cores)"
KG_F32_AREA = "kerasgen float32 interpolation=area (info)"
CACHE_MEM = "kerasgen float32 cache=memory (warm)"
CACHE_FILE = "kerasgen float32 cache=file (warm)"
KG_F32_TUNED = "kerasgen float32 with tune_malloc() (info)"
LIMIT_TUNED = "practical limit with tune_malloc() (info)"

MAIN, TUNED = "main", "tuned"  # this process, and the tune_malloc() child (--part tuned)
FIT_PART = "fit"  # a fresh process per model.fit epoch (--part fit --fit-row NAME)
PROCESS_TITLES = {
    MAIN: "main process: glibc's default malloc, nothing tuned (as users run it)",
    TUNED: "child process: kerasgen.tune_malloc() called first (opt-in)",
    FIT_PART: "a fresh process per epoch, as users run fit (TensorFlow's malloc pin stays "
              "in it)",
}


def run_standalone(folder, repeats, cores, part, after_round=None):
    """Times the standalone pipelines of `part`, `repeats` rounds; calls after_round(rep)
    after each round (the main process starts the tune_malloc() child there). The main
    process then times the warm caches."""
    res = Results(None)
    paths, labels = list_files(folder)
    res.num_files = len(paths)

    def shapes(name):
        return res.shapes.setdefault(name, {})

    def kg_pass(dtype, name, **extra):
        def run():
            gen = kerasgen_generator(folder, dtype, **extra)
            return iterate_sequence(gen, shapes(name))
        return lambda: timed(run)

    if part == TUNED:
        pipelines = [
            (KG_F32_TUNED, kg_pass("float32", KG_F32_TUNED)),
            (LIMIT_TUNED, lambda: practical_limit(paths, cores)),
        ]
        warmups = [lambda: kerasgen_generator(folder, "float32")]
        datasets = []
    else:
        plain_cls = make_plain_sequence_class()

        def plain_pass():
            def run():
                p, y = list_files(folder)
                return iterate_sequence(plain_cls(p, y, batch_size=BATCH_SIZE,
                                                  image_size=IMAGE_SIZE), shapes(PLAIN))
            return timed(run)

        def tf_pass():
            def run():
                p, y = list_files(folder)
                return iterate_tf(make_tf_dataset(p, y), shapes(TFDATA))
            return timed(run)

        def idfd_pass():
            return timed(lambda: iterate_tf(make_keras_dataset(folder), shapes(IDFD)))

        pipelines = [
            (KG_F32, kg_pass("float32", KG_F32)),
            (KG_F32_NO_CACHE, kg_pass("float32", KG_F32_NO_CACHE, cache=None)),
            (KG_U8, kg_pass("uint8", KG_U8)),
            (PLAIN, plain_pass),
            (TFDATA, tf_pass),
            (IDFD, idfd_pass),
            (LIMIT, lambda: practical_limit(paths, cores)),
            (KG_F32_AREA, kg_pass("float32", KG_F32_AREA, interpolation="area")),
        ]
        warmups = [lambda: plain_cls(paths, labels),
                   lambda: kerasgen_generator(folder, "float32"),
                   lambda: kerasgen_generator(folder, "uint8"),
                   lambda: kerasgen_generator(folder, "float32", interpolation="area")]
        datasets = [lambda: make_tf_dataset(paths, labels), lambda: make_keras_dataset(folder)]

    # Untimed warm-up: imports, TensorFlow's runtime, thread pools, first tracing.
    print("standalone warm-up (2 batches per pipeline, untimed)", flush=True)
    for factory in warmups:
        try:
            seq = factory()
            seq[0], seq[1 % len(seq)]
        except Exception:  # noqa: BLE001 - the timed pass reports it
            pass
    for ds in datasets:
        for _ in ds().take(2):
            pass
    gc.collect()

    for rep in range(repeats):
        print(f"standalone pass, repeat {rep + 1}/{repeats}", flush=True)
        for name, fn in pipelines:
            res.measure(name, fn)
        if after_round is not None:
            after_round(rep)
    if part == MAIN:
        with tempfile.TemporaryDirectory(prefix="kerasgen-bench-") as cache_dir:
            time_warm_caches(res, folder, repeats, cache_dir, shapes)
    return res


def fill_pass_name(name):
    return name.replace(" (warm)", ", filling pass")


def time_warm_caches(res, folder, repeats, cache_dir, shapes):
    """Fills each cache with one pass, then times `repeats` later epochs."""
    cache_specs = [(CACHE_MEM, "memory"),
                   (CACHE_FILE, os.path.join(cache_dir, "kerasgen-cache.bin"))]
    for name, cache in cache_specs:
        fill_name = fill_pass_name(name)
        try:
            gen = kerasgen_generator(folder, "float32", cache=cache)
        except Unavailable as error:
            print(f"cache: not available ({name}: {error})", flush=True)
            res.unavailable[name] = str(error)
            continue
        except Exception as error:  # noqa: BLE001
            print(f"  {name}: FAILED {type(error).__name__}: {error}", flush=True)
            res.errors[name] = f"{type(error).__name__}: {error}"
            continue
        print(f"{name}: one pass to fill, then {repeats} timed later epoch(s)", flush=True)
        res.measure(fill_name, lambda gen=gen, name=name: timed(
            lambda: iterate_sequence(gen, shapes(name))), retry=False)
        if res.skip(fill_name):
            res.errors[name] = "the filling pass failed"
            continue
        for _ in range(repeats):
            def warm_pass(gen=gen):
                gen.on_epoch_end()
                return timed(lambda: iterate_sequence(gen))
            res.measure(name, warm_pass)
        del gen
        gc.collect()


# ---------------------------------------------------------------------------- model.fit
FIT_KG_F32 = "fit: kerasgen float32"
FIT_KG_U8 = "fit: kerasgen uint8 + Rescaling"
FIT_PLAIN = "fit: plain Sequence"
FIT_TFDATA = "fit: tf.data"
FIT_IDFD = "fit: image_dataset_from_directory + Rescaling"
FIT_KG_F32_LEAVE = "fit: kerasgen float32, KERASGEN_MALLOC=leave (info)"
FIT_KG_F32_NO_CACHE = "fit: kerasgen float32, cache=None"
FIT_SPECS = {  # name: (pipeline, the model needs Rescaling(1/255), extra environment)
    FIT_KG_F32: ("kerasgen float32", False, {}),
    FIT_KG_F32_NO_CACHE: ("kerasgen float32 cache=None", False, {}),
    FIT_KG_U8: ("kerasgen uint8", True, {}),
    FIT_PLAIN: ("plain", False, {}),
    FIT_TFDATA: ("tf.data", False, {}),
    FIT_IDFD: ("idfd", True, {}),
    FIT_KG_F32_LEAVE: ("kerasgen float32", False, {"KERASGEN_MALLOC": "leave"}),
}


def fit_part(args):
    """The child process of one model.fit row: builds the model, warms up (2 steps,
    untimed), then fits 2 epochs and times the second (steady state: the first pays for
    this fresh process's thread pools and heaps); writes seconds, images and its cores
    to --part-out."""
    import keras

    pipeline, rescale, _ = FIT_SPECS[args.fit_row]
    model = tiny_model(rescale)
    model.fit(fit_pipeline(args.data, pipeline), epochs=1, steps_per_epoch=2,
              shuffle=False, verbose=0)
    gc.collect()
    timing = {}

    class TimeSecondEpoch(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                timing["waited"] = wait_for_quiet(args.max_other, args.quiet_wait)[0]
                timing["meter"] = CpuMeter().__enter__()
                timing["start"] = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                timing["seconds"] = time.perf_counter() - timing["start"]
                timing["meter"].__exit__(None, None, None)

    history = model.fit(fit_pipeline(args.data, pipeline), epochs=2, shuffle=False,
                        verbose=0, callbacks=[TimeSecondEpoch()])
    if not np.isfinite(history.history["loss"][-1]):
        raise RuntimeError("loss is not finite")
    from kerasgen.arrays import malloc as _malloc

    meter = timing["meter"]
    with open(args.part_out, "w") as f:
        json.dump({"seconds": timing["seconds"], "seen": len(list_files(args.data)[0]),
                   "cores": [meter.own_cores, meter.other_cores],
                   "waited": timing["waited"], "malloc_set": _malloc.times_applied()}, f)


def run_fit_process(args, name):
    """Runs one model.fit row's epoch in a fresh process; returns (seconds, images,
    (its cores, other processes' cores))."""
    payload = run_part(args, FIT_PART, ["--fit-row", name], FIT_SPECS[name][2],
                       "the model.fit process")
    return payload["seconds"], payload["seen"], tuple(payload["cores"])


def run_fit(args):
    """Each model.fit epoch runs in a fresh process, round robin over the rows: glibc's
    malloc settings are per process, and TensorFlow changes them whenever Keras feeds a
    PyDataset, so one process would let the rows run before change the ones after."""
    res = Results(len(list_files(args.data)[0]))
    for rep in range(args.fit_repeats):
        print(f"model.fit, 1 epoch, fresh process per run, repeat "
              f"{rep + 1}/{args.fit_repeats}", flush=True)
        for name in FIT_SPECS:
            res.measure(name, lambda name=name: run_fit_process(args, name))
    return res


# ---------------------------------------------------------------------------- processes
def run_part(args, part, extra, env, what):
    """Runs this script with `--part part` in a child process (with `env` added to the
    environment); returns the JSON payload it wrote, or raises RuntimeError. The child is
    started as this process was (`python -m benchmarks.images`, same working directory
    and environment), so it imports the same benchmarks and kerasgen."""
    with tempfile.TemporaryDirectory(prefix="kerasgen-bench-part-") as tmp:
        out = os.path.join(tmp, "part.json")
        cmd = [sys.executable, "-m", MODULE, "--part", part, *extra,
               "--part-out", out, "--data", args.data, "--num-files", str(args.num_files),
               "--max-other", repr(args.max_other), "--quiet-wait", repr(args.quiet_wait)]
        sys.stdout.flush()
        code = subprocess.run(cmd, env=dict(os.environ, **env), check=False).returncode
        if code != 0 or not os.path.exists(out):
            raise RuntimeError(f"{what} failed (exit code {code})")
        with open(out) as f:
            return json.load(f)


def run_tuned_process(args):
    """Runs this script with `--part tuned` (one round of its rows) in a child process;
    returns its JSON payload or raises RuntimeError."""
    return run_part(args, TUNED, ["--repeats", "1", "--cores", str(args.cores),
                                  "--retries", str(args.retries)], {},
                    "the tune_malloc() process")


def tuned_part(args):
    """The child process: tune_malloc() first, then one round of its rows; writes them to
    --part-out."""
    import kerasgen

    tuned = kerasgen.tune_malloc()
    print(f"\n=== {PROCESS_TITLES[TUNED]}\nkerasgen.tune_malloc() returned {tuned}",
          flush=True)
    if tuned:
        warm_page_cache(list_files(args.data)[0])
        standalone = run_standalone(args.data, args.repeats, args.cores, TUNED)
    else:
        standalone = Results(len(list_files(args.data)[0]))
        for name in STANDALONE_ROWS[TUNED]:
            standalone.unavailable[name] = "tune_malloc() returned False (not Linux glibc?)"
    with open(args.part_out, "w") as f:
        json.dump({"malloc_tuned": tuned, "standalone": standalone.state()}, f)
    print("=== tune_malloc() process done\n", flush=True)


# ---------------------------------------------------------------------------- report
STANDALONE_ROWS = {
    MAIN: [KG_F32, KG_F32_NO_CACHE, KG_U8, PLAIN, TFDATA, IDFD, LIMIT, KG_F32_AREA,
           fill_pass_name(CACHE_MEM), CACHE_MEM, fill_pass_name(CACHE_FILE), CACHE_FILE],
    TUNED: [KG_F32_TUNED, LIMIT_TUNED],
}
FIT_ROWS = {MAIN: [], TUNED: [], FIT_PART: list(FIT_SPECS)}
STANDALONE_ROWS[FIT_PART] = []


def ratio(numerator, denominator):
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def rate_range(res, name):
    """(slowest, fastest) images/s of `name`'s kept runs, or None."""
    if name not in res.runs:
        return None
    rates = [res.num_files / s for s in res.runs[name]]
    return min(rates), max(rates)


def report(standalone, fit, cores, args, wall):
    lines = []
    n = standalone.num_files
    lines.append("")
    lines.append(f"images/s, median of {args.repeats} (standalone) / {args.fit_repeats} "
                 f"(model.fit) runs; {n} JPEG files 500x375 -> 224x224 RGB, batch "
                 f"{BATCH_SIZE}")
    lines.append("cores: median cores this process used; others: the most cores other "
                 "processes used during a kept run; redone: runs discarded because other "
                 f"processes used > {Results.max_other:g} cores")
    lines.append(f"cores: os.cpu_count()={os.cpu_count()}, usable "
                 f"(sched_getaffinity)={usable_cores()}, used for the limit: {cores}")

    def header(title):
        return (f"{title:<48s} {'images/s':>10s} {'min':>9s} {'max':>9s} "
                f"{'cores':>6s} {'others':>6s} {'redone':>6s}")
    for res, rows in ((standalone, STANDALONE_ROWS), (fit, FIT_ROWS)):
        if not any(name in res.runs or res.skip(name) for part in rows for name in rows[part]):
            continue
        lines.append("")
        lines.append(header("pipeline, one pass" if res is standalone
                            else "model.fit, one epoch"))
        for part in (MAIN, TUNED, FIT_PART):
            if not rows[part]:
                continue
            lines.append(f"-- {PROCESS_TITLES[part]}")
            for name in rows[part]:
                if name in res.runs:
                    rates = [res.num_files / s for s in res.runs[name]]
                    cpu = res.cpu.get(name, [])
                    mine = statistics.median(c[0] for c in cpu) if cpu else float("nan")
                    others = [c[1] for c in cpu if c[1] is not None]
                    other = f"{max(others):6.2f}" if others else f"{'?':>6s}"
                    lines.append(f"{name:<48s} {res.rate(name):10.1f} {min(rates):9.1f} "
                                 f"{max(rates):9.1f} {mine:6.2f} {other} "
                                 f"{len(res.discarded.get(name, [])):6d}")
                elif name in res.unavailable:
                    lines.append(f"{name:<48s} {'not available':>10s}  "
                                 f"{res.unavailable[name]}")
                elif name in res.errors:
                    lines.append(f"{name:<48s} {'FAILED':>10s}  {res.errors[name]}")
    lines.append("")

    # tf.data's AUTOTUNE varies a lot on few cores: its range, next to its median.
    for label, res, name in (("standalone", standalone, TFDATA), ("model.fit", fit, FIT_TFDATA)):
        spread = rate_range(res, name)
        if spread is not None:
            lines.append(f"tf.data spread, {label}: median {res.rate(name):.1f} images/s, "
                         f"range {spread[0]:.1f}-{spread[1]:.1f} over "
                         f"{len(res.runs[name])} runs")
    lines.append("")

    s, f = standalone.rate, fit.rate
    # label, numerator, denominator, target, (results, name) of a tf.data denominator
    ratios = [
        ("standalone kerasgen float32 cache=None / tf.data", s(KG_F32_NO_CACHE), s(TFDATA),
         1.5, (standalone, TFDATA)),
        ("standalone kerasgen float32 (default, filling cache='auto') / tf.data", s(KG_F32),
         s(TFDATA), None, (standalone, TFDATA)),
        ("standalone kerasgen uint8 / tf.data", s(KG_U8), s(TFDATA), None,
         (standalone, TFDATA)),
        ("standalone kerasgen float32 cache=None / practical limit", s(KG_F32_NO_CACHE),
         s(LIMIT), 0.80, None),
        ("standalone kerasgen float32 / plain Sequence", s(KG_F32), s(PLAIN), None, None),
        ("standalone kerasgen float32 / image_dataset_from_directory", s(KG_F32), s(IDFD),
         None, None),
        ("standalone kerasgen uint8 / kerasgen float32", s(KG_U8), s(KG_F32), None, None),
        ("kerasgen float32 interpolation=area / bilinear (default)", s(KG_F32_AREA),
         s(KG_F32), None, None),
        ("tune_malloc(), kerasgen float32: tuned / glibc default", s(KG_F32_TUNED),
         s(KG_F32), None, None),
        ("tune_malloc(), bare cv2 loop: tuned / glibc default", s(LIMIT_TUNED), s(LIMIT),
         None, None),
        ("model.fit kerasgen float32 cache=None / model.fit tf.data", f(FIT_KG_F32_NO_CACHE),
         f(FIT_TFDATA), 1.3, (fit, FIT_TFDATA)),
        ("model.fit kerasgen float32 (default cache='auto') / model.fit tf.data",
         f(FIT_KG_F32), f(FIT_TFDATA), None, (fit, FIT_TFDATA)),
        ("model.fit kerasgen uint8 / model.fit tf.data", f(FIT_KG_U8), f(FIT_TFDATA), None,
         (fit, FIT_TFDATA)),
        ("model.fit kerasgen float32 / model.fit plain Sequence", f(FIT_KG_F32),
         f(FIT_PLAIN), None, None),
        ("model.fit kerasgen float32 / model.fit image_dataset_from_directory",
         f(FIT_KG_F32), f(FIT_IDFD), None, None),
        ("model.fit kerasgen uint8 / model.fit kerasgen float32", f(FIT_KG_U8),
         f(FIT_KG_F32), None, None),
        ("model.fit kerasgen float32: malloc kept / KERASGEN_MALLOC=leave", f(FIT_KG_F32),
         f(FIT_KG_F32_LEAVE), None, None),
        ("warm memory cache / tf.data uncached", s(CACHE_MEM), s(TFDATA), 5.0,
         (standalone, TFDATA)),
        ("warm file cache / tf.data uncached", s(CACHE_FILE), s(TFDATA), None,
         (standalone, TFDATA)),
    ]
    lines.append("ratios (images/s over images/s); against tf.data also the range over "
                 "tf.data's fastest..slowest run:")
    out = {}
    for label, numerator, denominator, target, tf_runs in ratios:
        value = ratio(numerator, denominator)
        if value is None:
            text = "   n/a"
            verdict = "" if target is None else f"   (target >= {target:g})"
        else:
            text = f"{value:6.2f}"
            verdict = "" if target is None else (
                f"   {'PASS' if value >= target else 'MISS'} (target >= {target:g})")
        entry = {"value": value, "target": target,
                 "pass": None if value is None or target is None else value >= target}
        extra = ""
        spread = None if tf_runs is None else rate_range(*tf_runs)
        if value is not None and spread is not None:
            low, high = ratio(numerator, spread[1]), ratio(numerator, spread[0])
            extra = f"{'':{26 - len(verdict)}s}tf.data range: {low:.2f}-{high:.2f}"
            entry["range_over_tf_data_runs"] = [low, high]
        lines.append(f"  {label:<68s} {text}{verdict}{extra}")
        out[label] = entry
    lines.append("")
    lines.append(f"total wall time: {wall:.1f} s")
    print("\n".join(lines), flush=True)
    return out


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-files", type=int, default=None,
                        help=f"JPEG files in the folder (default {DEFAULT_NUM_FILES}; "
                             "300 with --quick)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed passes per standalone pipeline (default 3; 1 with --quick)")
    parser.add_argument("--fit-repeats", type=int, default=None,
                        help="timed model.fit epochs per pipeline (default 3; 1 with --quick)")
    parser.add_argument("--data", default=None,
                        help=f"folder of the generated photos (default {DEFAULT_DATA}, or "
                             f"{DEFAULT_DATA}-N for another --num-files N)")
    parser.add_argument("--skip-fit", action="store_true", help="skip the model.fit part")
    parser.add_argument("--skip-cnn", action="store_true",
                        help="skip the tutorial-CNN model.fit rows (benchmarks/fit_cnn.py, "
                             "about 20 minutes on 2 cores)")
    parser.add_argument("--skip-tuned", action="store_true",
                        help="skip the tune_malloc() child process and its info rows")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 300 files, 1 repeat, 1 fit repeat")
    parser.add_argument("--cores", type=int, default=None,
                        help="core count the 1-core limit is multiplied by "
                             "(default os.cpu_count())")
    add_quiet_options(parser, quiet_wait=30.0)
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="also write every number to this JSON file")
    # The tune_malloc() child process (see the module docstring).
    parser.add_argument("--part", choices=[TUNED, FIT_PART], default=None,
                        help=argparse.SUPPRESS)
    parser.add_argument("--fit-row", choices=list(FIT_SPECS), default=None,
                        help=argparse.SUPPRESS)
    parser.add_argument("--part-out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.num_files is None:
        args.num_files = 300 if args.quick else DEFAULT_NUM_FILES
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.fit_repeats is None:
        args.fit_repeats = 1 if args.quick else 3
    for name in ("num_files", "repeats", "fit_repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.part and not args.part_out:
        parser.error("--part needs --part-out")
    if args.data is None:
        args.data = default_folder(args.num_files)
    args.data = os.fspath(args.data)
    if args.cores is None:
        args.cores = os.cpu_count() or 1
    args.retries = max(0, args.retries)
    return args


def check_untuned(when):
    """Stops the run if kerasgen set the malloc thresholds in this process: every row of
    the main process is meant to run with glibc's defaults (kerasgen sets them only
    inside Keras's epochs, which this process never runs)."""
    from kerasgen.arrays import malloc as _malloc

    if _malloc.times_applied():
        sys.exit(f"kerasgen set glibc's malloc thresholds in the main process ({when}); "
                 "its rows would not show glibc's defaults.")


def main(argv=None):
    args = parse_args(argv)
    wall_start = time.perf_counter()
    Results.retries, Results.max_other = args.retries, args.max_other
    Results.quiet_wait = args.quiet_wait
    if args.part in (TUNED, FIT_PART):
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")
        (tuned_part if args.part == TUNED else fit_part)(args)
        return

    cores = args.cores
    if cores != usable_cores():
        print(f"note: the limit uses {cores} cores, but this process may run on "
              f"{usable_cores()} (sched_getaffinity); pass --cores to change it.")
    if not args.quick and args.fit_repeats < 2 and not args.skip_fit:
        print("note: --fit-repeats < 2 gives a single model.fit timing, not a median.")

    seconds, written = build_data(args.data, args.num_files)
    if written:
        print(f"built {written} files in {args.data} ({seconds:.1f} s)")
    else:
        print(f"using the {args.num_files} cached files in {args.data}")

    import keras
    import tensorflow as tf

    import kerasgen

    tf.get_logger().setLevel("ERROR")  # one model per pipeline: retracing notes are expected

    print(f"python {platform.python_version()}, keras {keras.__version__}, tensorflow "
          f"{tf.__version__}, opencv {cv2.__version__}, numpy {np.__version__}, kerasgen "
          f"{getattr(kerasgen, '__version__', '?')}; cores: os.cpu_count()={os.cpu_count()}",
          flush=True)
    commit, dirty = git_state()
    if commit:
        print(f"commit {commit}"
              f"{' (kerasgen/ has uncommitted changes)' if dirty else ', kerasgen/ clean'}",
              flush=True)
    check_untuned("at start")
    paths, _ = list_files(args.data)
    warm_page_cache(paths)
    interpolation = kerasgen_generator(args.data, "uint8").interpolation
    check_untuned("after building a generator")
    print(f"kerasgen default interpolation: {interpolation}", flush=True)

    print(f"\n=== {PROCESS_TITLES[MAIN]}\nmalloc thresholds raised: False", flush=True)
    child = {"malloc_tuned": [], "failed": None}
    child_rows = Results(len(paths))

    def tuned_round(rep):
        if args.skip_tuned or child["failed"]:
            return
        try:
            payload = run_tuned_process(args)
        except RuntimeError as error:
            print(f"  {error}", flush=True)
            child["failed"] = str(error)
            return
        child["malloc_tuned"].append(payload["malloc_tuned"])
        child_rows.merge(payload["standalone"])
        print(f"=== {PROCESS_TITLES[MAIN]} (round {rep + 2})"
              if rep + 1 < args.repeats else f"=== {PROCESS_TITLES[MAIN]} (caches)",
              flush=True)

    standalone = run_standalone(args.data, args.repeats, cores, MAIN, after_round=tuned_round)
    standalone.merge(child_rows.state())
    if child["failed"]:
        for name in STANDALONE_ROWS[TUNED]:
            if name not in standalone.runs:
                standalone.errors.setdefault(name, child["failed"])
    elif args.skip_tuned:
        for name in STANDALONE_ROWS[TUNED]:
            standalone.unavailable[name] = "skipped (--skip-tuned)"
    fit = Results(standalone.num_files)
    if not args.skip_fit:
        print(f"=== {PROCESS_TITLES[FIT_PART]} (model.fit)", flush=True)
        fit = run_fit(args)
    check_untuned("at the end")
    cnn = None
    if not args.skip_fit and not args.skip_cnn:
        from benchmarks import fit_cnn

        print("=== the tutorial CNN in model.fit (benchmarks/fit_cnn.py)", flush=True)
        cnn = fit_cnn.main(["--repeats", str(args.fit_repeats), "--max-other",
                            repr(args.max_other), "--quiet-wait", repr(args.quiet_wait)])
    wall = time.perf_counter() - wall_start
    ratios = report(standalone, fit, cores, args, wall)
    if cnn is not None:
        ratios.update({f"tutorial CNN: {k}": v for k, v in cnn.items()})

    if args.json:
        payload = {
            "config": {"num_files": standalone.num_files, "repeats": args.repeats,
                       "fit_repeats": args.fit_repeats, "skip_fit": args.skip_fit,
                       "skip_tuned": args.skip_tuned,
                       "data": args.data, "image_size": list(IMAGE_SIZE),
                       "batch_size": BATCH_SIZE, "photo_size_wh": list(PHOTO_SIZE),
                       "jpeg_quality": JPEG_QUALITY, "retries": Results.retries,
                       "max_other_cores": Results.max_other,
                       "quiet_wait_s": Results.quiet_wait,
                       "kerasgen_interpolation_default": interpolation},
            "machine": {"os_cpu_count": os.cpu_count(), "usable_cores": usable_cores(),
                        "cores_for_limit": cores, "platform": platform.platform(),
                        "python": platform.python_version(), "keras": keras.__version__,
                        "tensorflow": tf.__version__, "opencv": cv2.__version__,
                        "numpy": np.__version__,
                        "kerasgen": getattr(kerasgen, "__version__", None),
                        "commit": commit, "kerasgen_dirty": dirty},
            "processes": {
                MAIN: {"malloc_tuned": False,
                       "rows": STANDALONE_ROWS[MAIN]},
                FIT_PART: {"rows": FIT_ROWS[FIT_PART]},
                TUNED: {"malloc_tuned_per_run": child["malloc_tuned"],
                        "error": child["failed"], "rows": STANDALONE_ROWS[TUNED]},
            },
            "standalone": standalone.as_dict(),
            "fit": fit.as_dict(),
            "ratios": ratios,
            "wall_s": wall,
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
