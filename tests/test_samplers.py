"""Class-imbalance samplers: strategies, plans, SMOTE geometry, generators, rebalance."""

import pickle
from collections import Counter

import numpy as np
import pytest

import kerasgen as kg
from kerasgen import samplers
from kerasgen.samplers import _adapters

from .conftest import write_image

LABELS = np.array([0] * 50 + [1] * 20 + [2] * 5)


def data(seed=0, labels=LABELS, dims=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(len(labels), dims)) + labels[:, None] * 3.0
    return x.astype("float32"), labels


@pytest.mark.parametrize("strategy", ["auto", "minority", "not minority", "not majority",
                                      "all", {1: 30, 2: 40}])
def test_over_sampling_counts_match_imbalanced_learn(strategy):
    from imblearn.utils import check_sampling_strategy

    expected = check_sampling_strategy(strategy, LABELS, "over-sampling")
    got = samplers.target_counts(LABELS, strategy, "over")
    counts = samplers.class_counts(LABELS)
    assert {c: got[c] - counts[c] for c in got if got[c] != counts[c]} == {
        c: n for c, n in expected.items() if n}


@pytest.mark.parametrize("strategy", ["auto", "majority", "not minority", "not majority",
                                      "all", {0: 10, 1: 7}])
def test_under_sampling_counts_match_imbalanced_learn(strategy):
    from imblearn.utils import check_sampling_strategy

    expected = check_sampling_strategy(strategy, LABELS, "under-sampling")
    got = samplers.target_counts(LABELS, strategy, "under")
    assert {c: got[c] for c in expected} == dict(expected)


def test_float_ratio_and_names():
    two = np.array([0] * 40 + [1] * 10)
    assert samplers.target_counts(two, 0.5, "over") == {0: 40, 1: 20}
    assert samplers.target_counts(two, 0.5, "under") == {0: 20, 1: 10}
    assert samplers.target_counts(LABELS, {"fox": 9}, "over",
                                  class_names=["cat", "dog", "fox"])[2] == 9


@pytest.mark.parametrize("labels,strategy,kind,match", [
    (LABELS, 0.5, "over", "two classes only"),
    (LABELS, {2: 3}, "over", "only adds samples"),
    (LABELS, {0: 60}, "under", "only removes samples"),
    (LABELS, {"owl": 3}, "over", "names class 'owl'"),
    (LABELS, "most", "over", "Received: sampling_strategy='most'"),
    (np.zeros(5, int), "auto", "over", "at least two classes"),
    (np.array([0] * 40 + [1] * 10), 0.1, "over", r"= -6 samples to add; an over-sampler"),
])
def test_strategy_errors(labels, strategy, kind, match):
    with pytest.raises(ValueError, match=match):
        samplers.target_counts(labels, strategy, kind)


@pytest.mark.parametrize("sampler,expected", [
    (kg.samplers.RandomOverSampler(), {0: 50, 1: 50, 2: 50}),
    (kg.samplers.RandomUnderSampler(), {0: 5, 1: 5, 2: 5}),
    (kg.samplers.RandomOverSampler(sampling_strategy={"fox": 25}), {0: 50, 1: 20, 2: 25}),
    (kg.samplers.SMOTE(k_neighbors=3), {0: 50, 1: 50, 2: 50}),
])
def test_samplers_inside_a_generator(sampler, expected):
    x, y = data()
    gen = kg.ArrayGenerator(x, np.array(["cat", "dog", "fox"])[y], sampler=sampler,
                            batch_size=16, seed=4, label_mode="int")
    assert len(gen) == int(np.ceil(sum(expected.values()) / 16))
    counts = gen.class_counts()
    assert counts["before"] == {"cat": 50, "dog": 20, "fox": 5}
    assert list(counts["after"].values()) == list(expected.values())
    seen = np.concatenate([gen[i][1] for i in range(len(gen))])
    assert np.bincount(seen).tolist() == list(expected.values())
    first = [gen[i][0] for i in range(len(gen))]
    again = kg.ArrayGenerator(x, np.array(["cat", "dog", "fox"])[y], sampler=sampler,
                              batch_size=16, seed=4, label_mode="int")
    np.testing.assert_array_equal(np.concatenate(first),
                                  np.concatenate([again[i][0] for i in range(len(gen))]))
    gen.on_epoch_end()
    assert not np.array_equal(np.concatenate(first),
                              np.concatenate([gen[i][0] for i in range(len(gen))]))


