"""The Ray path's per-batch cost against kerasgen's own worker processes, at equal worker
count (2), on a 2-node Ray cluster of this machine (its traffic on loopback).

Feeds (the same generator, one keyword apart):

- `processes`: `workers=2, use_multiprocessing=True` (kerasgen's worker processes, the
  batches handed over in shared memory);
- `ray`: `engine=kg.RayEngine(actors=2)`, the actors placed as Ray places them;
- `ray-remote`: the same with both actors on the second node
  (`NodeAffinitySchedulingStrategy`): every batch crosses from one node's object store to
  the other's (loopback here; a network between machines).

Workloads, batch 32 of 128x128x3 images (1,024 samples, uint8 in memory):

- `augment`: `kg.ArrayGenerator(x, y, dtype="float32", augment=crop_flip)`, a random
  7/8 crop resized back (cv2, bilinear) and a random flip per image: 6 MiB float32
  batches, a few ms of one core each;
- `no-work`: a `kg.Generator` subclass whose `load_sample` returns one fixed float32
  image: the same 6 MiB batches, assembled and handed over, nothing else. Its batch time
  in a loop is the feed's fixed per-batch cost.

Measured: (1) the cost of one batch made here (`make_batch`, CPU ms of the process), also
for `kg.ImageFolderGenerator` decoding 32 of the benchmarks' 500x375 JPEGs to 224x224
(`decode_threads=1`, `cache=None`): the per-batch preprocessing cost c that
docs/performance.md's scaling table uses; (2) a bare loop, `gen[i]` over 4 epochs after a
warm-up epoch: ms/batch, MB/s, the training process's CPU ms per batch and the busy cores
of the whole machine; (3) `model.fit`, each fit in a fresh process (this script with the
hidden `--part fit`, connecting to the same cluster): images/s of epoch 2 (the tutorial
CNN, `cnn`) or epochs 2-5 (`tiny`: Flatten, Dense, whose rate is the feed's); epoch 1
warms up (workers or actors start, the model traces); `--fit-feeds` (default processes
and ray; ray-remote adds a few minutes). Rounds interleave the feeds (processes, ray,
ray-remote, processes, ...); printed: medians, the ratio of each Ray feed to `processes`
per round and its median (issue 52's target: ray / processes >= 0.8 in fit), and the
1-minute load average at each run's start (the machine is shared).

Ray needs a loopback-only network namespace here (it binds the machine's interface
address otherwise): as root, the script re-runs itself under `unshare -n` unless
`--no-unshare` (then run it inside one yourself). KERAS_BACKEND defaults to tensorflow.

    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.ray_overhead            # 3 rounds
    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.ray_overhead --quick    # smoke
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import machine

ROOT = Path(__file__).resolve().parent.parent
FEEDS = ("processes", "ray", "ray-remote")
RAY_FEEDS = ("ray", "ray-remote")
WORKLOADS = ("augment", "no-work")
MODELS = ("cnn", "tiny")
TIMED_EPOCHS = {"cnn": 1, "tiny": 4}  # fit: epochs timed after the first
IMAGE = (128, 128, 3)
BATCH_SIZE = 32
WORKERS = 2
SEED = 0
NODE_CPUS = 2
OBJECT_STORE = 256 << 20  # bytes per node (Ray's default is 30% of the memory)
JPEG_SIZE = (224, 224)
JPEG_FILES = 300


def crop_flip(x, rng):
    """A random 7/8 crop resized back to the image's size, and a random flip."""
    import cv2

    h, w = x.shape[:2]
    ch, cw = h * 7 // 8, w * 7 // 8
    top, left = int(rng.integers(h - ch + 1)), int(rng.integers(w - cw + 1))
    x = cv2.resize(x[top:top + ch, left:left + cw], (w, h), interpolation=cv2.INTER_LINEAR)
    return x[:, ::-1] if rng.random() < 0.5 else x


_FIXED = np.zeros(IMAGE, np.float32)


def _no_work_class():
    import kerasgen as kg

    class NoWork(kg.Generator):
        """One fixed float32 image per sample: a batch is assembly and hand-over only."""

        def __init__(self, num_samples, **kwargs):
            super().__init__(num_samples=num_samples,
                             labels=np.arange(num_samples) % 10, **kwargs)

        def load_sample(self, index):
            return _FIXED

    NoWork.__module__, NoWork.__qualname__ = __name__, "NoWork"
    return NoWork


