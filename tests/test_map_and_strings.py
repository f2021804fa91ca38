"""tf.data's `.map` for kerasgen generators (`kg.augment.map_batch`), and batches of
strings in `model.fit` (an error naming what works, on every backend), trained through
`model.fit` on the backend the suite runs on."""

import importlib.util

import keras
import numpy as np
import pytest

import kerasgen as kg

BACKEND = keras.backend.backend()


def two_output_model():
    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(4, activation="relu")(inputs)
    model = keras.Model(inputs, {"kind": keras.layers.Dense(2, name="kind")(hidden),
                                 "size": keras.layers.Dense(1, name="size")(hidden)})
    model.compile("adam", {"kind": keras.losses.SparseCategoricalCrossentropy(
        from_logits=True), "size": "mse"})
    return model


def test_map_batch_reshapes_targets_for_a_two_output_model():
    """A (n, 2) target array split into the model's two named outputs, as a tf.data
    `.map(lambda x, y: (x, {"kind": y[:, 0], "size": y[:, 1]}))` would."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 3)).astype("float32")
    y = np.stack([(x[:, 0] > 0).astype("float32"), x[:, 1]], axis=1)
    to_outputs = kg.augment.map_batch(lambda x, y: (x, {"kind": y[:, 0], "size": y[:, 1]}))
    gen = kg.ArrayGenerator(x, y, batch_size=8, seed=0, batch_augment=to_outputs)
    bx, by = gen[0]
    rows = gen.epoch_plan()[:8]
    assert np.array_equal(bx, x[rows])
    assert np.array_equal(by["kind"], y[rows, 0]) and np.array_equal(by["size"], y[rows, 1])
    history = two_output_model().fit(gen, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_map_batch_is_kept_by_the_validation_split(tmp_path):
    """A map draws nothing: split()'s validation generator keeps it (a random step
    would be dropped), so both generators give the model one structure."""
    from .conftest import write_image

    for c in ("cat", "dog"):
        for i in range(5):
            write_image(str(tmp_path / c / f"{i}.png"), seed=i)
    pair = kg.augment.map_batch(lambda x, y: (x, {"label": y, "copy": y}))
    train, val = kg.ImageFolderGenerator.split(
        tmp_path, validation_split=0.4, seed=1, image_size=(8, 8), batch_size=4,
        batch_augment=[pair], verbose=0)
    assert set(train[0][1]) == set(val[0][1]) == {"label", "copy"}
    assert kg.augment.deterministic(pair) and repr(pair).startswith("map_batch(")


def test_map_batch_without_targets_and_its_errors():
    gen = kg.ArrayGenerator(np.arange(12.0).reshape(6, 2), batch_size=3, shuffle=False,
                            batch_augment=kg.augment.map_batch(lambda x: x * 2))
    assert np.array_equal(gen[1], np.arange(6.0, 12.0).reshape(3, 2) * 2)
    with pytest.raises(TypeError, match=r"`fn` must be a callable fn\(x, y\)"):
        kg.augment.map_batch("not a function")
    bad = kg.ArrayGenerator(np.zeros((4, 2)), np.zeros(4), batch_size=2,
                            batch_augment=kg.augment.map_batch(lambda x, y: x))
    with pytest.raises(TypeError, match=r"must return the batch's \(x, y\).*ndarray"):
        bad[0]


TEXTS = np.array(["good movie", "bad film", "great acting", "awful plot"] * 8)
SCORES = np.array([1.0, 0.0, 1.0, 0.0] * 8, "float32")


def vectorizer():
    layer = keras.layers.TextVectorization(max_tokens=20, output_sequence_length=4)
    layer.adapt(TEXTS)
    return layer


def token_model(text_input=False):
    model = keras.Sequential(([keras.Input((1,), dtype="string"), vectorizer()]
                              if text_input else [keras.Input((4,), dtype="int32")])
                             + [keras.layers.Embedding(20, 4),
                                keras.layers.GlobalAveragePooling1D(),
                                keras.layers.Dense(1)])
    model.compile("adam", "mse")
    return model


def test_string_batches_in_fit_name_what_works():
    """Keras's PyDataset adapter cannot carry strings ("Invalid dtype: str..."): fit says
    so, names the array, and names the two paths that work, on every backend."""
    gen = kg.ArrayGenerator(TEXTS, SCORES, dtype=None, batch_size=8)
    assert gen[0][0].dtype.kind == "U"  # outside fit, strings are served as they are
    with pytest.raises(TypeError, match=r"x holds strings \(dtype <U12\).*only numbers.*"
                                        r"gen\.to_tf_dataset\(\).*kg\.augment\.map_batch"):
        token_model().fit(gen, epochs=1, verbose=0)
    plain = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    plain.compile("sgd", "mse")
    with pytest.raises(TypeError, match=r"y\['text'\] holds strings"):
        plain.fit(kg.ArrayGenerator(np.zeros((32, 1)), {"text": TEXTS}, batch_size=8),
                  verbose=0)


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TextVectorization runs on tf.data")
def test_the_named_paths_train():
    """Both paths the error names: strings to ids in the generator (any backend), and the
    tf.data form with the vectorizer in the model (TensorFlow)."""
    layer = vectorizer()
    to_ids = kg.augment.map_batch(
        lambda x, y: (keras.ops.convert_to_numpy(layer(x)), y))
    gen = kg.ArrayGenerator(TEXTS, SCORES, dtype=None, batch_size=8, batch_augment=to_ids)
    history = token_model().fit(gen, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    if BACKEND == "tensorflow":
        strings = kg.ArrayGenerator(TEXTS[:, None], SCORES, dtype=None, batch_size=8)
        history = token_model(text_input=True).fit(strings.to_tf_dataset(epochs=2),
                                                   steps_per_epoch=len(strings), epochs=2,
                                                   verbose=0, shuffle=False)
        assert np.isfinite(history.history["loss"]).all()


def test_map_batch_may_return_backend_tensors():
    """A map that returns the backend's tensors (a vectorizer's output, say) is served
    and trained on as it is: the string check looks at NumPy arrays only."""
    x = np.random.default_rng(0).standard_normal((32, 3)).astype("float32")
    gen = kg.ArrayGenerator(x, x[:, 0], batch_size=8, batch_augment=kg.augment.map_batch(
        lambda x, y: (keras.ops.convert_to_tensor(x), y)))
    assert keras.ops.is_tensor(gen[0][0])
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    assert np.isfinite(model.fit(gen, epochs=1, verbose=0).history["loss"]).all()


def test_map_batch_makes_targets_for_a_batch_without_them():
    """tf.data's time-series tutorial: windows without targets, split by a map into
    (inputs, labels), as Keras reads a 2-tuple element."""
    series = np.sin(np.arange(400) / 10.0).astype("float32")[:, None]
    split = kg.augment.map_batch(lambda w: (w[:, :-1], w[:, -1]))
    gen = kg.timeseries_dataset_from_array(series, None, sequence_length=9, batch_size=32,
                                           format="kerasgen", batch_augment=split)
    inputs, labels = gen[0]
    assert inputs.shape == (32, 8, 1) and labels.shape == (32, 1)
    assert np.array_equal(labels, series[8:40])
    model = keras.Sequential([keras.Input((8, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.02), "mse")
    history = model.fit(gen, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_strings_are_refused_in_every_fit_evaluate_and_predict():
    """Also where Keras takes no first look (a model built already on JAX and torch),
    and naming the array within a tuple of inputs."""
    texts = kg.ArrayGenerator(np.array([["a", "b"]] * 16), np.zeros(16), dtype=None,
                              batch_size=8, shuffle=False)
    for method in ("fit", "evaluate", "predict"):
        # a model built already (an exception inside JAX's fit leaves a model unusable:
        # each call gets its own)
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        model.fit(np.zeros((8, 2), "float32"), np.zeros(8, "float32"), verbose=0)
        with pytest.raises(TypeError, match=r"x holds strings"):
            getattr(model, method)(texts, verbose=0)
    from kerasgen import _keras_compat

    batch = ((np.zeros(3), np.array(["a"])), np.zeros(3))
    assert _keras_compat._strings_in(batch)[0] == "x[1]"
    assert _keras_compat._strings_in(np.array([1, "a"], dtype=object))[0] == "x"
