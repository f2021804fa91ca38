#!/usr/bin/env python
"""Class-imbalance tools: quality against imbalanced-learn, and lazy SMOTE at scale.

Standalone script (never part of the test suite). One run, two parts:

1. Quality. On scikit-learn's bundled `load_breast_cancer` (binary) and on `load_digits`
   made imbalanced (10% kept of three classes chosen by `--data-seed`), one fixed
   classifier (StandardScaler fitted on the training split, then
   LogisticRegression(max_iter=2000)) is trained on the training split as it is, and
   rebalanced by `kg.rebalance(method="smote")`, imbalanced-learn's
   `SMOTE().fit_resample`, and, as information, `kg.rebalance` "oversample" /
   "undersample" and `class_weight=kg.class_weights(y)`. Balanced accuracy on a
   stratified held-out test split (never resampled), mean over `--seeds` seeds; a seed
   sets both the split and the sampler. Checks per data set: kg SMOTE within 0.01 of
   imbalanced-learn's SMOTE, and above no rebalancing.

2. Scale. 1,000,000 x 32 float32 rows (two Gaussian blobs, 5% minority). Each
   measurement runs in a fresh process (this script with the hidden `--part`):
   imbalanced-learn's `SMOTE(random_state=0).fit_resample(x, y)` (wall time, peak RSS
   above the RSS once x and y exist), and `kg.ArrayGenerator(x, y,
   sampler=kg.samplers.SMOTE(), batch_size=B, seed=0, label_mode="int")`, construction
   included: time until `gen[0]` is ready, time until every `gen[i]` of the epoch was
   made, and peak RSS above the same kind of baseline. Targets: first batch >= 3x sooner
   than fit_resample returns; full epoch <= 1.5x fit_resample's time; >= 10x less extra
   peak memory. Times are medians over `--repeats` fresh processes per measurement.

Peak RSS: a thread reads VmRSS from /proc/self/status every 5 ms, and the kernel's own
high-water mark (VmHWM, reset through /proc/self/clear_refs after the baseline) is read at
the end; the larger counts.

Run from the repository root, as a module:

    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.imbalance            # full
    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.imbalance --quick    # smoke run

Before each timed process the script waits (at most `--quiet-wait` s, default 60) until
other processes use less than `--max-other` cores (default 0.3), read from /proc/stat. A
measurement during which others used more is run again, at most `--retries` times
(default 2); the cores others used are reported for every run kept.
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
import threading
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from benchmarks.machine import add_quiet_options  # noqa: E402
from benchmarks.machine import machine_busy_seconds as _machine_busy_seconds  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent  # the repository
MODULE = "benchmarks.imbalance"  # what the child processes run: python -m MODULE --part ...

TEST_SIZE = 0.3
RARE_FRACTION = 0.10
NUM_RARE = 3
TARGETS = {"first_batch_speedup": 3.0, "epoch_ratio": 1.5, "memory_ratio": 10.0,
           "smote_gap": 0.01}


# ---------------------------------------------------------------------------- machine



def _own_seconds():
    """CPU seconds of this process and of its finished children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def wait_quiet(max_other, timeout):
    """Waits until other processes use < max_other cores over a 1 s window.

    Returns (seconds waited, cores others used in the last window, gave_up)."""
    if timeout <= 0:
        return 0.0, None, False
    start = time.perf_counter()
    others = None
    while True:
        busy, own, t0 = _machine_busy_seconds(), _own_seconds(), time.perf_counter()
        if busy is None:
            return 0.0, None, False
        time.sleep(1.0)
        dt = time.perf_counter() - t0
        others = max(0.0, (_machine_busy_seconds() - busy - (_own_seconds() - own)) / dt)
        waited = time.perf_counter() - start
        if others < max_other:
            return waited, others, False
        if waited >= timeout:
            return waited, others, True


