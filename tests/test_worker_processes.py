"""kerasgen's own worker processes when the training process is interrupted or killed:
nothing is left behind (workers notice their parent's pipe close)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    import numpy as np
    import kerasgen as kg

    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal


    class Slow(kg.Generator):
        def __init__(self, **kwargs):
            super().__init__(num_samples=100000, labels=np.arange(100000) % 2,
                             label_mode="int", **kwargs)

        def load_sample(self, index):
            time.sleep(0.005)
            return np.zeros(3, "float32")


    if __name__ == "__main__":
        gen = Slow(batch_size=8, workers=2, use_multiprocessing=True)
        for i in range(len(gen)):
            gen[i]
            if i == 3:
                print("running", flush=True)
""")


def descendants(pid):
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children = [int(p) for p in f.read().split()]
            for child in children:
                found += [child] + descendants(child)
    except FileNotFoundError:
        pass
    return found


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to find processes")
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=lambda s: s.name)
@pytest.mark.slow
def test_no_process_is_left_when_training_is_interrupted_or_killed(tmp_path, how):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    main = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert main.stdout.readline().strip() == "running", main.stderr.read()[-2000:]
        spawned = descendants(main.pid)  # fork server, resource tracker, 2 workers
        assert len(spawned) >= 3
        main.send_signal(how)
        main.wait(timeout=30)
        deadline = time.time() + 20
        while time.time() < deadline and any(running(pid) for pid in spawned):
            time.sleep(0.2)
        assert not [pid for pid in spawned if running(pid)]
        assert "BrokenPipeError" not in main.stderr.read()  # the workers ended quietly
    finally:
        if main.poll() is None:
            main.kill()


def open_fds():
    return len(os.listdir(f"/proc/{os.getpid()}/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to count descriptors")
@pytest.mark.parametrize("workers", [dict(workers=1), dict(workers=2),
                                     dict(workers=2, use_multiprocessing=True)],
                         ids=["1-worker", "2-threads", "2-processes"])
def test_threads_and_file_descriptors_stay_flat_over_epochs(image_folder, workers):
    import threading

    import keras

    import kerasgen as kg

    gen = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4, seed=0,
                                  **workers)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    counts = []
    watch = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: counts.append(
        (threading.active_count(), open_fds())))
    model.fit(gen, epochs=10, verbose=0, callbacks=[watch])
    (threads_2, fds_2), (threads_10, fds_10) = counts[2], counts[-1]
    assert threads_10 <= threads_2 and fds_10 <= fds_2, counts
