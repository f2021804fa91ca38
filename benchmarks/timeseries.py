"""Time-series windows in model.fit: kerasgen against Keras's own
`keras.utils.timeseries_dataset_from_array`, and the memory a window array written out
would take.

The series is keras.io's weather-forecasting shape (14 features; windows of 720 steps
sampled every 6, so 120 steps; the target 72 steps after the window), generated: a sum of
sines and noise, so nothing is downloaded. Feeds, each in a fresh process (epoch 1 warms
up, epoch 2 is timed; windows/s inside `model.fit`, shuffled):

- `keras`: Keras's function (format="tf"), as keras.io's example calls it;
- `kg-tf`: `kg.timeseries_dataset_from_array`, the same call (a tf.data.Dataset);
- `kg`: the same windows as a kerasgen PyDataset (`format="kerasgen"`).

Models: keras.io's LSTM(32) -> Dense(1) (`lstm`), and `tiny` (Flatten -> Dense(1)), whose
rate is the feed's. Each round runs every feed once per model, in turn; the printed ratios
are kg/keras per round and their median. Memory: the traced peak of one bare epoch through
the kerasgen generator (series, targets and batch buffers) against the window array
written out (windows x steps x features x 4 bytes).

    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.timeseries            # 3 rounds
    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.timeseries --quick    # smoke
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

from benchmarks import machine

FEEDS = ("keras", "kg-tf", "kg")
MODELS = ("lstm", "tiny")
FEATURES = 14
PAST, STEP, FUTURE = 720, 6, 72   # keras.io's weather example
SEQUENCE_LENGTH = PAST // STEP


def make_series(steps, seed=0):
    """(features (steps, 14) float32 normalised, the temperature column index)."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps, dtype="float64")[:, None]
    periods = rng.uniform(50, 5000, FEATURES)
    phases = rng.uniform(0, 2 * np.pi, FEATURES)
    x = np.sin(2 * np.pi * t / periods + phases) + 0.1 * rng.standard_normal((steps, FEATURES))
    x = (x - x.mean(0)) / x.std(0)
    return x.astype("float32"), 1


def windows_args(series, batch_size):
    """keras.io's call: x_train = features, y_train = temperature FUTURE steps later."""
    start = PAST + FUTURE
    x = series[:len(series) - start]
    y = series[start:, 1]
    return dict(data=x, targets=y, sequence_length=SEQUENCE_LENGTH, sampling_rate=STEP,
                batch_size=batch_size, shuffle=True, seed=0)


def make_feed(name, series, batch_size):
    args = windows_args(series, batch_size)
    if name == "keras":
        import keras

        return keras.utils.timeseries_dataset_from_array(**args)
    import kerasgen as kg

    if name == "kg-tf":
        return kg.timeseries_dataset_from_array(**args)
    return kg.timeseries_dataset_from_array(**args, format="kerasgen")


def make_model(name):
    import keras

    inputs = keras.Input((SEQUENCE_LENGTH, FEATURES))
    if name == "lstm":
        hidden = keras.layers.LSTM(32)(inputs)
    else:
        hidden = keras.layers.Flatten()(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1)(hidden))
    model.compile(keras.optimizers.Adam(0.001), "mse")
    return model


