"""`text_dataset_from_directory` (kerasgen/text.py, over sources/_text.py's `TextSource`):
Keras's own tests run against it, its texts and labels equal to Keras's, the validation
split, every argument check, and a text classifier trained through `model.fit` (the
tf.data form with TextVectorization in the model on TensorFlow; the generator with
`kg.augment.map_batch` on any backend)."""

import importlib.util
import os
from unittest import mock

import keras
import numpy as np
import pytest
from keras.src.utils import text_dataset_utils
from keras.src.utils import text_dataset_utils_test as keras_tests

import kerasgen as kg
from kerasgen.sources._text import TextSource, decoded
from kerasgen.text import text_dataset_from_directory

BACKEND = keras.backend.backend()
HAS_GRAIN = importlib.util.find_spec("grain") is not None
needs_tf_backend = pytest.mark.skipif(BACKEND != "tensorflow",
                                      reason="the tf.data dataset in fit: TensorFlow backend")


# Keras's test class, unmodified: kerasgen warns of a class folder without text files
# (Keras passes over it in silence), which Keras's tests neither expect nor capture
@pytest.mark.filterwarnings("ignore:Class folder .* holds no text files"
                            ":kerasgen._redact.KerasgenWarning")
class TestKerasOwnTextDatasetTests(keras_tests.TextDatasetFromDirectoryTest):
    """Every test of Keras's class (20 in Keras 3.15.1: 10 per format), on kerasgen's
    function. Errors are compared by exception type, not wording: kerasgen's messages
    keep kerasgen's form, and test_each_keras_error_names_the_argument checks them."""

    def setUp(self):
        super().setUp()
        swap = mock.patch.object(text_dataset_utils, "text_dataset_from_directory",
                                 text_dataset_from_directory)
        swap.start()
        self.addCleanup(swap.stop)

    def assertRaisesRegex(self, expected_exception, expected_regex, *args, **kwargs):
        """The exception type only (see the class docstring)."""
        return self.assertRaises(expected_exception, *args, **kwargs)


if not HAS_GRAIN:  # Keras's grain cases need grain, as Keras's own run does
    for _name in [n for n in dir(TestKerasOwnTextDatasetTests) if n.endswith("_grain")]:
        setattr(TestKerasOwnTextDatasetTests, _name,
                pytest.mark.skip(reason="grain is not installed")(
                    getattr(TestKerasOwnTextDatasetTests, _name)))


def test_keras_class_still_has_its_tests():
    names = [n for n in dir(keras_tests.TextDatasetFromDirectoryTest) if n.startswith("test_")]
    assert len(names) >= 20, names


def test_signature_is_keras_exactly_then_the_generators_options():
    import inspect

    ours = list(inspect.signature(text_dataset_from_directory).parameters.values())
    theirs = inspect.signature(keras.utils.text_dataset_from_directory)
    assert [(p.name, p.kind, p.default) for p in ours[:-1]] == [
        (p.name, p.kind, p.default) for p in theirs.parameters.values()]
    assert ours[-1].kind == inspect.Parameter.VAR_KEYWORD  # kerasgen's own options


# ------------------------------------------------------------------------------ data
TEXTS = {  # class -> file name -> bytes: CRLF, UTF-8 beyond ASCII, a NUL, a nested folder
    "neg": {"b.txt": b"bad film, awful plot", "a.txt": b"dull\r\nand slow",
            "deep/z.txt": b"terrible \xc3\xa9t\xc3\xa9 acting\x00"},
    "pos": {"c.txt": b"good movie", "d.txt": b"great acting, caf\xc3\xa9 scene",
            "e.txt": b"\xe2\x9c\x93 lovely\rending"},
}


def write_texts(root, texts=TEXTS):
    for name, files in texts.items():
        for rel, data in files.items():
            path = root / name / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    (root / "notes.md").write_text("not a text file")  # only .txt files are read
    return root


@pytest.fixture
def folder(tmp_path):
    return write_texts(tmp_path / "reviews")


