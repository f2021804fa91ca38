"""Feeding model.fit: work-ahead, Keras's adapter adopted, decode threads sized, worker
processes."""

import mmap
import os
import signal
import subprocess
import sys
import threading
import time

import keras
import numpy as np
import pytest
from keras.src.trainers.data_adapters import get_data_adapter

import kerasgen as kg

from .test_contract import ids
from .test_keras import by_epoch, expected_epochs, folder_gen, recorder


class Counted(kg.Generator):
    """Sample k is filled with 10 * k; records which thread loaded which sample."""

    def __init__(self, n=40, **kwargs):
        self.loads = []  # (index, thread name)
        self.lock = threading.Lock()
        self.loaded = threading.Condition(self.lock)
        super().__init__(num_samples=n, labels=np.arange(n) % 2, label_mode="int", **kwargs)

    def load_sample(self, index):
        with self.loaded:
            self.loads.append((index, threading.current_thread().name))
            self.loaded.notify_all()
        return np.full((3,), 10.0 * index, dtype="float32")

    def wait_for(self, indices, timeout=10):
        with self.loaded:
            return self.loaded.wait_for(
                lambda: set(indices) <= {i for i, _ in self.loads}, timeout)


def all_batches(gen, order):
    return [(i, gen[i]) for i in order]


@pytest.mark.parametrize("order", ["in order", "random access"])
def test_work_ahead_gives_the_same_batches_as_none(order):
    plain = Counted(seed=3, batch_size=4, prefetch=0)
    ahead = Counted(seed=3, batch_size=4, prefetch=2)
    for _ in range(2):  # two epochs
        indices = list(range(len(plain)))
        if order == "random access":
            indices = [3, 0, 7, 1, 2, 6, 5, 4]
        for (_, a), (_, b) in zip(all_batches(plain, indices), all_batches(ahead, indices)):
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])
        plain.on_epoch_end()
        ahead.on_epoch_end()


def test_the_next_batches_are_made_on_the_work_ahead_thread():
    gen = Counted(seed=0, batch_size=4, prefetch=2)
    plan = gen.epoch_plan()
    gen[0]
    assert gen.wait_for(plan[4:12])  # batches 1 and 2, made without being asked for
    ahead = {name for i, name in gen.loads if i in set(plan[4:12].tolist())}
    assert ahead == {"kerasgen-ahead_0"}
    asked = len(gen.loads)
    np.testing.assert_array_equal(ids(gen[1][0]), plan[4:8])
    np.testing.assert_array_equal(ids(gen[2][0]), plan[8:12])
    gen.wait_for(plan[12:20])
    assert all(i in set(plan[12:20].tolist()) for i, _ in gen.loads[asked:])


def test_random_access_turns_the_work_ahead_off_for_the_epoch():
    gen = Counted(seed=0, batch_size=4, prefetch=2)
    plan = gen.epoch_plan()
    gen[5]
    assert gen.wait_for(plan[24:32])  # batches 6 and 7 made ahead
    gen[2]  # out of order and not foreseen: nothing more is made ahead this epoch
    done = len(gen.loads)
    gen[8]
    gen[1]
    assert len(gen.loads) == done + 8  # exactly the samples asked for
    assert all(name != "kerasgen-ahead_0" for _, name in gen.loads[done:])


def test_a_batch_made_ahead_keeps_its_epoch_when_the_epoch_ends():
    gen = Counted(seed=5, batch_size=4, prefetch=2)
    expected = Counted(seed=5, batch_size=4, prefetch=0)
    gen[len(gen) - 3]  # the last two batches of epoch 0 are now made ahead
    gen.on_epoch_end()
    expected.on_epoch_end()
    for i in range(len(gen)):
        np.testing.assert_array_equal(gen[i][0], expected[i][0])


