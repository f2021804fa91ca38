"""Beyond one process: tf.data interop, sharding, tf.data service, exact mid-epoch resume,
worker hygiene."""

import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasgen as kg

from .conftest import plant_old_temp_links
from .test_contract import ids
from .test_keras import folder_gen

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def flat(batch):
    return [np.asarray(v) for v in tf.nest.flatten(batch)]


def assert_same_batches(got, expected):
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        for u, v in zip(flat(a), flat(b)):
            np.testing.assert_array_equal(u, v)


def test_to_tf_dataset_yields_the_generators_batches_epoch_after_epoch(image_folder):
    rng = np.random.default_rng(0)
    x = {"a": rng.normal(size=(30, 3)).astype("float32"), "b": np.arange(30.0)[:, None]}
    gen = kg.ArrayGenerator(x, np.arange(30) % 3, sample_weight=np.linspace(0, 1, 30),
                            batch_size=7, seed=2, label_mode="categorical",
                            augment=lambda s, r: {k: v + r.normal() for k, v in s.items()})
    dataset = gen.to_tf_dataset(epochs=2)
    got = [tf.nest.map_structure(lambda t: t.numpy(), batch) for batch in dataset]
    expected = []
    for _ in range(2):
        expected += [gen[i] for i in range(len(gen))]
        gen.on_epoch_end()
    assert_same_batches(got, expected)
    spec = dataset.element_spec
    assert spec[0]["a"].shape.as_list() == [None, 3] and spec[1].shape.as_list() == [None, 3]

    images = folder_gen(image_folder)
    endless = images.to_tf_dataset()  # epochs=None: forever, from the current epoch
    first = [ids(x.numpy()).tolist() for x, _ in endless.take(2 * len(images))]
    assert first[:len(images)] == [ids(images[i][0]).tolist() for i in range(len(images))]
    images.on_epoch_end()
    assert first[len(images):] == [ids(images[i][0]).tolist() for i in range(len(images))]


def test_to_tf_dataset_trains_under_a_distribution_strategy():
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    gen = kg.ArrayGenerator(x, (x[:, 0] > 0).astype("int64"), batch_size=16, seed=0)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(gen.to_tf_dataset(), epochs=2, steps_per_epoch=len(gen), verbose=0)
    assert len(history.history["loss"]) == 2


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("num_shards,remainder", [(3, "pad"), (3, "drop"), (4, "pad"),
                                                  (2, "drop")])
def test_shards_are_disjoint_complete_and_equal(seed, num_shards, remainder):
    x = np.arange(53.0)[:, None]
    base = kg.ArrayGenerator(x, batch_size=5, seed=seed)
    shards = [base.shard(num_shards, k, remainder) for k in range(num_shards)]
    for epoch in range(3):
        lengths = {len(s) for s in shards}
        assert len(lengths) == 1  # the same number of batches on every shard
        seen = [[int(v) for i in range(len(s)) for v in s[i][:, 0]] for s in shards]
        every = [v for part in seen for v in part]
        if remainder == "pad":
            assert set(every) == set(range(53))  # together: every sample
            assert len(every) - len(set(every)) < num_shards * 5  # padding: < one round
        else:
            assert len(every) == len(set(every))  # disjoint
            assert len(every) >= 53 - num_shards * 5
        if epoch == 0:
            first = seen
        for s in shards:
            s.on_epoch_end()
    assert seen != first  # reshuffled each epoch from the shared seed
    by_argument = kg.ArrayGenerator(x, batch_size=5, seed=seed, num_shards=num_shards,
                                    shard_index=1)
    np.testing.assert_array_equal(by_argument[0][0], base.shard(num_shards, 1)[0][0])


def test_shards_with_a_sampler_share_its_plan():
    y = np.array([0] * 40 + [1] * 8)
    x = np.arange(48.0)[:, None]
    make = lambda: kg.ArrayGenerator(x, y, batch_size=4, seed=3, label_mode="int",  # noqa
                                     sampler=kg.samplers.RandomOverSampler())
    whole = make()
    plan = whole.epoch_plan()
    shards = [make().shard(2, k) for k in range(2)]
    got = sorted(int(v) for s in shards for i in range(len(s)) for v in s[i][0][:, 0])
    assert got == sorted(plan.tolist()) and len(shards[0]) == len(shards[1]) == 10
    with pytest.raises(ValueError, match="`index` must be in"):
        whole.shard(2, 2)
    with pytest.raises(ValueError, match="`num_shards` and `shard_index` go together"):
        kg.ArrayGenerator(x, num_shards=2)


