"""Validation is never silently wrong: a validation subset measures its data as it is (no
sampler, augmentation or dropped samples), at the training batches' shape, through
`fit`'s validation pass; every generator that splits offers the same `split()` and the
same answer to `subset="both"`; `evaluate` says what it measures."""

import numpy as np
import pytest

import kerasgen as kg
from tests.conftest import write_image

keras = pytest.importorskip("keras")

COUNTS = {"common": 24, "rare": 4}


@pytest.fixture
def skewed(tmp_path):
    """A folder of 24 'common' and 4 'rare' 16x16 noise images, and its CSV."""
    root = tmp_path / "images"
    rows = ["filename,label"]
    k = 0
    for name, count in COUNTS.items():
        for i in range(count):
            write_image(str(root / name / f"{i:02d}.png"), height=16, width=16, seed=k)
            rows.append(f"{name}/{i:02d}.png,{name}")
            k += 1
    (root / "list.csv").write_text("\n".join(rows) + "\n")
    return root


class Seen(keras.Model):
    """Records the batches of its validation pass (test_step) and training steps."""

    def __init__(self):
        super().__init__()
        self.flatten = keras.layers.Flatten()
        self.dense = keras.layers.Dense(2)
        self.validated, self.trained = [], []

    def call(self, x):
        return self.dense(self.flatten(x))

    def train_step(self, data):
        self.trained.append(np.asarray(data[0]).shape)
        return super().train_step(data)

    def test_step(self, data):
        self.validated.append((np.asarray(data[0]).copy(), np.asarray(data[1]).copy()))
        return super().test_step(data)


def _model():
    model = Seen()
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    return model


def _typical_crop(size):
    pytest.importorskip("albumentations")
    return kg.augment.typical(size)


# ------------------------------------------------------------------ the manual form
@pytest.mark.parametrize("option", ["sampler", "augment", "batch_augment", "drop_remainder"])
@pytest.mark.parametrize("kind", ["folder", "csv"])
def test_a_validation_subset_refuses_what_would_change_its_metrics(skewed, kind, option):
    value = {"sampler": kg.samplers.BalancedBatchSampler(),
             "augment": lambda image, rng: image[::-1],
             "batch_augment": lambda x, y, rng: (x, y),
             "drop_remainder": True}[option]
    common = dict(image_size=(16, 16), validation_split=0.25, seed=7, batch_size=4,
                  **{option: value})
    build = (lambda **kw: kg.ImageFolderGenerator(skewed, **kw)) if kind == "folder" else (
        lambda **kw: kg.CSVGenerator(skewed / "list.csv", **kw))
    build(subset="training", **common)  # the training side takes it
    with pytest.raises(ValueError, match=rf"subset='validation' with {option}=.*split\("):
        build(subset="validation", **common)


def test_a_validation_generator_given_to_fit_with_a_sampler_is_refused_before_a_step(skewed):
    train = kg.ImageFolderGenerator(skewed, image_size=(16, 16), batch_size=8, seed=1)
    validation = kg.ImageFolderGenerator(skewed, image_size=(16, 16), batch_size=8, seed=1,
                                         sampler=kg.samplers.RandomOverSampler())
    model = _model()
    with pytest.raises(ValueError, match=r"`validation_data` must be measured as it is.*"
                                         r"sampler=RandomOverSampler"):
        model.fit(train, validation_data=validation, epochs=1, verbose=0)
    assert model.trained == []  # refused before the first training step


