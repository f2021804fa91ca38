"""ArrayGenerator and the kg.Generator base: inputs, augmentation hook, argument checks."""

import numpy as np
import keras
import pytest

import kerasgen as kg


def test_any_rank_and_dtype():
    x = np.arange(5 * 4 * 3 * 2, dtype="int64").reshape(5, 4, 3, 2)
    gen = kg.ArrayGenerator(x, batch_size=2, shuffle=False)
    assert gen[0].dtype == np.float32 and gen[0].shape == (2, 4, 3, 2)  # x alone
    np.testing.assert_array_equal(gen[2], x[4:5])
    kept = kg.ArrayGenerator(x, batch_size=2, shuffle=False, dtype=None)[0][0]
    assert kept.dtype == np.int64


def test_dict_targets_for_multi_output():
    x = np.zeros((4, 2))
    y = {"cls": np.array([0, 1, 1, 0]), "box": np.ones((4, 4))}
    batch = kg.ArrayGenerator(x, y, batch_size=4, shuffle=False)[0]
    assert batch[1]["cls"].tolist() == [0, 1, 1, 0] and batch[1]["box"].shape == (4, 4)
    with pytest.raises(ValueError, match="dict of targets works with label_mode='raw'"):
        kg.ArrayGenerator(x, y, label_mode="categorical")


def test_sample_weight_follows_the_samples():
    x = np.arange(6, dtype="float32")[:, None]
    gen = kg.ArrayGenerator(x, np.zeros(6), sample_weight=np.arange(6) / 10, batch_size=3,
                            seed=2)
    xb, _, wb = gen[0]
    np.testing.assert_allclose(wb, xb[:, 0] / 10)


def test_augment_callable_is_seeded_per_epoch_and_position():
    def jitter(x, rng):
        return x + rng.normal(size=x.shape)

    x = np.zeros((8, 3), dtype="float32")
    a = kg.ArrayGenerator(x, batch_size=4, seed=1, augment=jitter)
    b = kg.ArrayGenerator(x, batch_size=4, seed=1, augment=jitter)
    np.testing.assert_array_equal(a[1][0], b[1][0])
    np.testing.assert_array_equal(a[1][0], a[1][0])
    first = a[1][0]
    a.on_epoch_end()
    assert not np.array_equal(a[1][0], first)


def test_custom_sample_with_its_own_target_and_shape_check():
    class Pairs(kg.Generator):
        def __init__(self, **kwargs):
            super().__init__(num_samples=6, **kwargs)

        def load_sample(self, index):
            return np.full((2,), index, "float32"), np.float32(index * 2)

    x, y = Pairs(batch_size=6, shuffle=False)[0]
    assert y.tolist() == [0, 2, 4, 6, 8, 10] and x.shape == (6, 2)
    with_labels = Pairs(batch_size=6, shuffle=False, labels=[0, 1] * 3, label_mode=None)
    assert with_labels[0][1].tolist() == [0, 2, 4, 6, 8, 10]
    assert with_labels.labels.tolist() == [0, 1] * 3
    with pytest.raises(ValueError, match=r"returned \(x, y\), but this generator also"):
        Pairs(batch_size=6, labels=[0, 1] * 3)[0]

    class Ragged(kg.Generator):
        def load_sample(self, index):
            return np.zeros(index + 1)

        def describe_sample(self, index):
            return f"record #{index}"

    with pytest.raises(ValueError, match=r"shape \(2,\) for record #1"):
        Ragged(num_samples=3, batch_size=3, shuffle=False)[0]

    class Lazy(kg.Generator):
        pass

    with pytest.raises(NotImplementedError, match="Lazy must implement load_sample"):
        Lazy(num_samples=2)[0]