def test_tf_data_service_distributes_every_sample_exactly_once():
    service = tf.data.experimental.service
    dispatcher = service.DispatchServer()
    address = dispatcher.target.split("://")[1]
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=address))
               for _ in range(2)]
    gen = kg.ArrayGenerator(np.arange(100.0)[:, None], batch_size=8, seed=4)
    dataset = gen.to_tf_dataset(epochs=1).apply(service.distribute(
        processing_mode="distributed_epoch", service=dispatcher.target))
    seen = sorted(int(v) for x in dataset for v in x.numpy()[:, 0])
    assert seen == list(range(100))
    assert len(workers) == 2


RECORDING_SCRIPT = """
import json, os, signal, sys
import keras, numpy as np, kerasgen as kg
from tests.test_contract import ids

folder, state_path, log_path, mode, seed = sys.argv[1:6]

class Recorder(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(3)
        self.flat = keras.layers.Flatten()
    def call(self, x):
        return self.dense(self.flat(x))
    def train_step(self, data):
        with open(log_path, "a") as f:
            f.write(json.dumps(ids(np.asarray(data[0])).tolist()) + "\\n")
        return super().train_step(data)

class KillAt(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == 1 and batch == 1:
            os.kill(os.getpid(), signal.SIGKILL)
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

gen = kg.ImageFolderGenerator(folder, image_size=(8, 8), batch_size=3, label_mode="int",
                              seed=None if seed == "none" else int(seed))
model = Recorder()
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              run_eagerly=True)
checkpoint = kg.callbacks.GeneratorCheckpoint(state_path, every_n_batches=1)
if mode == "killed":
    model.fit(gen, epochs=3, shuffle=False, verbose=0, callbacks=[checkpoint, KillAt()])
elif mode == "resumed":
    checkpoint.restore(gen)
    model.fit(gen, epochs=1, shuffle=False, verbose=0, callbacks=[checkpoint])  # the rest
    model.fit(gen, epochs=1, shuffle=False, verbose=0, callbacks=[checkpoint])  # epoch 2
else:
    model.fit(gen, epochs=3, shuffle=False, verbose=0)
print("done")
"""


def run_script(*args):
    return subprocess.run([sys.executable, "-c", RECORDING_SCRIPT, *map(str, args)],
                          capture_output=True, text=True, timeout=240, cwd=ROOT,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


def read_log(path):
    return [json.loads(line) for line in open(path)]


@pytest.mark.slow
def test_a_killed_training_process_resumes_mid_epoch_exactly(image_folder, tmp_path):
    state, log = tmp_path / "gen.json", tmp_path / "killed.log"
    killed = run_script(image_folder, state, log, "killed", "none")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    saved = json.loads(state.read_text())
    assert (saved["epoch"], saved["batch"]) == (1, 2)  # killed after batch 1 of epoch 1
    resumed = run_script(image_folder, state, log, "resumed", "none")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    straight_log = tmp_path / "straight.log"
    straight = run_script(image_folder, tmp_path / "unused.json", straight_log, "straight",
                          saved["seed"])
    assert straight.returncode == 0, straight.stderr[-2000:]
    assert read_log(log) == read_log(straight_log)  # 4 + 2, then 2 + 4 batches
    assert len(read_log(log)) == 12


def child_pids(pid=None):
    pid = os.getpid() if pid is None else pid
    pids = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                pids += [int(p) for p in f.read().split()]
    except FileNotFoundError:  # it has exited
        pass
    return pids


def multiprocessing_helper(pid):
    """Python's fork server or resource tracker (they live as long as the process)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except FileNotFoundError:
        return False
    return b"multiprocessing.forkserver" in cmdline or b"resource_tracker" in cmdline


def worker_pids():
    """Our descendants, but Python's multiprocessing helpers: children and their
    children (the fork server's children are worker processes)."""
    found = set()
    for child in child_pids():
        if multiprocessing_helper(child):
            found.update(child_pids(child))
        else:
            found.add(child)
    return found


def rss_mb():
    with open(f"/proc/{os.getpid()}/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS")).split()[1]) / 1024


