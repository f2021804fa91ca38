"""SMOTE's plan: pinned values, compact arrays, a memo of the generator's."""

import numpy as np
import pytest

import kerasgen as kg
from kerasgen import samplers

Y = np.array([0] * 6 + [1] * 3 + [2] * 2)
X = (np.arange(len(Y), dtype="float32") ** 1.5)[:, None]


def test_golden_smote_plan():
    """The plan of a fixed seed, pinned (the values kerasgen has always drawn)."""
    with pytest.warns(UserWarning, match="Class 2 has 2 samples"):
        plan = samplers.SMOTE(k_neighbors=2).plan(Y, 7, 1, features=X)
    indices, partners, lams = plan.batch(0, len(plan))
    assert indices.tolist() == [3, 10, 4, 7, 8, 7, 6, 1, 6, 9, 0, 10, 2, 8, 9, 5, 10, 9]
    assert plan.slots.tolist() == [-1, -1, -1, -1, 0, 1, 0, -1, -1, 0, -1, 0, -1, -1, -1,
                                   -1, 0, 0]
    assert partners.tolist() == [-1, -1, -1, -1, 7, 8, 7, -1, -1, 10, -1, 9, -1, -1, -1,
                                 -1, 9, 10]
    np.testing.assert_allclose(lams[lams > 0], [0.561541, 0.594374, 0.138104, 0.544838,
                                                0.504393, 0.453681, 0.612023], atol=1e-6)


def test_a_plan_takes_no_more_memory_than_it_needs():
    rng = np.random.default_rng(0)
    y = np.array([0] * 900 + [1] * 100)
    x = rng.normal(size=(1000, 3)).astype("float32")
    plan = samplers.SMOTE(k_neighbors=3).plan(y, 0, 0, features=x)
    assert (plan.indices.dtype, plan.slots.dtype, plan.lams.dtype) == (
        np.int32, np.int16, np.float32)
    table = plan.neighbors
    # a row of k int32 neighbors per sample of the class grown, nothing per other sample
    assert table.table.shape == (100, 3) and table.table.dtype == np.int32
    assert table.grown.tolist() == list(range(900, 1000))
    assert not [name for name, value in vars(table).items()  # the data's own arrays aside
                if isinstance(value, np.ndarray) and len(value) == len(y)
                and value is not x and value is not y]
    plan.prepare_all()
    assert table.num_known() == 100 and (table.table >= 0).all()


def test_the_neighbor_table_is_the_generators_not_the_samplers():
    sampler = samplers.SMOTE(k_neighbors=2)
    memo = samplers.Memo()
    with pytest.warns(UserWarning):
        first = sampler.plan(Y, 0, 0, features=X, memo=memo)
    second = sampler.plan(Y, 0, 1, features=X, memo=memo)  # the same table, no warning
    assert first.neighbors is second.neighbors
    with pytest.warns(UserWarning):
        alone = sampler.plan(Y, 0, 0, features=X)  # no memo: a table of its own
    assert alone.neighbors is not first.neighbors
    assert "neighbor" not in " ".join(vars(sampler)).replace("k_neighbors", "")
    np.testing.assert_array_equal(alone.indices, first.indices)


def test_smote_in_a_generator_matches_smote_called_directly():
    gen = kg.ArrayGenerator(np.repeat(X, 2, axis=1), Y, batch_size=4, label_mode="int",
                            seed=3, sampler=samplers.SMOTE(k_neighbors=1))
    direct = samplers.SMOTE(k_neighbors=1).plan(Y, 3, 0, features=gen.sampler_features)
    np.testing.assert_array_equal(gen.epoch_plan().indices, direct.indices)
    np.testing.assert_array_equal(gen.epoch_plan().lams, direct.lams)