def test_oversampling_keeps_every_original():
    x, y = data()
    plan = kg.samplers.RandomOverSampler().plan(y, 0, 0)
    assert set(range(len(y))) <= set(plan.tolist())


def test_balanced_batches():
    x, y = data()
    gen = kg.ArrayGenerator(x, y, sampler=kg.samplers.BalancedBatchSampler(), batch_size=7,
                            seed=0, label_mode="int")
    assert len(gen) == 25  # 50 majority samples, 2 per batch (7 // 3, +1 for one class)
    for i in range(len(gen)):
        counts = np.bincount(gen[i][1], minlength=3)
        assert counts.sum() == 7 and counts.max() - counts.min() <= 1
    plan = gen.epoch_plan()
    majority = plan[np.isin(plan, np.flatnonzero(y == 0))]
    assert len(set(majority.tolist())) == 50  # the majority class seen once
    fixed = kg.ArrayGenerator(x, y, sampler=kg.samplers.BalancedBatchSampler(num_batches=4),
                              batch_size=9, label_mode="int")
    assert len(fixed) == 4 and all(np.bincount(fixed[i][1]).tolist() == [3, 3, 3]
                                   for i in range(4))
    with pytest.raises(ValueError, match="at least the number of classes"):
        kg.ArrayGenerator(x, y, sampler=kg.samplers.BalancedBatchSampler(), batch_size=2,
                          label_mode="int")


def brute_force_neighbours(x, members, i, k):
    distances = np.linalg.norm(x[members] - x[i], axis=1)
    order = [m for m in members[np.argsort(distances, kind="stable")] if m != i]
    return set(order[:k]), distances


def test_every_synthetic_sample_lies_between_neighbours():
    x, y = data(dims=5)
    gen = kg.ArrayGenerator(x, y, sampler=kg.samplers.SMOTE(k_neighbors=4), batch_size=32,
                            seed=2, label_mode="int", shuffle=False)
    plan = gen.epoch_plan()
    indices, partners, lams = plan.batch(0, len(plan))
    synthetic = np.flatnonzero(partners >= 0)
    assert len(synthetic) == 30 + 45
    batches = np.concatenate([gen[i][0] for i in range(len(gen))])
    for r in synthetic:
        i, j, lam = indices[r], partners[r], lams[r]
        members = np.flatnonzero(y == y[i])
        near, _ = brute_force_neighbours(x, members, i, 4)
        assert j in near and y[j] == y[i] and 0 <= lam < 1
        np.testing.assert_allclose(batches[r], x[i] + lam * (x[j] - x[i]), rtol=1e-5,
                                   atol=1e-5)
    originals = np.flatnonzero(partners < 0)
    np.testing.assert_array_equal(batches[originals], x[indices[originals]])


def test_smote_small_classes():
    x, y = data(labels=np.array([0] * 20 + [1] * 3))
    with pytest.warns(UserWarning, match="fewer than k_neighbors \\+ 1 = 6; SMOTE uses k=2"):
        gen = kg.ArrayGenerator(x, y, sampler=kg.samplers.SMOTE(), label_mode="int")
    assert gen.class_counts()["after"] == {"0": 20, "1": 20}
    x1, y1 = data(labels=np.array([0] * 20 + [1]))
    with pytest.raises(ValueError, match="has 1 sample; it needs at least two"):
        kg.ArrayGenerator(x1, y1, sampler=kg.samplers.SMOTE(), label_mode="int")
    with pytest.raises(ValueError, match="at least two classes"):
        kg.ArrayGenerator(x1, np.zeros(21, int), sampler=kg.samplers.SMOTE(),
                          label_mode="int")


@pytest.mark.parametrize("workers", [dict(workers=2), dict(workers=2, use_multiprocessing=True)])
def test_smote_batches_identical_through_predict_with_workers(workers):
    import keras

    x, y = data(dims=4)

    def make(**kw):
        return kg.ArrayGenerator(x, y, sampler=kg.samplers.SMOTE(k_neighbors=3), seed=8,
                                 batch_size=10, label_mode=None, **kw)

    identity = keras.Sequential([keras.Input((4,)), keras.layers.Identity()])
    reference = np.concatenate([make()[i] for i in range(len(make()))])
    with pytest.warns(UserWarning, match=r"model\.predict\(\) reads .*sampler=SMOTE"):
        predicted = identity.predict(make(**workers), verbose=0)
    np.testing.assert_allclose(predicted, reference, rtol=1e-6)


