"""GPU check: what each kerasgen.gpu tool gives back, and a real image fit, on a GPU.

    KERAS_BACKEND=torch python3 -m benchmarks.gpu_check [--mib 2048] [--dry-run]

Run it from the repository root, as a module: that puts the root on `sys.path`, so this
checkout's kerasgen is imported (kerasgen need not be installed on the GPU machine), here
and in the run_isolated children.

Works with KERAS_BACKEND=tensorflow, jax or torch (default: tensorflow when it is
installed, else torch, else jax). Needs no TensorFlow and no network.

1. Real fit (in a run_isolated child): an ImageFolderGenerator over ~320 PNG/JPEG digits
   (scikit-learn's bundled digits, upscaled to 64x64, 10 class folders, written to a temp
   folder with cv2) feeds a small Conv2D model for 2 epochs; it prints loss, images/s and
   the device the backend reports for a weight. Free memory after the child ended.
2. run_isolated: in a child, allocate ~--mib MiB on the GPU through the backend, fit a
   small model from a kg.ArrayGenerator for 2 epochs, report free memory while fitting and
   the weight's device; then free memory in the parent after the child ended (everything
   should be back).
3. In this process (last: release_gpu_memory() destroys this process's CUDA context):
   allocate and fit the same way, report free memory; after clear_session() + gc; after
   the backend's own cache release (torch.cuda.empty_cache(), jax.clear_caches()); after
   kg.gpu.release_gpu_memory().

Free memory (MiB) comes from nvidia-smi when present (it sees every process), else from
kg.gpu.memory_info(). On a machine without a GPU it says so and exits 0; --dry-run then
runs every step on the CPU instead, to check the code. The last line is
`SUMMARY {json}` with every number; with OUT set (or --json PATH) the same JSON is
written to $OUT/gpu_check_<backend>.json (one file per backend, so runs with several
backends keep theirs), and the full tracebacks of failed steps to
gpu_check_<backend>_errors.txt beside it. Exit code 1 when a step failed.
"""

import argparse
import gc
import importlib.util
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback


def _default_backend():
    for name in ("tensorflow", "torch", "jax"):
        if importlib.util.find_spec(name) is not None:
            return name
    return "tensorflow"


# Before keras (and so the backend) is imported anywhere; run_isolated children inherit it.
os.environ.setdefault("KERAS_BACKEND", _default_backend())
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if os.environ["KERAS_BACKEND"] == "jax":
    # jax grabs 75% of the GPU at start otherwise, and free memory would mean nothing.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def say(text):
    print(text, flush=True)


def free_mib(numba=True):
    """Free MiB of GPU 0: nvidia-smi when present, else kg.gpu.memory_info(0) (unless
    numba=False), else None."""
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.free",
                              "--format=csv,noheader,nounits", "-i", "0"],
                             check=False, capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return int(out.stdout.strip().splitlines()[0])
    if not numba:
        return None
    try:
        import kerasgen as kg

        info = kg.gpu.memory_info(0)
    except Exception:  # noqa: BLE001 (no numba, no device, a broken driver binding)
        return None
    return _mib(None if info is None else info["free"])


def _mib(value):
    """bytes -> int MiB; None for None and for the numba simulator's NaN."""
    if value is None or not math.isfinite(value):
        return None
    return int(value // 2**20)


def gpu_total():
    """(total MiB of GPU 0, where free memory comes from), or (None, None) without a GPU."""
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total,name",
                              "--format=csv,noheader,nounits", "-i", "0"],
                             check=False, capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            total, name = out.stdout.strip().splitlines()[0].split(",", 1)
            return int(total), f"nvidia-smi ({name.strip()})"
    import kerasgen as kg

    try:
        info = kg.gpu.memory_info(0)
    except Exception as error:  # noqa: BLE001 (reported; then there is no GPU to measure)
        say(f"kg.gpu.memory_info(0) failed: {type(error).__name__}: {error}")
        return None, None
    if info is None:
        return None, None
    where = "kg.gpu.memory_info (numba" + (" simulator: not real numbers)" if SIMULATOR
                                           else ")")
    return _mib(info["total"]), where


