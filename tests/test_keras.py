"""Batches as Keras sees them: fit, evaluate and predict, with 1 worker, threads, processes."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import kerasgen as kg

from .test_contract import ids

WORKERS = [
    pytest.param(dict(workers=1), id="1-worker"),
    pytest.param(dict(workers=2), id="2-threads"),
    pytest.param(dict(workers=2, use_multiprocessing=True), id="2-processes"),
]


class Recorder(keras.Model):
    """A tiny model that records the sample ids of every batch it trains or evaluates on."""

    def __init__(self):
        super().__init__()
        self.flatten = keras.layers.Flatten()
        self.dense = keras.layers.Dense(3)
        self.seen = []

    def call(self, x):
        return self.dense(self.flatten(x))

    def train_step(self, data):
        self.seen.append(("fit", ids(np.asarray(data[0])).tolist()))
        return super().train_step(data)

    def test_step(self, data):
        self.seen.append(("evaluate", ids(np.asarray(data[0])).tolist()))
        return super().test_step(data)


def recorder():
    model = Recorder()
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    return model


def folder_gen(image_folder, **kwargs):
    return kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=5, seed=11,
                                   label_mode="int", **kwargs)


def by_epoch(seen, n_batches):
    return [seen[i:i + n_batches] for i in range(0, len(seen), n_batches)]


def expected_epochs(make, epochs):
    gen = make()
    out = []
    for _ in range(epochs):
        out.append([ids(gen[i][0]).tolist() for i in range(len(gen))])
        gen.on_epoch_end()
    return out


@pytest.mark.parametrize("workers", WORKERS)
def test_fit_sees_the_generators_batches_with_any_workers(image_folder, workers):
    make = lambda: folder_gen(image_folder, **workers)  # noqa: E731
    gen = make()
    model = recorder()
    model.fit(gen, epochs=3, verbose=0, shuffle=False)
    seen = [batch for _, batch in model.seen]
    assert by_epoch(seen, len(gen)) == expected_epochs(make, 3)
    assert gen.epoch == 3  # Keras's extra on_epoch_end from reset() did not count


@pytest.mark.parametrize("workers", WORKERS)
def test_predict_and_evaluate_serve_epoch_zero_like_fit(image_folder, workers):
    make = lambda: folder_gen(image_folder, **workers)  # noqa: E731
    first_epoch = expected_epochs(make, 1)[0]
    model = recorder()
    model.evaluate(make(), verbose=0)
    assert [batch for _, batch in model.seen] == first_epoch
    gen = make()
    predictions = model.predict(gen, verbose=0)
    assert len(predictions) == gen.num_samples
    identity = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Identity()])
    order = ids(identity.predict(make(), verbose=0))
    assert order.tolist() == [i for batch in first_epoch for i in batch]


def test_fit_shuffle_true_reorders_the_whole_batches_of_a_fixed_order_generator(
        image_folder):
    """A generator with shuffle=False keeps Keras's batch shuffle (a shuffling one turns
    it off: see test_feeding.py)."""
    make = lambda: kg.ImageFolderGenerator(image_folder, image_size=(8, 8),  # noqa: E731
                                           batch_size=2, shuffle=False, label_mode="int")
    gen = make()
    model = recorder()
    model.fit(gen, epochs=2, verbose=0, shuffle=True)
    seen = by_epoch([batch for _, batch in model.seen], len(gen))
    expected = expected_epochs(make, 2)
    for got, want in zip(seen, expected):
        assert sorted(got) == sorted(want)
    assert seen != expected  # 6 batches: the same order twice by chance is 1 in 518,400


def test_array_generator_trains_a_model_with_dicts_and_weights():
    rng = np.random.default_rng(0)
    x = {"a": rng.normal(size=(64, 4)).astype("float32"),
         "b": rng.normal(size=(64, 2)).astype("float32")}
    y = (x["a"][:, 0] > 0).astype("int64")
    weights = np.where(y == 1, 2.0, 1.0)
    gen = kg.ArrayGenerator(x, y, sample_weight=weights, batch_size=16, seed=0,
                            label_mode="categorical")
    xa, xb = keras.Input((4,), name="a"), keras.Input((2,), name="b")
    out = keras.layers.Dense(2, activation="softmax")(keras.layers.Concatenate()([xa, xb]))
    model = keras.Model({"a": xa, "b": xb}, out)
    model.compile("adam", "categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(gen, epochs=3, verbose=0)
    assert len(history.history["loss"]) == 3
    batch = gen[0]
    assert set(batch[0]) == {"a", "b"} and batch[1].shape == (16, 2) and len(batch) == 3


def test_resume_in_a_new_process_continues_the_sequence(image_folder, tmp_path):
    gen = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=5,
                                  label_mode="int", seed=None)
    model = recorder()
    model.fit(gen, epochs=2, verbose=0, shuffle=False)
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(gen.get_state()))
    model.fit(gen, epochs=1, verbose=0, shuffle=False)
    uninterrupted = [batch for _, batch in model.seen][-len(gen):]
    script = textwrap.dedent(f"""
        import json, keras, numpy as np, kerasgen as kg
        from tests.test_keras import recorder
        gen = kg.ImageFolderGenerator({str(image_folder)!r}, image_size=(8, 8),
                                      batch_size=5, label_mode="int", seed=None)
        gen.set_state(json.load(open({str(state_file)!r})))
        model = recorder()
        model.fit(gen, epochs=1, verbose=0, shuffle=False)
        print(json.dumps([batch for _, batch in model.seen]))
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=root, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
                         timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == uninterrupted
