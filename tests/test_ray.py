"""`engine=kg.RayEngine(...)`: batches made by Ray actors on a real 2-node Ray cluster on
this machine (tests/raycluster.py: a loopback-only network namespace), byte-identical to
those made in the training process, through `model.fit`, after an actor is killed and a
node removed mid-epoch, and with nothing left running afterwards; the engine's arguments
and refusals without a cluster."""

import pathlib
import re
import sys

import numpy as np
import pytest

import kerasgen as kg
from tests import raycluster
from tests.conftest import write_image
from tests.test_stream import write_tar

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "ray_preprocessing.py"


# Shared by the cluster scripts: data, generators built alike with and without the engine,
# and a comparison of whole epochs
COMMON = """
import numpy as np
import kerasgen as kg

def flip(x, rng):
    return x[:, ::-1] if rng.random() < 0.5 else x

rng = np.random.default_rng(0)
X = rng.integers(0, 255, (192, 8, 8, 3), dtype=np.uint8)
Y = np.arange(192) % 4

def arrays(**kw):
    return kg.ArrayGenerator(X, Y, batch_size=16, seed=3, **{"augment": flip, **kw})

def same(a, b):
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(p, q) for p, q in zip(a, b))
    return a.dtype == b.dtype and np.array_equal(a, b)

def epoch(gen):
    return [gen[i] for i in range(len(gen))]
"""


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_batches_from_ray_actors_equal_local_ones_through_fit(tmp_path):
    folder = tmp_path / "images"
    for k in range(24):
        write_image(str(folder / f"c{k % 3}" / f"{k}.png"), value=None, seed=k)
    tars = [write_tar(tmp_path / f"train-{s}.tar", range(s * 100, s * 100 + 7 + s))
            for s in range(3)]
    result = raycluster.run(COMMON + f"""
engine = kg.RayEngine(actors=2)
report(repr=repr(engine))
# arrays, shuffled and augmented, and a sampler: two epochs, each batch equal
local, remote = arrays(), arrays(engine=engine)
epochs = []
for _ in range(2):
    epochs.append(same(epoch(local), epoch(remote)))
    local.on_epoch_end(); remote.on_epoch_end()
pool = remote._feeding.pool
nodes = {{node for _, node in ray.get([a.where.remote() for a in pool.actors])}}
sampled = [arrays(sampler=kg.samplers.RandomOverSampler(), engine=engine),
           arrays(sampler=kg.samplers.RandomOverSampler())]
# an image folder, and a generator resumed mid-epoch
folder = {str(folder)!r}
images = [kg.ImageFolderGenerator(folder, image_size=(8, 8), batch_size=4, seed=5, **kw)
          for kw in ({{}}, {{"engine": engine}})]
resumed = arrays(engine=engine)
state = local.get_state(3)
resumed.set_state(state)
local_rest = arrays(); local_rest.set_state(state)
# a stream of WebDataset shards: the actors read the streams as worker processes do
streams = [kg.StreamGenerator({tars!r}, image_size=(4, 4), batch_size=4, seed=1,
                              num_streams=2, shuffle_buffer=5, **kw)
           for kw in ({{}}, {{"engine": engine}})]
# a subclass defined in the script (__main__): its recipe goes by value (cloudpickle)
class Squares(kg.Generator):
    def __init__(self, **kw):
        super().__init__(num_samples=40, labels=np.arange(40) % 2, batch_size=8, seed=2, **kw)

    def load_sample(self, index):
        return np.full((3,), index ** 2, "float32")

report(subclass=same(epoch(Squares()), epoch(Squares(engine=engine))))

import threading

class Locked(Squares):  # what cannot be pickled is named before a batch
    def __init__(self, **kw):
        self.guard = threading.Lock()
        super().__init__(**kw)

try:
    Locked(engine=engine)[0]
except TypeError as error:
    report(locked=str(error))
report(streams=same([streams[0][i] for i in range(14)], [streams[1][i] for i in range(14)]))
report(epochs=epochs, nodes=len(nodes), writable=bool(remote[0][0].flags.writeable),
       sampled=same(epoch(sampled[0]), epoch(sampled[1])),
       images=same(epoch(images[0]), epoch(images[1])),
       resumed=same(epoch(resumed), epoch(local_rest)), resumed_len=len(resumed))

# model.fit: the same weights after 2 epochs, from the same start
import keras
def trained(gen):
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Flatten(), keras.layers.Dense(4)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(gen, epochs=2, verbose=0)
    return model.get_weights(), history.history["loss"]
(w_local, loss_local), (w_ray, loss_ray) = trained(arrays()), trained(arrays(engine=engine))
report(fit_same=all(np.array_equal(a, b) for a, b in zip(w_local, w_ray)),
       loss_local=loss_local, loss_ray=loss_ray)

# what the engine refuses: actors no node can place, a batch's own error raised as itself
import time
start = time.monotonic()
try:
    arrays(engine=kg.RayEngine(actor_options={{"num_cpus": 64}}))[0]
except ValueError as error:
    report(too_big=str(error), too_big_s=time.monotonic() - start)
import pathlib
bad = pathlib.Path(folder) / "c0" / "broken.png"
bad.write_bytes(b"not a png")
errors = []
for kw in ({{}}, {{"engine": engine}}):
    try:
        epoch(kg.ImageFolderGenerator(folder, image_size=(8, 8), batch_size=4, seed=5,
                                      shuffle=False, **kw))
    except Exception as error:
        errors.append([type(error).__name__, str(error)])
report(errors=errors)

# the documented example (docs/distributed.md), on this cluster
import runpy
runpy.run_path({str(EXAMPLE)!r}, run_name="__main__")
""")
    assert result["repr"] == ("RayEngine(address=None, actors=2, actor_options={'num_cpus': "
                              "1}, max_retries=3, start_timeout=120.0)")
    assert result["epochs"] == [True, True]
    assert result["nodes"] == 2, "the two actors should sit on both nodes"
    assert result["writable"] is True
    assert result["sampled"] and result["images"] and result["streams"]
    assert result["subclass"]
    assert "Squares" not in result["locked"] and "'guard'" in result["locked"]
    assert "cannot be sent to Ray actors (engine=kg.RayEngine)" in result["locked"]
    assert result["resumed"] and result["resumed_len"] == 12 - 3
    assert result["fit_same"], (result["loss_local"], result["loss_ray"])
    assert "No node of the Ray cluster can hold one actor" in result["too_big"]
    assert "'num_cpus': 64" in result["too_big"] and result["too_big_s"] < 10
    (local_type, local_message), (ray_type, ray_message) = result["errors"]
    assert ray_type == local_type and ray_message == local_message
    assert "broken.png" in ray_message
    output = result["_output"]
    assert re.search(r"trained 5 epochs on Ray actors: accuracy 0\.[5-9]", output), output
    assert "29 batches identical to those made here: True" in output
    assert "an actor killed after batch 1: the epoch still identical: True" in output


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_a_lost_actor_or_node_has_its_batches_made_again_identical():
    result = raycluster.run(COMMON + """
import time

def slow_flip(x, rng):  # batches slow enough that some are in flight at the loss
    time.sleep(0.03)
    return flip(x, rng)

local = epoch(arrays())

def killed_mid_epoch(gen, kill):
    got = []
    for i in range(len(gen)):
        got.append(gen[i])
        if i == 0:
            kill(gen._feeding.pool)
    return got

gen = arrays(augment=slow_flip, engine=kg.RayEngine(actors=2))
after_kill = killed_mid_epoch(gen, lambda pool: ray.kill(pool.actors[0], no_restart=True))
killed = same(after_kill, local)
resent_kill = gen._feeding.pool.resent
gen._feeding.pool.stop()

# model.fit with an actor killed after its second step: the same weights as a local fit
import keras

class KillAnActor(keras.callbacks.Callback):
    def __init__(self, engine):
        super().__init__()
        self.engine = engine

    def on_train_batch_end(self, batch, logs=None):
        if batch == 1:
            ray.kill(self.engine.actor_handles()[0], no_restart=True)

def trained(gen, callbacks=()):
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Flatten(), keras.layers.Dense(4)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(gen, epochs=2, verbose=0, callbacks=list(callbacks))
    return model.get_weights()

engine = kg.RayEngine(actors=2)
fitted = arrays(augment=slow_flip, engine=engine)
w_ray = trained(fitted, [KillAnActor(engine)])
fit_resent = fitted._feeding.pool.resent
w_local = trained(arrays())
report(fit_killed=all(np.array_equal(a, b) for a, b in zip(w_local, w_ray)),
       fit_resent=fit_resent)
fitted._feeding.pool.stop()

# the default engine: an actor per CPU of the cluster (4), so the lost node's actors
# cannot be replaced: the epoch goes on with the others
gen = arrays(augment=slow_flip, engine=kg.RayEngine())
gen[0]
where = ray.get([a.where.remote() for a in gen._feeding.pool.actors])
gen.set_state(arrays().get_state())
head = ray.get_runtime_context().get_node_id()
on_node2 = [k for k, (_, node) in enumerate(where) if node != head]
after_removal = killed_mid_epoch(
    gen, lambda pool: cluster.remove_node(node2, allow_graceful=False))
report(killed=killed, resent_kill=resent_kill, on_node2=len(on_node2),
       removed=same(after_removal, local), resent_removal=gen._feeding.pool.resent,
       actors_left=len(gen._feeding.pool.actors))
gen._feeding.pool.stop()
""", timeout=300, backend="jax", fresh=True)
    assert result["killed"] and result["resent_kill"] >= 1
    assert result["fit_killed"] and result["fit_resent"] >= 1
    assert result["on_node2"] == 2
    assert result["removed"] and result["resent_removal"] >= 1
    assert result["actors_left"] == 2