def reviews(n_per_class=16):
    """A folder a small model learns: 'good'/'great' words against 'bad'/'awful'."""
    rng = np.random.default_rng(0)
    words = {"pos": ["good", "great", "lovely", "fine"], "neg": ["bad", "awful", "dull", "poor"]}
    return {name: {f"{i:02d}.txt": " ".join(rng.choice(w + ["the", "film", "plot"], 6))
                   .encode() for i in range(n_per_class)} for name, w in words.items()}


def tf_batches(dataset):
    return [tuple(np.asarray(part) for part in batch) if isinstance(batch, tuple)
            else np.asarray(batch) for batch in dataset.as_numpy_iterator()]


def same(ours, keras_batches):
    assert len(ours) == len(keras_batches)
    for a, b in zip(ours, keras_batches):
        for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            x, y = np.asarray(x), np.asarray(y)
            assert x.dtype.kind == y.dtype.kind and x.shape == y.shape
            assert x.tolist() == y.tolist()


# ---------------------------------------------------------------------- Keras's values
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="Keras's tf form")
@pytest.mark.parametrize("kwargs", [
    dict(), dict(label_mode="categorical"), dict(label_mode="binary"), dict(label_mode=None),
    dict(labels=[0, 1, 1, 0, 1, 0]), dict(max_length=5), dict(batch_size=None),
])
def test_tf_texts_and_labels_equal_keras(folder, kwargs):
    """format="tf", shuffle=False: the same bytes (CRLF, NUL and UTF-8 kept), cut to
    max_length bytes, and the same labels of the same dtypes, batch for batch."""
    common = dict(shuffle=False, batch_size=4, verbose=False)
    common.update(kwargs)
    ours = text_dataset_from_directory(folder, **common)
    theirs = keras.utils.text_dataset_from_directory(folder, **common)
    assert ours.element_spec == theirs.element_spec
    same(tf_batches(ours), tf_batches(theirs))
    assert ours.class_names == theirs.class_names


@pytest.mark.skipif(not HAS_GRAIN, reason="grain is not installed")
@pytest.mark.parametrize("kwargs", [dict(), dict(max_length=7), dict(label_mode=None),
                                    dict(batch_size=None)])
def test_grain_texts_equal_keras(folder, kwargs):
    """format="grain": Python's text reading (universal newlines, max_length characters,
    not bytes), batched as Keras batches strings on this backend."""
    common = dict(shuffle=False, batch_size=4, verbose=False, format="grain")
    common.update(kwargs)
    ours = list(text_dataset_from_directory(folder, **common))
    theirs = list(keras.utils.text_dataset_from_directory(folder, **common))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        a, b = (a, b) if isinstance(a, tuple) else ((a,), (b,))
        assert type(a[0]) is type(b[0])  # noqa: E721 - Keras's exact type
        texts = [np.asarray(t).tolist() for t in (a[0], b[0])]
        assert texts[0] == texts[1]
        for x, y in zip(a[1:], b[1:]):
            assert np.asarray(x).tolist() == keras.ops.convert_to_numpy(y).tolist()


def test_kerasgen_format_gives_str_batches_and_keras_order(folder):
    gen = text_dataset_from_directory(folder, shuffle=False, batch_size=3, max_length=9,
                                      format="kerasgen", verbose=False)
    assert isinstance(gen, kg.Generator) and gen.class_names == ["neg", "pos"]
    x, y = gen[0]
    assert x.dtype == object and x.tolist() == ["dull\nand ", "bad film,", "terrible "]
    assert y.dtype == np.int32 and y.tolist() == [0, 0, 0]
    assert [os.path.relpath(p, folder) for p in gen.source.file_paths] == [
        "neg/a.txt", "neg/b.txt", "neg/deep/z.txt", "pos/c.txt", "pos/d.txt", "pos/e.txt"]
    assert gen[1][0].tolist() == ["good movi", "great act", "✓ lovely\n"]