def test_no_worker_processes_are_left_after_fit(image_folder):
    gen = folder_gen(image_folder, workers=2, use_multiprocessing=True)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = worker_pids()
    during = []
    watch = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: during.append(worker_pids() - before))
    model.fit(gen, epochs=2, verbose=0, callbacks=[watch])
    assert max(len(pids) for pids in during) == 2  # kerasgen's own two workers
    assert len(set().union(*during)) == 2  # the same two in both epochs: kept, not restarted
    deadline = time.time() + 20
    while time.time() < deadline:
        multiprocessing.active_children()  # reaps finished children
        left = worker_pids() - before
        if not left:
            break
        time.sleep(0.2)
    assert not left, f"worker processes left after fit: {left}"


def test_memory_stays_flat_over_20_epochs_with_workers(image_folder):
    gen = folder_gen(image_folder, workers=2)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(gen, epochs=3, verbose=0)
    start = rss_mb()
    model.fit(gen, epochs=20, verbose=0)
    assert rss_mb() - start < 40, f"RSS grew from {start:.0f} MB to {rss_mb():.0f} MB"


def test_an_error_in_a_worker_process_names_the_batch_and_file(image_folder):
    (image_folder / "dog" / "broken.png").write_bytes(b"not a png")
    gen = folder_gen(image_folder, workers=2, use_multiprocessing=True)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="broken.png") as caught:
        model.fit(gen, epochs=1, verbose=0, shuffle=False)
    notes = " ".join(getattr(caught.value, "__notes__", []))
    assert "while loading batch" in notes and "of epoch 0" in notes


def test_the_checkpoint_writes_no_file_through_a_planted_symlink(tmp_path):
    """The state used to be written as <path>.tmp-<pid>, following a symlink put there."""
    path = tmp_path / "gen.json"
    victim, planted = plant_old_temp_links(path, tmp_path)
    gen = kg.ArrayGenerator(np.zeros((16, 2)), np.zeros(16), batch_size=4, seed=3)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    checkpoint = kg.callbacks.GeneratorCheckpoint(path, every_n_batches=1)
    model.fit(gen, epochs=1, verbose=0, callbacks=[checkpoint])
    assert victim.read_text() == "precious"
    assert set(os.listdir(tmp_path)) == planted | {"gen.json"}  # no temporary file left
    assert not path.is_symlink()
    assert json.loads(path.read_text()) == gen.get_state()
    assert json.loads(path.read_text())["epoch"] == 1


def state_gen(n=16, seed=3, **kwargs):
    return kg.ArrayGenerator(np.arange(n * 2.0).reshape(n, 2), np.arange(n) % 2,
                             batch_size=4, seed=seed, label_mode="int", **kwargs)


def position(gen):
    return gen.get_state(), len(gen), gen.seed, [np.asarray(v) for v in gen[0]]


def assert_unchanged(gen, before):
    state, length, seed, batch = before
    assert (gen.get_state(), len(gen), gen.seed) == (state, length, seed)
    for got, expected in zip(gen[0], batch):
        np.testing.assert_array_equal(got, expected)


VALID = json.dumps({"epoch": 1, "batch": 0, "seed": 3, "num_samples": 16})