def backend_gpus():
    """The GPUs the active Keras backend sees, as strings."""
    import keras

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return [d.name for d in tf.config.list_physical_devices("GPU")]
    if backend == "jax":
        import jax

        try:
            return [str(d) for d in jax.devices("gpu")]
        except RuntimeError:  # no GPU platform
            return []
    if backend == "torch":
        import torch

        if not torch.cuda.is_available():
            return []
        return [f"cuda:{i} {torch.cuda.get_device_name(i)}"
                for i in range(torch.cuda.device_count())]
    raise RuntimeError(f"unsupported KERAS_BACKEND {backend!r}: use tensorflow, jax or torch")


def device_of(tensor):
    """Where a backend tensor (or a Keras variable's value) lives, as the backend says."""
    devices = getattr(tensor, "devices", None)  # jax.Array
    if callable(devices):
        return ",".join(sorted(str(d) for d in devices()))
    device = getattr(tensor, "device", None)  # tf (str), torch (torch.device)
    if callable(device):
        device = device()
    return str(device)


def allocate(mib, dry_run):
    """~mib MiB of float32 ones on GPU 0 (on the CPU with dry_run), through the backend.
    Returns (the tensor, its device as the backend reports it)."""
    import keras

    backend = keras.backend.backend()
    count = mib * 256 * 1024  # 4 bytes each
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.device("/CPU:0" if dry_run else "/GPU:0"):
            block = tf.ones((count,), tf.float32)
        _ = block.numpy()[:1]  # wait for it
    elif backend == "jax":
        import jax
        import jax.numpy as jnp

        device = jax.devices("cpu")[0] if dry_run else jax.devices("gpu")[0]
        block = jax.device_put(jnp.ones((count,), jnp.float32), device)
        block.block_until_ready()
    elif backend == "torch":
        import torch

        block = torch.ones((count,), dtype=torch.float32,
                           device="cpu" if dry_run else "cuda")
        if not dry_run:
            torch.cuda.synchronize()
    else:
        raise RuntimeError(f"unsupported KERAS_BACKEND {backend!r}")
    return block, device_of(block)


def _check_gpu(dry_run):
    """The backend's GPUs; raises when it sees none (unless dry_run)."""
    import keras

    gpus = backend_gpus()
    if not gpus and not dry_run:
        raise RuntimeError(f"the {keras.backend.backend()} backend sees no GPU (a CPU-only "
                           "build, or no CUDA plugin): nothing would run on the GPU")
    return gpus


def _weight_device(model, dry_run):
    """The device of the model's first weight; raises if it is not on the GPU."""
    where = device_of(model.weights[0].value)
    lowered = where.lower()
    if not dry_run and not ("gpu" in lowered or "cuda" in lowered):
        raise RuntimeError(f"the model's weights are on {where!r}, not on the GPU")
    return where


def allocate_and_fit(mib, dry_run=False):
    """Holds ~mib MiB through the backend and fits a small model from a kg.ArrayGenerator
    for 2 epochs; returns the free MiB at start, while fitting and after, the backend, the
    block's device and a weight's device."""
    import keras
    import numpy as np

    import kerasgen as kg

    free_at_start = free_mib()
    gpus = _check_gpu(dry_run)
    block, block_device = allocate(mib, dry_run)
    free_after_alloc = free_mib()
    seen = {}

    class FreeWhileFitting(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen[epoch] = free_mib()

    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, 64)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"),
                              keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    started = time.perf_counter()
    history = model.fit(kg.ArrayGenerator(x, y, batch_size=256, seed=0), epochs=2,
                        verbose=0, callbacks=[FreeWhileFitting()])
    fit_s = time.perf_counter() - started
    weight_device = _weight_device(model, dry_run)
    del block
    return {"backend": keras.backend.backend(), "gpus": gpus, "block_device": block_device,
            "weight_device": weight_device,
            "loss": [round(float(v), 4) for v in history.history["loss"]],
            "fit_s": round(fit_s, 2), "free_at_start": free_at_start,
            "free_after_alloc": free_after_alloc,
            "free_during": seen.get(max(seen)) if seen else None,
            "pid": os.getpid()}