# ---------------------------------------------------------------------------- quality
def quality_datasets(data_seed):
    """{name: (x, y, description)}: breast cancer as it is, digits with 3 rare classes."""
    from sklearn.datasets import load_breast_cancer, load_digits

    out = {}
    x, y = load_breast_cancer(return_X_y=True)
    counts = np.bincount(y)
    out["breast_cancer"] = (x, y, f"569 rows, 30 features, classes {counts.tolist()}")
    x, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(data_seed)
    rare = sorted(int(c) for c in rng.choice(10, NUM_RARE, replace=False))
    keep = []
    for c in range(10):
        members = np.flatnonzero(y == c)
        if c in rare:
            members = np.sort(rng.choice(members, int(round(RARE_FRACTION * len(members))),
                                         replace=False))
        keep.append(members)
    keep = np.sort(np.concatenate(keep))
    x, y = x[keep], y[keep]
    counts = np.bincount(y, minlength=10)
    out["digits_imbalanced"] = (
        x, y, f"{len(y)} rows, 64 features, rare digits {rare} kept 10%: "
              f"{[int(counts[c]) for c in rare]} vs ~{int(np.median(counts))} per other class")
    return out


QUALITY_METHODS = ["none", "kg smote", "imblearn smote", "kg oversample", "kg undersample",
                   "kg class_weights"]


def quality_one(x, y, seed):
    """{method: balanced accuracy} for one split/sampler seed."""
    from imblearn.over_sampling import SMOTE
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    import kerasgen as kg

    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=TEST_SIZE, stratify=y, random_state=seed)
    scaler = StandardScaler().fit(x_train)
    x_train, x_test = scaler.transform(x_train), scaler.transform(x_test)
    sets = {
        "none": (x_train, y_train),
        "kg smote": kg.rebalance(x_train, y_train, method="smote", seed=seed),
        "imblearn smote": SMOTE(random_state=seed).fit_resample(x_train, y_train),
        "kg oversample": kg.rebalance(x_train, y_train, method="oversample", seed=seed),
        "kg undersample": kg.rebalance(x_train, y_train, method="undersample", seed=seed),
    }
    scores = {}
    for method in QUALITY_METHODS:
        if method == "kg class_weights":
            model = LogisticRegression(max_iter=2000, class_weight=kg.class_weights(y_train))
            model.fit(x_train, y_train)
        else:
            model = LogisticRegression(max_iter=2000).fit(*sets[method])
        scores[method] = float(balanced_accuracy_score(y_test, model.predict(x_test)))
    return scores


def run_quality(args):
    seeds = list(range(args.seeds))
    results = {}
    for name, (x, y, description) in quality_datasets(args.data_seed).items():
        per_seed = [quality_one(x, y, s) for s in seeds]
        means = {m: float(np.mean([r[m] for r in per_seed])) for m in QUALITY_METHODS}
        stds = {m: float(np.std([r[m] for r in per_seed])) for m in QUALITY_METHODS}
        gap = means["kg smote"] - means["imblearn smote"]
        results[name] = {
            "description": description, "seeds": seeds, "per_seed": per_seed,
            "mean": means, "std": stds,
            "checks": {
                "kg smote within 0.01 of imblearn smote": abs(gap) <= TARGETS["smote_gap"],
                "kg smote above no rebalancing": means["kg smote"] > means["none"],
            },
        }
    return results


def print_quality(results, args):
    print(f"\n== Quality: balanced accuracy on a stratified {int(TEST_SIZE * 100)}% test "
          f"split (never resampled), mean (std) over {args.seeds} seeds")
    print("   classifier: StandardScaler (fitted on the training split) -> "
          "LogisticRegression(max_iter=2000); resampling in the scaled space")
    for name, r in results.items():
        print(f"   {name}: {r['description']}")
    width = max(len(m) for m in QUALITY_METHODS)
    header = f"{'method':<{width}}" + "".join(f"  {name:>20}" for name in results)
    print(header)
    print("-" * len(header))
    for m in QUALITY_METHODS:
        info = "" if m in ("none", "kg smote", "imblearn smote") else "  (info)"
        cells = "".join(f"  {r['mean'][m]:>12.4f} ({r['std'][m]:.3f})"
                        for r in results.values())
        print(f"{m:<{width}}{cells}{info}")
    print()
    for name, r in results.items():
        gap = r["mean"]["kg smote"] - r["mean"]["imblearn smote"]
        lift = r["mean"]["kg smote"] - r["mean"]["none"]
        ok1, ok2 = r["checks"].values()
        print(f"{name}: kg smote - imblearn smote = {gap:+.4f} (target |gap| <= 0.01)"
              f"  {'PASS' if ok1 else 'MISS'}")
        print(f"{name}: kg smote - no rebalancing = {lift:+.4f} (target > 0)"
              f"  {'PASS' if ok2 else 'MISS'}")