@pytest.mark.parametrize("content, problem", [
    (b"", r"the file is empty \(0 bytes\)"),
    (b" \n", r"the file is empty \(2 bytes\)"),
    (VALID[:25].encode(),
     r"it is not valid JSON \(.*: line 1 column \d+; truncated or corrupt\)"),
    (b"{\"epoch\": 1, \x00\x01}", r"it is not valid JSON \(Expecting property name.*"),
    (b"\xff\xfe{}", r"it is not UTF-8 text \(byte 0\)"),
    (b"[1, 2, 3]", r"it holds a JSON array \(list\), not the object GeneratorCheckpoint "
                   "writes"),
    (b"\"epoch\"", "it holds a JSON string, not the object GeneratorCheckpoint writes"),
    (b"null", "it holds a JSON null, not the object GeneratorCheckpoint writes"),
])
def test_a_checkpoint_that_is_not_a_state_is_an_error_naming_the_file(tmp_path, content,
                                                                     problem):
    path = tmp_path / "gen.json"
    path.write_bytes(content)
    gen = state_gen()
    before = position(gen)
    with pytest.raises(ValueError, match=rf"The checkpoint {re.escape(str(path))} is not a "
                                         rf"kerasgen generator state: {problem}\. Restore "
                                         "a file GeneratorCheckpoint wrote, or delete it"):
        kg.callbacks.restore(gen, path)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        kg.callbacks.GeneratorCheckpoint(path, generator=gen).restore()
    assert_unchanged(gen, before)


@pytest.mark.parametrize("edit, problem", [
    (lambda s: s.pop("seed"), r"The state lacks 'seed': a state from get_state\(\) holds "
                              "'epoch', 'seed', 'num_samples' at least"),
    (lambda s: [s.pop("epoch"), s.pop("num_samples")], "lacks 'epoch', 'num_samples'"),
    (lambda s: s.update(seed=None), r"`state\['seed'\]` must be a non-negative integer. "
                                    r"Received: state\['seed'\]=None"),
    (lambda s: s.update(epoch="1"), r"`state\['epoch'\]` must be a non-negative integer"),
    (lambda s: s.update(num_samples=17), "over 17 samples, this one has 16"),
    (lambda s: s.update(source="16 samples, class ids crc32 00000000"),
     "other labels or another order"),
])
def test_a_checkpoint_missing_a_key_or_of_other_data_is_refused_naming_the_file(
        tmp_path, edit, problem):
    path = tmp_path / "gen.json"
    state = state_gen(seed=5).get_state()
    edit(state)
    path.write_text(json.dumps(state))
    gen = state_gen()
    before = position(gen)
    with pytest.raises(ValueError, match=rf"The checkpoint {re.escape(str(path))} cannot be "
                                         rf"restored into this generator: .*{problem}"):
        kg.callbacks.restore(gen, path)
    assert_unchanged(gen, before)


@pytest.mark.parametrize("refused, error, match", [
    (dict(batch=10**9), ValueError, r"batch position \(1000000000\) is past the end"),
    (dict(epoch=-1, seed=99), ValueError, r"`state\['epoch'\]` must be a non-negative"),
    (dict(epoch=2, seed=99, batch=-1), ValueError, r"`state\['batch'\]`"),
    (dict(epoch=2, seed=-5), ValueError, r"`state\['seed'\]`"),
    (dict(epoch=2, seed=99, num_samples=15), ValueError, "over 15 samples"),
    (dict(epoch=2, seed=99, batch=1, batch_size=8), ValueError, "batch_size=8"),
    (dict(epoch=2, seed=99, sampler="Sequential()"), ValueError, "sampler=Sequential"),
])
def test_a_refused_state_changes_nothing_and_training_goes_on(refused, error, match):
    """set_state used to apply part of a state before refusing it: batch=10**9 left
    len(gen) == 0 (the next fit failed), a refused epoch=-1 had changed the seed."""
    gen = state_gen()
    gen.on_epoch_end()
    before = position(gen)
    with pytest.raises(error, match=match):
        gen.set_state({**gen.get_state(), **refused})
    assert_unchanged(gen, before)
    with pytest.raises(TypeError, match=r"`state` must be a dict from get_state\(\). "
                                        r"Received: state=\[1, 2\] \(a list\)"):
        gen.set_state([1, 2])
    assert_unchanged(gen, before)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    history = model.fit(gen, epochs=1, verbose=0, shuffle=False)
    assert len(history.history["loss"]) == 1 and gen.epoch == 2