@pytest.mark.parametrize("call,exc,match", [
    (lambda: kg.ArrayGenerator(np.zeros((4, 2)), np.zeros(3)), ValueError,
     r"same number of samples. Received: len\(x\)=4, len\(y\)=3"),
    (lambda: kg.ArrayGenerator(np.zeros((4, 2)), label_mode="int"), ValueError,
     "needs `y`"),
    (lambda: kg.ArrayGenerator({"a": np.zeros(4), "b": np.zeros(3)}), ValueError,
     "same number of samples"),
    (lambda: kg.ArrayGenerator(np.zeros((4, 2)), batch_size=2.5), ValueError,
     "`batch_size` must be a positive integer. Received: batch_size=2.5"),
    (lambda: kg.ArrayGenerator(np.zeros((4, 2)), workers=-1), ValueError,
     "`workers` must be a non-negative integer"),
    (lambda: kg.ArrayGenerator(np.zeros((4, 2)), max_queue_size=-1), ValueError,
     "`max_queue_size` must be a non-negative integer"),
    (lambda: kg.ArrayGenerator(np.zeros((4, 2)), seed=-1), ValueError,
     "`seed` must be a non-negative integer or None"),
    (lambda: kg.ArrayGenerator(np.zeros((4, 2)), batch_size=8, drop_remainder=True),
     ValueError, "would yield no batch"),
    (lambda: kg.ArrayGenerator(np.zeros((4, 2)), augment="flip"), TypeError,
     "`augment` must be None, an albumentations transform or a callable"),
    (lambda: kg.ArrayGenerator(np.zeros((4, 2)), sampler=object()), TypeError,
     "`sampler` must be None, a kg.samplers sampler"),
    (lambda: kg.ArrayGenerator(np.zeros((4, 2)), sample_weight=np.ones(3)), ValueError,
     r"`sample_weight` must have shape \(4,\)"),
    (lambda: kg.Generator(num_samples=3, labels=[0, 1]), ValueError,
     "one entry per sample"),
    (lambda: kg.Generator(num_samples=3, label_mode="int"), ValueError, "needs labels"),
    (lambda: kg.ArrayGenerator(np.zeros((4, 2)))["0"], TypeError, "must be an integer"),
])
def test_argument_checks(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_sampler_protocol_sets_the_epoch_plan():
    class EvenOnly:
        def plan(self, labels, seed, epoch):
            return np.flatnonzero(labels % 2 == 0)

    gen = kg.ArrayGenerator(np.arange(10.0)[:, None], np.arange(10), batch_size=4,
                            sampler=EvenOnly())
    assert len(gen) == 2
    assert np.concatenate([gen[i][0][:, 0] for i in range(2)]).tolist() == [0, 2, 4, 6, 8]


@pytest.mark.slow
def test_quickstart_demo_trains_from_an_image_folder(tmp_path):
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, os.path.join(root, "examples", "quickstart.py"), "--epochs", "2",
         "--data", str(tmp_path / "digits")],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.returncode == 0, out.stderr[-2000:]
    accuracy = float(out.stdout.split("validation accuracy: ")[1].split()[0])
    assert accuracy > 0.5  # 10 classes: chance is 0.1
    assert "classes: ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9']" in out.stdout


def ragged(*lengths):
    x = np.empty(len(lengths), dtype=object)
    for i, n in enumerate(lengths):
        x[i] = np.arange(float(n))
    return x


@pytest.mark.parametrize("x, match", [
    (ragged(3, 3, 3, 2, 3, 1), r"`x` must have one shape per row to be batched. Received: a "
                               r"ragged object array, row 0 of shape \(3,\), row 3 of shape "
                               r"\(2,\). Pad the rows"),
    (ragged(3, 3, 3, 3), r"`x` must be a numeric array, not an object array of arrays. "
                         r"Received: 4 rows of shape \(3,\) in an object array. Stack them "
                         r"into one array first: np.stack\(list\(x\)\)"),
    (np.array(["a cat", "a dog", "a fox", "an owl"]),
     r"`x` holds text that cannot be converted to dtype='float32'. Received: row 0 = "
     r"'a cat' \(x of dtype <U6\). Encode it as numbers first, or pass dtype=None"),
    (np.array([b"1", b"2", b"x", b"4"]), r"Received: row 2 = b'x' \(x of dtype \|S1\)"),
    (np.array([1, 2.5, 3, "four", 5], dtype=object), r"holds text .* row 3 = 'four'"),
    (np.array([[1, 2], [3, "x"], [5, 6]], dtype=object),
     r"holds text .* row 1 = array\(\[3, 'x'\], dtype=object\)"),
    ({"a": np.zeros((4, 2)), "text": np.array(["a", "b", "c", "d"])},
     r"`x\['text'\]` holds text that cannot be converted to dtype='float32'"),
])
def test_x_that_batches_could_not_convert_is_refused_at_construction(x, match):
    """Ragged object arrays and strings as x used to fail at the first batch."""
    with pytest.raises(ValueError, match=match):
        kg.ArrayGenerator(x, batch_size=2)


