"""The sampler contract, run over every sampler kind on an array and an image generator.

For each of shuffle, sequential, RandomOverSampler, RandomUnderSampler,
BalancedBatchSampler and SMOTE: the same plan for the same (seed, epoch), every index in
range, picklable (the plan is equal after a pickle round trip, of the sampler and of the
generator), and the same under sharding (shard k reads the epoch's batches k, k + S, ...,
byte-identical to the unsharded generator's; together the shards hold every batch).
"""

import pickle

import numpy as np
import pytest

import kerasgen as kg
from kerasgen import samplers

# kind: (the generator's arguments, the Sampler it plans with)
SAMPLERS = {
    "shuffle": lambda: ({"shuffle": True}, samplers.Shuffle()),
    "sequential": lambda: ({"shuffle": False}, samplers.Sequential()),
    "over": lambda: (None, samplers.RandomOverSampler()),
    "under": lambda: (None, samplers.RandomUnderSampler()),
    "balanced": lambda: (None, samplers.BalancedBatchSampler()),
    "smote": lambda: (None, samplers.SMOTE(k_neighbors=2)),
}
Y = np.array([0] * 13 + [1] * 6 + [2] * 4)


def make(source, kind, image_folder, **kwargs):
    arguments, sampler = SAMPLERS[kind]()
    kwargs = {"batch_size": 4, "label_mode": "int", "seed": 11,
              **(arguments or {"sampler": sampler}), **kwargs}
    if source == "array":
        x = np.repeat(np.arange(len(Y), dtype="float32")[:, None], 2, axis=1)
        return kg.ArrayGenerator(x, Y, **kwargs)
    return kg.ImageFolderGenerator(image_folder, image_size=(6, 6), verbose=0, **kwargs)


@pytest.fixture(params=["array", "folder"])
def build(request, image_folder):
    return lambda kind, **kw: make(request.param, kind, image_folder, **kw)


def arrays(plan):
    """A plan as arrays to compare: (indices,) or (indices, slots, lams)."""
    if isinstance(plan, samplers.Plan):
        return (plan.indices,) if plan.slots is None else (plan.indices, plan.slots,
                                                          plan.lams)
    return (np.asarray(plan),)


def assert_same_plan(a, b):
    a, b = arrays(a), arrays(b)
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def plan_of(sampler, gen, epoch):
    """`sampler`'s plan of `epoch`, called as the generator calls it."""
    return sampler.plan(gen.labels, gen.seed, epoch, num_samples=gen.num_samples,
                        batch_size=gen.batch_size, class_names=gen.class_names,
                        features=gen.sampler_features)


def batches(gen):
    return [gen[i] for i in range(len(gen))]


def assert_same_batch(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


KINDS = list(SAMPLERS)


@pytest.mark.parametrize("kind", KINDS)
def test_same_plan_for_the_same_seed_and_epoch(build, kind):
    gen, twin = build(kind), build(kind)
    for epoch in (0, 1, 2):
        assert_same_plan(gen.epoch_plan(epoch), twin.epoch_plan(epoch))
    twin.on_epoch_end()
    assert_same_plan(twin.epoch_plan(), gen.epoch_plan(1))
    sampler = SAMPLERS[kind]()[1]  # a new one: the plan depends on (seed, epoch) alone
    assert isinstance(sampler, samplers.Sampler)
    assert_same_plan(plan_of(sampler, gen, 1), gen.epoch_plan(1))
    if kind != "sequential":  # another seed, another plan
        assert not np.array_equal(arrays(build(kind, seed=12).epoch_plan(0))[0],
                                  arrays(gen.epoch_plan(0))[0])


@pytest.mark.parametrize("kind", KINDS)
def test_every_index_in_range(build, kind):
    gen = build(kind)
    n = gen.num_samples
    for epoch in (0, 1):
        plan = gen.epoch_plan(epoch)
        if isinstance(plan, samplers.Plan):
            indices, partners, _ = plan.batch(0, len(plan))
        else:
            indices, partners = plan, None
        assert len(indices) and indices.min() >= 0 and indices.max() < n
        if partners is not None:  # SMOTE: a partner of the same class, never itself
            synthetic = partners >= 0
            assert synthetic.any() and partners.max() < n
            assert (gen.labels[partners[synthetic]] == gen.labels[indices[synthetic]]).all()
            assert (partners[synthetic] != indices[synthetic]).all()
    seen = [len(b[0]) for b in batches(gen)]
    assert sum(seen) == len(gen.epoch_plan())


@pytest.mark.parametrize("kind", KINDS)
def test_picklable(build, kind):
    gen = build(kind)
    sampler = gen.sampler or SAMPLERS[kind]()[1]
    clone = pickle.loads(pickle.dumps(sampler))
    for epoch in (0, 1):
        assert_same_plan(plan_of(clone, gen, epoch), gen.epoch_plan(epoch))
    gen.on_epoch_end()
    copy = pickle.loads(pickle.dumps(gen))
    assert copy.epoch == 1
    assert_same_plan(copy.epoch_plan(), gen.epoch_plan())
    for a, b in zip(batches(copy), batches(gen)):
        assert_same_batch(a, b)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("num_shards, remainder", [(2, "pad"), (3, "pad"), (2, "drop")])
def test_same_under_sharding(build, kind, num_shards, remainder):
    gen = build(kind)
    gen.on_epoch_end()  # epoch 1: shards follow the shared epoch
    whole = batches(gen)
    covered = set()
    for k in range(num_shards):
        shard = gen.shard(num_shards, k, remainder=remainder)
        assert shard.epoch == 1
        assert_same_plan(shard.epoch_plan(), gen.epoch_plan())
        for i in range(len(shard)):
            number = (i * num_shards + k) % len(whole)  # batch i of shard k
            assert_same_batch(shard[i], whole[number])
            covered.add(number)
    rounds = len(whole) // num_shards * num_shards
    assert covered == set(range(len(whole) if remainder == "pad" else rounds))


@pytest.mark.parametrize("kind", KINDS)
def test_planning_leaves_the_sampler_as_it_was(build, kind):
    """A plan is a pure function: no learned attribute (ending in `_`), no cache, nothing
    set on the sampler by plan(), inside a generator or called directly; its views and
    epochs change nothing on it either."""
    arguments, sampler = SAMPLERS[kind]()
    before = dict(vars(sampler))
    gen = build(kind) if arguments else build(kind, sampler=sampler)
    for epoch in (0, 1):
        plan_of(sampler, gen, epoch)
        gen.epoch_plan(epoch)
    batches(gen)
    batches(gen.shard(2, 1))
    batches(gen.at_epoch(3))
    assert vars(sampler) == before
    assert not [name for name in vars(sampler) if name.endswith("_")]
