"""ArrayGenerator(sparse=True): the rows of a scipy.sparse x batched as CSR matrices, fed
by Keras to a `keras.Input(sparse=True)` model (tf.SparseTensor on TensorFlow, BCOO on
JAX), equal made dense to the sparse=False batches (SMOTE's synthetic rows included)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import kerasgen as kg

sp = pytest.importorskip("scipy.sparse")

BACKEND = keras.backend.backend()
needs_sparse_backend = pytest.mark.skipif(
    BACKEND not in ("tensorflow", "jax"),
    reason=f"the {BACKEND} backend takes no sparse inputs")


def data(n=90, d=40, seed=0, dtype=np.float32):
    """A sparse x (about 10% stored) and imbalanced 0/1 labels (a third are 1)."""
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((n, d)) < 0.1, rng.random((n, d)) * 4, 0).astype(dtype)
    y = (np.arange(n) % 3 == 0).astype("int64")
    return sp.csr_matrix(dense), dense, y


def batches(gen):
    return [gen[b] for b in range(len(gen))]


def model_for(d, outputs=1):
    inputs = keras.Input(shape=(d,), sparse=True)
    model = keras.Model(inputs, keras.layers.Dense(outputs, activation="sigmoid")(inputs))
    model.compile("adam", "binary_crossentropy")
    return model


@needs_sparse_backend
@pytest.mark.parametrize("options", [
    dict(),
    dict(sampler=kg.samplers.SMOTE(k_neighbors=3)),
    dict(sampler=kg.samplers.RandomOverSampler()),
    dict(dtype="uint8"),
], ids=["plain", "smote", "oversample", "uint8"])
def test_sparse_batches_equal_dense_batches(options):
    x, _, y = data(dtype=np.float64 if options else np.float32)
    if options.get("dtype") == "uint8":
        x = x.ceil()  # whole numbers 0..4
    sparse = kg.ArrayGenerator(x, y, batch_size=16, seed=4, label_mode="binary",
                               sparse=True, **options)
    dense = kg.ArrayGenerator(x, y, batch_size=16, seed=4, label_mode="binary", **options)
    assert len(sparse) == len(dense)
    for epoch in range(2):
        for (xs, ys), (xd, yd) in zip(batches(sparse), batches(dense)):
            assert sp.issparse(xs) and xs.format == "csr" and xs.has_canonical_format
            assert xs.dtype == xd.dtype == np.dtype(options.get("dtype", "float32"))
            assert np.array_equal(xs.toarray(), xd)
            assert np.array_equal(ys, yd)
        sparse.on_epoch_end()
        dense.on_epoch_end()
    assert epoch == 1


@needs_sparse_backend
def test_smote_rows_stay_sparse_and_blend_integer_rows():
    """SMOTE's synthetic rows are sparse too, stored only where either parent stores a
    value; integer matrices are rounded as dense batches are."""
    x, dense, y = data(dtype=np.int32)
    options = dict(batch_size=30, seed=2, label_mode="int", dtype=None,
                   sampler=kg.samplers.SMOTE(k_neighbors=2))
    sparse = kg.ArrayGenerator(x, y, sparse=True, **options)
    plain = kg.ArrayGenerator(x, y, **options)
    labels = []
    for (xs, ys), (xd, _) in zip(batches(sparse), batches(plain)):
        assert xs.dtype == np.int32 and np.array_equal(xs.toarray(), xd)
        assert xs.nnz <= x.nnz  # far fewer than a dense batch's values
        labels.append(ys)
    counts = np.bincount(np.concatenate(labels))
    assert counts[0] == counts[1]  # synthetic rows were made


@needs_sparse_backend
def test_dict_x_keeps_each_sparse_entry_sparse():
    x, dense, y = data()
    side = np.arange(len(y), dtype=np.float32)[:, None]
    gen = kg.ArrayGenerator({"words": x, "side": side}, y, batch_size=10, shuffle=False,
                            sparse=True)
    xb, _ = gen[1]
    assert sp.issparse(xb["words"]) and isinstance(xb["side"], np.ndarray)
    assert np.array_equal(xb["words"].toarray(), dense[10:20])
    assert np.array_equal(xb["side"], side[10:20])


@needs_sparse_backend
def test_fit_and_predict_take_sparse_batches():
    x, dense, y = data(d=25)
    gen = kg.ArrayGenerator(x, y, batch_size=16, seed=1, label_mode="binary", sparse=True,
                            sampler=kg.samplers.SMOTE(k_neighbors=3))
    model = model_for(25)
    history = model.fit(gen, validation_data=kg.ArrayGenerator(
        x, y, batch_size=32, shuffle=False, label_mode="binary", sparse=True),
        epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert np.isfinite(history.history["val_loss"]).all()
    unlabeled = kg.ArrayGenerator(x, batch_size=32, shuffle=False, sparse=True)
    assert isinstance(unlabeled[0], tuple) and sp.issparse(unlabeled[0][0])
    predicted = model.predict(unlabeled, verbose=0)
    assert predicted.shape == (90, 1)
    np.testing.assert_allclose(predicted, model.predict(dense, verbose=0), atol=1e-5)


@needs_sparse_backend
def test_keras_feeds_the_backends_sparse_type():
    """What the model receives: a tf.SparseTensor on TensorFlow, a BCOO on JAX."""
    x, _, y = data(d=12)
    seen = []

    class Record(keras.layers.Layer):
        def call(self, inputs):
            seen.append(type(inputs).__name__)
            return keras.ops.ones((keras.ops.shape(inputs)[0], 1))

    inputs = keras.Input(shape=(12,), sparse=True)
    outputs = keras.layers.Dense(1)(inputs) + Record()(inputs)
    model = keras.Model(inputs, outputs)
    model.compile("sgd", "mse", run_eagerly=BACKEND == "tensorflow")
    gen = kg.ArrayGenerator(x, y, batch_size=30, shuffle=False, sparse=True)
    model.fit(gen, epochs=1, verbose=0)
    expected = "SparseTensor" if BACKEND == "tensorflow" else "BCOO"
    assert expected in seen


@needs_sparse_backend
def test_worker_processes_and_threads_serve_the_same_sparse_batches():
    x, _, y = data(n=64, d=20)
    options = dict(batch_size=8, seed=6, label_mode="binary", sparse=True)
    alone = batches(kg.ArrayGenerator(x, y, **options))
    for workers in (dict(workers=2), dict(workers=2, use_multiprocessing=True)):
        gen = kg.ArrayGenerator(x, y, **options, **workers)
        served = batches(gen)
        for (xa, ya), (xw, yw) in zip(alone, served):
            assert sp.issparse(xw) and np.array_equal(xa.toarray(), xw.toarray())
            assert np.array_equal(ya, yw)
        model = model_for(20)
        assert np.isfinite(model.fit(gen, epochs=1, verbose=0).history["loss"]).all()


@needs_sparse_backend
def test_batch_augment_receives_the_sparse_batch():
    x, _, y = data()
    received = []

    def scale(xb, yb, rng):
        received.append(type(xb).__name__)
        return xb * 2, yb

    gen = kg.ArrayGenerator(x, y, batch_size=16, shuffle=False, sparse=True,
                            batch_augment=scale)
    xb, _ = gen[0]
    assert received == ["csr_matrix"]
    assert np.array_equal(xb.toarray(), x[:16].toarray() * 2)


def test_sparse_refusals_name_the_argument():
    x, dense, y = data()
    with pytest.raises(ValueError, match=r"`sparse=True`.*no scipy.sparse array.*ndarray"):
        kg.ArrayGenerator(dense, y, sparse=True)
    with pytest.raises(TypeError, match=r"`sparse` must be True or False. Received: "
                                        r"sparse='yes'"):
        kg.ArrayGenerator(x, y, sparse="yes")
    if BACKEND not in ("tensorflow", "jax"):
        with pytest.raises(ValueError, match=rf"the '{BACKEND}' backend does not.*"
                                             "Use sparse=False"):
            kg.ArrayGenerator(x, y, sparse=True)
        return
    with pytest.raises(ValueError, match=r"`augment`.*batch_augment"):
        kg.ArrayGenerator(x, y, sparse=True, augment=lambda row, rng: row)
    with pytest.raises(ValueError, match=r"label_mode='input'.*sparse=False"):
        kg.ArrayGenerator(x, sparse=True, label_mode="input")
    with pytest.raises(ValueError, match=r"`dtype` must be one that scipy.sparse.*"
                                         r"Received: dtype='float16' with sparse=True"):
        kg.ArrayGenerator(x, y, sparse=True, dtype="float16")
    gen = kg.ArrayGenerator(x, y, sparse=True)
    with pytest.raises(ValueError, match=r"to_tf_dataset\(\).*sparse=True"):
        gen.to_tf_dataset()


def test_backend_without_sparse_inputs_is_refused(monkeypatch):
    """On torch (Keras: sparse inputs unsupported) sparse=True is an error naming the
    backend and saying what works; sparse=False still makes dense rows."""
    monkeypatch.setattr(keras.backend, "backend", lambda: "torch")
    x, dense, y = data()
    with pytest.raises(ValueError, match=r"the 'torch' backend does not.*"
                                         r"KERAS_BACKEND='torch'.*Use sparse=False"):
        kg.ArrayGenerator(x, y, sparse=True)
    gen = kg.ArrayGenerator(x, y, batch_size=8, shuffle=False)
    assert np.array_equal(gen[0][0], dense[:8])