def test_decoding_a_cut_file_as_python_reads_it():
    """A cut at max_length characters after reading 4 * max_length + 8 bytes: a character
    or a CRLF split by the read is never half decoded."""
    assert decoded(b"ab\r\ncd\re", True, None, "f") == "ab\ncd\ne"
    assert decoded(b"\xc3\xa9\xc3", False, 1, "f") == "\u00e9"
    assert decoded(b"a\r", False, 5, "f") == "a"
    with pytest.raises(ValueError, match=r"Cannot read text file f as UTF-8.*format='tf'"):
        decoded(b"\xff\xfe", True, None, "f")


# ------------------------------------------------------------------ split and epochs
def test_validation_split_is_seeded_stratified_and_disjoint(tmp_path, capsys):
    root = write_texts(tmp_path, reviews(10))
    train, val = text_dataset_from_directory(root, validation_split=0.2, subset="both",
                                             seed=7, format="kerasgen", batch_size=4)
    out = capsys.readouterr().out
    assert out.splitlines() == ["Found 20 files belonging to 2 classes.",
                                "Using 16 files for training.", "Using 4 files for validation."]
    assert set(train.source.file_paths).isdisjoint(val.source.file_paths)
    assert len(set(train.source.file_paths) | set(val.source.file_paths)) == 20
    assert np.bincount(val.labels).tolist() == [2, 2]  # 0.2 of each class
    assert not val.shuffle
    one = text_dataset_from_directory(root, validation_split=0.2, subset="validation", seed=7,
                                      format="kerasgen", verbose=False)
    assert one.source.file_paths == val.source.file_paths


def test_both_keeps_a_map_batch_for_validation_and_drops_the_sampler(tmp_path):
    root = write_texts(tmp_path, reviews(6))
    upper = kg.augment.map_batch(lambda x, y: (np.char.upper(x.astype(str)), y))
    train, val = text_dataset_from_directory(
        root, validation_split=0.5, subset="both", seed=1, format="kerasgen", batch_size=4,
        verbose=False, batch_augment=upper, sampler=kg.samplers.RandomOverSampler())
    assert val.sampler is None and val.batch_augment is not None
    assert all(t == t.upper() for t in val[0][0].tolist())


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="tf.data")
def test_each_tf_pass_is_a_new_seeded_epoch(tmp_path):
    root = write_texts(tmp_path, reviews(8))
    ds = text_dataset_from_directory(root, batch_size=16, seed=3, verbose=False)
    first, second = (next(iter(ds))[0].numpy().tolist() for _ in range(2))
    assert first != second and sorted(first) == sorted(second)
    assert ds.generator.epoch == 2  # each pass served its epoch whole (one batch)
    again = text_dataset_from_directory(root, batch_size=16, seed=3, verbose=False)
    assert next(iter(again))[0].numpy().tolist() == first


@pytest.mark.parametrize("kwargs,prints", [
    (dict(), "Found 6 files belonging to 2 classes."),
    (dict(labels=None), "Found 6 files."),
    (dict(labels=["x", "y", "x", "y", "x", "y"]), "Found 6 files belonging to 2 classes."),
])
def test_label_modes_and_what_keras_prints(folder, capsys, kwargs, prints):
    gen = text_dataset_from_directory(folder, format="kerasgen", shuffle=False, **kwargs)
    assert capsys.readouterr().out.strip() == prints
    batch = gen[0]
    if kwargs.get("labels", "inferred") is None:
        assert isinstance(batch, np.ndarray) and gen.label_mode is None
    else:
        assert batch[1].tolist() == ([0, 0, 0, 1, 1, 1] if not kwargs else [0, 1, 0, 1, 0, 1])
    for mode, shape, dtype in (("binary", (6, 1), "float32"),
                               ("categorical", (6, 2), "float32")):
        if kwargs.get("labels", "inferred") is not None:
            y = text_dataset_from_directory(folder, format="kerasgen", shuffle=False,
                                            label_mode=mode, verbose=False, **kwargs)[0][1]
            assert y.shape == shape and y.dtype == dtype