def test_imbalanced_learn_samplers_are_accepted():
    from imblearn.over_sampling import SMOTE as ImblearnSMOTE
    from imblearn.under_sampling import RandomUnderSampler

    x, y = data()
    gen = kg.ArrayGenerator(x, y, sampler=RandomUnderSampler(), batch_size=5, seed=1,
                            label_mode="int")
    assert gen.class_counts()["after"] == {"0": 5, "1": 5, "2": 5}
    first = gen.epoch_plan().copy()
    gen.on_epoch_end()
    assert set(gen.epoch_plan().tolist()) != set(first.tolist())
    x2, y2 = data(labels=np.array([0] * 30 + [1] * 10))
    with pytest.raises(TypeError, match="has no `sample_indices_`"):  # before training
        kg.ArrayGenerator(x2, y2, sampler=ImblearnSMOTE(), label_mode="int")


def test_rebalance_and_fit_resample_on_images():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (30, 6, 6, 3), dtype=np.uint8)
    y = np.array([0] * 24 + [1] * 6)
    for method, expected in [("smote", [24, 24]), ("oversample", [24, 24]),
                             ("undersample", [6, 6])]:
        xr, yr = kg.rebalance(x, y, method=method, seed=1)
        assert xr.shape[1:] == (6, 6, 3) and xr.dtype == np.uint8
        assert np.bincount(yr).tolist() == expected
    xr2, yr2 = kg.samplers.SMOTE(seed=1).fit_resample(x, y)
    np.testing.assert_array_equal(xr2, kg.rebalance(x, y, seed=1)[0])
    sampler = kg.samplers.RandomUnderSampler(seed=3)
    xu, yu = sampler.fit_resample(x, y)
    np.testing.assert_array_equal(xu, x[sampler.sample_indices_])
    assert sampler.sampling_strategy_ == {0: 6}  # imbalanced-learn's: class 0 kept to 6
    assert sampler.class_counts_ == {0: 6, 1: 6}
    assert "SMOTE(k_neighbors=5, sampling_strategy='auto', seed=1)" == repr(
        kg.samplers.SMOTE(seed=1))
    with pytest.raises(ValueError, match="`method` must be one of"):
        kg.rebalance(x, y, method="adasyn")


def test_class_weights_match_scikit_learn():
    from sklearn.utils.class_weight import compute_class_weight

    weights = kg.class_weights(LABELS)
    expected = compute_class_weight("balanced", classes=np.unique(LABELS), y=LABELS)
    assert np.allclose([weights[c] for c in range(3)], expected)
    assert kg.class_weights(np.eye(3)[LABELS]) == weights


def test_smote_on_images_uses_thumbnails_or_features(image_folder):
    for i in range(5, 9):
        write_image(str(image_folder / "dog" / f"extra{i}.png"), seed=i)
    for kw in [{}, {"features": np.arange(16, dtype="float32")[:, None]}]:
        gen = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), batch_size=8,
                                      sampler=kg.samplers.SMOTE(k_neighbors=2), seed=0,
                                      label_mode="int", **kw)
        assert gen.class_counts()["after"] == {"cat": 7, "dog": 7, "fox": 7}
        x, y = gen[0]
        assert x.shape[1:] == (6, 6, 3) and np.isfinite(x).all()


def test_plot_class_distribution(tmp_path):
    import cv2

    x, y = data()
    gen = kg.ArrayGenerator(x, y, sampler=kg.samplers.RandomOverSampler(), label_mode="int")
    path = kg.viz.plot_class_distribution(gen, path=str(tmp_path / "dist.png"))
    assert cv2.imread(path) is not None


def test_a_samplers_own_seed_inside_a_generator_is_an_error_naming_the_generators():
    x, y = np.zeros((30, 2)), np.array([0] * 24 + [1] * 6)
    with pytest.raises(ValueError, match=r"`seed` of SMOTE\(seed=5\) is not used inside a "
                                         r"generator.*Received: sampler seed=5, generator "
                                         r"seed=3\. Pass seed=5 to the generator"):
        kg.ArrayGenerator(x, y, sampler=kg.samplers.SMOTE(seed=5), seed=3)
    with pytest.raises(ValueError, match=r"generator seed=None \(None: a seed drawn at "
                                         r"random\)"):
        kg.ArrayGenerator(x, y, sampler=kg.samplers.RandomOverSampler(seed=5))
    # the same seed on both, or none on the sampler: the generator's seed draws
    same = kg.ArrayGenerator(x, y, sampler=kg.samplers.RandomOverSampler(seed=5), seed=5)
    unseeded = kg.ArrayGenerator(x, y, sampler=kg.samplers.RandomOverSampler(), seed=5)
    np.testing.assert_array_equal(same.epoch_plan(), unseeded.epoch_plan())