def test_x_of_strings_or_objects_that_do_convert_is_still_accepted():
    numeric_text = kg.ArrayGenerator(np.array(["1.5", "2", "3"]), batch_size=3,
                                     shuffle=False)
    np.testing.assert_array_equal(numeric_text[0], np.float32([1.5, 2, 3]))
    numbers = kg.ArrayGenerator(np.array([1, 2.5, 3], dtype=object), batch_size=3,
                                shuffle=False)
    np.testing.assert_array_equal(numbers[0], np.float32([1, 2.5, 3]))
    text = np.array(["a cat", "a dog", "an owl"])  # for a model that takes strings
    kept = kg.ArrayGenerator(text, np.array([0, 1, 0]), batch_size=3, shuffle=False,
                             dtype=None)
    assert list(kept[0][0]) == list(text) and kept[0][0].dtype == text.dtype
    padded = kg.ArrayGenerator(  # an augment that gives every row one shape
        ragged(3, 1, 2), batch_size=3, shuffle=False,
        augment=lambda x, rng: np.pad(x, (0, 3 - len(x))))
    np.testing.assert_array_equal(padded[0], np.float32([[0, 1, 2], [0, 0, 0], [0, 1, 0]]))
    as_given = kg.ArrayGenerator(ragged(3, 1), batch_size=2, shuffle=False, dtype=None)
    assert [len(row) for row in as_given[0]] == [3, 1]  # dtype=None: rows as they are


# ----------------------------------------------------------------- one type per batch
class Samples(kg.Generator):
    """x and y exactly as given, one (x, y) pair per sample; x kept as it is (dtype=None)
    unless a dtype is passed."""

    def __init__(self, xs, ys, **kwargs):
        self.xs, self.ys = xs, ys
        kwargs.setdefault("dtype", None)
        super().__init__(num_samples=len(xs), shuffle=False, **kwargs)

    def load_sample(self, index):
        return self.xs[index], self.ys[index]

    def describe_sample(self, index):
        return f"record #{index}"


def test_float_targets_after_an_int_one_keep_their_fractions_through_fit():
    """The batch used to take sample 0's type: [3, 2.5, 0.7, 1.9] came out [3, 2, 0, 1]."""
    import keras

    targets = [3, 2.5, 0.7, 1.9]
    gen = Samples([np.float32([k, 1]) for k in range(4)], targets, batch_size=4)
    y = gen[0][1]
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, np.array(targets))
    seen = []

    def loss(y_true, y_pred):
        seen.append(np.asarray(y_true).ravel())
        return keras.ops.mean((y_pred[:, 0] - keras.ops.cast(y_true, "float32")) ** 2)

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", loss, run_eagerly=True)
    model.fit(gen, epochs=1, verbose=0)
    np.testing.assert_array_equal(np.float32(seen[0]), np.float32(targets))


@pytest.mark.parametrize("ys, expected", [
    ([True, 2, 3, 0], np.array([1, 2, 3, 0])),                         # bool, then int
    ([np.float32(0.5), 2 ** 30 + 1, 7, 8], np.array([0.5, 2 ** 30 + 1, 7, 8])),  # beyond float32
    ([np.uint8(200), np.int8(-3), 1, 2], np.array([200, -3, 1, 2])),  # neither holds both
    ([np.float16(0.5), np.float32(1 / 3), 0.1, 2], np.array([0.5, np.float32(1 / 3), 0.1, 2])),
])
def test_every_sample_keeps_its_value_in_the_type_that_holds_them_all(ys, expected):
    y = Samples(np.zeros((4, 2)), ys, batch_size=4)[0][1]
    assert y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)