def test_a_remote_folder_gives_the_local_texts(folder):
    """A URL folder (fsspec, here memory://) is listed and read as the local one."""
    fsspec = pytest.importorskip("fsspec")
    fs, url = fsspec.filesystem("memory"), f"memory://kg-text-{os.getpid()}"
    try:
        for path in folder.rglob("*"):
            if path.is_file():
                fs.pipe(url[len("memory://"):] + "/" + path.relative_to(folder).as_posix(),
                        path.read_bytes())
        common = dict(shuffle=False, batch_size=6, format="kerasgen", verbose=False)
        remote, local = (text_dataset_from_directory(where, **common) for where in (url, folder))
        assert remote[0][0].tolist() == local[0][0].tolist()
        assert remote[0][1].tolist() == local[0][1].tolist()
    finally:
        fs.rm(url[len("memory://"):], recursive=True)


def test_state_resumes_the_same_texts(tmp_path):
    root = write_texts(tmp_path, reviews(6))
    gen = text_dataset_from_directory(root, batch_size=4, seed=5, format="kerasgen",
                                      verbose=False)
    gen.on_epoch_end()
    state = gen.get_state()
    expected = [gen[i][0].tolist() for i in range(len(gen))]
    again = text_dataset_from_directory(root, batch_size=4, seed=5, format="kerasgen",
                                        verbose=False)
    again.set_state(state)
    assert [again[i][0].tolist() for i in range(len(again))] == expected


# -------------------------------------------------------------------------- errors
@pytest.mark.parametrize("kwargs,error,match", [
    (dict(labels="other"), ValueError, r"`labels` must be 'inferred'.*Received: labels='other'"),
    (dict(labels=[0] * 6, class_names=["neg", "pos"]), ValueError,
     r"`class_names` goes with labels='inferred' only"),
    (dict(label_mode="other"), ValueError, r"`label_mode` must be one of.*label_mode='other'"),
    (dict(format="torch"), ValueError, r"`format` must be 'tf'.*format='torch'"),
    (dict(validation_split=2), ValueError, r"`validation_split` must be a fraction"),
    (dict(subset="training"), ValueError, r"`validation_split` must be set"),
    (dict(validation_split=0.2, subset="other", seed=1), ValueError, r"`subset` must be"),
    (dict(validation_split=0.2, subset="training"), ValueError, r"`seed` must be given"),
    (dict(max_length=0), ValueError, r"`max_length` must be a positive integer"),
    (dict(format="kerasgen", batch_size=None), ValueError, r"`batch_size` must be a positive"),
    (dict(workerz=2), TypeError, r"unexpected keyword argument 'workerz'.*`workers`"),
    (dict(labels=[0, 1]), ValueError, r"`labels` must hold one label per text file.*2 labels "
                                      r"for the 6 text files"),
    (dict(class_names=["neg", "wrong"]), ValueError, r"`class_names` must name subfolders.*"
                                                     r"not found: \['wrong'\]"),
    (dict(labels=None, class_names=["neg"]), ValueError, r"`class_names` goes with "
                                                         r"labels='inferred' and a label_mode"),
    (dict(dtype="float32", format="kerasgen"), ValueError, r"`dtype` must be None for texts"),
])
def test_each_check_raises_in_kerasgen_form(folder, kwargs, error, match):
    with pytest.raises(error, match=match):
        text_dataset_from_directory(folder, verbose=False, **kwargs)


def test_binary_needs_two_classes_and_a_folder_needs_text_files(tmp_path, folder):
    three = write_texts(tmp_path / "three", {**TEXTS, "meh": {"m.txt": b"so so"}})
    with pytest.raises(ValueError, match=r"`class_names` must be exactly 2 classes with "
                                         r"label_mode='binary'.*'meh', 'neg', 'pos'"):
        text_dataset_from_directory(three, label_mode="binary", verbose=False)
    (tmp_path / "empty" / "a").mkdir(parents=True)
    with pytest.warns(UserWarning, match=r"Class folder .* holds no text files") as caught, \
            pytest.raises(ValueError, match=r"No text files found in .*empty.*\.txt"):
        text_dataset_from_directory(tmp_path / "empty", verbose=False)
    assert caught[0].filename == __file__  # the warning names the caller's line
    with pytest.raises(FileNotFoundError, match=r"`directory` must be an existing folder"):
        text_dataset_from_directory(tmp_path / "nowhere", verbose=False)


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    root = write_texts(tmp_path, {"a": {"bad.txt": b"caf\xe9"}, "b": {"ok.txt": b"ok"}})
    gen = text_dataset_from_directory(root, format="kerasgen", shuffle=False, verbose=False)
    with pytest.raises(ValueError, match=r"Cannot read text file .*bad\.txt as UTF-8"):
        gen[0]


