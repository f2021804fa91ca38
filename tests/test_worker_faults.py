"""Faults of kerasgen's own worker processes (use_multiprocessing=True) never harm a run
silently: a batch that raises in a worker reaches the caller, whatever its exception, and
no worker stays behind; a worker killed mid-epoch fails the batches it owed, never
leaving a pass short or changed, and what it sent before dying still arrives; a training
process killed with SIGKILL leaves nothing in /dev/shm, and nothing in the temporary
folder past the next start of kerasgen's workers."""

import multiprocessing.connection
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import keras
import numpy as np
import pytest

import kerasgen as kg
from kerasgen.pipeline import feeding as _feeding
from kerasgen.pipeline import worker_start
from kerasgen.pipeline import workers as _workers

from .test_distributed import child_pids, multiprocessing_helper, worker_pids
from .test_worker_processes import descendants, running

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")


class Numbered(kg.Generator):
    """Sample k is filled with k; batch `broken` raises `error(*args)` while it is made;
    each sample takes `delay` seconds; batch `slow` sleeps a second more, and batch
    `fatal`, made in a worker process, kills that process."""

    def __init__(self, n=64, delay=0.0, broken=None, error=ValueError, args=(),
                 fatal=None, slow=None, **kwargs):
        self.delay, self.broken, self.error, self.args = delay, broken, error, args
        self.fatal, self.slow = fatal, slow
        self.served = []  # (epoch, batch index, x) of every batch handed to the caller
        super().__init__(num_samples=n, labels=np.arange(n) % 2, label_mode="int", **kwargs)

    def load_sample(self, index):
        time.sleep(self.delay)
        return np.full((4,), float(index), dtype="float32")

    def load_batch(self, indices, positions, partners=None, lams=None):
        index = int(positions[0]) // self.batch_size  # no shard, resume or batch shuffle
        if index == self.slow:
            time.sleep(1.0)
        if index == self.fatal and multiprocessing.current_process().daemon:
            os.kill(os.getpid(), signal.SIGKILL)
        if index == self.broken:
            raise self.error(*self.args)
        return super().load_batch(indices, positions, partners, lams)

    def __getitem__(self, index):
        batch = super().__getitem__(index)
        self.served.append((self.epoch, int(index), np.array(batch[0])))
        return batch


class PathError(Exception):
    """An exception whose pickle cannot rebuild it (its class wants two arguments)."""

    def __init__(self, path, line):
        super().__init__(f"{path}:{line} is unreadable")


class Unrebuildable:
    """A value that pickles in a worker and cannot be unpickled anywhere."""

    def __reduce__(self):
        return (_refuse, ())


def _refuse():
    raise TypeError("this value cannot be rebuilt")


class WithUnrebuildable(Numbered):
    def load_batch(self, indices, positions, partners=None, lams=None):
        x, y = super().load_batch(indices, positions, partners, lams)
        return ((x, Unrebuildable()) if positions[0] == 2 * self.batch_size else x), y


def tiny_model():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def wait_until(condition, limit=60.0):
    """Polls `condition` until it holds or `limit` seconds have passed (a hang guard):
    its last value."""
    deadline = time.monotonic() + limit
    while True:
        multiprocessing.active_children()  # reaps what has ended
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def helpers_only(before):
    """Whether our new descendants are Python's multiprocessing helpers only (the fork
    server and the resource tracker live as long as this process): no worker."""
    children = set(child_pids()) - before
    return not worker_pids() - before and all(multiprocessing_helper(p) for p in children)


def reference(keys, **kwargs):
    """x of batch (epoch, index) for each of `keys` of Numbered(**kwargs), made by one
    worker, no process."""
    plain = Numbered(**kwargs)
    return {(epoch, index): np.array(plain.at_epoch(epoch)[index][0])
            for epoch, index in keys}


@pytest.mark.timeout(180)
def test_a_batch_raising_in_a_worker_ends_fit_with_its_error_and_leaves_no_worker():
    before = worker_pids() | set(child_pids())
    gen = Numbered(broken=3, args=("batch 3 is broken",), batch_size=4, seed=1, workers=2,
                   use_multiprocessing=True)
    with pytest.raises(ValueError, match="batch 3 is broken") as caught:
        tiny_model().fit(gen, epochs=2, verbose=0)
    notes = " ".join(getattr(caught.value, "__notes__", []))
    assert "kerasgen worker process traceback" in notes  # raised in a worker process
    assert "while loading batch 3 of epoch 0" in notes
    assert sorted({index for _, index, _ in gen.served}) == [0, 1, 2]  # then it stopped
    # the generator is still referenced, and no epoch ended: its workers end all the same
    assert wait_until(lambda: helpers_only(before)), (
        f"left after the failed batch: {worker_pids() - before}")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("what", ["exception", "value"])