def test_old_names_of_num_batches_and_neighbors_still_work_with_a_warning():
    with pytest.warns(DeprecationWarning, match="use num_batches="):
        sampler = kg.samplers.BalancedBatchSampler(n_batches=4)
    assert sampler.num_batches == 4 and "num_batches=4" in repr(sampler)
    with pytest.warns(DeprecationWarning, match="use num_batches"):
        assert sampler.n_batches == 4
    with pytest.raises(TypeError, match="`num_batches` and its deprecated name"):
        kg.samplers.BalancedBatchSampler(4, n_batches=4)
    x, y = np.arange(40.0).reshape(20, 2), np.array([0] * 14 + [1] * 6)
    _, y_res = sampler.fit_resample(x, y)
    assert sampler.class_counts_ == {0: 64, 1: 64} == dict(Counter(y_res.tolist()))
    with pytest.warns(DeprecationWarning, match="are `class_counts_`"):
        assert sampler.sampling_strategy_ == sampler.class_counts_
    plan = kg.ArrayGenerator(x, y, sampler=kg.samplers.SMOTE(k_neighbors=2), seed=0,
                             label_mode="int").epoch_plan()
    with pytest.warns(DeprecationWarning, match="use Plan.neighbors"):
        assert plan.neighbours is plan.neighbors
    with pytest.warns(DeprecationWarning, match="use neighbors="):
        old = kg.samplers.Plan(plan.indices, plan.slots, plan.lams, neighbours=plan.neighbors)
    assert old.neighbors is plan.neighbors
    with pytest.warns(DeprecationWarning, match="use NeighborCache"):
        assert kg.samplers.NeighbourCache is kg.samplers.NeighborCache


def test_smote_with_many_neighbours_keeps_every_synthetic_sample():
    rng = np.random.default_rng(0)
    y = np.array([0] * 500 + [1] * 200)
    x = rng.normal(size=(700, 3)).astype("float32")
    plan = kg.samplers.SMOTE(k_neighbors=150).plan(y, 0, 0, features=x)
    assert (plan.slots >= 0).sum() == 300 and plan.slots.max() < 150


def test_a_plan_only_sampler_pickles():
    gen = kg.ArrayGenerator(np.zeros((6, 1)), np.arange(6) % 2, sampler=PlanOnly(),
                            label_mode="int")
    assert len(pickle.loads(pickle.dumps(gen))) == len(gen)


class PlanOnly:
    def plan(self, labels, seed, epoch):
        return np.arange(len(labels))


def test_feature_based_imbalanced_learn_samplers_see_the_features():
    from imblearn.under_sampling import NearMiss

    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=(60, 2)), rng.normal(size=(15, 2)) + 1.0])
    y = np.array([0] * 60 + [1] * 15)
    gen = kg.ArrayGenerator(x, y, sampler=NearMiss(), label_mode="int")
    expected = NearMiss().fit(x, y)
    expected.fit_resample(x, y)
    assert sorted(gen.epoch_plan().tolist()) == sorted(expected.sample_indices_.tolist())


def _folder_with_a_bad_file(image_folder):
    (image_folder / "dog" / "broken.png").write_bytes(b"not a png")  # dog: 3 -> 4 files
    return image_folder


def test_random_imbalanced_learn_samplers_decode_no_image_to_plan(image_folder):
    from imblearn.over_sampling import RandomOverSampler
    from imblearn.under_sampling import RandomUnderSampler

    for sampler in (RandomOverSampler(), RandomUnderSampler()):
        gen = kg.ImageFolderGenerator(image_folder, sampler=sampler, image_size=(8, 8),
                                      seed=1)
        assert gen.sampler_features.table == {}  # no thumbnail decoded: x is not read
        counts = Counter(gen.labels[gen.epoch_plan()].tolist())
        assert len(set(counts.values())) == 1  # balanced