def test_errors_of_batches_made_ahead_reach_the_caller_naming_the_batch():
    class Broken(Counted):
        def load_sample(self, index):
            if index == self.bad:
                raise ValueError(f"bad sample {index}")
            return super().load_sample(index)

    gen = Broken(seed=0, batch_size=4, prefetch=2)
    gen.bad = int(gen.epoch_plan()[5])  # in batch 1, made ahead
    gen[0]
    with pytest.raises(ValueError, match="bad sample") as caught:
        gen[1]
    assert "while loading batch 1 of epoch 0" in "".join(caught.value.__notes__)


def test_prefetch_applies_with_one_worker_and_workers_are_kerasgens_threads():
    assert Counted(prefetch=2)._feeding.ahead is not None
    assert Counted()._feeding.ahead is None  # custom subclasses: opt in
    threads = Counted(workers=3, max_queue_size=4, batch_size=5, shuffle=False)
    ahead = threads._feeding.ahead
    assert (ahead.threads, ahead.depth) == (3, 4)  # Keras's queue size
    threads[0]  # made here
    assert threads.wait_for(range(25))  # batches 1..4 made ahead, on kerasgen's threads
    names = {name for index, name in threads.loads if index >= 5}
    assert names and all(name.startswith("kerasgen-ahead") for name in names)
    with pytest.raises(ValueError, match=r"`prefetch` must be 'auto' or a non-negative "
                                         r"integer. Received: prefetch=-1"):
        Counted(prefetch=-1)


def test_image_generators_work_ahead_by_default(image_folder):
    gen = folder_gen(image_folder)
    assert gen.prefetch == 4 and gen._feeding.ahead is not None
    assert folder_gen(image_folder, prefetch=0)._feeding.ahead is None


def test_image_generators_make_two_batches_ahead_at_once_and_subclasses_one(
        image_folder, monkeypatch):
    from kerasgen.pipeline import feeding as _feeding

    monkeypatch.setattr(_feeding, "usable_cores", lambda: 2)
    assert folder_gen(image_folder)._feeding.ahead.threads == 2
    assert folder_gen(image_folder, prefetch=1)._feeding.ahead.threads == 1
    # a subclass's load_sample may not expect two threads: one, whatever prefetch
    assert Counted(prefetch=4)._feeding.ahead.threads == 1
    monkeypatch.setattr(_feeding, "usable_cores", lambda: 1)
    assert folder_gen(image_folder)._feeding.ahead.threads == 1


def test_two_batches_made_at_once_are_the_batches_made_on_demand(image_folder,
                                                                  monkeypatch):
    from kerasgen.pipeline import feeding as _feeding

    monkeypatch.setattr(_feeding, "usable_cores", lambda: 2)
    make = lambda **kw: kg.ImageFolderGenerator(  # noqa: E731
        image_folder, image_size=(8, 8), batch_size=2, seed=7, cache=None, **kw)
    ahead, plain = make(), make(prefetch=0)
    assert ahead._feeding.ahead.threads == 2
    for epoch in range(2):
        for i in range(len(plain)):
            got, want = ahead[i], plain[i]
            assert all(np.array_equal(g, w) for g, w in zip(got, want)), (epoch, i)
        ahead.on_epoch_end()
        plain.on_epoch_end()


def test_fit_with_keras_default_shuffle_sees_exactly_the_generators_order(image_folder):
    """Keras's fit(shuffle=True) would reorder the batches of each epoch with Python's
    global `random`; a generator that shuffles itself turns that off, so fit trains on
    the generator's order (reproducible, resumable mid-epoch)."""
    make = lambda: folder_gen(image_folder)  # noqa: E731
    gen = make()
    model = recorder()
    model.fit(gen, epochs=2, verbose=0)  # shuffle=True is Keras's default
    seen = [batch for _, batch in model.seen]
    assert by_epoch(seen, len(gen)) == expected_epochs(make, 2)