# ------------------------------------------------------------------ split() through fit
@pytest.mark.parametrize("kind", ["folder", "csv"])
def test_split_keeps_the_validation_pass_to_the_data_as_it_is(skewed, kind):
    common = dict(image_size=(16, 16), batch_size=4, dtype="uint8",
                  sampler=kg.samplers.BalancedBatchSampler(),
                  augment=lambda image, rng: 255 - image)
    if kind == "folder":
        train, validation = kg.ImageFolderGenerator.split(skewed, validation_split=0.25,
                                                          seed=3, **common)
    else:
        train, validation = kg.CSVGenerator.split(skewed / "list.csv",
                                                  validation_split=0.25, seed=3, **common)
    assert validation.sampler is None and validation.augment is None
    assert not validation.shuffle and train.sampler is not None
    assert not set(train.file_paths) & set(validation.file_paths)
    assert len(train.file_paths) + len(validation.file_paths) == sum(COUNTS.values())
    model = _model()
    model.fit(train, validation_data=validation, epochs=1, verbose=0)
    x = np.concatenate([b[0] for b in model.validated])
    y = np.concatenate([b[1] for b in model.validated])
    # every validation image once, in file order, as decoded: no repeat, no augmentation
    assert np.bincount(y, minlength=2).tolist() == [6, 1]  # round(0.25 * 24), (0.25 * 4)
    expected = np.stack([np.asarray(keras.utils.load_img(p, target_size=(16, 16)))
                         for p in validation.file_paths])
    np.testing.assert_array_equal(x, expected)


