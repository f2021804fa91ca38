"""Worker threads and processes wherever Keras's run: every combination of the
generator's `shuffle`, `fit(shuffle=...)`, threads or processes, and Keras's adapter driven
by hand trains on every sample once per epoch, or raises the batch's own error within
seconds (never a crash from daemonic workers, never a hang); classes and functions that
pickling by reference cannot send (a lambda, a class defined in a function) work."""

import time

import keras
import numpy as np
import pytest
from keras.src.trainers.data_adapters import get_data_adapter

import kerasgen as kg

X = np.arange(48, dtype="float32")[:, None] * np.ones((1, 3), "float32")
Y = (np.arange(48) % 2).astype("float32")
MODES = [pytest.param(dict(workers=2), id="threads"),
         pytest.param(dict(workers=2, use_multiprocessing=True), id="processes")]


def fit_ids(gen, shuffle):
    """[(epoch, sample ids)] of each batch Keras asked the generator for in a 2-epoch
    fit (Keras's adapter also peeks at the first batches for their structure)."""
    asked = []
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    original = gen.__class__.__getitem__

    def recording(self, index):
        batch = original(self, index)
        asked.append((self.epoch, sorted(int(v) for v in np.asarray(batch[0])[:, 0])))
        return batch

    gen.__class__ = type("Recording" + gen.__class__.__name__, (gen.__class__,),
                         {"__getitem__": recording})
    model.fit(gen, epochs=2, shuffle=shuffle, verbose=0)
    return asked


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fit_shuffle", [True, False], ids=["fit-shuffle", "fit-in-order"])
@pytest.mark.parametrize("gen_shuffle", [True, False], ids=["gen-shuffle", "gen-in-order"])
def test_every_combination_trains_on_every_sample_once_per_epoch(gen_shuffle, fit_shuffle,
                                                                  mode):
    gen = kg.ArrayGenerator(X, Y, batch_size=4, shuffle=gen_shuffle, seed=5,
                            augment=lambda x, rng: x, **mode)  # a lambda, by value
    asked = fit_ids(gen, fit_shuffle)
    for epoch in (0, 1):
        trained = [batch for e, batch in asked if e == epoch][-12:]  # after any peek
        assert sorted(i for batch in trained for i in batch) == list(range(48)), asked
    if not gen_shuffle and not fit_shuffle:  # in order, as asked
        assert [b for e, b in asked if e == 1] == [list(range(k, k + 4))
                                                  for k in range(0, 48, 4)]


class Failing(kg.ArrayGenerator):
    def load_batch(self, indices, positions, partners=None, lams=None):
        if 20 in indices:
            raise ValueError("sample 20 is broken")
        return super().load_batch(indices, positions, partners, lams)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shuffle", [True, False], ids=["adapter-shuffle", "adapter-in-order"])
@pytest.mark.parametrize("length_first", [True, False], ids=["length-read", "length-unread"])
def test_kerass_adapter_driven_by_hand_serves_or_raises_the_batchs_error(length_first,
                                                                         shuffle, mode):
    """As Keras's own tests drive it: get_data_adapter(...), its `num_batches` read (then
    the generator's own workers serve) or not (then Keras's pool starts first and makes
    the batches, kerasgen's in-place inside its daemonic workers)."""
    if (not length_first and mode.get("use_multiprocessing")
            and keras.backend.backend() != "tensorflow"):
        pytest.skip("Keras's own pool forks the training process, which JAX warns of")

    def adapter_of(gen):
        adapter = get_data_adapter(gen, shuffle=shuffle)
        if length_first:
            assert adapter.num_batches == 12
        return adapter

    gen = kg.ArrayGenerator(X, Y, batch_size=4, shuffle=False, seed=5, **mode)
    adapter = adapter_of(gen)
    ids = sorted(int(v) for x, _ in adapter.get_numpy_iterator() for v in x[:, 0])
    assert ids == list(range(48))
    adapter.on_epoch_end()
    broken = Failing(X, Y, batch_size=4, shuffle=False, seed=5, **mode)
    adapter = adapter_of(broken)
    start = time.perf_counter()
    with pytest.raises(ValueError, match="sample 20 is broken"):
        for _ in adapter.get_numpy_iterator():
            pass
    adapter.on_epoch_end()
    assert time.perf_counter() - start < 120  # a hang guard (the enqueuer hung), not speed


@pytest.mark.timeout(120)
def test_a_class_defined_in_a_function_works_with_worker_processes():
    class Local(kg.Generator):
        def __init__(self, **kwargs):
            super().__init__(num_samples=24, labels=np.arange(24) % 3, label_mode="int",
                             **kwargs)

        def load_sample(self, index):
            return np.full((3,), float(index), "float32")

    processes = Local(batch_size=4, seed=2, workers=2, use_multiprocessing=True)
    threads = Local(batch_size=4, seed=2, workers=2)
    for b in range(len(threads)):
        np.testing.assert_array_equal(processes[b][0], threads[b][0])
        np.testing.assert_array_equal(processes[b][1], threads[b][1])
    processes.on_epoch_end()


def test_what_cannot_cross_processes_is_named_before_the_first_batch():
    import threading

    class Holding(kg.ArrayGenerator):
        def load_sample(self, index):  # its loading is its own: the workers need it
            with self.lock:
                return super().load_sample(index)

    gen = Holding(X, Y, batch_size=4, workers=2, use_multiprocessing=True)
    gen.lock = threading.Lock()  # as a dataset holding a lock, a connection, a model
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    with pytest.raises(TypeError, match=r"Holding cannot be sent to worker processes .*"
                                        r"its attribute 'lock' cannot be pickled"):
        model.fit(gen, epochs=1, verbose=0)


def test_workers_receive_the_maker_not_the_generator():
    """A generator whose class fills no hook sends its batch maker and order to the
    workers, not itself: what it holds beside its data need not cross processes."""
    import threading

    class Holding(kg.ArrayGenerator):
        pass

    gen = Holding(X, Y, batch_size=4, seed=1, workers=2, use_multiprocessing=True)
    gen.lock = threading.Lock()  # never used to make a batch
    same = Holding(X, Y, batch_size=4, seed=1)
    try:
        for b in range(len(same)):
            np.testing.assert_array_equal(gen[b][0], same[b][0])
    finally:
        gen.on_epoch_end()


INTERRUPTED = """
import time
import numpy as np
import kerasgen as kg

gen = kg.ArrayGenerator(np.zeros((40, 3), "float32"), batch_size=4, workers=2,
                        use_multiprocessing=True)
for b in range(len(gen)):  # both workers have served batches: they are running
    gen[b]
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_an_interrupt_ends_the_workers_quietly(tmp_path):
    """Ctrl-C, or a notebook's stop button, signals the whole process group: only the
    training process shows its KeyboardInterrupt, the workers end without a word."""
    import os
    import signal
    import subprocess
    import sys

    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert child.stdout.readline().strip() == "ready"
    os.killpg(child.pid, signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert err.count("KeyboardInterrupt") == 1, err[-3000:]
    assert "kerasgen-worker" not in err and "worker_loop" not in err, err[-3000:]
