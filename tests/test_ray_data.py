"""A `ray.data.Dataset` as TableGenerator's table (`kerasgen.formats.table_ray`).

The unit tests read a stand-in for Ray (blocks as pyarrow Tables, `ray.get` the identity,
a task run in place): the (block, row) index, batches equal to a pyarrow table's, nulls
named, the refusals. The cluster test runs one real 2-node cluster in a loopback-only
namespace (`tests/raycluster.py`): batches equal to a pyarrow table's, with shuffle and a
sampler, for 2 epochs; the same rows in the same order from a pipeline built twice whose
blocks finish out of order; no block fetched by the driver to build the generator; an
image column; a copy unpickled in a Ray task on the other node; fit.
"""

import pickle
import sys
import types

import numpy as np
import pytest

import kerasgen as kg
from kerasgen.formats import table_ray
from kerasgen.table import TableGenerator
from tests import raycluster
from tests.test_tables import assert_same, batches

pa = pytest.importorskip("pyarrow")

CLASSES = ["bird", "cat", "dog"]


def make_table(ids):
    ids = np.asarray(ids, np.int64)
    return pa.table({
        "id": pa.array(ids),
        "a": pa.array(ids * 0.5),
        "vec": pa.array([[float(i), -1.0] for i in ids], pa.list_(pa.float32(), 2)),
        "label": pa.array([CLASSES[0] if i % 5 else CLASSES[1 + i % 2] for i in ids]),
    })


class FakeRay:
    """Ray as table_ray uses it, in this process: an object reference is the block."""

    cloudpickle = pickle

    def __init__(self):
        self.gets = 0

    def get(self, refs):
        self.gets += not isinstance(refs, list)  # a block fetched whole by the driver
        return refs

    def remote(self, function):
        task = types.SimpleNamespace(remote=function)
        return types.SimpleNamespace(options=lambda **_: task)


class Dataset:
    """A stand-in for ray.data.Dataset: its blocks, materialized as they are."""

    def __init__(self, blocks):
        self.blocks = blocks
        self.context = types.SimpleNamespace(
            execution_options=types.SimpleNamespace(preserve_order=False))
        self.ordered = None

    def materialize(self):
        self.ordered = self.context.execution_options.preserve_order
        return self

    def to_arrow_refs(self):
        return self.blocks


Dataset.__module__ = "ray.data.dataset"


class DataIterator:
    pass


DataIterator.__module__ = "ray.data.iterator"


@pytest.fixture
def fake_ray(monkeypatch):
    ray = FakeRay()
    monkeypatch.setattr(table_ray, "ray_module", lambda: ray)
    monkeypatch.setattr(table_ray, "_REMOTE", {})
    return ray


def blocks_of(table, sizes):
    starts = np.concatenate([[0], np.cumsum(sizes)])
    return [table.slice(int(a), int(b - a)) for a, b in zip(starts[:-1], starts[1:])]


def test_rows_are_indexed_by_block_and_batches_match_a_table(fake_ray):
    table = make_table(range(37))
    dataset = Dataset(blocks_of(table, [10, 0, 13, 14]))
    options = dict(x_col=["a", "vec"], y_col="label", batch_size=6, seed=4,
                   sampler=kg.samplers.RandomOverSampler(seed=4))
    gen = TableGenerator(dataset, **options)
    assert dataset.ordered and not dataset.context.execution_options.preserve_order
    assert fake_ray.gets == 0  # counts, labels and the list width came from tasks
    assert gen.num_rows == 37 and gen.class_names == CLASSES
    rows = gen.rows
    assert rows.num_blocks == 4 and rows.locate([0, 9, 10, 36])[0].tolist() == [0, 0, 2, 3]
    ids = [9, 30, 0, 10, 22, 23]
    assert rows.take(ids, ["id"]).column(0).to_pylist() == ids
    assert_same(batches(gen), batches(TableGenerator(table, **options)))
    assert 0 < fake_ray.gets
    one_block = TableGenerator(Dataset(blocks_of(table, [37])), **options)
    assert_same(batches(one_block, 1), batches(TableGenerator(table, **options), 1))
    copy = pickle.loads(pickle.dumps(rows))
    assert copy.dataset is None and copy.num_rows == 37
    assert copy.take([36, 0], ["id"]).column(0).to_pylist() == [36, 0]


def test_nulls_are_named_by_row(fake_ray):
    holes = pa.table({"a": [1.0, 2.0, 3.0, None, 5.0], "b": [1.0] * 5,
                      "y": ["x", "y", None, "x", "y"]})
    blocks = blocks_of(holes, [2, 3])
    with pytest.raises(ValueError, match=r"Column 'a' holds a null .* at row 3 of the Ray "
                                         r"dataset"):
        TableGenerator(Dataset(blocks), x_col="a")
    with pytest.raises(ValueError, match=r"Column 'y' holds a null .* at row 2 of the Ray "
                                         r"dataset"):
        TableGenerator(Dataset(blocks), x_col="b", y_col="y")


def test_refusals(fake_ray, monkeypatch):
    dataset = Dataset([make_table(range(4))])
    with pytest.raises(ValueError, match=r"`use_multiprocessing` must be False .*"
                                         r"engine=kg\.RayEngine\(\)\)\. Received: "
                                         r"use_multiprocessing=True, workers=2"):
        TableGenerator(dataset, x_col="a", workers=2, use_multiprocessing=True)
    with pytest.raises(TypeError, match=r"`table` must be a ray\.data\.Dataset .* "
                                        r"Received: table of type DataIterator"):
        TableGenerator(DataIterator(), x_col="a")
    with pytest.raises(ValueError, match=r"`table` must hold rows"):
        TableGenerator(Dataset([make_table([])]), x_col="a")
    with pytest.raises(ValueError, match=r"`max_cache_bytes` must be"):
        TableGenerator(dataset, x_col="a", max_cache_bytes=0)