@pytest.mark.parametrize("make", ["RandomOverSampler", "NearMiss", "TomekLinks"])
def test_imbalanced_learn_samplers_skip_bad_files_as_every_sampler_does(image_folder,
                                                                       make):
    import keras
    from imblearn import over_sampling, under_sampling

    cls = getattr(over_sampling, make, None) or getattr(under_sampling, make)
    folder = _folder_with_a_bad_file(image_folder)
    with pytest.raises(ValueError, match="broken.png"):  # named, under the default
        gen = kg.ImageFolderGenerator(folder, sampler=cls(), image_size=(8, 8), seed=1)
        [gen[i] for i in range(len(gen))]
    with pytest.warns(UserWarning, match="broken.png"):
        gen = kg.ImageFolderGenerator(folder, sampler=cls(), image_size=(8, 8), seed=1,
                                      on_error="skip")
        model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                                  keras.layers.Dense(3)])
        model.compile("adam",
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(gen, epochs=1, verbose=0)
    assert [p for p in gen.skipped if p.endswith("broken.png")]
    bad = next(i for i, p in enumerate(gen.file_paths) if p.endswith("broken.png"))
    if make != "RandomOverSampler":  # chosen by features: the bad file has none
        assert bad not in gen.epoch_plan().tolist()


def test_features_must_match_the_samples(image_folder):
    with pytest.raises(ValueError, match=r"`features` must hold one row per sample \(12"):
        kg.ImageFolderGenerator(image_folder, features=np.zeros((10, 3)),
                                sampler=kg.samplers.SMOTE())


def smote_generator(sampler, **kwargs):
    x, y = data(dims=4)
    return kg.ArrayGenerator(x, y, sampler=sampler, seed=4, batch_size=8, label_mode="int",
                             **kwargs)


def test_generators_sharing_one_smote_keep_their_neighbors_apart():
    """The neighbor table is per generator (its order's memo), never on the SMOTE object:
    two generators built with one SMOTE each have their own; a generator's views (shard,
    at_epoch) and its later epochs share the generator's."""
    sampler = kg.samplers.SMOTE(k_neighbors=3)
    first, second = smote_generator(sampler), smote_generator(sampler)
    table = first.epoch_plan().neighbors
    assert isinstance(table, kg.samplers.NeighborCache)
    assert second.epoch_plan().neighbors is not table
    for view in (first.shard(2, 1), first.at_epoch(1), first.at_epoch(0)):
        assert view.epoch_plan().neighbors is table
    first.on_epoch_end()
    assert first.epoch_plan().neighbors is table
    assert set(vars(sampler)) == {"k_neighbors", "sampling_strategy", "seed", "_given_seed"}
    for a, b in zip(first.at_epoch(0), second):  # and the same batches all the same
        np.testing.assert_array_equal(a[0], b[0])


def test_threads_planning_at_once_share_one_neighbor_table():
    from concurrent.futures import ThreadPoolExecutor

    gen = smote_generator(kg.samplers.SMOTE(k_neighbors=3))
    views = [gen.at_epoch(e % 3) for e in range(12)]
    with ThreadPoolExecutor(6) as pool:
        plans = list(pool.map(lambda view: view.epoch_plan(), views))
        made = list(pool.map(lambda view: view[1][0], views))
    assert len({id(plan.neighbors) for plan in plans}) == 1
    for view, x in zip(views, made):
        np.testing.assert_array_equal(x, smote_generator(kg.samplers.SMOTE(
            k_neighbors=3)).at_epoch(view.epoch)[1][0])


def test_the_neighbor_table_travels_to_worker_processes():
    """A pickled generator (what a worker process gets) carries the neighbors found so
    far, so a worker does not search again; the copy's table is its own."""
    gen = smote_generator(kg.samplers.SMOTE(k_neighbors=3))
    gen.epoch_plan().prepare_all()
    table = gen.epoch_plan().neighbors
    copy = pickle.loads(pickle.dumps(gen))
    copied = copy.epoch_plan().neighbors
    assert copied is not table and copied.num_known() == table.num_known() > 0
    np.testing.assert_array_equal(copied.table, table.table)
    for a, b in zip(copy, gen):
        np.testing.assert_array_equal(a[0], b[0])


def test_fit_resample_alone_sets_the_learned_attributes():
    x, y = data()
    for sampler in (kg.samplers.RandomOverSampler(seed=2), kg.samplers.RandomUnderSampler(
            seed=2), kg.samplers.SMOTE(4, seed=2), kg.samplers.BalancedBatchSampler(seed=2)):
        sampler.plan(y, 2, 0, features=x)
        assert not [k for k in vars(sampler) if k.endswith("_")]
        sampler.fit_resample(x, y)
        learned = sorted(k for k in vars(sampler) if k.endswith("_"))
        random = isinstance(sampler, (kg.samplers.RandomOverSampler,
                                      kg.samplers.RandomUnderSampler))
        expected = (["class_counts_"]
                    + (["sample_indices_"] if random else [])
                    + ([] if isinstance(sampler, kg.samplers.BalancedBatchSampler)
                       else ["sampling_strategy_"]))
        assert learned == sorted(expected)
    over = kg.samplers.RandomOverSampler(seed=2)
    x_res, _ = over.fit_resample(x, y)
    np.testing.assert_array_equal(x_res, x[over.sample_indices_])
    np.testing.assert_array_equal(over.sample_indices_, over.plan(y, 2, 0))


def test_a_random_sampler_declares_its_draw():
    from kerasgen.samplers._random import RandomSampler

    class NoDraw(RandomSampler):
        kind = "over"

    with pytest.raises(TypeError, match="abstract"):
        NoDraw()


def test_the_public_classes_keep_their_public_names():
    """Re-exported from the modules that define them, kg.samplers' names are the same
    objects as before, and a long sampler repr in a saved state still names its class
    by kerasgen.samplers."""
    for name in ("RandomOverSampler", "RandomUnderSampler", "BalancedBatchSampler", "SMOTE",
                 "Shuffle", "Sequential", "Plan", "Sampler", "NeighborCache", "Memo",
                 "class_counts", "target_counts", "check_strategy", "OVER_STRATEGIES",
                 "UNDER_STRATEGIES"):
        assert name in kg.samplers.__all__ and hasattr(kg.samplers, name)
    # what only the generators use is not kg.samplers' (imported from its module)
    for name in ("as_sampler", "check_seed", "identity", "realise"):
        assert name not in kg.samplers.__all__ and not hasattr(kg.samplers, name)
    huge = kg.samplers.SMOTE(sampling_strategy={c: 10**6 for c in range(40)})
    assert _adapters.identity(huge).startswith("kerasgen.samplers.SMOTE(repr crc32 ")


def test_every_method_of_the_public_sampler_classes_is_annotated():
    """tests/test_typing.py reads the classes a public module defines; kg.samplers'
    classes are defined in modules of their own, so their hints are checked here."""
    import inspect
    import sys
    import typing

    for name in kg.samplers.__all__:
        cls = getattr(kg.samplers, name)
        if not inspect.isclass(cls):
            continue
        for owner in cls.__mro__:
            if not owner.__module__.startswith("kerasgen"):
                continue
            for attr, value in vars(owner).items():
                if attr.startswith("_") and attr not in ("__init__", "__len__"):
                    continue
                function = value.fget if isinstance(value, property) else getattr(
                    value, "__func__", value)
                if not inspect.isfunction(function) or function.__module__ != owner.__module__:
                    continue  # not kerasgen's (a Protocol's __init__)
                signature = inspect.signature(function)
                missing = [p.name for p in signature.parameters.values()
                           if p.annotation is p.empty and p.name not in ("self", "cls")
                           and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
                assert not missing and signature.return_annotation is not signature.empty, (
                    f"{owner.__name__}.{attr}")
                typing.get_type_hints(function,
                                      globalns=vars(sys.modules[function.__module__]))


def test_states_name_the_public_sampler_classes_by_kg_samplers():
    """_sampler_adapters names kg.samplers' classes without importing kg.samplers (which
    imports it): its list must be exactly the classes kg.samplers exports."""
    import inspect

    from kerasgen.samplers import _adapters as _sampler_adapters

    exported = {name for name in kg.samplers.__all__
                if inspect.isclass(getattr(kg.samplers, name))}
    assert _sampler_adapters.PUBLIC_CLASSES == exported
    assert _sampler_adapters._class_path(kg.samplers.SMOTE) == "kerasgen.samplers.SMOTE"
    assert _sampler_adapters._class_path(_sampler_adapters.PlanOnly) == (
        "kerasgen.samplers._adapters.PlanOnly")