def test_strings_of_growing_length_arrive_whole(tmp_path):
    """Strings were cut to the first one's length (329 characters became 255)."""
    texts = [("word " * (5 * k + 1)).strip() for k in range(6)]  # 4 to 129 characters
    for k, text in enumerate(texts):
        (tmp_path / f"{k}.txt").write_text(text)

    class Texts(kg.Generator):
        def __init__(self, **kwargs):
            super().__init__(num_samples=len(texts), shuffle=False, dtype=None, **kwargs)

        def load_sample(self, index):
            text = (tmp_path / f"{index}.txt").read_text()
            return text, text.upper()

    gen = Texts(batch_size=6)
    x, y = gen[0]
    assert x.tolist() == texts and y.tolist() == [t.upper() for t in texts]
    tf = pytest.importorskip("tensorflow")
    shorter = Texts(batch_size=3)  # a second batch of longer strings than the first
    got = [(x.numpy(), y.numpy()) for x, y in shorter.to_tf_dataset(epochs=1)]
    assert [t.decode() for x, _ in got for t in x] == texts
    assert tf.is_tensor(next(iter(shorter.to_tf_dataset(epochs=1)))[0])


def test_dict_samples_take_the_type_of_every_sample_per_key():
    ys = [{"score": 3, "name": "a"}, {"score": 0.25, "name": "abcd"}]
    y = Samples(np.zeros((2, 2)), ys, batch_size=2)[0][1]
    np.testing.assert_array_equal(y["score"], [3, 0.25])
    assert y["name"].tolist() == ["a", "abcd"]
    with pytest.raises(ValueError, match=r"structure of the first one.*dict without "
                                         r"\['score'\] for record #1"):
        Samples(np.zeros((2, 2)), [{"score": 1}, {"other": 2}], batch_size=2)[0]


@pytest.mark.parametrize("ys, error, match", [
    ([1, "two"], TypeError, r"dtype <U3 for record #1, but int64 for the batch's first "
                            r"sample \(record #0\), and no type holds both"),
    (["one", b"two"], TypeError, r"dtype \|S3 for record #1, but <U3"),
    ([0.5, 2 ** 53 + 1], ValueError, r"9007199254740993 \(int64\) for record #1, which "
                                     r"float64.*would round to 9007199254740992"),
    ([{"a": 1}, {"a": "x"}], TypeError, r"dtype <U1 for record #1 \(its part \['a'\]\)"),
])
def test_samples_no_one_type_holds_are_refused_naming_the_sample_and_both_types(
        ys, error, match):
    with pytest.raises(error, match=match):
        Samples(np.zeros((2, 2)), ys, batch_size=2)[0]


def test_mixed_shapes_are_still_refused_naming_the_sample():
    with pytest.raises(ValueError, match=r"shape \(3,\) for record #2, but \(2,\) for the "
                                         r"batch's first sample"):
        Samples([np.zeros(2), np.zeros(2), np.zeros(3)], [0, 1, 2], batch_size=3)[0]


def test_batches_of_different_types_are_refused_before_keras_casts_them():
    """Keras fixes y's dtype from the first batches and casts the later ones to it:
    [0.7, 1.9] after a batch of [3, 2] trained as [0, 1]."""
    import keras

    gen = Samples([np.float32([k, 1]) for k in range(4)], [3, 2, 0.7, 1.9], batch_size=2)
    gen[0]
    with pytest.raises(TypeError, match=r"Every batch must hold y in one dtype.*y of dtype "
                                        r"float64 in batch 1 of epoch 0 \(its first "
                                        r"sample: record #2\), but int64 in batch 0"):
        gen[1]
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    fresh = Samples([np.float32([k, 1]) for k in range(4)], [3, 2, 0.7, 1.9], batch_size=2)
    with pytest.raises(TypeError, match=r"Every batch must hold y in one dtype"):
        model.fit(fresh, epochs=1, verbose=0)
    strings = Samples(np.zeros((4, 2)), ["a", "b", "long", "longer"], batch_size=2)
    assert strings[0][1].dtype == "<U1" and strings[1][1].tolist() == ["long", "longer"]


