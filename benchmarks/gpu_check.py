"""GPU memory check: what each kerasgen.gpu tool gives back, on a machine with a GPU.

    .venv/bin/python benchmarks/gpu_check.py [--mib 2048]

1. In a child (run_isolated): allocate ~--mib MiB through TensorFlow, fit a small model
   from a kerasgen generator, and report free memory inside the child; then report free
   memory in the parent after the child ended (everything should be back).
2. In this process: allocate and fit the same way, measure free memory, call
   kg.gpu.release_gpu_memory(), measure again.
Free memory comes from nvidia-smi when present (it sees every process), else from
kg.gpu.memory_info(). On a machine without a GPU it says so and exits 0.
"""

import argparse
import os
import shutil
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_mib():
    """Free MiB of GPU 0 as the driver reports it (nvidia-smi), or None."""
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.free,memory.total",
                              "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True)
        if out.returncode == 0:
            free, total = (int(v) for v in out.stdout.strip().split(","))
            return free, total
    return None


def allocate_and_fit(mib):
    """Holds ~mib MiB in a TensorFlow tensor, fits a small model; returns free MiB then."""
    import keras
    import numpy as np
    import tensorflow as tf

    import kerasgen as kg

    with tf.device("/GPU:0"):
        block = tf.ones((mib * 256 * 1024,), tf.float32)  # 4 bytes each
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, 64)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"),
                              keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(kg.ArrayGenerator(x, y, batch_size=256, seed=0), epochs=2, verbose=0)
    during = free_mib()
    del block
    return {"loss": history.history["loss"], "free_during": during,
            "gpus": len(tf.config.list_physical_devices("GPU"))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=2048)
    args = parser.parse_args()
    import kerasgen as kg

    start = free_mib()
    print(f"free before anything: {start}")
    if start is None and kg.gpu.memory_info() is None:
        print("no GPU here (no nvidia-smi, no CUDA device for numba): nothing to measure")
        return 0
    child = kg.gpu.run_isolated(allocate_and_fit, args.mib)
    print(f"run_isolated: free inside the child while fitting: {child['free_during']} "
          f"(GPUs seen: {child['gpus']}); free after the child ended: {free_mib()}")
    here = allocate_and_fit(args.mib)
    print(f"in-process: free while fitting: {here['free_during']}")
    import gc

    import keras
    keras.backend.clear_session()
    gc.collect()
    print(f"in-process after clear_session + gc: {free_mib()}")
    print(f"release_gpu_memory() -> {kg.gpu.release_gpu_memory()}; free after: {free_mib()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
