"""Feeding model.fit: work-ahead, Keras's adapter adopted, decode threads sized."""

import threading

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


def test_prefetch_applies_with_one_worker_only_and_is_checked():
    assert Counted(prefetch=2)._ahead is not None
    assert Counted(prefetch=2, workers=2)._ahead is None  # Keras's threads work ahead
    assert Counted()._ahead is None  # custom subclasses: opt in
    with pytest.raises(ValueError, match=r"`prefetch` must be 'auto' or a non-negative "
                                         r"integer. Received: prefetch=-1"):
        Counted(prefetch=-1)


def test_image_generators_work_ahead_by_default(image_folder):
    gen = folder_gen(image_folder)
    assert gen.prefetch == 2 and gen._ahead is not None
    assert folder_gen(image_folder, prefetch=0)._ahead is None


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