def test_masks_that_are_no_whole_class_ids_are_refused_naming_the_sample():
    """A subclass's float mask (0.5) used to be cut to class 0 in silence; a float mask of
    whole ids is taken."""
    class Masks(kg.Generator):
        def __init__(self, masks, **kwargs):
            self.masks = masks
            super().__init__(num_samples=len(masks), label_mode="mask", num_classes=3,
                             **kwargs)

        def load_sample(self, index):
            return np.zeros((2, 2, 1), np.float32), self.masks[index]

        def describe_sample(self, index):
            return f"mask #{index}"

    whole = Masks([np.full((2, 2), 2.0), np.ones((2, 2))], batch_size=2, shuffle=False)
    assert whole[0][1].dtype == np.int32 and whole[0][1][0].tolist() == [[2, 2], [2, 2]]
    halves = Masks([np.ones((2, 2)), np.full((2, 2), 0.5)], batch_size=2, shuffle=False)
    with pytest.raises(ValueError, match=r"whole class ids. Received: 0\.5 \(float64\) in "
                                         r"the mask of mask #1"):
        halves[0]


def test_a_value_the_batch_dtype_would_change_is_refused_naming_the_sample():
    """The conversion to `dtype` is checked as the stacking is: 300.5 into uint8 (it
    became 44), 0.7 into uint8 (0), 2**24 + 1 into float32 (2**24) are errors naming
    the sample; values the dtype holds convert as before, with no pass over them where
    the samples' type always fits."""
    class Values(kg.Generator):
        def __init__(self, values, **kwargs):
            self.values = values
            super().__init__(num_samples=len(values), **kwargs)

        def load_sample(self, index):
            return np.array([self.values[index]])

        def describe_sample(self, index):
            return f"value #{index}"

    fine = Values([0.0, 255.0, 7.0], dtype="uint8", batch_size=3, shuffle=False)
    assert fine[0].ravel().tolist() == [0, 255, 7] and fine[0].dtype == np.uint8
    for values, dtype, shown in (([1.0, 300.5], "uint8", r"300\.5 \(float64\) in value #1"),
                                 ([0.7, 1.0], "uint8", r"0\.7 \(float64\) in value #0"),
                                 ([3, 2**24 + 1], "float32",
                                  r"16777217 \(int64\) in value #1, which the batch would "
                                  r"hold as 16777216\.0")):
        with pytest.raises(ValueError, match=rf"dtype='{dtype}' must hold every value as "
                                             rf"it is.*Received: {shown}"):
            Values(values, dtype=dtype, batch_size=2, shuffle=False)[0]
    exact = Values([3, 2**24], dtype="float32", batch_size=2, shuffle=False)[0]
    assert exact.ravel().tolist() == [3.0, 2.0**24]


def test_sparse_rows_are_batched_dense():
    """A scipy.sparse matrix (imbalanced-learn's Keras example feeds one) is taken as x:
    its rows made dense straight into each batch, converted, shuffled and sampled like
    any array, and trained through fit."""
    sparse = pytest.importorskip("scipy.sparse")
    rng = np.random.default_rng(0)
    dense = np.where(rng.random((60, 30)) < 0.1, rng.random((60, 30)), 0.0)
    y = (dense[:, 0] > 0).astype(int)
    matrix = sparse.csr_matrix(dense)
    gen = kg.ArrayGenerator(sparse.coo_matrix(dense), y, batch_size=16, seed=3,
                            label_mode="int")
    rows = gen.epoch_plan()[:16]
    x, labels = gen[0]
    assert x.dtype == np.float32 and np.array_equal(x, dense[rows].astype("float32"))
    assert np.array_equal(labels, y[rows])
    smote = kg.ArrayGenerator(matrix, y, batch_size=16, seed=3, label_mode="int",
                              sampler=kg.samplers.SMOTE(k_neighbors=2))
    batches = [smote[b] for b in range(len(smote))]
    counts = np.bincount(np.concatenate([b[1] for b in batches]))
    assert counts[0] == counts[1]
    model = keras.Sequential([keras.Input((30,)), keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert np.isfinite(model.fit(gen, epochs=2, verbose=0).history["loss"]).all()
    huge = sparse.csr_matrix(np.where(np.arange(20)[:, None] == 7, 1e30, 0.0))
    with pytest.raises(ValueError, match=r"`x\[7\]` holds 1e\+30|x\[7\] holds 1e\+30"):
        kg.ArrayGenerator(huge, np.zeros(20), dtype="float16")