def test_what_the_parent_cannot_unpickle_fails_that_batch_and_the_next_ones_arrive(what):
    """An exception class that needs other arguments than its pickle gives (common in
    libraries), or an object in a batch that cannot be rebuilt: the receiving thread used
    to die on it, and the caller to wait for the batch forever."""
    if what == "exception":
        gen = Numbered(broken=2, error=PathError, args=("x.png", 3), batch_size=4, seed=0,
                       shuffle=False, workers=2, use_multiprocessing=True)
        expected = (r"PathError: x.png:3 is unreadable \(raised in a kerasgen worker "
                    r"process; the exception cannot be rebuilt in the training process\)")
    else:
        gen = WithUnrebuildable(batch_size=4, seed=0, shuffle=False, workers=2,
                                use_multiprocessing=True)
        expected = (r"a value of its batch was made in a kerasgen worker process, but "
                    r"cannot be unpickled in the training process \(TypeError: this value "
                    r"cannot be rebuilt\)")
    expected_x = reference([(0, i) for i in range(len(gen))], seed=0, batch_size=4,
                           shuffle=False)
    gen[0], gen[1]
    with pytest.raises(RuntimeError, match=expected) as caught:
        gen[2]
    assert "while loading batch 2 of epoch 0" in " ".join(caught.value.__notes__)
    for index in range(3, len(gen)):  # the workers go on serving
        np.testing.assert_array_equal(gen[index][0], expected_x[(0, index)])
    gen.on_epoch_end()


@pytest.mark.timeout(240)
def test_a_worker_killed_mid_epoch_fails_fit_and_never_leaves_a_pass_short_or_changed():
    before = worker_pids() | set(child_pids())
    gen = Numbered(n=400, delay=0.002, batch_size=8, seed=4, workers=2,
                   use_multiprocessing=True)
    victims, ended = [], []

    def kill_one(batch, logs):
        if len(ended) == 1 and batch == 5 and not victims:  # epoch 1, batch 5
            victims.append(max(worker_pids() - before))
            os.kill(victims[0], signal.SIGKILL)

    watch = keras.callbacks.LambdaCallback(
        on_train_batch_end=kill_one, on_epoch_end=lambda epoch, logs: ended.append(epoch))
    with pytest.raises(RuntimeError, match=r"worker \d of 2\) was killed by signal "
                                           r"SIGKILL") as caught:
        tiny_model().fit(gen, epochs=3, verbose=0, callbacks=[watch])
    assert f"(pid {victims[0]}, worker" in str(caught.value)
    assert ended == [0]  # epoch 0 only: the epoch the kill hit never ended
    served = {(epoch, index): x for epoch, index, x in gen.served}
    assert {index for epoch, index in served if epoch == 0} == set(range(len(gen)))
    expected = reference(served, n=400, seed=4, batch_size=8)
    for key, x in served.items():  # every batch trained on is the one planned
        np.testing.assert_array_equal(x, expected[key], err_msg=f"(epoch, batch) {key}")
    assert wait_until(lambda: helpers_only(before)), "a worker outlived the failed fit"


@pytest.mark.timeout(180)
def test_what_a_worker_sent_before_it_died_is_delivered():
    """Replies still in the pipe when the worker's death is noticed: they used to be
    failed with the death (then the receiving thread died on them, and the batches of
    the other workers never came). Holding the pool's lock keeps the receiving thread
    from reading while the worker sends batches 2 and 3 and dies on batch 4."""
    gen = Numbered(batch_size=4, seed=2, shuffle=False, slow=1, fatal=4)
    expected = reference([(0, i) for i in range(5)], seed=2, batch_size=4, shuffle=False)
    pool = _workers.WorkerPool(_feeding.Recipe(gen._maker, gen._order.copy()), 1,
                               "Numbered")
    try:
        np.testing.assert_array_equal(pool.submit(0, 0, 0, gen.seed).result(60)[0],
                                      expected[(0, 0)])
        process = pool.crew.processes[0]
        futures = {i: pool.submit(0, 0, i, gen.seed) for i in (1, 2, 3, 4)}
        with pool.lock:  # batch 1 takes a second: its reply waits for the lock
            assert multiprocessing.connection.wait([process.sentinel], timeout=60)
        for index in (1, 2, 3):
            np.testing.assert_array_equal(futures[index].result(60)[0],
                                          expected[(0, index)])
        with pytest.raises(RuntimeError, match=rf"\(pid {process.pid}, worker 1 of 1\) was "
                                               r"killed by signal SIGKILL.* It was making "
                                               r"batch 4 of epoch 0"):
            futures[4].result(60)
    finally:
        pool.stop()