def test_the_tensorflow_dataset_of_the_adapter_has_no_autotuning(image_folder):
    gen = folder_gen(image_folder)
    adapter = get_data_adapter(gen, shuffle=True)
    assert adapter.num_batches == len(gen)  # read as Keras's EpochIterator reads it
    dataset = adapter.get_tf_dataset()
    assert dataset.options().autotune.enabled is False

    class Plain(keras.utils.PyDataset):
        def __len__(self):
            return 2

        def __getitem__(self, index):
            return np.zeros((2, 3), "float32"), np.zeros((2,), "float32")

    plain = get_data_adapter(Plain(), shuffle=True)  # other PyDatasets: as Keras makes them
    assert plain.num_batches == 2
    assert plain.get_tf_dataset().options().autotune.enabled is not False


def test_decode_threads_follow_the_usable_cores_and_worker_processes(image_folder):
    from kerasgen import loader

    cores = loader.usable_cores()
    assert folder_gen(image_folder).loader.threads() == cores
    assert folder_gen(image_folder, workers=4).loader.threads() == cores  # one shared pool
    processes = folder_gen(image_folder, workers=2, use_multiprocessing=True)
    assert processes.loader.threads() == max(1, cores // 2)
    assert folder_gen(image_folder, decode_threads=3).loader.threads() == 3


def test_batch_buffers_are_reused_only_once_nothing_holds_them(image_folder):
    gen = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4,
                                  shuffle=False, label_mode="int", cache=None, prefetch=0)
    first = gen[0][0]
    kept = first.copy()
    second = gen[1][0]
    assert not np.shares_memory(first, second)  # `first` is still held
    np.testing.assert_array_equal(first, kept)
    view = second[1:]
    address = second.__array_interface__["data"][0]
    del first, second
    third = gen[2][0]
    assert not np.shares_memory(third, view)  # a view keeps its batch from reuse
    del view
    fourth = gen[0][0]
    np.testing.assert_array_equal(fourth, kept)
    assert address in (third.__array_interface__["data"][0],
                       fourth.__array_interface__["data"][0])  # reused once let go


def test_keras_trains_on_intact_batches_with_reused_buffers(image_folder):
    make = lambda: kg.ImageFolderGenerator(image_folder, image_size=(8, 8),  # noqa: E731
                                           batch_size=2, seed=4, label_mode="int",
                                           cache=None)
    model = recorder()
    model.fit(make(), epochs=3, verbose=0)
    gen = make()
    assert by_epoch([batch for _, batch in model.seen], len(gen)) == expected_epochs(make, 3)


def test_batches_are_64_byte_aligned(image_folder):
    """Measured in fit (docs/performance.md): with 16-byte aligned batches the process grew
    by about 90 MiB an epoch under the 32 MiB mmap threshold; with 64, it stayed flat."""
    images = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4,
                                     label_mode="int", cache=None)
    arrays = kg.ArrayGenerator(np.arange(60.0).reshape(20, 3), batch_size=4)
    for gen in (images, arrays):
        for i in range(3):
            assert gen[i][0].ctypes.data % 64 == 0


# ---------------------------------------------------------------- worker processes
class Slow(kg.Generator):
    """Sample k is filled with k; each load takes `delay` seconds."""

    def __init__(self, n=64, delay=0.0, **kwargs):
        self.delay = delay
        super().__init__(num_samples=n, labels=np.arange(n) % 2, label_mode="int", **kwargs)

    def load_sample(self, index):
        time.sleep(self.delay)
        return np.full((4, 4, 3), float(index), dtype="float32")


def test_worker_processes_hand_batches_over_in_shared_memory():
    gen = Slow(batch_size=8, seed=5, workers=2, use_multiprocessing=True)
    plain = Slow(batch_size=8, seed=5)
    first = gen[0]  # made here, while the workers make the next batches
    second = gen[1]
    np.testing.assert_array_equal(second[0], plain[1][0])
    np.testing.assert_array_equal(first[0], plain[0][0])
    memory = second[0].base.base  # a view of a slot, mapped in both processes
    assert isinstance(memory, memoryview) and isinstance(memory.obj, mmap.mmap)
    gen.on_epoch_end()


