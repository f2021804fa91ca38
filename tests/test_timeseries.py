"""Windows of a series: kg.TimeseriesGenerator (Keras 2's class) and
kg.timeseries_dataset_from_array (Keras 3's function): Keras's values, views instead of
copies, seeded epochs, samplers, workers, resume, training through `model.fit` on the
backend the suite runs on, and without TensorFlow. Keras's own tests of the function run
in test_keras_peer.py."""

import json
import pickle
import tracemalloc

import keras
import numpy as np
import pytest

import kerasgen as kg

from .test_backends import (FIRST_EPOCH, NO_TENSORFLOW, batches_of_epochs, fit_recorder,
                            jax_installed, run_python)


def series(steps=200, features=3):
    """A series whose step t holds t, t + 0.25, t + 0.5, ... (each value says its step)."""
    return np.arange(steps, dtype="float64")[:, None] + 0.25 * np.arange(features)


# --- Keras 2's TimeseriesGenerator ---------------------------------------------------

def test_keras2_docstring_example():
    """The example of Keras 2's TimeseriesGenerator docstring, as written there."""
    data = np.array([[i] for i in range(50)])
    targets = np.array([[i] for i in range(50)])
    data_gen = kg.TimeseriesGenerator(data, targets, length=10, sampling_rate=2,
                                      batch_size=2)
    assert len(data_gen) == 20
    x, y = data_gen[0]
    assert np.array_equal(x, np.array([[[0], [2], [4], [6], [8]],
                                       [[1], [3], [5], [7], [9]]]))
    assert np.array_equal(y, np.array([[10], [11]]))