def test_a_state_of_other_files_is_refused_and_a_moved_data_set_restores(image_folder,
                                                                        tmp_path):
    import shutil
    gen = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), batch_size=4, seed=1)
    gen.on_epoch_end()
    state = gen.get_state(batches_done=1)
    assert state["files"].startswith("12 files, names crc32 ")
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(image_folder, moved)  # the same data set in another folder
    resumed = kg.ImageFolderGenerator(moved, image_size=(6, 6), batch_size=4)
    resumed.set_state(state)
    np.testing.assert_array_equal(resumed[0][0], gen[1][0])
    cat = sorted((moved / "cat").glob("*.png"))[0]
    cat.rename(cat.with_name("renamed.png"))  # same count and labels, other files
    other = kg.ImageFolderGenerator(moved, image_size=(6, 6), batch_size=4, seed=7)
    assert other.get_state()["source"] == state["source"]  # labels alone cannot tell
    path = tmp_path / "gen.json"
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match=re.escape(
            f"The checkpoint {path} cannot be restored into this generator: The state "
            f"belongs to other files: it was saved over files={state['files']!r}, this "
            f"generator reads files={other.get_state()['files']!r}")):
        kg.callbacks.restore(other, path)
    assert other.seed == 7 and other.epoch == 0
    old = {k: v for k, v in state.items() if k != "files"}  # kerasgen before "files"
    other.set_state(old)
    assert other.epoch == 1 and len(other) == len(gen) - 1
    arrays = state_gen(n=12)
    with pytest.raises(ValueError, match="this generator reads no files"):
        arrays.set_state({**state, "sampler": "Shuffle()", "source": arrays.get_state()[
            "source"]})
    assert "files" not in arrays.get_state()


def noisy(x, y, rng):
    return x + rng.integers(1000), y


def test_batch_draws_follow_the_epochs_batch_after_resume_and_in_shards():
    x = np.zeros((40, 1), "float32")
    gen = kg.ArrayGenerator(x, batch_size=4, seed=0, batch_augment=noisy)
    resumed = kg.ArrayGenerator(x, batch_size=4, seed=0, batch_augment=noisy)
    resumed.set_state(gen.get_state(batches_done=3))
    np.testing.assert_array_equal(resumed[0], gen[3])
    shards = [gen.shard(2, k) for k in range(2)]
    assert shards[0][0][0, 0] != shards[1][0][0, 0]
    np.testing.assert_array_equal(shards[1][0], gen[1])  # shard 1 reads batch 1


def test_padding_wraps_however_many_shards():
    gen = kg.ArrayGenerator(np.arange(20.0)[:, None], batch_size=8, seed=1)  # 3 batches
    last = gen.shard(7, 6)
    assert len(last) == 1 and len(last[0]) in (4, 8)


def test_checkpoint_saves_the_training_generator_not_the_validation_one(tmp_path):
    train = kg.ArrayGenerator(np.zeros((40, 2)), np.zeros(40), batch_size=8, seed=1)
    val = kg.ArrayGenerator(np.zeros((24, 2)), np.zeros(24), batch_size=8, seed=2)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    path = tmp_path / "gen.json"
    model.fit(train, validation_data=val, epochs=1, verbose=0,
              callbacks=[kg.callbacks.GeneratorCheckpoint(path)])
    state = json.loads(path.read_text())
    assert (state["seed"], state["num_samples"], state["epoch"]) == (1, 40, 1)


def test_fitting_on_after_a_mid_epoch_restore_is_refused():
    x = np.zeros((16, 2), "float32")
    gen = kg.ArrayGenerator(x, np.zeros(16), batch_size=4, seed=0)
    gen.set_state({**gen.get_state(), "batch": 2})
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    with pytest.raises(RuntimeError, match="restored mid-epoch"):
        model.fit(gen, epochs=3, verbose=0)
    gen.set_state({**gen.get_state(), "epoch": 0, "batch": 2})
    model.fit(gen, epochs=1, verbose=0)  # the rest of the epoch
    model.fit(gen, epochs=2, verbose=0)  # then whole epochs again
    assert gen.epoch == 3


def test_state_from_another_batch_size_is_refused():
    gen = kg.ArrayGenerator(np.zeros((16, 1)), batch_size=4)
    other = kg.ArrayGenerator(np.zeros((16, 1)), batch_size=8)
    with pytest.raises(ValueError, match="batch_size=4, this one has batch_size=8"):
        other.set_state(gen.get_state(batches_done=1))