def test_without_ray_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r'needs Ray: pip install "kerasgen3\[ray\]"'):
        TableGenerator(Dataset([make_table(range(4))]), x_col="a")


CLUSTER_BODY = r'''
import io, time
import cloudpickle, cv2, numpy as np, pyarrow as pa
import keras
import kerasgen as kg
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from kerasgen.table import TableGenerator

N, CLASSES = 203, ["bird", "cat", "dog"]

def png(i):
    image = np.full((6, 5, 3), (i * 7 % 256, i % 256, 255 - i % 256), np.uint8)
    return cv2.imencode(".png", image)[1].tobytes()

def rows(ids):
    ids = np.asarray(ids, np.int64)
    return pa.table({"id": ids, "a": ids * 0.5, "b": (ids % 7).astype(np.int32),
                     "label": [CLASSES[0] if i % 5 else CLASSES[1 + i % 2] for i in ids],
                     "img": pa.array([png(i) for i in ids], pa.binary())})

def add_columns(batch):  # later blocks finish first: unordered, they would come first
    ids = batch["id"].to_numpy()
    time.sleep(0.1 * (1 - ids[0] / N))
    return rows(ids)

def built():
    return ray.data.range(N, override_num_blocks=7).map_batches(
        add_columns, batch_format="pyarrow")

table = rows(np.arange(N))
real_get = ray.get
fetched = []
def counting_get(refs, *args, **kwargs):
    fetched.extend(r.hex() for r in (refs if isinstance(refs, list) else [refs]))
    return real_get(refs, *args, **kwargs)
ray.get = counting_get

started = time.perf_counter()
FEATURES = dict(x_col=["a", "b"], y_col="label", batch_size=16, seed=3)
gen = TableGenerator(built(), **FEATURES)
report(build_s=time.perf_counter() - started, num_blocks=gen.rows.num_blocks)
blocks = {b.hex() for b in gen.rows.blocks}
report(blocks_fetched_to_build=len(blocks & set(fetched)))
gen[0]
report(blocks_fetched_by_a_batch=len(blocks & set(fetched)))
ray.get = real_get

materialized = gen.rows.dataset  # a MaterializedDataset is read as it is
images = dict(image_col="img", x_col="a", y_col="label", image_size=(6, 5),
              batch_size=16, seed=5)
image_gen = TableGenerator(materialized, **images)

@ray.remote
def make(gen_bytes, index):
    return ray.get_runtime_context().get_node_id(), cloudpickle.loads(gen_bytes)[index]

# a copy, as a RayEngine actor gets it, makes a batch on the other node (while the
# checks below run: its worker imports kerasgen and Keras first)
copied = make.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
    node2.node_id, soft=False)).remote(cloudpickle.dumps(image_gen), 3)
wanted = image_gen[3]

def epochs(g, n=2):
    out = []
    for _ in range(n):
        g.on_epoch_end()
        out.append([g[i] for i in range(len(g))])
    return out

def leaves(part):
    if isinstance(part, dict):
        return [a for key in sorted(part) for a in leaves(part[key])]
    if isinstance(part, (tuple, list)):
        return [a for item in part for a in leaves(item)]
    return [np.asarray(part)]

def same(a, b):
    xs, ys = leaves(a), leaves(b)
    return len(xs) == len(ys) and all(np.array_equal(x, y) for x, y in zip(xs, ys))

checks = {}
checks["shuffled"] = same(epochs(gen), epochs(TableGenerator(table, **FEATURES)))
sampled = dict(FEATURES, sampler=kg.samplers.RandomOverSampler(seed=3))
checks["sampled"] = same(epochs(TableGenerator(built(), **sampled)),  # built again
                         epochs(TableGenerator(table, **sampled)))
checks["images"] = same(epochs(image_gen, 1), epochs(TableGenerator(table, **images), 1))
report(checks=checks, class_names=gen.class_names,
       ordered_ids=gen.rows.take(np.arange(N), ["id"]).column(0).to_pylist()
       == list(range(N)))

model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="softmax")])
model.compile("sgd", "sparse_categorical_crossentropy")
history = model.fit(TableGenerator(materialized, **FEATURES), epochs=1, verbose=0)
report(loss=float(history.history["loss"][-1]))
node, batch = ray.get(copied, timeout=120)
report(copy_same=same([[batch]], [[wanted]]), copy_on_node2=node == node2.node_id,
       took_s=time.perf_counter() - started)
'''


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_a_ray_dataset_on_a_two_node_cluster():
    result = raycluster.run(CLUSTER_BODY)
    assert result["num_blocks"] == 7
    assert result["blocks_fetched_to_build"] == 0  # counts and labels came from tasks
    assert result["blocks_fetched_by_a_batch"] > 0  # (the count sees block fetches)
    assert result["checks"] == {"shuffled": True, "sampled": True, "images": True}
    assert result["class_names"] == CLASSES and result["ordered_ids"]
    assert result["copy_same"] and result["copy_on_node2"]
    assert np.isfinite(result["loss"])