@pytest.mark.parametrize("length,rate,stride,start,end,batch,reverse", [
    (10, 1, 1, 0, None, 16, False),
    (10, 3, 2, 5, 150, 7, False),   # ceil(10 / 3) = 4 steps a window
    (7, 2, 5, 0, 199, 32, True),
    (1, 1, 1, 198, None, 4, False),  # one window, the last row
])
def test_windows_are_keras2s_rows(length, rate, stride, start, end, batch, reverse):
    """Every window is data[r - length:r:rate] (reversed with reverse=True) and its target
    targets[r], for the rows r Keras 2 reads: start + length .. end, stride apart, and
    len() is Keras 2's."""
    data = series()
    targets = np.arange(200) * 10
    gen = kg.TimeseriesGenerator(data, targets, length, sampling_rate=rate, stride=stride,
                                 start_index=start, end_index=end, batch_size=batch,
                                 reverse=reverse, dtype=None)
    last = len(data) - 1 if end is None else end
    rows = list(range(start + length, last + 1, stride))
    keras2_len = (last - (start + length) + batch * stride) // (batch * stride)
    assert len(gen) == keras2_len == -(-len(rows) // batch)
    xs, ys = zip(*(gen[b] for b in range(len(gen))))
    x, y = np.concatenate(xs), np.concatenate(ys)
    expected = np.stack([data[r - length:r:rate] for r in rows])
    assert np.array_equal(x, expected[:, ::-1] if reverse else expected)
    assert np.array_equal(y, targets[rows])
    assert (gen.start_index, gen.end_index) == (start + length, last)  # Keras 2's


def test_windows_are_views_of_the_series():
    """The windows are a view of the series; a batch is the only copy made, and the
    generator pickles as the series, not as its windows written out."""
    data = series(20_000, 8).astype("float32")
    gen = kg.TimeseriesGenerator(data, data[:, 0], length=500, batch_size=64)
    assert np.shares_memory(gen.source.x, data)
    assert gen.source.x.shape == (len(data) - 500, 500, 8)
    written_out = gen.source.x.size * 4  # 316 MB as one window array
    tracemalloc.start()
    x, _ = gen[3]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 4 * x.nbytes and 50 * peak < written_out
    assert len(pickle.dumps(gen.source)) < 1.2 * data.nbytes  # the series and targets
    assert np.array_equal(pickle.loads(pickle.dumps(gen))[3][0], x)


def test_shuffle_draws_every_window_once_per_epoch_from_the_seed():
    data = series(100, 1)
    make = lambda: kg.TimeseriesGenerator(data, np.arange(100), length=5, shuffle=True,  # noqa: E731
                                          seed=7, batch_size=8, dtype=None)
    gen, again = make(), make()

    def epoch(g):
        return np.concatenate([g[b][1] for b in range(len(g))])

    first = epoch(gen)
    assert sorted(first) == list(range(5, 100))  # every window's target, once
    assert np.array_equal(first, epoch(again))  # the seed decides the order
    gen.on_epoch_end()
    second = epoch(gen)
    assert sorted(second) == list(range(5, 100)) and not np.array_equal(first, second)
    for b in range(len(gen)):  # a window's first step is its target's row - length
        x, y = gen[b]
        assert np.array_equal(x[:, 0, 0], y - 5)


def test_resume_from_state_mid_epoch():
    data = series(300, 2)
    gen = kg.TimeseriesGenerator(data, np.arange(300), length=12, shuffle=True, seed=3,
                                 batch_size=16)
    gen.on_epoch_end()
    for b in range(5):
        gen[b]
    state = gen.get_state()
    expected = [gen[b] for b in range(5, len(gen))]
    resumed = kg.TimeseriesGenerator(data, np.arange(300), length=12, shuffle=True, seed=3,
                                     batch_size=16)
    resumed.set_state(state)
    for b, (x, y) in zip(range(5, len(gen)), expected):
        rx, ry = resumed[b]
        assert np.array_equal(rx, x) and np.array_equal(ry, y)


def test_class_targets_take_samplers():
    """Windows labelled by a class (activity recognition, say) are balanced by a sampler
    like any labelled samples: the rare class drawn as often as the common one."""
    data = series(400, 2)
    classes = (np.arange(400) % 10 == 0).astype(int)  # class 1 at one row in ten
    gen = kg.TimeseriesGenerator(data, classes, length=8, label_mode="int", shuffle=True,
                                 seed=0, batch_size=32,
                                 sampler=kg.samplers.RandomOverSampler(seed=0))
    ys = np.concatenate([gen[b][1] for b in range(len(gen))])
    assert np.bincount(ys)[0] == np.bincount(ys)[1]
    x, y = gen[0]
    rows = x[:, 0, 0].astype(int) + 8  # the row each window is the history of
    assert np.array_equal(y, classes[rows])


@pytest.mark.parametrize("workers", [dict(workers=2),
                                     dict(workers=2, use_multiprocessing=True)])
def test_fit_trains_on_the_same_batches_with_workers(workers):
    """fit with worker threads or processes trains on exactly the batches one worker
    makes (the processes get the series, never its windows, and make them there)."""
    data = series(600, 4)
    make = lambda **kw: kg.TimeseriesGenerator(  # noqa: E731
        data, np.arange(600) % 3, length=30, stride=2, shuffle=True, seed=5,
        batch_size=64, label_mode="int", **kw)
    seen = fit_recorder(make(**workers), epochs=2)
    expected = batches_of_epochs(make(), FIRST_EPOCH, 2)
    assert len(seen) == len(expected) == 2 * 5
    for (x, y), (ex, ey) in zip(seen, expected):
        assert np.array_equal(x, ex) and np.array_equal(y, ey)


def test_fit_learns_a_windowed_regression():
    """A windowed regression trains through model.fit: the next step of a noisy sine from
    the 24 before it, loss well below predicting the mean."""
    rng = np.random.default_rng(0)
    t = np.arange(3000)
    wave = (np.sin(t / 9.0) + 0.05 * rng.standard_normal(len(t))).astype("float32")
    train = kg.TimeseriesGenerator(wave[:, None], wave, length=24, end_index=2399,
                                   shuffle=True, seed=0, batch_size=64)
    val = kg.TimeseriesGenerator(wave[:, None], wave, length=24, start_index=2400,
                                 batch_size=64)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((24, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.01), "mse")
    history = model.fit(train, validation_data=val, epochs=4, verbose=0)
    assert history.history["val_loss"][-1] < 0.1 * np.var(wave)


def test_errors_name_the_argument():
    data = series(50, 1)
    with pytest.raises(ValueError, match=r"`data` and `targets` must have the same length"
                                         r".*len\(data\)=50, len\(targets\)=49"):
        kg.TimeseriesGenerator(data, np.arange(49), length=5)
    with pytest.raises(ValueError, match=r"`start_index \+ length` must be at most "
                                         r"`end_index`.*40 \+ 10 > 49"):
        kg.TimeseriesGenerator(data, np.arange(50), length=10, start_index=40)
    with pytest.raises(ValueError, match=r"`end_index` must be a step of `data`.*"
                                         r"end_index=50"):
        kg.TimeseriesGenerator(data, np.arange(50), length=10, end_index=50)
    for name in ("length", "sampling_rate", "stride"):
        with pytest.raises(ValueError, match=rf"`{name}` must be an integer of at least 1"
                                             rf"\. Received: {name}=0"):
            kg.TimeseriesGenerator(data, np.arange(50), **{"length": 5, name: 0})
    with pytest.raises(ValueError, match=r"`label_mode` must be one of"):
        kg.TimeseriesGenerator(data, np.arange(50), length=5, label_mode="mask")
    with pytest.raises(TypeError, match=r"`data` must be an array with time on axis 0"):
        kg.TimeseriesGenerator(3.0, None, length=5)
    with pytest.raises(ValueError, match=r"`data` holds text.*row 0 = 'a'"):
        kg.TimeseriesGenerator(np.array(["a"] * 20), None, length=5)
    with pytest.raises(ValueError, match=r"`data` must hold values that dtype='float16' "
                                         r"can hold.*data\[3\] holds 1e\+30"):
        kg.TimeseriesGenerator(np.where(np.arange(20) == 3, 1e30, 0.0), None, length=5,
                               dtype="float16")
    with pytest.raises(TypeError, match="TimeseriesGenerator.*sequence_length"):
        kg.TimeseriesGenerator(data, None, length=5, sequence_length=3)


def test_no_targets_gives_windows_alone():
    gen = kg.TimeseriesGenerator(series(30, 2), None, length=4, batch_size=8)
    x = gen[0]
    assert not isinstance(x, tuple) and x.shape == (8, 4, 2)
    assert gen.source.describe(2) == "window 2 (steps 2 to 5 of the series)"


# --- Keras 3's timeseries_dataset_from_array ------------------------------------------

GEOMETRIES = [
    dict(sequence_length=9, batch_size=5),
    dict(sequence_length=9, batch_size=5, sampling_rate=2, sequence_stride=3),
    dict(sequence_length=4, batch_size=7, start_index=10, end_index=90, sequence_stride=2),
    dict(sequence_length=12, batch_size=16, sampling_rate=3, start_index=5),
]


@pytest.mark.parametrize("kwargs", GEOMETRIES)
@pytest.mark.parametrize("with_targets", [True, False])
def test_function_gives_kerass_batches(kwargs, with_targets):
    """shuffle=False: batch for batch the values, shapes and dtypes of Keras's own
    function (format="kerasgen" and "tf")."""
    data = series(100, 2)
    targets = np.arange(100) * 3 if with_targets else None
    keras_batches = list(keras.utils.timeseries_dataset_from_array(
        data, targets, **kwargs).as_numpy_iterator())
    for fmt in ("kerasgen", "tf"):
        made = kg.timeseries_dataset_from_array(data, targets, format=fmt, **kwargs)
        ours = [made[b] for b in range(len(made))] if fmt == "kerasgen" else list(
            made.as_numpy_iterator())
        assert len(ours) == len(keras_batches)
        for mine, theirs in zip(ours, keras_batches):
            mine = mine if with_targets else (mine,)
            theirs = theirs if with_targets else (theirs,)
            for a, b in zip(mine, theirs):
                assert a.dtype == b.dtype and np.array_equal(a, b)


def test_function_regression_targets_ahead():
    """Keras's example 2: data[:-10] and data[10:] predict the step 10 ahead."""
    data = np.arange(200, dtype="float32")
    made = kg.timeseries_dataset_from_array(data[:-10], data[10:], sequence_length=10,
                                            format="kerasgen")
    inputs, targets = made[0]
    assert np.array_equal(inputs[0], data[:10]) and targets[0] == data[10]
    assert len(made.source) == 181  # the windows that have a target


def test_function_unbatched_and_shuffled_passes():
    """batch_size=None yields single windows; with shuffle each pass over the dataset is
    a new epoch, seeded: a second dataset of the same seed gives the same passes."""
    data = np.arange(60)
    make = lambda: kg.timeseries_dataset_from_array(  # noqa: E731
        data, data * 2, sequence_length=5, batch_size=None, shuffle=True, seed=11)
    ds, again = make(), make()
    first = [x.tolist() for x, _ in ds.as_numpy_iterator()]
    second = [x.tolist() for x, _ in ds.as_numpy_iterator()]
    assert len(first) == 56 and sorted(first) == sorted(second) and first != second
    assert first == [x.tolist() for x, _ in again.as_numpy_iterator()]
    for x, y in ds.take(3).as_numpy_iterator():
        assert x.shape == (5,) and y == 2 * x[0]


def test_function_fits_with_tfdata_dataset():
    data = np.sin(np.arange(600) / 7.0).astype("float32")
    ds = kg.timeseries_dataset_from_array(data[:-1, None], data[1:], sequence_length=16,
                                          batch_size=32, shuffle=True, seed=1)
    model = keras.Sequential([keras.Input((16, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.02), "mse")
    history = model.fit(ds, epochs=3, verbose=0, shuffle=False)
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert ds.generator.epoch >= 2


@pytest.mark.parametrize("kwargs,message", [
    (dict(sequence_length=0), r"`sequence_length` must be an integer of at least 1"),
    (dict(sequence_length=60), r"`sequence_length` must leave room for one window.*"
                               r"= 60 steps, and 50 are there"),
    (dict(end_index=0), r"`end_index` must be an integer of at least 1"),
    (dict(start_index=20, end_index=10), r"`end_index` must be higher than `start_index`"),
    (dict(targets=np.arange(30), start_index=25),
     r"`targets` must hold the target of every window"),
    (dict(batch_size=None, format="kerasgen"), r"`batch_size` must be a positive integer "
                                               r"with format='kerasgen'"),
    (dict(format="torch"), r"`format` must be 'tf'"),
])
def test_function_errors_name_the_argument(kwargs, message):
    kwargs = dict(dict(sequence_length=5, targets=None), **kwargs)
    with pytest.raises(ValueError, match=message):
        kg.timeseries_dataset_from_array(np.arange(50), **kwargs)


# --- without TensorFlow ---------------------------------------------------------------

WITHOUT_TENSORFLOW = NO_TENSORFLOW + """
    import keras
    import numpy as np
    import kerasgen as kg

    wave = np.sin(np.arange(1200) / 8.0).astype("float32")
    gen = kg.TimeseriesGenerator(wave[:, None], wave, length=16, shuffle=True, seed=0,
                                 batch_size=32, workers=2)
    model = keras.Sequential([keras.Input((16, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.02), "mse")
    losses = model.fit(gen, epochs=3, verbose=0).history["loss"]
    grain_batches = list(kg.timeseries_dataset_from_array(
        wave[:-1], wave[1:], sequence_length=16, batch_size=64, format="grain"))
    print(json.dumps({"backend": keras.backend.backend(), "losses": losses,
                      "grain": [len(b[0]) for b in grain_batches],
                      "tensorflow_loaded": "tensorflow" in sys.modules}))
"""


@pytest.mark.skipif(not jax_installed(), reason="needs JAX: pip install 'jax[cpu]'")
def test_trains_on_jax_without_tensorflow():
    pytest.importorskip("grain")
    stdout, _ = run_python(WITHOUT_TENSORFLOW, "jax")
    result = json.loads(stdout.splitlines()[-1])
    assert result["backend"] == "jax" and not result["tensorflow_loaded"]
    assert result["losses"][-1] < result["losses"][0]
    assert sum(result["grain"]) == 1199 - 15 and result["grain"][0] == 64


def test_a_sampler_and_processes_never_write_the_windows_out():
    """With a sampler the generator (its order holds the feature space) still pickles as
    the series: SMOTE and imbalanced-learn's samplers gather windows when asked."""
    data = series(20_000, 8).astype("float32")
    classes = (np.arange(20_000) % 7 == 0).astype(int)
    for sampler in (kg.samplers.RandomOverSampler(seed=0), kg.samplers.SMOTE(seed=0)):
        gen = kg.TimeseriesGenerator(data, classes, length=500, label_mode="int",
                                     shuffle=True, seed=0, sampler=sampler)
        assert len(pickle.dumps(gen)) < 1.5 * data.nbytes  # not 300 MB of windows
        x, y = gen[0]
        assert x.shape == (128, 500, 8) and set(np.unique(y)) <= {0, 1}


def test_data_and_targets_are_kept_once():
    """A list (or a DataFrame) is held as the one array the windows view, not beside
    it."""
    data = [[float(i)] for i in range(5000)]
    gen = kg.TimeseriesGenerator(data, list(range(5000)), length=10)
    assert gen.data is gen.source.series and gen.targets is gen.source.targets
    assert len(pickle.dumps(gen)) < 2 * (gen.data.nbytes + gen.targets.nbytes)


@pytest.mark.parametrize("kwargs,message", [
    (dict(targets=np.array([])), r"`targets` must hold the target of every window"),
    (dict(batch_size=None, drop_remainder=True), r"`drop_remainder` drops the last partial "
                                                 r"batch.*batch_size=None"),
])
def test_function_refuses_what_would_lose_windows(kwargs, message):
    kwargs = dict(dict(sequence_length=5, targets=None), **kwargs)
    with pytest.raises(ValueError, match=message):
        kg.timeseries_dataset_from_array(np.arange(50), **kwargs)