def test_the_engine_checks_its_arguments():
    assert repr(kg.RayEngine(address="auto", actors=3, actor_options={"num_cpus": 2},
                             max_retries=0, start_timeout=5)) == (
        "RayEngine(address='auto', actors=3, actor_options={'num_cpus': 2}, "
        "max_retries=0, start_timeout=5.0)")
    assert kg.RayEngine() == kg.RayEngine()
    with pytest.raises(ValueError, match=r"`actors` must be a positive integer\. "
                                         r"Received: actors=0"):
        kg.RayEngine(actors=0)
    with pytest.raises(TypeError, match=r"`actor_options` must be a dict"):
        kg.RayEngine(actor_options=[("num_cpus", 1)])
    with pytest.raises(ValueError, match=r"`max_retries` must be"):
        kg.RayEngine(max_retries=-1)
    with pytest.raises(ValueError, match=r"`start_timeout` must be"):
        kg.RayEngine(start_timeout=0)
    with pytest.raises(TypeError, match=r"`address` must be a string"):
        kg.RayEngine(address=6379)
    with pytest.raises(ValueError, match=r"one batch at a time .* must not set "
                                         r"max_concurrency"):
        kg.RayEngine(actor_options={"num_cpus": 1, "max_concurrency": 4})


def test_the_engine_keyword_is_checked_by_every_generator(image_folder):
    x, y = np.zeros((8, 2), "float32"), np.arange(8) % 2
    with pytest.raises(TypeError, match=r"`engine` must be None or a kg\.RayEngine"):
        kg.ArrayGenerator(x, y, engine="ray")
    with pytest.raises(ValueError, match=r"choose one"):
        kg.ArrayGenerator(x, y, engine=kg.RayEngine(), workers=2, use_multiprocessing=True)
    with pytest.raises(ValueError, match=r"choose one"):
        kg.ImageFolderGenerator(image_folder, engine=kg.RayEngine(), workers=2,
                                use_multiprocessing=True)


def test_without_ray_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray then fails
    x, y = np.zeros((8, 2), "float32"), np.arange(8) % 2
    gen = kg.ArrayGenerator(x, y, batch_size=4, engine=kg.RayEngine())
    with pytest.raises(ImportError, match=r'pip install "kerasgen3\[ray\]"'):
        gen[0]