# ---------------------------------------------------------------------------- scale
def _rss_kib(field="VmRSS"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


class PeakRSS:
    """Peak resident memory while the block runs: a 5 ms sampling thread, and the
    kernel's high-water mark reset at entry (when /proc/self/clear_refs allows)."""

    def __enter__(self):
        self.peak = _rss_kib()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
            self.hwm_reset = True
        except OSError:
            self.hwm_reset = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.005):
            rss = _rss_kib()
            if rss > self.peak:
                self.peak = rss

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sampled_peak = max(self.peak, _rss_kib())
        self.hwm = _rss_kib("VmHWM") if self.hwm_reset else None
        self.peak = max(self.sampled_peak, self.hwm or 0)


def make_scale_data(rows, features, minority):
    rng = np.random.default_rng(0)
    y = np.zeros(rows, dtype=np.int64)
    y[rng.choice(rows, int(round(minority * rows)), replace=False)] = 1
    x = rng.standard_normal((rows, features), dtype=np.float32)
    x[y == 1] += np.float32(1.0)
    return x, y


def run_part(args):
    """One measurement in this (fresh) process; writes a JSON dict to args.out."""
    import sklearn.neighbors  # noqa: F401  (imported before the baseline by both parts)
    from sklearn.metrics import pairwise_distances  # noqa: F401

    if args.part == "imblearn":
        from imblearn.over_sampling import SMOTE
    else:
        import kerasgen as kg

        # `import kerasgen` is lazy: the first kg.ArrayGenerator imports Keras and
        # TensorFlow (seconds, hundreds of MiB). Load them before the baseline and the
        # timer, as the imbalanced-learn part loads SMOTE.
        kg.ArrayGenerator, kg.samplers.SMOTE
    x, y = make_scale_data(args.rows, args.features, args.minority)
    gc.collect()
    baseline = _rss_kib()
    result = {"part": args.part, "baseline_mib": baseline / 1024}
    if args.part == "imblearn":
        with PeakRSS() as peak:
            start = time.perf_counter()
            x_res, y_res = SMOTE(random_state=0).fit_resample(x, y)
            result["fit_resample_s"] = time.perf_counter() - start
        result["rows_out"] = int(len(y_res))
        del x_res, y_res
    else:
        with PeakRSS() as peak:
            start = time.perf_counter()
            gen = kg.ArrayGenerator(x, y, sampler=kg.samplers.SMOTE(),
                                    batch_size=args.batch_size, seed=0, label_mode="int")
            result["construct_s"] = time.perf_counter() - start
            batch = gen[0]
            result["first_batch_s"] = time.perf_counter() - start
            rows = len(batch[1])
            for i in range(1, len(gen)):
                batch = gen[i]
                rows += len(batch[1])
            result["epoch_s"] = time.perf_counter() - start
            del batch
        result["rows_out"] = int(rows)
        result["batches"] = len(gen)
    result["peak_extra_mib"] = (peak.peak - baseline) / 1024
    result["sampled_peak_extra_mib"] = (peak.sampled_peak - baseline) / 1024
    result["hwm_extra_mib"] = None if peak.hwm is None else (peak.hwm - baseline) / 1024
    with open(args.out, "w") as f:
        json.dump(result, f)


