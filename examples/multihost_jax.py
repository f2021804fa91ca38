"""Several JAX processes train one Keras model, each reading its own shard of the data.

    python examples/multihost_jax.py          # 2 processes on this machine (127.0.0.1)
    python examples/multihost_jax.py --one-process   # the same in one process, batch 32
    python examples/multihost_jax.py PROCESS_ID NUM_PROCESSES COORDINATOR_HOST:PORT
                                              # one process of a run (start one per host)

Every process runs the same program: `jax.distributed.initialize` joins the run, a
`keras.distribution.DataParallel` over every process's devices (auto_shard_dataset=False:
the generator shards itself), and a kerasgen generator with the same seed everywhere and
num_shards="auto", which reads this process's shard (Keras's `data_shard_id`): each
global step trains on one batch of 16 from each process, the 32 samples one process
would read with batch_size=32. Each process prints its shard and its loss per epoch
(the loss of the whole model: the same in every process).
"""

import os
import socket
import subprocess
import sys

os.environ["KERAS_BACKEND"] = "jax"


def data_and_model():
    """The data and the model, the same in every process (and in the one-process run)."""
    import keras
    import numpy as np

    keras.utils.set_random_seed(0)  # the same initial weights in every process
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 8)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int64")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(2)])
    model.compile(keras.optimizers.SGD(0.1),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return x, y, model


def train(process_id, num_processes, coordinator, bind=None):
    import jax

    jax.distributed.initialize(coordinator, num_processes, process_id,
                               coordinator_bind_address=bind, initialization_timeout=60)
    import keras

    import kerasgen as kg

    keras.distribution.set_distribution(keras.distribution.DataParallel(
        devices=jax.devices(), auto_shard_dataset=False))
    x, y, model = data_and_model()
    # the same data and seed in every process; each reads its shard of every epoch
    gen = kg.ArrayGenerator(x, y, batch_size=16, seed=1, num_shards="auto")
    history = model.fit(gen, epochs=2, verbose=0)
    losses = [round(v, 4) for v in history.history["loss"]]
    print(f"process {jax.process_index()} of {jax.process_count()}: shard "
          f"{gen.get_state()['shard']}, {len(gen)} batches of 16 per epoch, loss per epoch "
          f"{losses}", flush=True)
    jax.distributed.shutdown()


def one_process():
    """The same training in one process, at batch_size=32: the same losses."""
    import kerasgen as kg

    x, y, model = data_and_model()
    gen = kg.ArrayGenerator(x, y, batch_size=32, seed=1)
    history = model.fit(gen, epochs=2, verbose=0)
    losses = [round(v, 4) for v in history.history["loss"]]
    print(f"1 process: {len(gen)} batches of 32 per epoch, loss per epoch {losses}")


def launch(num_processes=2):
    """Starts `num_processes` processes of this script on 127.0.0.1 and prints their
    lines in process order."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen(
        [sys.executable, __file__, str(i), str(num_processes), f"127.0.0.1:{port}",
         "--local"], stdout=subprocess.PIPE, text=True) for i in range(num_processes)]
    try:
        outputs = [p.communicate(timeout=180)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, out in zip(procs, outputs):
        print("".join(line for line in out.splitlines(True)
                      if not line.startswith("[Gloo]")), end="")
        if p.returncode:
            sys.exit(f"a process exited with {p.returncode}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--one-process"]:
        one_process()
    elif len(sys.argv) > 1:
        address = sys.argv[3]
        # started by launch(): the coordinator listens on 127.0.0.1 only
        bind = address if "--local" in sys.argv else None
        train(int(sys.argv[1]), int(sys.argv[2]), address, bind)
    else:
        launch()