def make_digits_folder(directory, count=320, size=64):
    """count images (PNG and JPEG alternately) of scikit-learn's bundled 8x8 digits,
    upscaled to size x size, in 10 class subfolders. Returns how many were written."""
    import cv2
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    per_class = max(1, count // 10)
    written = 0
    for label in range(10):
        folder = os.path.join(directory, str(label))
        os.makedirs(folder, exist_ok=True)
        for i, index in enumerate(np.flatnonzero(digits.target == label)[:per_class]):
            gray = (digits.images[index] * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)
            image = cv2.cvtColor(cv2.resize(gray, (size, size), interpolation=cv2.INTER_CUBIC),
                                 cv2.COLOR_GRAY2BGR)
            name = os.path.join(folder, f"{i:04d}." + ("png" if i % 2 == 0 else "jpg"))
            if not cv2.imwrite(name, image):
                raise OSError(f"cv2.imwrite failed for {name}")
            written += 1
    return written


def real_fit(directory, epochs=2, batch_size=32, dry_run=False):
    """Fits Conv2D (x3) + GlobalAveragePooling2D + Dense on an ImageFolderGenerator over
    `directory`; returns losses, accuracies, images/s per epoch and the weight's device."""
    import keras

    import kerasgen as kg

    gpus = _check_gpu(dry_run)
    gen = kg.ImageFolderGenerator(directory, image_size=(64, 64), label_mode="int",
                                  rescale=1 / 255, batch_size=batch_size, seed=0, verbose=0)
    times = {}

    class EpochTimes(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            times[epoch] = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            times[epoch] = time.perf_counter() - times[epoch]

    layers = keras.layers
    model = keras.Sequential([  # BatchNormalization: the loss visibly falls in 2 epochs
        keras.Input((64, 64, 3)),
        layers.Conv2D(32, 3, strides=2, padding="same", activation="relu"),
        layers.BatchNormalization(),
        layers.Conv2D(64, 3, strides=2, padding="same", activation="relu"),
        layers.BatchNormalization(),
        layers.Conv2D(128, 3, strides=2, padding="same", activation="relu"),
        layers.GlobalAveragePooling2D(),
        layers.Dense(gen.num_classes),
    ])
    model.compile(keras.optimizers.Adam(3e-3),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    history = model.fit(gen, epochs=epochs, verbose=0, callbacks=[EpochTimes()])
    return {"backend": keras.backend.backend(), "gpus": gpus, "images": gen.num_samples,
            "batches": len(gen), "weight_device": _weight_device(model, dry_run),
            "loss": [round(float(v), 4) for v in history.history["loss"]],
            "accuracy": [round(float(v), 4) for v in history.history.get("accuracy", [])],
            "epoch_s": [round(times[e], 3) for e in sorted(times)],
            "images_per_s": [round(gen.num_samples / times[e], 1) for e in sorted(times)],
            "free_after_fit": free_mib()}


def clear_backend_cache():
    """The backend's own way to hand cached GPU memory back, if any; returns its name."""
    import keras

    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
            return "torch.cuda.empty_cache()"
        return None
    if backend == "jax":
        import jax

        jax.clear_caches()
        return "jax.clear_caches()"
    return None  # TensorFlow has none


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=2048, help="MiB to hold on the GPU")
    parser.add_argument("--images", type=int, default=320, help="images for the real fit")
    parser.add_argument("--epochs", type=int, default=2, help="epochs of the real fit")
    parser.add_argument("--dry-run", action="store_true",
                        help="without a GPU: run every step on the CPU to check the code")
    parser.add_argument("--exit-watchdog", type=float, default=30, metavar="SECONDS",
                        help="kill this process if it has not exited SECONDS after the "
                        "summary (0: never)")
    parser.add_argument("--json", help="write the summary here (default: "
                        "$OUT/gpu_check_<backend>.json when OUT is set)")
    args = parser.parse_args()
    backend = os.environ["KERAS_BACKEND"]
    summary = {"backend": backend, "mib": args.mib, "dry_run": args.dry_run,
               "python": platform.python_version(), "errors": {}}
    free_before = free_mib(numba=False)  # nvidia-smi only: nothing imported yet
    say(f"KERAS_BACKEND={backend}; free MiB before importing anything: {free_before}")

    import keras

    import kerasgen as kg

    summary.update(keras=keras.__version__, kerasgen=kg.__version__)
    total, source = gpu_total()
    if SIMULATOR and not args.dry_run:
        total, source = None, None
    if source is None and not args.dry_run:
        say("no GPU here (no nvidia-smi, no CUDA device for numba"
            + (", and numba's CUDA simulator is no GPU" if SIMULATOR else "")
            + "): nothing to measure (--dry-run runs every step on the CPU)")
        return 0
    summary.update(free_source=source, total_mib=total, free_before=free_before,
                   free_after_import=free_mib())
    say(f"keras {keras.__version__}, kerasgen {kg.__version__}, python "
        f"{platform.python_version()}; GPU 0: {total} MiB total, free MiB from {source}"
        + ("; DRY RUN: every step on the CPU" if args.dry_run else ""))
    say(f"free after importing keras + kerasgen: {summary['free_after_import']}")

    tracebacks = []

    def step(name, fn, *fn_args):
        try:
            return fn(*fn_args)
        except Exception as error:  # noqa: BLE001 (recorded; the next steps still run)
            summary["errors"][name] = f"{type(error).__name__}: {error}"
            say(f"{name}: FAILED: {type(error).__name__}: {error}")
            text = "".join(traceback.format_exception(error))
            tracebacks.append(f"== {name}\n{text}")
            # the child's traceback for a run_isolated step; the whole goes to the .txt
            remote = getattr(error.__cause__, "text", None) or text
            tail = remote.strip().strip('"').rstrip().splitlines()[-8:]
            print("\n".join(["  " + line for line in tail]), file=sys.stderr, flush=True)
            return None

    # 1. The real fit, in a child so this process has not touched the GPU yet for 2. and 3.
    data = tempfile.mkdtemp(prefix="kg_gpu_check_")
    try:
        started = time.perf_counter()
        written = make_digits_folder(data, args.images)
        say(f"real fit: wrote {written} digit images (64x64 PNG/JPEG, 10 classes) in "
            f"{time.perf_counter() - started:.1f}s")
        real = step("real_fit", kg.gpu.run_isolated, real_fit, data, args.epochs, 32,
                    args.dry_run)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    summary["real_fit"] = real
    summary["free_after_real_fit_child"] = free_mib()
    if real is not None:
        say(f"real fit ({real['backend']}, run_isolated child): {real['images']} images, "
            f"{real['batches']} batches/epoch; loss per epoch {real['loss']}, accuracy "
            f"{real['accuracy']}; images/s per epoch {real['images_per_s']} (epoch 1 "
            f"includes compiling); weight on {real['weight_device']}; backend GPUs "
            f"{real['gpus']}; free after fit {real['free_after_fit']}")
    say(f"free after the real-fit child ended: {summary['free_after_real_fit_child']}")

    # 2. run_isolated: everything the child held should be back when it ends.
    child = step("run_isolated", kg.gpu.run_isolated, allocate_and_fit, args.mib,
                 args.dry_run)
    summary["isolated"] = child
    summary["free_after_isolated_child"] = free_mib()
    if child is not None:
        say(f"run_isolated ({child['backend']}): free in the child at start "
            f"{child['free_at_start']}, after holding {args.mib} MiB on "
            f"{child['block_device']} {child['free_after_alloc']}, while fitting "
            f"{child['free_during']}; loss {child['loss']}; weight on "
            f"{child['weight_device']}")
    say(f"free after the run_isolated child ended: {summary['free_after_isolated_child']}")

    # 3. In this process, last: release_gpu_memory() destroys its CUDA context.
    here = step("in_process", allocate_and_fit, args.mib, args.dry_run)
    summary["in_process"] = here
    if here is not None:
        say(f"in-process ({here['backend']}): after holding {args.mib} MiB on "
            f"{here['block_device']} {here['free_after_alloc']}, while fitting "
            f"{here['free_during']}; loss {here['loss']}; weight on {here['weight_device']}")
    summary["free_after_fit_returned"] = free_mib()
    say(f"in-process after the fit returned (block and model dropped): "
        f"{summary['free_after_fit_returned']}")
    step("clear_session", lambda: (keras.backend.clear_session(), gc.collect()))
    summary["free_after_clear_session"] = free_mib()
    say(f"in-process after keras.backend.clear_session() + gc.collect(): "
        f"{summary['free_after_clear_session']}")
    cleared = step("backend_cache", clear_backend_cache)
    summary["backend_cache_call"] = cleared
    summary["free_after_backend_cache"] = free_mib() if cleared else None
    if cleared:
        say(f"in-process after {cleared}: {summary['free_after_backend_cache']}")
    released = step("release_gpu_memory", kg.gpu.release_gpu_memory)
    summary["release_returned"] = released
    summary["free_after_release"] = free_mib() if source and "nvidia-smi" in source else (
        "not measured: memory_info() would open a new context")
    say(f"kg.gpu.release_gpu_memory() -> {released}; free after: "
        f"{summary['free_after_release']}")

    base = summary["free_after_import"]
    if isinstance(base, int):  # MiB still held compared with the start (about 0: all back)
        held = {key: base - summary[f"free_{key}"] for key in (
            "after_real_fit_child", "after_isolated_child", "after_fit_returned",
            "after_clear_session", "after_backend_cache", "after_release")
            if isinstance(summary[f"free_{key}"], int)}
        summary["held_mib_vs_start"] = held
        say("MiB held compared with the start: " + ", ".join(f"{k} {v}" for k, v in
                                                            held.items()))
    if summary["errors"]:
        say(f"FAILED steps: {', '.join(summary['errors'])}")
    line = json.dumps(summary, default=str)
    path = args.json or (os.path.join(os.environ["OUT"], f"gpu_check_{backend}.json")
                         if os.environ.get("OUT") else None)
    if path:
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(path, "w") as file:
                file.write(line + "\n")
            say(f"summary written to {path}")
            if tracebacks:
                with open(os.path.splitext(path)[0] + "_errors.txt", "w") as file:
                    file.write("\n".join(tracebacks))
        except OSError as error:
            say(f"could not write {path}: {error}")
    say("SUMMARY " + line)
    if args.exit_watchdog > 0 and not args.dry_run:
        _exit_watchdog(args.exit_watchdog)
    return 1 if summary["errors"] else 0


def _exit_watchdog(seconds):
    """Kills this process when it has not exited `seconds` after the summary: a backend
    whose CUDA context release_gpu_memory() destroyed may hang in its exit handlers, and
    device time is short. A clean exit ends the watchdog within half a second."""
    script = ('i=0; while [ "$i" -lt "$2" ]; do kill -0 "$1" 2>/dev/null || exit 0; '
              'sleep 0.5; i=$((i+1)); done; echo "gpu_check: still running $3 s after '
              'SUMMARY (exit hung after release_gpu_memory?): killed"; kill -9 "$1"')
    subprocess.Popen(["sh", "-c", script, "sh", str(os.getpid()), str(int(2 * seconds)),
                      f"{seconds:g}"], start_new_session=True)


if __name__ == "__main__":
    sys.exit(main())