def __getattr__(name):
    """`NoWork`, made on first use (kerasgen is imported then, not for --help); pickled
    by reference, so worker processes and Ray actors find it here too."""
    if name == "NoWork":
        globals()["NoWork"] = _no_work_class()
        return globals()["NoWork"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def samples(n):
    rng = np.random.default_rng(SEED)
    return (rng.integers(0, 256, (n,) + IMAGE, dtype=np.uint8),
            (np.arange(n) % 10).astype("int64"))


def make_gen(workload, feed, n, address=None, node=None):
    """The generator of `workload` fed by `feed` (None: batches made here, no worker)."""
    import kerasgen as kg

    if feed is None:
        place = {}
    elif feed == "processes":
        place = {"workers": WORKERS, "use_multiprocessing": True}
    else:
        options = {"num_cpus": 1}
        if feed == "ray-remote":
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        place = {"engine": kg.RayEngine(address=address, actors=WORKERS,
                                        actor_options=options)}
    common = dict(batch_size=BATCH_SIZE, seed=SEED, **place)
    if workload == "no-work":
        from benchmarks import ray_overhead  # by reference, importable by every worker

        return ray_overhead.NoWork(n, **common)
    from benchmarks import ray_overhead

    x, y = samples(n)
    return kg.ArrayGenerator(x, y, dtype="float32", augment=ray_overhead.crop_flip,
                             **common)


def stop(gen):
    """Ends the generator's workers or actors now (no 5 s idle wait)."""
    gen._feeding.restart()


def batch_bytes(batch):
    parts = batch if isinstance(batch, tuple) else (batch,)
    return sum(np.asarray(p).nbytes for p in parts)


def make_cost(gen, count):
    """Median CPU ms (this process, all threads) and wall ms of make_batch over `count`
    batches, and a batch's bytes."""
    cpu, wall, size = [], [], 0
    gen.make_batch(0)
    for i in range(count):
        c0, w0 = time.process_time(), time.perf_counter()
        batch = gen.make_batch(i % len(gen))
        cpu.append((time.process_time() - c0) * 1e3)
        wall.append((time.perf_counter() - w0) * 1e3)
        size = batch_bytes(batch)
    return {"cpu_ms": statistics.median(cpu), "wall_ms": statistics.median(wall),
            "bytes": size}


def jpeg_cost(count):
    """make_batch of kg.ImageFolderGenerator over the benchmarks' 500x375 JPEGs, decoded
    to 224x224 on one thread (uint8 and float32)."""
    import kerasgen as kg
    from benchmarks import data

    folder = data.default_folder(JPEG_FILES)
    data.build_data(folder, JPEG_FILES, threads=2)
    data.warm_page_cache(data.list_files(folder)[0])
    out = {}
    for dtype in ("uint8", "float32"):
        gen = kg.ImageFolderGenerator(str(folder), image_size=JPEG_SIZE,
                                      batch_size=BATCH_SIZE, dtype=dtype, cache=None,
                                      decode_threads=1, seed=SEED, verbose=0)
        out[dtype] = make_cost(gen, count)
    return out


RAY_MARKS = ("raylet", "gcs_server", "ray::", "ray/_private", "ray/dashboard",
             "default_worker.py", "runtime_env")


def processes():
    """{pid: (parent pid, command line, CPU seconds)} of every process (Linux /proc)."""
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(name)] = (int(fields[1]), cmd, (int(fields[11]) + int(fields[12])) / tick)
    return out


