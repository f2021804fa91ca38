"""Several processes training one model: `pipeline/hosts.py` (which shard this process
reads), `num_shards="auto"`, the automatic sharding under a multi-process Keras
distribution, and per-host exact resume, in real JAX runs of 2 processes on 127.0.0.1
(`jax.distributed.initialize`, `keras.distribution.DataParallel`). The runs are
subprocesses with KERAS_BACKEND=jax whatever this process's backend, in a network
namespace of their own where `unshare -n` works (root), killed if they outlive their
timeout. examples/multihost_jax.py is run here (tests/test_examples.py leaves it out)."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import kerasgen as kg
from kerasgen._redact import KerasgenWarning
from kerasgen.pipeline import hosts

ROOT = pathlib.Path(__file__).resolve().parent.parent
ENV = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
           PYTHONPATH=str(ROOT))
TIMEOUT = 180

# One process of a 2-process run: the example's data, model and optimizer, a generator
# with no num_shards (sharded by the distribution itself). "train": 2 epochs, the state
# and weights saved after batch 5 of epoch 1 (each host its own files); "resume": new
# processes restore them and finish epoch 1.
CHILD = textwrap.dedent("""
    import json, sys, time, warnings, zlib
    start = time.perf_counter()
    mode, pid, port, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    import jax
    jax.distributed.initialize(f"127.0.0.1:{port}", 2, pid, initialization_timeout=60,
                               coordinator_bind_address=f"127.0.0.1:{port}")
    import keras
    import numpy as np
    import kerasgen as kg
    keras.utils.set_random_seed(0)
    keras.distribution.set_distribution(keras.distribution.DataParallel(
        devices=jax.devices(), auto_shard_dataset=False))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 8)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int64")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(2)])
    model.compile(keras.optimizers.SGD(0.1),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    crc = lambda g, ks: [zlib.crc32(np.ascontiguousarray(g[k][0]).tobytes()) for k in ks]
    out = {"pid": pid}
    host = f"{folder}/host{pid}"
    if mode == "train":
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gen = kg.ArrayGenerator(x, y, batch_size=16, seed=1)
        out["warnings"] = [str(w.message) for w in caught]
        auto = kg.ArrayGenerator(x, y, batch_size=16, seed=1, num_shards="auto")
        again = gen.shard(2, pid)  # an explicit shard of the whole, not a shard's shard
        out["same"] = [crc(g, range(len(g))) == crc(gen, range(len(gen)))
                       for g in (auto, again)]
        running = []

        class Save(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                self.epoch = epoch

            def on_train_batch_end(self, batch, logs=None):
                if self.epoch == 1:
                    running.append(float(logs["loss"]))
                    if batch == 4:  # 5 batches of epoch 1 done
                        np.savez(host + ".npz", *self.model.get_weights())  # synced
                        with open(host + ".json", "w") as f:
                            json.dump(gen.get_state(5), f)

        history = model.fit(gen, epochs=2, verbose=0, callbacks=[Save()])
        out["loss"] = history.history["loss"]
        out["running"] = running  # epoch 1's running mean of the loss, batch by batch
        out["remaining"] = crc(gen.at_epoch(1), range(5, len(gen)))
    else:
        model.set_weights(list(np.load(host + ".npz").values()))
        gen = kg.ArrayGenerator(x, y, batch_size=16, seed=1, num_shards="auto")
        with open(host + ".json") as f:
            gen.set_state(json.load(f))
        out["remaining"] = crc(gen, range(len(gen)))
        other = kg.ArrayGenerator(x, y, batch_size=16, seed=1, num_shards="auto")
        try:
            with open(f"{folder}/host{1 - pid}.json") as f:
                other.set_state(json.load(f))
            out["other"] = "accepted"
        except ValueError as error:
            out["other"] = str(error)
        out["loss"] = model.fit(gen, epochs=1, verbose=0).history["loss"]
    out["shard"] = gen.get_state()["shard"]
    out["weights"] = float(sum(np.asarray(w, "float64").sum() for w in model.get_weights()))
    out["seconds"] = round(time.perf_counter() - start, 1)
    sys.stdout.write("RESULT " + json.dumps(out) + "\\n")  # one write: the other
    sys.stdout.flush()  # process shares the pipe
    jax.distributed.shutdown()
""")


def _netns() -> bool:
    """Whether the runs get a network namespace of their own (loopback only)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


NETNS = _netns()


def start(command: str) -> subprocess.Popen:
    """`command` (a shell line) in a session of its own, in its own network namespace
    where that works."""
    argv = (["unshare", "-n", "sh", "-c", f"ip link set lo up && {command}"] if NETNS
            else ["sh", "-c", command])
    return subprocess.Popen(argv, cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def finish(procs: list[subprocess.Popen]) -> list[str]:
    """The outputs of `procs`; every process of their sessions killed, whatever happens."""
    try:
        return [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def two_processes(mode: str, folder: pathlib.Path) -> str:
    script = folder / "child.py"
    script.write_text(CHILD)
    port = free_port()
    line = " & ".join(f"{sys.executable} {script} {mode} {i} {port} {folder}" for i in (0, 1))
    return f"{line} & wait"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def results(output: str) -> list[dict]:
    """The RESULT records of 2 processes writing to one pipe (a line of one may land
    inside a line of the other's output: each is read from its mark, as far as its
    JSON goes)."""
    decoder = json.JSONDecoder()
    marks = [k for k in range(len(output)) if output.startswith("RESULT {", k)]
    found = sorted((decoder.raw_decode(output, k + 7)[0] for k in marks),
                   key=lambda r: r["pid"])
    assert len(found) == 2, output[-6000:]
    return found


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The example's 2 processes, its one-process reference and the "train" run, at once
    (each waits on its own processes)."""
    folder = tmp_path_factory.mktemp("multihost")
    example = f"{sys.executable} examples/multihost_jax.py"
    procs = [start(f"exec {example}"), start(f"exec {example} --one-process"),
             start(two_processes("train", folder))]
    example_out, reference_out, train_out = finish(procs)
    return folder, example_out, reference_out, results(train_out)


def losses(output: str, prefix: str) -> list[list[float]]:
    return [json.loads(line.rsplit("loss per epoch ", 1)[1])
            for line in output.splitlines() if line.startswith(prefix)]


@pytest.mark.slow
@pytest.mark.xdist_group("multihost")
def test_two_processes_train_as_one_process_at_double_batch(trained):
    _, example_out, reference_out, train = trained
    reference = losses(reference_out, "1 process")
    assert len(reference) == 1, reference_out[-4000:]
    per_process = losses(example_out, "process ")
    assert len(per_process) == 2, example_out[-4000:]
    assert "process 0 of 2: shard [2, 0], 16 batches of 16" in example_out
    assert "process 1 of 2: shard [2, 1], 16 batches of 16" in example_out
    for got in per_process + [[round(v, 4) for v in r["loss"]] for r in train]:
        np.testing.assert_allclose(got, reference[0], atol=2e-4)
    # the automatic sharding: said once, the same batches as "auto" and as an explicit
    # gen.shard(2, i) (which shards the whole data, never the shard again)
    for r in train:
        assert r["shard"] == [2, r["pid"]] and r["same"] == [True, True]
        assert len(r["warnings"]) == 1 and f"reads shard {r['pid']} of 2" in r["warnings"][0]
        assert "auto_shard_dataset=False" in r["warnings"][0]
    assert train[0]["weights"] == pytest.approx(train[1]["weights"], abs=1e-6)


@pytest.mark.slow
@pytest.mark.xdist_group("multihost")
def test_each_host_resumes_exactly_from_its_own_state(trained):
    folder, _, _, train = trained
    began = time.perf_counter()
    resumed = results(finish([start(two_processes("resume", folder))])[0])
    print("resume", time.perf_counter() - began, [r["seconds"] for r in resumed])
    for before, after in zip(train, resumed):
        assert after["shard"] == [2, after["pid"]]
        assert after["remaining"] == before["remaining"] and len(after["remaining"]) == 11
        # the loss of batches 5..15 of epoch 1, from the uninterrupted run's running mean
        running = before["running"]
        rest = (16 * running[15] - 5 * running[4]) / 11
        assert after["loss"][0] == pytest.approx(rest, abs=2e-4)
        assert after["weights"] == pytest.approx(before["weights"], abs=1e-4)
        assert after["other"].startswith("The state's batch position counts batches of a "
                                         f"generator with shard=[2, {1 - after['pid']}]")


# ---------------------------------------------------------------- hosts.py in this process
class FakeDistribution:
    """What hosts.py reads of a keras.distribution Distribution."""

    def __init__(self, processes, replicas, process_id, auto_shard_dataset=False):
        self.num_processes, self.num_model_replicas = processes, replicas
        self.auto_shard_dataset = auto_shard_dataset
        # Keras's Distribution.data_shard_id
        self.data_shard_id = (process_id if replicas >= processes
                              else process_id // (processes // replicas))


@pytest.fixture
def distribution(monkeypatch):
    """Sets a fake distribution where keras.distribution.distribution() finds it."""
    import keras

    def set_(dist):
        monkeypatch.setattr(keras.distribution, "distribution", lambda: dist)
    return set_


def test_one_process_reads_everything():
    assert hosts.process_shard() is None and hosts.automatic() is None
    x = np.arange(40, dtype="float32").reshape(20, 2)
    gen = kg.ArrayGenerator(x, batch_size=4, seed=1, num_shards="auto")
    assert gen.get_state()["shard"] is None and len(gen) == 5
    with pytest.raises(ValueError, match="`seed` must be an integer when each process"):
        kg.ArrayGenerator(x, batch_size=4, num_shards="auto")
    kg.ArrayGenerator(x, batch_size=4, shuffle=False, num_shards="auto")  # no seed needed
    with pytest.raises(ValueError, match='`shard_index` must be None with num_shards="auto"'):
        kg.ArrayGenerator(x, batch_size=4, seed=1, num_shards="auto", shard_index=0)


@pytest.mark.parametrize("processes,replicas,expected", [
    (2, 2, [(2, 0), (2, 1)]),  # DataParallel, one device per process
    (2, 8, [(2, 0), (2, 1)]),  # 4 devices per process
    (4, 2, [(2, 0), (2, 0), (2, 1), (2, 1)]),  # ModelParallel: 2 processes per replica
    (4, 1, [None] * 4),  # one replica over every process: each reads every batch
])
def test_the_shard_is_keras_data_shard_id(distribution, processes, replicas, expected):
    got = []
    for pid in range(processes):
        distribution(FakeDistribution(processes, replicas, pid))
        found = hosts.process_shard()
        got.append(found and (found.num_shards, found.index))
    assert got == expected


def test_a_distribution_that_shards_the_data_itself_leaves_it_whole(distribution):
    x = np.arange(40, dtype="float32").reshape(20, 2)
    distribution(FakeDistribution(2, 2, 1, auto_shard_dataset=True))
    assert len(kg.ArrayGenerator(x, batch_size=4, seed=1)) == 5  # Keras shards a tf.data
    distribution(FakeDistribution(2, 2, 1))
    with pytest.warns(KerasgenWarning, match="reads shard 1 of 2") as caught:
        gen = kg.ArrayGenerator(x, batch_size=4, seed=1)
    assert caught[0].filename == __file__  # the user's line
    assert gen.get_state()["shard"] == [2, 1] and len(gen) == 3
    whole = kg.ArrayGenerator(x, batch_size=4, seed=1, num_shards=1, shard_index=0)
    assert len(whole) == 5 and len(whole.shard(5, 4)) == 1  # the whole data's shard
    with pytest.raises(ValueError, match="`seed` must be an integer .*auto_shard_dataset"):
        kg.ArrayGenerator(x, batch_size=4)


def test_a_stream_reads_its_hosts_share_with_num_hosts_auto(distribution):
    def read(name):
        return [np.full((2,), float(name[1:]) * 10 + k, "float32") for k in range(4)]

    def stream(**kwargs):
        return kg.StreamGenerator(["s0", "s1", "s2", "s3"], read, image_size=None,
                                  label_mode=None, batch_size=2, seed=1, **kwargs)

    assert stream(num_hosts="auto").get_state()["num_hosts"] == 1  # one process
    distribution(FakeDistribution(2, 2, 1))
    auto = stream(num_hosts="auto")
    assert (auto.num_hosts, auto.host_index) == (2, 1) and "host_index=1 of 2" in repr(auto)
    explicit = stream(num_hosts=2, host_index=1)
    np.testing.assert_array_equal(auto[0], explicit[0])
    assert stream().num_hosts == 1  # a stream shards itself only when asked
    with pytest.raises(ValueError, match='`host_index` must be None with num_hosts="auto"'):
        stream(num_hosts="auto", host_index=1)


# One worker of a 2-worker MultiWorkerMirroredStrategy (TF_CONFIG on 127.0.0.1): which shard
# hosts.py finds outside and inside the strategy's scope; exits at once (no teardown).
TF_WORKER = textwrap.dedent("""
    import json, os, sys
    i, port = int(sys.argv[1]), int(sys.argv[2])
    os.environ["TF_CONFIG"] = json.dumps({"task": {"type": "worker", "index": i},
        "cluster": {"worker": [f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"]}})
    import numpy as np
    import tensorflow as tf
    import kerasgen as kg
    from kerasgen.pipeline import hosts
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    outside = hosts.process_shard()
    with strategy.scope():
        found = hosts.process_shard()
        gen = kg.ArrayGenerator(np.zeros((40, 2), "float32"), batch_size=4, seed=1,
                                num_shards="auto")
        whole = kg.ArrayGenerator(np.zeros((40, 2), "float32"), batch_size=4, seed=1)
    sys.stdout.write("RESULT " + json.dumps({"pid": i, "outside": outside is None,
          "found": [found.num_shards, found.index], "shard": gen.get_state()["shard"],
          "whole": whole.get_state()["shard"]}) + "\\n")
    sys.stdout.flush()
    os._exit(0)
""")


@pytest.mark.slow
@pytest.mark.xdist_group("multihost")
def test_tensorflow_multi_worker_strategy_gives_each_worker_its_shard(tmp_path):
    pytest.importorskip("tensorflow")
    script = tmp_path / "worker.py"
    script.write_text(TF_WORKER)
    port = free_port()
    line = " & ".join(f"KERAS_BACKEND=tensorflow {sys.executable} {script} {i} {port}"
                      for i in (0, 1))
    got = results(finish([start(f"{line} & wait")])[0])
    for r in got:
        # inside the scope only; "auto" only (TensorFlow shards a dataset itself)
        assert r["outside"] and r["whole"] is None
        assert r["found"] == r["shard"] == [2, r["pid"]]


class FakeResolver:
    def __init__(self, spec, task_type, task_id):
        self.spec, self.task_type, self.task_id = spec, task_type, task_id

    def cluster_spec(self):
        return self

    def as_dict(self):
        return self.spec


def test_tensorflow_worker_shard_numbers_the_chief_first():
    # a stand-in for MultiWorkerMirroredStrategy's cluster_resolver (see the TF test below)
    spec = {"chief": ["a:1"], "worker": ["b:1", "c:1"]}
    got = [hosts.worker_shard(FakeResolver(spec, t, i))
           for t, i in (("chief", 0), ("worker", 0), ("worker", 1))]
    assert [(s.num_shards, s.index) for s in got] == [(3, 0), (3, 1), (3, 2)]
    assert hosts.worker_shard(FakeResolver({"worker": ["a:1"]}, "worker", 0)) is None
    assert hosts.worker_shard(FakeResolver(spec, "evaluator", 0)) is None