def test_orphaned_temporary_folders_of_kerasgen_only_are_removed(tmp_path):
    """What the next start removes: the `kerasgen-<pid>-*` folders of this user whose
    process is gone and whose lock is free, holding nothing but the owner file and the
    fork server's socket; nothing else (a user's `kerasgen-1234-notes` folder stays)."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(gone.stdout)
    for name in (f"kerasgen-{dead}-orphan", f"kerasgen-{dead}-locked",
                 f"kerasgen-{os.getpid()}-mine", f"kerasgen-{dead}-nolock", "pymp-abc",
                 f"kerasgen-{dead}-file", f"kerasgen-{dead}-notes"):
        path = tmp_path / name
        if name.endswith("-file"):
            path.write_text("a file, not a folder")
            continue
        path.mkdir()
        if not name.endswith("-nolock"):
            (path / "owner.lock").write_text("")
            (path / "listener-x").write_text("")
        if name.endswith("-notes") or name.endswith("-nolock"):
            (path / "important.txt").write_text("a user's own")
    (tmp_path / f"kerasgen-{dead}-link").symlink_to(tmp_path / f"kerasgen-{dead}-locked")
    held = os.open(tmp_path / f"kerasgen-{dead}-locked" / "owner.lock", os.O_RDWR)
    try:
        assert worker_start.lock(held, wait=False)  # as a live process of another namespace
        removed = _workers.remove_orphans(str(tmp_path))
    finally:
        os.close(held)
    assert sorted(os.path.basename(p) for p in removed) == [f"kerasgen-{dead}-orphan"]
    assert sorted(os.listdir(tmp_path)) == sorted([
        f"kerasgen-{dead}-file", f"kerasgen-{dead}-link", f"kerasgen-{dead}-locked",
        f"kerasgen-{os.getpid()}-mine", "pymp-abc", f"kerasgen-{dead}-nolock",
        f"kerasgen-{dead}-notes"])
    assert (tmp_path / f"kerasgen-{dead}-notes" / "important.txt").exists()


KILLED = textwrap.dedent("""
    import keras
    import kerasgen as kg

    gen = kg.ImageFolderGenerator({folder!r}, image_size=(8, 8), batch_size=2, seed=0,
                                  cache="memory", workers=2, use_multiprocessing=True)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("sgd", "sparse_categorical_crossentropy")
    said = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: epoch == 1 and
                                          print("running", flush=True))
    model.fit(gen, epochs=100000, verbose=0, callbacks=[said])
""")

NEXT = textwrap.dedent("""
    import numpy as np
    import kerasgen as kg

    gen = kg.ArrayGenerator(np.zeros((8, 3), "float32"), batch_size=2, workers=2,
                            use_multiprocessing=True)
    print(sum(float(gen[i].sum()) for i in range(len(gen))), flush=True)
""")


def mapped_files(pid):
    """The paths of what `pid` maps ("/memfd:NAME (deleted)" for anonymous memory)."""
    with open(f"/proc/{pid}/maps") as maps:
        return {line.split(None, 5)[5].strip() for line in maps if len(line.split()) > 5}


def shared_mappings(pid):
    """The files in /dev/shm that `pid` maps and that still have a name there (one that
    would outlive it; an unlinked one shows as "(deleted)")."""
    return sorted(path for path in mapped_files(pid)
                  if path.startswith("/dev/shm/") and not path.endswith("(deleted)"))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_killed_training_process_leaves_nothing_past_the_next_start(image_folder,
                                                                       tmp_path):
    # a temporary folder of their own, short enough for the fork server's socket
    temp = tempfile.mkdtemp(prefix="kgt-")
    try:
        killed_then_started(image_folder, tmp_path, temp)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def killed_then_started(image_folder, tmp_path, temp):
    root = os.path.dirname(os.path.dirname(os.path.abspath(kg.__file__)))  # this kerasgen
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, TMPDIR=temp, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=path)
    script = tmp_path / "train.py"
    script.write_text(KILLED.format(folder=str(image_folder)))
    main = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    try:
        assert main.stdout.readline().strip() == "running", main.stderr.read()[-3000:]
        spawned = descendants(main.pid)  # fork server, resource tracker, 2 workers
        assert len(spawned) >= 3
        # the batch slots and the shared cache are anonymous memory (memfd), and nothing
        # else mapped has a name in /dev/shm: none can outlive the process
        assert any(path.startswith("/memfd:kerasgen") for path in mapped_files(main.pid))
        assert shared_mappings(main.pid) == []
        assert all(shared_mappings(pid) == [] for pid in spawned if running(pid))
        main.kill()
        main.wait(timeout=60)
    finally:
        if main.poll() is None:
            main.kill()
    assert wait_until(lambda: not any(running(pid) for pid in spawned)), spawned
    left = sorted(os.listdir(temp))
    assert all(name.startswith(f"kerasgen-{main.pid}-") for name in left), left  # ours
    nxt = subprocess.run([sys.executable, "-c", NEXT], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=240)
    assert nxt.returncode == 0, nxt.stderr[-3000:]
    left = [name for name in os.listdir(temp)
            if not name.startswith("__autograph_generated_file")]  # TensorFlow's own
    assert left == [], f"left in the temporary folder after the next start: {left}"
