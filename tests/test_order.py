"""The order layer: the Sampler protocol, get_state / set_state identity checks, copies."""

import copy
import pickle

import numpy as np
import pytest

import kerasgen as kg
from kerasgen import samplers
from kerasgen.samplers import _adapters

Y = np.array([0] * 20 + [1] * 8 + [2] * 5)
X = np.arange(len(Y), dtype="float32")[:, None]


def array_gen(**kwargs):
    kwargs.setdefault("batch_size", 4)
    kwargs.setdefault("label_mode", "int")
    return kg.ArrayGenerator(X, Y, **kwargs)


class EveryOther:
    """A sampler of one's own, with object's default repr (a memory address)."""

    def plan(self, labels, seed, epoch, **context):
        rng = np.random.default_rng([seed, 99, epoch])
        return rng.permutation(np.arange(0, context["num_samples"], 2))


class Synthetic:
    """A sampler that returns a Plan: sample 1 blended halfway towards sample 0, twice."""

    def plan(self, labels, seed, epoch, **context):
        return samplers.Plan([0, 1, 1], np.array([-1, 0, 0], np.int16),
                             np.array([0, 0.5, 0.5], np.float32), Toward0())


class Toward0:
    def known(self, bases):
        return True

    def resolve(self, bases, slots):
        return np.zeros(len(bases), np.int64)


def test_the_sampler_protocol_is_structural():
    for sampler in [samplers.RandomOverSampler(), samplers.RandomUnderSampler(),
                    samplers.BalancedBatchSampler(), samplers.SMOTE(), samplers.Shuffle(),
                    samplers.Sequential(), EveryOther()]:
        assert isinstance(sampler, samplers.Sampler)
    assert not isinstance(object(), samplers.Sampler)
    from imblearn.under_sampling import RandomUnderSampler

    assert not isinstance(RandomUnderSampler(), samplers.Sampler)  # adapted, not a Sampler


def test_shuffle_and_sequential_always_return_a_plan():
    shuffled = samplers.Shuffle().plan(None, 42, 0, num_samples=10)
    assert isinstance(shuffled, samplers.Plan) and shuffled.slots is None
    assert shuffled.indices.tolist() == [5, 6, 0, 7, 3, 2, 4, 9, 1, 8]  # the golden order
    assert samplers.Sequential().plan(Y, 0, 3).indices.tolist() == list(range(len(Y)))
    assert array_gen(seed=42).epoch_plan().tolist() == samplers.Shuffle().plan(
        Y, 42, 0).indices.tolist()
    np.testing.assert_array_equal(array_gen(seed=8, sampler=samplers.Shuffle())[1][0],
                                  array_gen(seed=8)[1][0])  # sampler=Shuffle() is shuffle=True


def test_a_custom_sampler_gets_the_context_and_may_return_a_plan():
    gen = array_gen(sampler=EveryOther(), seed=1)
    assert sorted(gen.epoch_plan().tolist()) == list(range(0, len(Y), 2))
    synthetic = array_gen(sampler=Synthetic(), batch_size=3, dtype=None)
    assert isinstance(synthetic.epoch_plan(), samplers.Plan)
    x, y = synthetic[0]
    assert x[:, 0].tolist() == [0.0, 0.5, 0.5] and y.tolist() == [0, 0, 0]


@pytest.mark.parametrize("bad", [-1, len(Y)])
def test_a_plan_outside_the_samples_is_refused(bad):
    class Broken:
        def plan(self, labels, seed, epoch):
            return [0, bad]

    with pytest.raises(ValueError, match=f"names sample index {bad}, outside the 33 "
                                         "samples"):
        array_gen(sampler=Broken())


def test_the_state_names_the_sampler_and_the_source():
    state = array_gen(seed=3, sampler=samplers.RandomOverSampler(seed=3)).get_state()
    assert state["sampler"] == "RandomOverSampler(sampling_strategy='auto')"  # no seed
    assert state["source"].startswith("33 samples, class ids crc32 ")
    assert array_gen().get_state()["sampler"] == "Shuffle()"
    assert array_gen(shuffle=False).get_state()["sampler"] == "Sequential()"
    assert kg.ArrayGenerator(X).get_state()["source"] == "33 samples"  # no labels


@pytest.mark.parametrize("saved, restored, names", [
    (dict(sampler=samplers.RandomOverSampler()), dict(),
     r"sampler=RandomOverSampler\(sampling_strategy='auto'\), this one has "
     r"sampler=Shuffle\(\)"),
    (dict(), dict(shuffle=False), r"sampler=Shuffle\(\), this one has sampler=Sequential"),
    (dict(sampler=samplers.RandomUnderSampler()),
     dict(sampler=samplers.RandomUnderSampler(sampling_strategy="all")),
     "sampling_strategy='auto'.*sampling_strategy='all'"),
    (dict(sampler=samplers.SMOTE(k_neighbors=3)), dict(sampler=samplers.SMOTE(k_neighbors=4)),
     r"SMOTE\(k_neighbors=3, .*SMOTE\(k_neighbors=4, "),
])
def test_a_state_of_another_sampler_is_refused_naming_both(saved, restored, names):
    state = array_gen(seed=1, **saved).get_state()
    gen = array_gen(seed=2, **restored)
    with pytest.raises(ValueError, match=names):
        gen.set_state(state)
    assert gen.seed == 2  # nothing changed