def producer_cpu():
    """{pid: ("workers" or "ray", CPU seconds so far)} of the processes that make and
    hand over batches, other than this one: kerasgen's worker processes (and their fork
    server), or Ray's processes (actors, raylets with their object stores, GCS); all are
    descendants of this process."""
    table, children = processes(), {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = {}, list(children.get(os.getpid(), ()))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        _, cmd, cpu = table[pid]
        out[pid] = ("ray" if any(mark in cmd for mark in RAY_MARKS) else "workers", cpu)
    return out


def producer_delta(before, after):
    """CPU seconds of each kind between two `producer_cpu()`s: the processes alive at the
    end (one that ended meanwhile, the previous generator's worker, is not counted)."""
    out = {"workers": 0.0, "ray": 0.0}
    for pid, (kind, cpu) in after.items():
        out[kind] += cpu - before.get(pid, (kind, 0.0))[1]
    return out


def loop(gen, epochs):
    """A warm-up epoch (workers or actors start), then `epochs` timed ones: ms/batch, the
    CPU ms per batch of the training process and of the producing side (worker processes,
    or Ray's processes), and the machine's busy cores."""
    for i in range(len(gen)):
        gen[i]
    gen.on_epoch_end()
    batches = epochs * len(gen)
    before = producer_cpu()
    with machine.CpuMeter() as meter:
        for _ in range(epochs):
            for i in range(len(gen)):
                batch = gen[i]
            gen.on_epoch_end()
    spent = producer_delta(before, producer_cpu())
    del batch
    return {"ms_per_batch": meter.wall / batches * 1e3,
            "own_cpu_ms": meter.own_cores * meter.wall / batches * 1e3,
            "workers_cpu_ms": spent["workers"] / batches * 1e3,
            "ray_cpu_ms": spent["ray"] / batches * 1e3,
            "machine_cores": meter.own_cores + (meter.other_cores or 0.0)}


def placement(gen, ray, head):
    """Where the Ray feed's actors run: 'head' or 'node2' for each."""
    pool = gen._feeding.pool
    where = ray.get([actor.where.remote() for actor in pool.actors])
    return "/".join("head" if node == head else "node2" for _, node in where)


def tutorial_model(name):
    import keras
    from keras import layers

    if name == "cnn":
        from benchmarks.fit_cnn import tutorial_cnn

        return tutorial_cnn(IMAGE[:2], 10)
    inputs = keras.Input(IMAGE)
    model = keras.Model(inputs, layers.Dense(10)(layers.Flatten()(inputs)))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def fit_part(args):
    """One fit in this process: images/s over the timed epochs, the cores of this process
    (with its children) and of the whole machine."""
    import keras

    gen = make_gen("augment", args.feed, args.samples, args.address, args.node)
    model = tutorial_model(args.model)
    times = []

    class Clock(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.start, self.cpu = time.perf_counter(), os.times()
            self.busy = machine.machine_busy_seconds()

        def on_epoch_end(self, epoch, logs=None):
            cpu, wall = os.times(), time.perf_counter() - self.start
            own = sum(cpu[:4]) - sum(self.cpu[:4])
            busy = machine.machine_busy_seconds()
            times.append((wall, own, (busy - self.busy) if busy and self.busy else 0.0))

    timed = TIMED_EPOCHS[args.model]
    model.fit(gen, epochs=1 + timed, verbose=0, callbacks=[Clock()])
    wall, own, busy = (sum(t[k] for t in times[1:]) for k in range(3))
    stop(gen)
    if args.feed in RAY_FEEDS:
        import ray

        ray.shutdown()
    return {"feed": args.feed, "model": args.model,
            "images_per_s": timed * len(gen) * BATCH_SIZE / wall,
            "own_cores": own / wall, "machine_cores": busy / wall}


def only_loopback():
    try:
        return sorted(os.listdir("/sys/class/net")) == ["lo"]
    except OSError:
        return False


def reexec_unshared():
    """Runs this script again in a loopback-only network namespace (root, unshare, ip)."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        sys.exit("Ray needs a loopback-only network namespace here: run as root (with "
                 "unshare and ip), or inside one with --no-unshare.")
    command = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
               sys.executable, "-m", "benchmarks.ray_overhead", *sys.argv[1:],
               "--no-unshare"]
    sys.exit(subprocess.run(command, cwd=ROOT).returncode)


def start_cluster():
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=NODE_CPUS, include_dashboard=False, object_store_memory=OBJECT_STORE))
    node2 = cluster.add_node(num_cpus=NODE_CPUS, object_store_memory=OBJECT_STORE)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    head = ray.get_runtime_context().get_node_id()
    return ray, cluster, head, node2.node_id


def load():
    return os.getloadavg()[0]


def fmt_round(values, digits=2):
    return ", ".join(f"{v:.{digits}f}" for v in values)


def main():
    parser = argparse.ArgumentParser(prog="ray_overhead.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=1024,
                        help="images per epoch (batches of 32)")
    parser.add_argument("--feeds", nargs="+", choices=FEEDS, default=list(FEEDS),
                        help="feeds of the bare loop (default: all)")
    parser.add_argument("--fit-feeds", nargs="+", choices=FEEDS,
                        default=["processes", "ray"],
                        help="feeds of model.fit (default: processes ray; ray-remote "
                             "adds about 4 minutes)")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--loop-epochs", type=int, default=4)
    parser.add_argument("--skip-fit", action="store_true")
    parser.add_argument("--quick", action="store_true",
                        help="smoke: 512 images, one round, no wait for a quiet machine")
    parser.add_argument("--json", help="write every result here")
    parser.add_argument("--no-unshare", action="store_true",
                        help="run here: already in a loopback-only network namespace")
    parser.add_argument("--quiet-wait", type=float, default=10,
                        help="before each measurement wait up to this many seconds for "
                             "other processes to use at most --max-other cores "
                             "(default 10; 0: never wait)")
    parser.add_argument("--max-other", type=float, default=0.3)
    parser.add_argument("--part", choices=["fit"], help=argparse.SUPPRESS)
    parser.add_argument("--feed", choices=FEEDS, help=argparse.SUPPRESS)
    parser.add_argument("--model", choices=MODELS, help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--node", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if args.part == "fit":
        print(json.dumps(fit_part(args)))
        return
    if not args.no_unshare and not only_loopback():
        reexec_unshared()
    if args.quick:
        args.rounds, args.samples, args.loop_epochs, args.quiet_wait = 1, 512, 2, 0
    # Ray's workers (started by the raylets, which inherit this environment) import
    # this checkout's kerasgen and benchmarks
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    import kerasgen  # noqa: F401 - before Ray: the backend's import is not timed

    commit, dirty = machine.git_state()
    t0 = time.perf_counter()
    ray, cluster, head, node2 = start_cluster()
    print(f"kerasgen {commit}{' (modified)' if dirty else ''}; ray {ray.__version__}, "
          f"2 nodes x {NODE_CPUS} CPUs on {machine.usable_cores()} cores (loopback), up "
          f"in {time.perf_counter() - t0:.1f} s; KERAS_BACKEND={os.environ['KERAS_BACKEND']}"
          f"; {args.samples} images of {IMAGE[0]}x{IMAGE[1]}, batch {BATCH_SIZE}, "
          f"{WORKERS} workers/actors", flush=True)
    results = {"commit": commit, "cost": {}, "loop": [], "fit": []}
    try:
        run(args, results, ray, cluster, head, node2)
    finally:
        ray.shutdown()
        cluster.shutdown()
    report(results, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def run(args, results, ray, cluster, head, node2):
    # (1) the cost of a batch made here, one process
    for workload in WORKLOADS:
        gen = make_gen(workload, None, args.samples)
        results["cost"][workload] = make_cost(gen, 9 if args.quick else 17)
    results["cost"].update({f"jpeg-{k}": v for k, v in
                            jpeg_cost(9 if args.quick else 17).items()})
    for name, cost in results["cost"].items():
        print(f"  make_batch {name:13} {cost['cpu_ms']:6.1f} CPU ms  {cost['wall_ms']:6.1f} "
              f"wall ms  {cost['bytes'] / 1e6:5.1f} MB", flush=True)
    # (2) the bare loop, rounds interleaved
    for round_ in range(args.rounds):
        for workload in WORKLOADS:
            for feed in args.feeds:
                machine.wait_for_quiet(args.max_other, args.quiet_wait)
                avg = load()
                gen = make_gen(workload, feed, args.samples, node=node2)
                result = loop(gen, args.loop_epochs)
                where = placement(gen, ray, head) if feed in RAY_FEEDS else "-"
                stop(gen)
                size = results["cost"][workload]["bytes"]
                result.update(round=round_, workload=workload, feed=feed, load=avg,
                              actors=where,
                              mb_per_s=size / 1e6 / (result["ms_per_batch"] / 1e3))
                results["loop"].append(result)
                print(f"  round {round_ + 1} loop {workload:8} {feed:10} "
                      f"{result['ms_per_batch']:6.2f} ms/batch {result['mb_per_s']:5.0f} MB/s"
                      f"  CPU ms/batch: trainer {result['own_cpu_ms']:5.2f} workers "
                      f"{result['workers_cpu_ms']:5.2f} ray {result['ray_cpu_ms']:5.2f}  "
                      f"machine {result['machine_cores']:.2f} cores  actors {where:10}  "
                      f"load {avg:.2f}", flush=True)
    if args.skip_fit:
        return
    # (3) model.fit, a fresh process per fit, rounds interleaved
    feeds = args.fit_feeds
    for round_ in range(args.rounds):
        for model in args.models:
            for feed in feeds:
                machine.wait_for_quiet(args.max_other, args.quiet_wait)
                avg = load()
                cmd = [sys.executable, "-m", "benchmarks.ray_overhead", "--part", "fit",
                       "--feed", feed, "--model", model, "--samples", str(args.samples),
                       "--address", cluster.address, "--node", node2]
                done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
                if done.returncode != 0:
                    sys.exit(f"fit {feed}/{model} failed:\n{done.stderr[-3000:]}")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                result.update(round=round_, load=avg)
                results["fit"].append(result)
                print(f"  round {round_ + 1} fit {model:4} {feed:10} "
                      f"{result['images_per_s']:7.0f} images/s  process "
                      f"{result['own_cores']:.2f} cores  machine "
                      f"{result['machine_cores']:.2f} cores  load {avg:.2f}", flush=True)


def report(results, args):
    rounds = range(args.rounds)

    def per_round(rows, key, **match):
        out = []
        for r in rounds:
            found = [row[key] for row in rows if row["round"] == r
                     and all(row[k] == v for k, v in match.items())]
            out.append(found[0] if found else None)
        return out

    print("\nbare loop, gen[i] after a warm-up epoch: ms/batch, median of rounds "
          "[per round]; ratio = processes' ms / the feed's (>1: faster); CPU ms per batch "
          "of the training process and of the producing side (kerasgen's worker "
          "processes, or all of Ray's: actors, raylets and object stores, GCS)")
    for workload in WORKLOADS:
        base = per_round(results["loop"], "ms_per_batch", workload=workload,
                         feed="processes")
        size = results["cost"][workload]["bytes"]
        for feed in args.feeds:
            ms = per_round(results["loop"], "ms_per_batch", workload=workload, feed=feed)
            if None in ms:
                continue
            cpu = {key: statistics.median(per_round(results["loop"], f"{key}_cpu_ms",
                                                    workload=workload, feed=feed))
                   for key in ("own", "workers", "ray")}
            producer = cpu["workers"] if feed == "processes" else cpu["ray"]
            med = statistics.median(ms)
            line = (f"  {workload:8} {feed:10} {med:6.2f} ms/batch [{fmt_round(ms)}]  "
                    f"{size / 1e3 / med:5.0f} MB/s  CPU ms/batch: trainer "
                    f"{cpu['own']:5.2f}, {'workers' if feed == 'processes' else 'ray'} "
                    f"{producer:5.2f}")
            if feed != "processes" and None not in base:
                ratios = [b / m for b, m in zip(base, ms)]
                line += (f"  processes/{feed} {statistics.median(ratios):.2f} "
                         f"[{fmt_round(ratios)}]")
            print(line)
    if results["fit"]:
        print("\nmodel.fit, augment workload: images/s of the timed epochs, median of "
              "rounds [per round]; ratio = the feed's / processes' (target ray >= 0.8)")
        for model in args.models:
            base = per_round(results["fit"], "images_per_s", model=model, feed="processes")
            for feed in args.fit_feeds:
                rate = per_round(results["fit"], "images_per_s", model=model, feed=feed)
                if None in rate:
                    continue
                line = f"  {model:4} {feed:10} {statistics.median(rate):7.0f} images/s " \
                       f"[{fmt_round(rate, 0)}]"
                if feed != "processes" and None not in base:
                    ratios = [m / b for b, m in zip(base, rate)]
                    verdict = ("met" if statistics.median(ratios) >= 0.8 else "missed") \
                        if feed == "ray" else "info"
                    line += (f"  {feed}/processes {statistics.median(ratios):.2f} "
                             f"[{fmt_round(ratios)}] ({verdict})")
                print(line)
    loads = [row["load"] for row in results["loop"] + results["fit"]]
    if loads:
        print(f"\nload average (1 min) at the runs' starts: {min(loads):.1f}-"
              f"{max(loads):.1f} on {machine.usable_cores()} cores")


if __name__ == "__main__":
    main()
