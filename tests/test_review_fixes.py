"""Behaviours fixed after review: each test failed before its fix."""

import json
import pickle
import sqlite3

import keras
import numpy as np
import pytest

import kerasgen as kg


def noisy(x, y, rng):
    return x + rng.integers(1000), y


def test_batch_draws_follow_the_epochs_batch_after_resume_and_in_shards():
    x = np.zeros((40, 1), "float32")
    gen = kg.ArrayGenerator(x, batch_size=4, seed=0, batch_augment=noisy)
    resumed = kg.ArrayGenerator(x, batch_size=4, seed=0, batch_augment=noisy)
    resumed.set_state(gen.get_state(batches_done=3))
    np.testing.assert_array_equal(resumed[0][0], gen[3][0])
    shards = [gen.shard(2, k) for k in range(2)]
    assert shards[0][0][0][0, 0] != shards[1][0][0][0, 0]
    np.testing.assert_array_equal(shards[1][0][0], gen[1][0])  # shard 1 reads batch 1


def test_padding_wraps_however_many_shards():
    gen = kg.ArrayGenerator(np.arange(20.0)[:, None], batch_size=8, seed=1)  # 3 batches
    last = gen.shard(7, 6)
    assert len(last) == 1 and len(last[0][0]) in (4, 8)


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


def test_two_generators_on_one_cache_file_never_mix_images(image_folder, tmp_path):
    spec = str(tmp_path / "shared.cache")
    common = dict(image_size=(6, 6), batch_size=16, shuffle=False, cache=spec, seed=1,
                  validation_split=0.5)
    train = kg.ImageFolderGenerator(image_folder, subset="training", **common)
    with pytest.warns(UserWarning, match="Give each generator its own cache file"):
        val = kg.ImageFolderGenerator(image_folder, subset="validation", **common)
    val[0]
    with pytest.raises(RuntimeError, match="Give each generator its own cache file"):
        train[0]


def test_skip_needs_a_class_to_pick_stand_ins_from(tmp_path, image_folder):
    lines = ["filename,a,b", "cat/cat_0.png,1,0", "dog/dog_0.png,0,1"]
    (image_folder / "ml.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="on_error='skip' replaces a bad image"):
        kg.CSVGenerator(image_folder / "ml.csv", y_col=["a", "b"], label_mode="multi_label",
                        on_error="skip")


def test_integer_and_boolean_labels_from_databases_and_frames(tmp_path):
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (a REAL, b REAL, label INTEGER)")
        db.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, -i, i % 2) for i in range(6)])
    gen = kg.SQLGenerator(path, "SELECT a, b, label FROM t", x_col=["a", "b"],
                          label_mode="int", shuffle=False)
    assert gen[0][1].tolist() == [0, 1, 0, 1, 0, 1]
    flags = kg.ArrayGenerator(np.zeros((4, 1)), np.array([True, False, True, True]),
                              label_mode="binary", shuffle=False)
    assert flags[0][1][:, 0].tolist() == [1, 0, 1, 1]


def test_feature_based_imbalanced_learn_samplers_see_the_features():
    from imblearn.under_sampling import NearMiss

    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=(60, 2)), rng.normal(size=(15, 2)) + 1.0])
    y = np.array([0] * 60 + [1] * 15)
    gen = kg.ArrayGenerator(x, y, sampler=NearMiss(), label_mode="int")
    expected = NearMiss().fit(x, y)
    expected.fit_resample(x, y)
    assert sorted(gen.epoch_plan().tolist()) == sorted(expected.sample_indices_.tolist())


def test_features_must_match_the_samples(image_folder):
    with pytest.raises(ValueError, match=r"`features` must hold one row per sample \(12"):
        kg.ImageFolderGenerator(image_folder, features=np.zeros((10, 3)),
                                sampler=kg.samplers.SMOTE())


def test_mixup_with_integer_labels_fails_before_training():
    import keras

    x = np.zeros((8, 16, 16, 3), np.uint8)
    with pytest.raises(ValueError, match="MixUp in `batch_augment` mixes labels"):
        kg.ArrayGenerator(x, np.arange(8) % 2, label_mode="int",
                          batch_augment=keras.layers.MixUp())