def test_the_same_sampler_built_anew_restores():
    """The sampler's own seed, a default repr's address and imbalanced-learn's
    random_state differ between two builds of the same sampler: not its identity."""
    from imblearn.under_sampling import RandomUnderSampler

    states = iter(range(100))
    for make in [lambda: samplers.RandomOverSampler(), lambda: samplers.SMOTE(k_neighbors=3),
                 lambda: samplers.BalancedBatchSampler(), EveryOther,
                 lambda: RandomUnderSampler(random_state=next(states))]:
        gen = array_gen(sampler=make(), seed=None)
        gen.on_epoch_end()
        resumed = array_gen(sampler=make(), seed=None)
        resumed.set_state(gen.get_state(batches_done=1))
        assert resumed.epoch == 1 and resumed.seed == gen.seed
        np.testing.assert_array_equal(resumed[0][0], gen[1][0])
    with pytest.raises(ValueError, match=r"sampling_strategy=\{0: 5\}"):
        array_gen(sampler=RandomUnderSampler(sampling_strategy={0: 5})).set_state(
            array_gen(sampler=RandomUnderSampler()).get_state())


def test_a_state_of_other_labels_is_refused():
    state = array_gen().get_state()
    other = kg.ArrayGenerator(X, Y[::-1].copy(), batch_size=4, label_mode="int")
    with pytest.raises(ValueError, match="other labels or another order.*same data"):
        other.set_state(state)


def test_an_old_state_without_sampler_and_source_restores():
    gen = array_gen(seed=None, sampler=samplers.RandomOverSampler())
    gen.on_epoch_end()
    old = {k: v for k, v in gen.get_state(batches_done=2).items()
           if k in ("epoch", "batch", "seed", "num_samples")}
    for state in [old, {**old, "batch_size": 4, "shard": None}]:
        fresh = array_gen(sampler=samplers.RandomOverSampler())
        fresh.set_state(state)
        np.testing.assert_array_equal(fresh[0][0], gen[2][0])


def test_a_state_past_the_end_changes_nothing():
    gen = array_gen(seed=4)
    with pytest.raises(ValueError, match="past the end of epoch 3"):
        gen.set_state({**gen.get_state(), "epoch": 3, "seed": 9, "batch": 99})
    assert (gen.epoch, gen.seed, len(gen)) == (0, 4, 9)


def test_identity_shortens_a_long_repr():
    class Wordy:
        def plan(self, labels, seed, epoch, **context):
            return np.arange(len(labels))

        def __repr__(self):
            return "Wordy(" + "x" * 300 + ")"

    name = _adapters.identity(Wordy())
    assert name.endswith(")") and "Wordy(repr crc32 " in name and len(name) < 120
    assert _adapters.identity(lambda: 0) == _adapters.identity(lambda: 1)  # no address


def test_copies_and_views_move_on_their_own():
    gen = array_gen(seed=0)
    for other in [copy.copy(gen), pickle.loads(pickle.dumps(gen)), gen.at_epoch(0),
                  gen.shard(1, 0)]:
        other.on_epoch_end()
        assert (other.epoch, gen.epoch) == (1, 0)
    gen.seed = 7
    np.testing.assert_array_equal(gen[0][0], array_gen(seed=7)[0][0])


def test_copies_share_the_plan_and_the_memo_a_pickle_carries_the_memo_only():
    gen = array_gen(seed=2, sampler=samplers.SMOTE(k_neighbors=2))
    plan = gen.epoch_plan()
    assert gen.at_epoch(0).epoch_plan() is plan and gen.shard(2, 1).epoch_plan() is plan
    assert gen.at_epoch(1).epoch_plan() is not plan
    gen.set_state(gen.get_state())
    assert gen.epoch_plan() is plan  # the same seed: the plan is kept
    copy_ = pickle.loads(pickle.dumps(gen))
    again = copy_.epoch_plan()
    assert again is not plan and again.neighbors is not plan.neighbors
    np.testing.assert_array_equal(again.indices, plan.indices)
    assert isinstance(plan.neighbors, samplers.NeighborCache)


def test_a_sampler_of_ones_own_gets_the_generators_memo():
    seen = []

    class Remembers:
        def plan(self, labels, seed, epoch, memo=None, **context):
            seen.append(memo.get("squares", len(labels), lambda: object()))
            return np.arange(context["num_samples"])

    gen = array_gen(sampler=Remembers())
    gen.epoch_plan(0)
    gen.at_epoch(1).epoch_plan()
    array_gen(sampler=Remembers()).epoch_plan(0)
    assert seen[0] is seen[1] and seen[2] is not seen[0]