def test_a_link_leading_out_of_the_folder_is_refused(tmp_path, folder):
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    os.symlink(outside, folder / "pos" / "leak.txt")
    with pytest.raises(ValueError, match=r"leak\.txt.*follow_links=True"):
        text_dataset_from_directory(folder, verbose=False)
    gen = text_dataset_from_directory(folder, follow_links=True, verbose=False,
                                      format="kerasgen", shuffle=False, batch_size=8)
    assert "secret" in gen[0][0].tolist()


def test_source_refuses_smote_blends():
    from kerasgen.sources._batch_request import BatchRequest

    source = TextSource(["a.txt", "b.txt"], [0, 1], class_names=["a", "b"])
    with pytest.raises(ValueError, match="texts cannot be blended"):
        source.load_batch(BatchRequest(np.array([0]), np.array([0]), partners=np.array([1]),
                                       lams=np.array([0.5]), dtype=None))


# ----------------------------------------------------------------- training with fit
def vectorizer(root):
    layer = keras.layers.TextVectorization(max_tokens=30, output_sequence_length=6)
    layer.adapt([p.read_text() for p in root.rglob("*.txt")])
    return layer


def classifier(inputs):
    model = keras.Sequential(inputs + [keras.layers.Embedding(30, 8),
                                       keras.layers.GlobalAveragePooling1D(),
                                       keras.layers.Dense(1, activation="sigmoid")])
    model.compile("adam", "binary_crossentropy", metrics=["accuracy"])
    return model


@needs_tf_backend  # Keras warns of fit(shuffle=True) with any tf.data dataset, its own too
@pytest.mark.filterwarnings("ignore:`shuffle=True` was passed:UserWarning")
def test_a_classifier_trains_on_the_tf_dataset_with_textvectorization(tmp_path):
    """Keras's own path: strings in the tf.data dataset, TextVectorization in the model."""
    root = write_texts(tmp_path, reviews())
    train, val = text_dataset_from_directory(root, validation_split=0.25, subset="both",
                                             seed=2, batch_size=8, label_mode="binary",
                                             verbose=False)
    model = classifier([keras.Input((), dtype="string"), vectorizer(root)])
    history = model.fit(train, validation_data=val, epochs=3, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert train.generator.epoch == 3  # each pass an epoch of the generator
    assert model.predict(val, verbose=0).shape == (8, 1)


def test_a_classifier_trains_on_the_generator_on_any_backend(tmp_path):
    """The generator itself in fit: strings turned into token ids in the generator."""
    root = write_texts(tmp_path, reviews())
    layer = vectorizer(root)
    to_ids = kg.augment.map_batch(lambda x, y: (keras.ops.convert_to_numpy(layer(x)), y))
    train = text_dataset_from_directory(root, batch_size=8, seed=2, label_mode="binary",
                                        format="kerasgen", verbose=False,
                                        batch_augment=to_ids)
    model = classifier([keras.Input((6,), dtype="int32")])
    history = model.fit(train, epochs=3, verbose=0)
    assert np.isfinite(history.history["loss"]).all() and train.epoch == 3
    plain = text_dataset_from_directory(root, batch_size=8, format="kerasgen", verbose=False)
    with pytest.raises(TypeError, match=r"x holds strings.*kg\.augment\.map_batch"):
        classifier([keras.Input((6,), dtype="int32")]).fit(plain, epochs=1, verbose=0)
