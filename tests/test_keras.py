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
    with pytest.warns(UserWarning, match=r"model\.predict\(\) reads .* in the order of epoch 0"):
        predictions = model.predict(gen, verbose=0)
    assert len(predictions) == gen.num_samples
    identity = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Identity()])
    with pytest.warns(UserWarning, match=r"model\.predict\(\) reads"):
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


BROKEN_WORKERS = [
    pytest.param(dict(workers=1), id="1-worker-prefetch"),
    pytest.param(dict(workers=1, prefetch=0), id="1-worker"),
    pytest.param(dict(workers=2), id="2-threads"),
    pytest.param(dict(workers=2, use_multiprocessing=True), id="2-processes"),
]


def broken_folder_gen(image_folder, **workers):
    """The folder's images in order, 2 a batch, with a corrupt PNG in batch 3 (sample 7):
    past the 2 batches Keras reads itself to learn the batch shapes, so it is read inside
    TensorFlow's training function."""
    (image_folder / "fox" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not a png")
    return kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=2,
                                   shuffle=False, label_mode="int", **workers)


def assert_is_the_batch_error(error, generator="ImageFolderGenerator", batch=3):
    """`error` is kerasgen's own ValueError, not TensorFlow's error carrying its text."""
    import tensorflow as tf

    assert type(error) is ValueError
    assert str(error).startswith("Cannot decode image file ")
    assert str(error).split(":")[0].endswith("broken.png")
    assert f"kerasgen: while loading batch {batch} of epoch 0 of {generator}(" in "\n".join(
        getattr(error, "__notes__", []))
    # TensorFlow's error stays reachable: the cause, or the context where Keras's
    # traceback filtering (on by default) raises "from None"
    assert isinstance(error.__cause__ or error.__context__, tf.errors.OpError)


@pytest.mark.parametrize("workers", BROKEN_WORKERS)
def test_a_corrupt_file_ends_fit_with_kerasgens_own_error(image_folder, workers):
    gen = broken_folder_gen(image_folder, **workers)
    events = []
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    watch = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: events.append(("batch", batch)),
        on_epoch_end=lambda epoch, logs: events.append(("epoch end", epoch)),
        on_test_begin=lambda logs: events.append(("validation", None)))
    with pytest.raises(ValueError, match=r"^Cannot decode image file .*broken\.png") as caught:
        model.fit(gen, epochs=2, verbose=0, callbacks=[watch], shuffle=False,
                  validation_data=folder_gen(image_folder, shuffle=False))
    assert_is_the_batch_error(caught.value)
    # the broken epoch does not look finished: no epoch end, no validation on it (the
    # failed batch may surface while tf.data still reads ahead, before batch 3's step)
    assert events == [("batch", i) for i in range(len(events))] and len(events) <= 3
    gen.on_epoch_end()  # stops the worker processes


@pytest.mark.parametrize("workers", BROKEN_WORKERS)
def test_a_corrupt_file_ends_evaluate_and_predict_with_kerasgens_own_error(
        image_folder, workers):
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    for run in (model.evaluate, model.predict):
        gen = broken_folder_gen(image_folder, **workers)
        with pytest.raises(ValueError, match=r"^Cannot decode image file .*broken\.png") as caught:
            run(gen, verbose=0)
        assert_is_the_batch_error(caught.value)
        gen.on_epoch_end()


def test_an_error_of_the_model_is_left_as_tensorflow_raised_it(image_folder):
    """Only the exception a batch raised replaces TensorFlow's error."""
    import tensorflow as tf

    gen = folder_gen(image_folder)

    def refuse(x):
        tf.debugging.assert_less(tf.reduce_sum(x), -1.0, message="the model refuses")
        return x

    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Lambda(refuse),
                              keras.layers.Flatten(), keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(tf.errors.InvalidArgumentError, match="the model refuses"):
        model.fit(gen, epochs=1, verbose=0)


def test_a_corrupt_file_in_the_validation_data_ends_fit_with_kerasgens_own_error(
        image_folder, tmp_path):
    train = folder_gen(image_folder, shuffle=False)
    validation = broken_folder_gen(image_folder)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    saved = tmp_path / "model.keras"
    with pytest.raises(ValueError, match=r"^Cannot decode image file .*broken\.png") as caught:
        model.fit(train, epochs=2, verbose=0, shuffle=False, validation_data=validation,
                  callbacks=[keras.callbacks.ModelCheckpoint(saved)])
    assert_is_the_batch_error(caught.value)
    assert not saved.exists()  # no checkpoint of an epoch whose validation failed
