"""Overhead of pipeline statistics: one pass with stats off vs on, same run.

    .venv/bin/python -m benchmarks.stats [--data benchmarks/.data/photos] [--repeats 7]

(from the repository root, as a module).

Prints images/s for both (median of --repeats alternating passes) and the overhead of
stats=True as a percentage (target: under 2%). With stats off the code path is one `is
None` test per batch and a shared no-op context per stage. Uses the photo folder made by
benchmarks/images.py (run `python -m benchmarks.images` first, or pass --data).
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import kerasgen as kg  # noqa: E402

from benchmarks.data import DEFAULT_DATA  # noqa: E402


def one_pass(gen):
    start = time.perf_counter()
    for i in range(len(gen)):
        gen[i]
    return gen.num_samples / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.fspath(DEFAULT_DATA),
                        help=f"the photo folder (default {DEFAULT_DATA})")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--cache", default="auto",
                        help="the generators' cache: 'auto' (default: later passes read "
                             "decoded images from RAM, about 1 ms a batch) or 'none' "
                             "(every pass decodes)")
    args = parser.parse_args()
    if not os.path.isdir(args.data):
        sys.exit(f"{args.data} not found: run `python -m benchmarks.images` first (it builds it)")
    common = dict(image_size=(args.image_size,) * 2, batch_size=32, shuffle=False,
                  label_mode="int", rescale=1 / 255, verbose=0,
                  cache=None if args.cache == "none" else args.cache)
    generators = {"stats off": kg.ImageFolderGenerator(args.data, **common),
                  "stats on": kg.ImageFolderGenerator(args.data, stats=True, **common)}
    for gen in generators.values():  # warm the page cache and the thread pools
        gen[0]
    rates = {name: [] for name in generators}
    for _ in range(args.repeats):
        for name, gen in generators.items():  # alternate, so drift hits both alike
            rates[name].append(one_pass(gen))
    medians = {name: statistics.median(r) for name, r in rates.items()}
    for name, median in medians.items():
        print(f"{name:10s} {median:8.1f} images/s  (min {min(rates[name]):.1f}, "
              f"max {max(rates[name]):.1f}, {args.repeats} passes)")
    overhead = 100 * (medians["stats off"] / medians["stats on"] - 1)
    verdict = "PASS" if overhead < 2 else "MISS"
    print(f"stats=True overhead: {overhead:+.2f}%  {verdict} (target < 2%)")
    print("stage breakdown of the last pass with stats on:",
          generators["stats on"].stats()["stages_s"])


if __name__ == "__main__":
    main()