def test_fit_with_worker_processes_uses_kerasgens_workers_not_keras_pool(image_folder):
    gen = folder_gen(image_folder, workers=2, use_multiprocessing=True)
    adapter = get_data_adapter(gen, shuffle=True)
    assert adapter.enqueuer is not None  # Keras made one ...
    assert adapter.num_batches == len(gen)
    assert adapter.enqueuer is None  # ... and it is dropped before it starts
    model = recorder()
    model.fit(gen, epochs=2, verbose=0)
    make = lambda: folder_gen(image_folder)  # noqa: E731
    assert by_epoch([b for _, b in model.seen], len(gen)) == expected_epochs(make, 2)


def test_worker_processes_are_not_forks_of_the_training_process():
    from .test_distributed import child_pids, multiprocessing_helper, worker_pids

    before = worker_pids()
    gen = Slow(n=400, delay=0.01, batch_size=8, workers=2, use_multiprocessing=True)
    gen[0]
    children = child_pids()
    helpers = [pid for pid in children if multiprocessing_helper(pid)]
    assert set(children) - before == set(helpers) - before  # no worker is our child ...
    workers = {pid for helper in helpers for pid in child_pids(helper)} - before
    assert len(workers) == 2  # ... they are forks of Python's fork server
    gen.on_epoch_end()


def test_a_killed_worker_process_ends_the_epoch_with_an_error_naming_it():
    from .test_distributed import worker_pids

    before = worker_pids()
    gen = Slow(n=400, delay=0.02, batch_size=8, workers=2, use_multiprocessing=True)
    gen[0]
    victim = max(worker_pids() - before)
    os.kill(victim, signal.SIGKILL)
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match=rf"pid {victim}.*killed by signal SIGKILL"):
        for i in range(1, len(gen)):
            gen[i]
    # a hang guard, not a speed check (measured: well under a second): generous for a
    # shared, loaded machine
    assert time.perf_counter() - started < 60
    gen.on_epoch_end()


SCRIPT = """
import numpy as np
import kerasgen as kg

print("script ran", flush=True)
gen = kg.ImageFolderGenerator({folder!r}, image_size=(8, 8), batch_size=4, seed=1,
                              label_mode="int", workers=2, use_multiprocessing=True)
total = sum(float(gen[i][0].sum()) for i in range(len(gen)))
print("sum", total, flush=True)
"""

GUARDED = """
import numpy as np
import kerasgen as kg


class Squares(kg.Generator):
    def __init__(self, **kwargs):
        super().__init__(num_samples=40, labels=np.arange(40) % 2, label_mode="int",
                         **kwargs)

    def load_sample(self, index):
        return np.full((2,), float(index) ** 2, dtype="float32")


if __name__ == "__main__":
    for processes in (False, True):
        gen = Squares(batch_size=4, seed=3, workers=2, use_multiprocessing=processes)
        print(processes, [float(gen[i][0].sum()) for i in range(len(gen))], flush=True)
"""


def run_script(tmp_path, text):
    script = tmp_path / "train.py"
    script.write_text(text)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_worker_processes_do_not_run_the_users_script(image_folder, tmp_path):
    # no `if __name__ == "__main__":` guard, as in most training scripts
    out = run_script(tmp_path, SCRIPT.format(folder=str(image_folder)))
    assert out.count("script ran") == 1
    assert out.count("sum ") == 1


@pytest.mark.slow
def test_a_generator_class_of_the_users_script_works_in_worker_processes(tmp_path):
    out = run_script(tmp_path, GUARDED).splitlines()
    threads, processes = [line.split(" ", 1)[1] for line in out]
    assert threads == processes