def test_split_centre_crops_validation_to_the_training_crop_size(skewed):
    augment = _typical_crop((12, 12))
    train, validation = kg.ImageFolderGenerator.split(
        skewed, validation_split=0.25, seed=3, image_size=(16, 16), batch_size=4,
        augment=augment)
    assert train.sample_shape == validation.sample_shape == (12, 12, 3)
    assert isinstance(validation.augment, kg.augment.CenterCrop)
    model = keras.Sequential([keras.Input((12, 12, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(train, validation_data=validation, epochs=1, verbose=0)
    assert np.isfinite(history.history["val_loss"][0])
    x, _ = validation[0]
    full = kg.ImageFolderGenerator(skewed, image_size=(16, 16), validation_split=0.25,
                                   subset="validation", seed=3, shuffle=False,
                                   batch_size=4)
    np.testing.assert_array_equal(x, full[0][0][:, 2:14, 2:14])  # the centre, exactly


def test_a_validation_generator_of_another_shape_is_refused_before_a_step(skewed):
    train = kg.ImageFolderGenerator(skewed, image_size=(16, 16), batch_size=8, seed=1,
                                    augment=_typical_crop((12, 12)))
    validation = kg.ImageFolderGenerator(skewed, image_size=(16, 16), batch_size=8)
    model = _model()
    with pytest.raises(ValueError, match=r"samples of shape \(16, 16, 3\).*makes them "
                                         r"\(12, 12, 3\).*center_crop\(\(12, 12\)\)"):
        model.fit(train, validation_data=validation, epochs=1, verbose=0)
    assert model.trained == []
    fixed = kg.ImageFolderGenerator(skewed, image_size=(16, 16), batch_size=8,
                                    augment=kg.augment.center_crop((12, 12)))
    model.fit(train, validation_data=fixed, epochs=1, verbose=0)  # the way out it names
    assert model.validated[0][0].shape[1:] == (12, 12, 3)


def test_center_crop_enlarges_an_image_smaller_than_the_crop():
    crop = kg.augment.center_crop((8, 8))
    image = np.arange(4 * 6, dtype=np.uint8).reshape(4, 6)
    out = crop(image, None)
    assert out.shape == (8, 8)
    assert crop(np.zeros((10, 10, 3), np.uint8), None).shape == (8, 8, 3)
    with pytest.raises(ValueError, match="image_size"):
        kg.augment.center_crop((0, 8))


# ------------------------------------------------------------------ evaluate
def test_evaluate_says_it_measures_the_resampled_epoch(skewed):
    gen = kg.ImageFolderGenerator(skewed, image_size=(16, 16), batch_size=8, seed=1,
                                  sampler=kg.samplers.RandomOverSampler())
    model = _model()
    with pytest.warns(UserWarning, match=r"evaluate\(\) measures the epoch.*sampler="):
        model.evaluate(gen, verbose=0)
    plain = kg.ImageFolderGenerator(skewed, image_size=(16, 16), batch_size=8, seed=1,
                                    augment=kg.augment.center_crop((16, 16)))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a deterministic crop measures the data as it is
        model.evaluate(plain, verbose=0)


# ------------------------------------------------------------------ one answer everywhere
def test_every_splitting_generator_answers_subset_both_with_split(skewed, tmp_path):
    import json
    import sqlite3

    coco = tmp_path / "coco.json"
    coco.write_text(json.dumps({
        "images": [{"id": 1, "file_name": str(skewed / "common" / "00.png"),
                    "height": 16, "width": 16}],
        "annotations": [], "categories": [{"id": 1, "name": "thing"}]}))
    db = tmp_path / "rows.db"
    with sqlite3.connect(db) as connection:
        connection.execute("create table t (a real, label text)")
        connection.executemany("insert into t values (?, ?)",
                               [(float(i), "ab"[i % 2]) for i in range(8)])
    builds = {
        "ImageFolderGenerator": lambda **kw: kg.ImageFolderGenerator(skewed, **kw),
        "CSVGenerator": lambda **kw: kg.CSVGenerator(skewed / "list.csv", **kw),
        "DetectionGenerator": lambda **kw: kg.DetectionGenerator(coco, allow_outside=True,
                                                                 **kw),
        "SQLFeatureGenerator": lambda **kw: kg.SQLGenerator(db, "select * from t",
                                                            x_col=["a"], **kw),
    }
    for name, build in builds.items():
        with pytest.raises(ValueError, match=rf"subset='both'.*kg\.{name}\.split\("):
            build(validation_split=0.5, subset="both", seed=1)
    train, validation = kg.SQLFeatureGenerator.split(db, "select * from t", ["a"],
                                                     validation_split=0.5, seed=1)
    assert train.num_samples == validation.num_samples == 4


def test_a_subclass_given_validation_split_is_told_how_to_split(skewed):
    class Records(kg.Generator):
        def __init__(self, n, **kwargs):
            super().__init__(num_samples=n, **kwargs)

        def load_sample(self, index):
            return np.zeros(2, np.float32)

    with pytest.raises(TypeError, match=r"validation_split.*train_test_split.*"
                                        r"custom-datasets\.md"):
        Records(10, validation_split=0.2, subset="training")


def test_an_unknown_keyword_is_named_before_the_table_is_read(tmp_path, monkeypatch):
    from kerasgen.sources import _listing

    def never(*args, **kwargs):
        raise AssertionError("the table was read before the keyword was checked")

    monkeypatch.setattr(_listing.Table, "read", never)
    with pytest.raises(TypeError, match=r"CSVGenerator\(\) got unexpected keyword argument "
                                        r"'target_size'.*image_size"):
        kg.CSVGenerator(tmp_path / "huge.csv", target_size=(8, 8))
    with pytest.raises(TypeError, match=r"DetectionGenerator\(\) got unexpected keyword"):
        kg.DetectionGenerator(tmp_path / "huge.csv", target_size=(8, 8))


@pytest.mark.parametrize("subset", ["validation", "both"])
def test_a_preprocessing_step_stays_on_validation(skewed, subset):
    """A step that gives the same output for every draw (the channels-first layout of
    data_format, a function marked deterministic) is a preprocessing: the validation
    subset takes it, split() keeps it, and evaluate does not warn of it."""
    pytest.importorskip("tensorflow")
    common = dict(image_size=(16, 16), batch_size=4, validation_split=0.25, seed=3,
                  data_format="channels_first", format="kerasgen")
    made = kg.image_dataset_from_directory(skewed, subset=subset, **common)
    validation = made[1] if subset == "both" else made
    assert validation[0][0].shape == (4, 3, 16, 16)
    if subset == "both":
        assert made[0][0][0].shape == (4, 3, 16, 16)  # one layout on both sides

    def scale(image, rng):
        return image // 2

    scale.deterministic = True
    plain = kg.ImageFolderGenerator(skewed, image_size=(16, 16), validation_split=0.25,
                                    subset="validation", seed=3, augment=scale,
                                    batch_size=4, shuffle=False)
    train, val = kg.ImageFolderGenerator.split(skewed, image_size=(16, 16), seed=3,
                                               validation_split=0.25, augment=scale,
                                               batch_size=4)
    assert val.augment is scale
    np.testing.assert_array_equal(val[0][0], plain[0][0])
    import warnings
    model = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.evaluate(val, verbose=0)
