"""What the benchmarks share about the machine: how busy its CPUs are, waiting for it to
go quiet, and its usable cores."""

import os
import subprocess
import time
from pathlib import Path


def machine_busy_seconds():
    """CPU seconds all processes spent busy since boot (Linux /proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """Cores this process used (`own_cores`) and cores all other processes used
    (`other_cores`, None without /proc/stat) over a `with` block of `wall` seconds.

    On a noisy machine the second number says when a measurement was disturbed.
    """

    def __enter__(self):
        self.start = time.perf_counter()
        t = os.times()
        self.own = t.user + t.system
        self.machine = machine_busy_seconds()
        return self

    def __exit__(self, *exc):
        self.wall = max(time.perf_counter() - self.start, 1e-9)
        t = os.times()
        self.own_cores = (t.user + t.system - self.own) / self.wall
        machine = machine_busy_seconds()
        self.other_cores = (None if machine is None or self.machine is None else
                            max(0.0, (machine - self.machine) / self.wall - self.own_cores))
        return False


def wait_for_quiet(max_other, max_wait, interval=0.5):
    """Waits until other processes use at most `max_other` cores over `interval` seconds.

    Returns (seconds waited, whether it got quiet); gives up after `max_wait` seconds
    (max_wait <= 0: never waits). Without /proc/stat there is nothing to measure.
    """
    if max_wait <= 0 or machine_busy_seconds() is None:
        return 0.0, True
    start = time.perf_counter()
    while True:
        with CpuMeter() as meter:
            time.sleep(interval)
        if meter.other_cores is not None and meter.other_cores <= max_other:
            return time.perf_counter() - start, True
        if time.perf_counter() - start >= max_wait:
            return time.perf_counter() - start, False


def usable_cores():
    """Cores this process may run on (sched_getaffinity), else os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count()


def add_quiet_options(parser, quiet_wait):
    """--max-other, --quiet-wait and --retries: how a benchmark keeps other processes out
    of its timings (`quiet_wait`: the default wait, in seconds)."""
    parser.add_argument("--max-other", type=float, default=0.3,
                        help="a timed run is disturbed when other processes used more than "
                             "this many cores during it; before each run, wait until they "
                             "use at most this many (default 0.3)")
    parser.add_argument("--quiet-wait", type=float, default=quiet_wait,
                        help="give up waiting for a quiet machine after this many seconds "
                             f"and measure anyway (default {quiet_wait:g}; 0: never wait)")
    parser.add_argument("--retries", type=int, default=2,
                        help="run a disturbed measurement again, up to this many times "
                             "(default 2; 0 keeps every run)")


def git_state():
    """(short commit, whether kerasgen/ differs from it) of the repository, or (None, None)."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--",
                                "kerasgen"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None, None
    return commit, bool(dirty)


def run_quiet(cmd, args, what):
    """Runs `cmd` (a benchmark's child printing one JSON line last) on a quiet machine,
    again up to `args.retries` times while other processes used more than
    `args.max_other` cores during it; its result, with `other_cores` added."""
    import json
    import subprocess
    import sys

    for _ in range(args.retries + 1):
        wait_for_quiet(args.max_other, args.quiet_wait)
        with CpuMeter() as meter:
            done = subprocess.run(cmd, capture_output=True, text=True,
                                  env=dict(os.environ, KERAS_BACKEND="tensorflow"))
        if done.returncode != 0:
            sys.exit(f"{what} failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["other_cores"] = meter.other_cores
        if meter.other_cores is None or meter.other_cores <= args.max_other:
            break
    return result