def test_decoding_leaves_cores_to_a_slow_consumer_and_widens_when_it_waits(
        image_folder, monkeypatch):
    from kerasgen.loading import decode_pool

    monkeypatch.setattr(decode_pool, "usable_cores", lambda: 3)
    gen = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=3, seed=1,
                                  cache=None, label_mode="int")
    used = []
    load_into = gen.loader.load_into
    monkeypatch.setattr(gen.loader, "load_into", lambda index, out, *rest: (
        used.append(threading.current_thread().name), load_into(index, out, *rest))[1])
    for _ in range(12):  # a slow training step: every batch is ready when asked for
        for i in range(len(gen)):
            gen[i]
            time.sleep(0.03)
        gen.on_epoch_end()
    assert gen.loader.decode_pool.width == 1
    used.clear()
    for i in range(len(gen)):
        gen[i]
        time.sleep(0.03)
    assert not [name for name in used if name.startswith("kerasgen-decode")]  # one each
    gen.loader.pace(waited=True)  # the consumer had to wait: every thread again
    assert gen.loader.decode_pool.width is None


def test_a_killed_worker_process_ends_fit_with_an_error_naming_it():
    """Keras's own pool would wait for the dead worker's batch forever."""
    from .test_distributed import worker_pids

    before = worker_pids()
    gen = Slow(n=400, delay=0.02, batch_size=8, workers=2, use_multiprocessing=True)
    victims, killed_at = [], []

    def kill_one(batch, logs):
        if batch == 0:
            victims.append(max(worker_pids() - before))
            os.kill(victims[0], signal.SIGKILL)
            killed_at.append(time.perf_counter())

    model = keras.Sequential([keras.Input((4, 4, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    # The RuntimeError itself under every backend: under TensorFlow, where a batch after
    # the first comes through tf.data, kerasgen raises it in place of tf.data's UnknownError.
    with pytest.raises(RuntimeError, match=r"pid \d+, worker \d of 2\) was killed by signal "
                                           r"SIGKILL") as caught:
        model.fit(gen, epochs=2, verbose=0, callbacks=[
            keras.callbacks.LambdaCallback(on_train_batch_end=kill_one)])
    # from the kill (not fit's start-up); a hang guard (Keras's pool waited forever), not
    # a speed check: measured well under a second, generous for a loaded machine
    assert time.perf_counter() - killed_at[0] < 60
    assert f"(pid {victims[0]}, worker" in str(caught.value)
    gen.on_epoch_end()
    assert not worker_pids() - before  # the other worker ended too


def test_kerasgen_does_kerass_batch_shuffle_for_a_shuffle_false_generator(image_folder):
    """A shuffle=False generator under fit(shuffle=True): Keras's pool is not kept (its
    daemonic workers could start none of kerasgen's, and its stop() hangs on a batch that
    raised); the generator serves whole batches in an order drawn from (seed, epoch)."""
    def make():
        return kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=2,
                                       label_mode="int", workers=2, shuffle=False, seed=3)

    gen = make()
    adapter = get_data_adapter(gen, shuffle=True)
    assert adapter.num_batches == len(gen)
    assert adapter.enqueuer is None
    runs = []
    for _ in range(2):
        model, fitted = recorder(), make()
        model.fit(fitted, epochs=2, verbose=0)
        runs.append(by_epoch([b for _, b in model.seen], len(gen)))
    in_order = [ids(gen[b][0]).tolist() for b in range(len(gen))]
    for epoch in runs[0]:  # every sample once per epoch, each batch a batch in order
        assert sorted(i for batch in epoch for i in batch) == list(range(gen.num_samples))
        assert sorted(epoch) == sorted(in_order) and epoch != in_order
    assert runs[0] == runs[1]  # reproducible: drawn from (seed, epoch), not `random`
    assert runs[0][0] != runs[0][1]  # a new batch order every epoch
    assert [ids(fitted[b][0]).tolist() for b in range(len(gen))] == in_order  # after fit
