"""`Plan` (its batches, the neighbor blocks it asks for) and `Memo`, a generator's store
for what its sampler derives once."""

import pickle
import threading

import numpy as np
import pytest

from kerasgen import samplers


class Counting:
    """Neighbors that know what `prepare` was given: j = base + 1."""

    def __init__(self):
        self.seen = set()
        self.blocks = []

    def known(self, bases):
        return all(int(b) in self.seen for b in bases)

    def prepare(self, bases):
        self.blocks.append(np.asarray(bases).tolist())
        self.seen.update(int(b) for b in bases)

    def num_known(self):
        return len(self.seen)

    def resolve(self, bases, slots):
        return np.asarray(bases, np.int64) + 1


def test_a_plan_prepares_the_next_synthetic_bases_in_doubling_blocks():
    n = 3000
    slots = np.where(np.arange(n) % 3 == 0, 0, -1).astype(np.int16)  # 1000 synthetic
    plan = samplers.Plan(np.arange(n, dtype=np.int32), slots, np.full(n, 0.5, np.float32),
                         Counting())
    synthetic = np.flatnonzero(slots >= 0)
    indices, partners, lams = plan.batch(0, 10)
    assert plan.neighbors.blocks == [synthetic[:256].tolist()]
    np.testing.assert_array_equal(partners[slots[:10] >= 0], indices[slots[:10] >= 0] + 1)
    assert (partners[slots[:10] < 0] == -1).all() and lams.dtype == np.float32
    plan.batch(256 * 3, 256 * 3 + 10)  # past what is known: the next 256 from there
    assert plan.neighbors.blocks[1] == synthetic[256:512].tolist()
    plan.batch(512 * 3, 512 * 3 + 10)  # 512 known now: a block of 512 (to the end)
    assert plan.neighbors.blocks[2] == synthetic[512:1000].tolist()


def test_a_plan_without_synthetic_entries_needs_no_neighbors():
    plan = samplers.Plan([3, 1, 2], np.array([-1, -1, -1], np.int16), np.zeros(3, "float32"))
    indices, partners, lams = plan.batch(0, 3)
    assert indices.tolist() == [3, 1, 2] and partners is None and lams is None
    broken = samplers.Plan([3, 1], np.array([-1, 0], np.int16), np.zeros(2, "float32"))
    with pytest.raises(ValueError, match="`neighbors` must resolve the synthetic entries"):
        broken.batch(0, 2)
    no_lams = samplers.Plan([3, 1], np.array([-1, 0], np.int16), None, Counting())
    with pytest.raises(ValueError, match="`lams` must give the mixing weight"):
        no_lams.batch(0, 2)


def test_a_memo_keeps_one_value_per_name_for_its_key():
    memo = samplers.Memo()
    made = []

    def make(value):
        return lambda: made.append(value) or value

    assert memo.get("table", ("a", 1), make("first")) == "first"
    assert memo.get("table", ("a", 1), make("again")) == "first"  # kept
    assert memo.get("other", ("a", 1), make("second")) == "second"
    assert memo.get("table", ("b", 2), make("third")) == "third"  # another key replaces
    assert made == ["first", "second", "third"]
    assert repr(memo) == "Memo(['other', 'table'])"


def test_a_memo_makes_a_value_once_for_threads_asking_at_once():
    memo = samplers.Memo()
    made = []
    start = threading.Barrier(8)

    def make():
        made.append(1)
        return object()

    def ask(results):
        start.wait()
        results.append(memo.get("table", 0, make))

    results = []
    threads = [threading.Thread(target=ask, args=(results,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and len({id(r) for r in results}) == 1


def test_a_memo_pickles_with_its_values_and_a_lock_of_its_own():
    memo = samplers.Memo()
    memo.get("table", 1, lambda: [1, 2, 3])
    copy = pickle.loads(pickle.dumps(memo))
    assert copy.get("table", 1, lambda: None) == [1, 2, 3]
    assert copy.get("table", 2, lambda: "new") == "new"