def run_child(args, part, out):
    command = [sys.executable, "-m", MODULE, "--part", part, "--out", out,
               "--rows", str(args.rows), "--features", str(args.features),
               "--minority", str(args.minority), "--batch-size", str(args.batch_size)]
    busy, own, start = _machine_busy_seconds(), _own_seconds(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"--part {part} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    with open(out) as f:
        result = json.load(f)
    if busy is not None:
        child_cores = (_own_seconds() - own) / wall
        result["process_cores"] = child_cores
        result["other_cores"] = max(0.0, (_machine_busy_seconds() - busy) / wall - child_cores)
    return result


def run_scale(args):
    runs = {"imblearn": [], "kerasgen": []}
    quiet_notes, discarded = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for part in ("imblearn", "kerasgen"):  # alternate, so drift hits both alike
                for attempt in range(args.retries + 1):
                    waited, others, gave_up = wait_quiet(args.max_other, args.quiet_wait)
                    if gave_up:
                        note = (f"repeat {r + 1} {part}: others still used {others:.2f} "
                                f"cores after {waited:.0f} s; measured anyway")
                        quiet_notes.append(note)
                        print("   note:", note, flush=True)
                    result = run_child(args, part,
                                       os.path.join(tmp, f"{part}-{r}-{attempt}.json"))
                    result.update(waited_s=waited, quiet=not gave_up, redone=attempt)
                    shown = {k: round(v, 2) for k, v in result.items()
                             if isinstance(v, float)}
                    disturbed = result.get("other_cores", 0.0) > args.max_other
                    if disturbed and attempt < args.retries:
                        discarded.append(result)
                        print(f"   repeat {r + 1} {part}: other processes used "
                              f"{result['other_cores']:.2f} cores; run again", flush=True)
                        continue
                    runs[part].append(result)
                    print(f"   repeat {r + 1} {part}: {shown}", flush=True)
                    break
    med = statistics.median
    imb, kgr = runs["imblearn"], runs["kerasgen"]
    summary = {
        "fit_resample_s": med(r["fit_resample_s"] for r in imb),
        "first_batch_s": med(r["first_batch_s"] for r in kgr),
        "construct_s": med(r["construct_s"] for r in kgr),
        "epoch_s": med(r["epoch_s"] for r in kgr),
        "imblearn_peak_extra_mib": med(r["peak_extra_mib"] for r in imb),
        "kerasgen_peak_extra_mib": med(r["peak_extra_mib"] for r in kgr),
    }
    summary["first_batch_speedup"] = summary["fit_resample_s"] / summary["first_batch_s"]
    summary["epoch_ratio"] = summary["epoch_s"] / summary["fit_resample_s"]
    summary["memory_ratio"] = (summary["imblearn_peak_extra_mib"]
                               / max(summary["kerasgen_peak_extra_mib"], 1e-3))
    summary["checks"] = {
        "first batch >= 3x sooner": summary["first_batch_speedup"]
        >= TARGETS["first_batch_speedup"],
        "full epoch <= 1.5x fit_resample": summary["epoch_ratio"] <= TARGETS["epoch_ratio"],
        "peak extra memory >= 10x less": summary["memory_ratio"] >= TARGETS["memory_ratio"],
    }
    return {"runs": runs, "summary": summary, "quiet_notes": quiet_notes,
            "discarded": discarded,
            "rows_out": {"imblearn": imb[0]["rows_out"], "kerasgen": kgr[0]["rows_out"]}}


def print_scale(result, args):
    s = result["summary"]
    imb, kgr = result["runs"]["imblearn"], result["runs"]["kerasgen"]

    def spread(runs, key):
        values = [r[key] for r in runs]
        return f"(min {min(values):.2f}, max {max(values):.2f})" if len(values) > 1 else ""

    print(f"\n== Scale: medians over {args.repeats} fresh processes per measurement")
    print(f"{'imblearn SMOTE(random_state=0).fit_resample':<46} {s['fit_resample_s']:7.2f} s "
          f"{spread(imb, 'fit_resample_s')}   peak extra RSS "
          f"{s['imblearn_peak_extra_mib']:7.1f} MiB   "
          f"({result['rows_out']['imblearn']:,} rows out)")
    print(f"{'kerasgen construction (plan)':<46} {s['construct_s']:7.2f} s "
          f"{spread(kgr, 'construct_s')}")
    print(f"{'kerasgen first batch (construction included)':<46} {s['first_batch_s']:7.2f} s "
          f"{spread(kgr, 'first_batch_s')}")
    print(f"{'kerasgen full epoch (construction included)':<46} {s['epoch_s']:7.2f} s "
          f"{spread(kgr, 'epoch_s')}   peak extra RSS "
          f"{s['kerasgen_peak_extra_mib']:7.1f} MiB   ({result['rows_out']['kerasgen']:,} rows"
          f" in {kgr[0]['batches']} batches)")
    others = [r.get("other_cores") for r in imb + kgr if r.get("other_cores") is not None]
    if others:
        print(f"other processes used {min(others):.2f}-{max(others):.2f} cores during the "
              f"kept runs; {len(result['discarded'])} disturbed runs were run again")
    for note in result["quiet_notes"]:
        print("note:", note)
    c = list(s["checks"].values())
    print(f"first batch: {s['first_batch_speedup']:.1f}x sooner than fit_resample returns "
          f"(target >= 3x)  {'PASS' if c[0] else 'MISS'}")
    print(f"full epoch: {s['epoch_ratio']:.2f}x fit_resample's time (target <= 1.5x)  "
          f"{'PASS' if c[1] else 'MISS'}")
    print(f"peak extra memory: {s['memory_ratio']:.1f}x less than fit_resample "
          f"(target >= 10x)  {'PASS' if c[2] else 'MISS'}")


# ---------------------------------------------------------------------------- main
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 100,000 rows, 1 repeat, 2 quality seeds")
    parser.add_argument("--repeats", type=int, default=None,
                        help="fresh processes per scale measurement (default 3; 1 quick)")
    parser.add_argument("--seeds", type=int, default=None,
                        help="quality seeds (default 5; 2 quick)")
    parser.add_argument("--data-seed", type=int, default=0,
                        help="chooses the three rare digits and the rows kept")
    parser.add_argument("--rows", type=int, default=None,
                        help="scale rows (default 1,000,000; 100,000 quick)")
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--minority", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--json", help="write every number to this file")
    add_quiet_options(parser, quiet_wait=60.0)
    parser.add_argument("--part", choices=["imblearn", "kerasgen"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.seeds is None:
        args.seeds = 2 if args.quick else 5
    if args.rows is None:
        args.rows = 100_000 if args.quick else 1_000_000
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.part:
        run_part(args)
        return
    import imblearn
    import keras
    import sklearn

    print(f"kerasgen imbalance benchmark ({'quick' if args.quick else 'full'}), "
          f"{time.strftime('%Y-%m-%d %H:%M')}, Python {platform.python_version()}, "
          f"numpy {np.__version__}, scikit-learn {sklearn.__version__}, imbalanced-learn "
          f"{imblearn.__version__}, keras {keras.__version__}, {os.cpu_count()} cores")
    print("command: " + " ".join([os.path.relpath(sys.executable, ROOT), "-m", MODULE]
                                 + sys.argv[1:]))
    report = {"args": vars(args), "targets": TARGETS, "cores": os.cpu_count()}
    ok = True
    if not args.skip_quality:
        report["quality"] = run_quality(args)
        print_quality(report["quality"], args)
        ok &= all(all(r["checks"].values()) for r in report["quality"].values())
    if not args.skip_scale:
        minority = int(round(args.minority * args.rows))
        print(f"\n== Scale: {args.rows:,} x {args.features} float32 rows (two Gaussian blobs), "
              f"{args.minority:.0%} minority ({minority:,}), batch_size={args.batch_size}; "
              "each measurement in a fresh process")
        report["scale"] = run_scale(args)
        print_scale(report["scale"], args)
        ok &= all(report["scale"]["summary"]["checks"].values())
    print(f"\noverall: {'PASS' if ok else 'MISS'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