def fit_part(feed, model_name, steps, batch_size):
    """One fit in this process: epoch 2's windows/s, CPU cores used, peak RSS growth."""
    import resource

    import keras

    series, _ = make_series(steps)
    data = make_feed(feed, series, batch_size)
    model = make_model(model_name)
    windows = len(windows_args(series, batch_size)["targets"]) - (SEQUENCE_LENGTH - 1) * STEP
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []

    class Clock(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.start, self.cpu = time.perf_counter(), os.times()

        def on_epoch_end(self, epoch, logs=None):
            cpu = os.times()
            wall = time.perf_counter() - self.start
            times.append((wall, (cpu.user + cpu.system - self.cpu.user - self.cpu.system)
                          / wall))

    model.fit(data, epochs=2, verbose=0, shuffle=False, callbacks=[Clock()])
    wall, cores = times[-1]
    rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    return {"feed": feed, "model": model_name, "windows_per_s": windows / wall,
            "cores": cores, "rss_growth_mb": rss_growth / 1024}


def memory_part(steps, batch_size):
    """Traced peak bytes of one bare epoch through the kerasgen generator (the series made
    before tracing is counted too: the generator holds it) and the windows written out."""
    import tracemalloc

    import kerasgen as kg

    kg.timeseries_dataset_from_array  # Keras and TensorFlow imported before tracing
    series, _ = make_series(steps)
    tracemalloc.start()
    args = windows_args(series, batch_size)
    args["data"] = args["data"].copy()  # the series the generator holds, traced
    args["targets"] = args["targets"].copy()
    gen = kg.timeseries_dataset_from_array(**args, format="kerasgen")
    for b in range(len(gen)):
        gen[b]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    windows = gen.source.x
    return {"kerasgen_peak_mb": peak / 2**20,
            "written_out_mb": windows.size * windows.itemsize / 2**20,
            "series_mb": args["data"].nbytes / 2**20}


def run_child(args, feed, model):
    cmd = [sys.executable, "-m", "benchmarks.timeseries", "--part", "fit", "--feed", feed,
           "--model", model, "--steps", str(args.steps), "--batch-size", str(args.batch_size)]
    return machine.run_quiet(cmd, args, f"{feed}/{model}")


def main():
    parser = argparse.ArgumentParser(prog="timeseries.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60_000,
                        help="steps of the series (default 60000: ~59k windows)")
    parser.add_argument("--batch-size", type=int, default=256, help="keras.io's 256")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 8000 steps, one round")
    parser.add_argument("--json", help="write every result here")
    machine.add_quiet_options(parser, quiet_wait=60)
    parser.add_argument("--part", choices=["fit"], help=argparse.SUPPRESS)
    parser.add_argument("--feed", choices=FEEDS, help=argparse.SUPPRESS)
    parser.add_argument("--model", choices=MODELS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part == "fit":
        print(json.dumps(fit_part(args.feed, args.model, args.steps, args.batch_size)))
        return
    if args.quick:
        args.steps, args.rounds = 8000, 1
    commit, dirty = machine.git_state()
    print(f"kerasgen {commit}{' (modified)' if dirty else ''}; series of {args.steps} steps x "
          f"{FEATURES} features, windows of {SEQUENCE_LENGTH} steps (every {STEP}), batch "
          f"{args.batch_size}; {machine.usable_cores()} cores")
    results = []
    for round_ in range(args.rounds):
        for model in args.models:
            for feed in FEEDS:
                result = run_child(args, feed, model)
                result["round"] = round_
                results.append(result)
                print(f"  round {round_ + 1} {model:4} {feed:6} "
                      f"{result['windows_per_s']:9.0f} windows/s  "
                      f"{result['cores']:.2f} cores  rss +{result['rss_growth_mb']:.0f} MB",
                      flush=True)
    print("\nwindows/s inside model.fit, median of rounds (ratio to Keras's function; "
          "per round in brackets)")
    for model in args.models:
        rate = {feed: [r["windows_per_s"] for r in results
                       if r["model"] == model and r["feed"] == feed] for feed in FEEDS}
        for feed in FEEDS:
            ratios = [a / b for a, b in zip(rate[feed], rate["keras"])]
            print(f"  {model:4} {feed:6} {statistics.median(rate[feed]):9.0f}   "
                  f"ratio {statistics.median(ratios):.2f} "
                  f"({', '.join(f'{r:.2f}' for r in ratios)})")
    memory = memory_part(args.steps, args.batch_size)
    print(f"\nmemory: kerasgen's traced peak over a bare epoch {memory['kerasgen_peak_mb']:.1f} "
          f"MB (the series {memory['series_mb']:.1f} MB of it); the windows written out "
          f"{memory['written_out_mb']:.0f} MB: "
          f"{memory['written_out_mb'] / memory['kerasgen_peak_mb']:.0f}x less")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "memory": memory, "commit": commit}, f, indent=1)


if __name__ == "__main__":
    main()
