"""kerasgen as a drop-in for Keras: `kg.image_dataset_from_directory`, Keras's arguments on
ImageFolderGenerator (labels, aspect ratio, interpolation, subset="both"), unknown keyword
arguments, workers=0, and a command line that starts without Keras."""

import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import cv2
import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasgen as kg
from kerasgen.cli import PreviewBatch

from .conftest import write_image

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def smooth_image(height, width, seed=0):
    """A photo-like test image: smooth gradients, one sharp square, mild noise."""
    yy, xx = np.mgrid[0:height, 0:width]
    image = np.stack([128 + 100 * np.sin(xx / 7.0), 128 + 100 * np.cos(yy / 5.0),
                      (xx * 3 + yy * 2) % 256], -1)
    image[height // 3:height // 2, width // 3:width // 2] = 250
    noise = np.random.default_rng(seed).normal(0, 3, image.shape)
    return np.clip(image + noise, 0, 255).astype(np.uint8)


def write_png(path, image):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    assert cv2.imwrite(str(path), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))


@pytest.fixture
def pets(tmp_path):
    """The tutorial's PetImages layout, tiny: Cat and Dog, 10 PNGs each."""
    root = tmp_path / "PetImages"
    for c, name in enumerate(["Cat", "Dog"]):
        for i in range(10):
            image = np.full((24, 30, 3), 40 + 150 * c, np.uint8)
            image[:, : 3 + i] = 255 - image[:, : 3 + i]
            write_png(root / name / f"{i}.png", image)
    return root


# ----------------------------------------------------------------- image_dataset_from_directory
def test_signature_is_keras_exactly_then_the_generators_options():
    ours = list(inspect.signature(kg.image_dataset_from_directory).parameters.values())
    theirs = inspect.signature(keras.utils.image_dataset_from_directory)
    assert [(p.name, p.kind, p.default) for p in ours[:-1]] == [
        (p.name, p.kind, p.default) for p in theirs.parameters.values()]
    assert ours[-1].kind == inspect.Parameter.VAR_KEYWORD  # kerasgen's own options


def test_returns_a_tf_data_dataset_with_kerass_attributes_and_the_generator(pets):
    ds = kg.image_dataset_from_directory(pets, image_size=(8, 10), batch_size=6, seed=2,
                                         verbose=False)
    assert isinstance(ds, tf.data.Dataset)
    assert ds.class_names == ["Cat", "Dog"] and len(ds.file_paths) == 20
    assert isinstance(ds.generator, kg.ImageFolderGenerator)
    assert ds.file_paths == ds.generator.file_paths
    assert int(ds.cardinality()) == 4  # finite and known, as Keras's: fit needs no steps
    assert ds.element_spec[0].shape.as_list() == [None, 8, 10, 3]
    # a pass is an epoch: the generator's, byte for byte, and the next pass the next one
    first = [(x.numpy(), y.numpy()) for x, y in ds]
    second = [(x.numpy(), y.numpy()) for x, y in ds]
    for epoch, batches in enumerate([first, second]):
        view = ds.generator.at_epoch(epoch)
        for b, (x, y) in enumerate(batches):
            np.testing.assert_array_equal(x, view[b][0])
            np.testing.assert_array_equal(y, view[b][1])
    assert [y.tolist() for _, y in first] != [y.tolist() for _, y in second]
    again = kg.image_dataset_from_directory(pets, image_size=(8, 10), batch_size=6, seed=2,
                                            verbose=False)
    np.testing.assert_array_equal(next(iter(again))[1].numpy(), first[0][1])  # one seed


def test_tf_data_methods_and_kerass_element_structure(pets):
    unlabelled = kg.image_dataset_from_directory(pets, label_mode=None, image_size=8,
                                                 batch_size=5, verbose=False)
    batch = next(iter(unlabelled.take(1)))
    assert isinstance(batch, tf.Tensor) and batch.shape == (5, 8, 8, 3)  # x alone
    assert unlabelled.class_names is None
    samples = kg.image_dataset_from_directory(pets, batch_size=None, image_size=8,
                                              shuffle=False, verbose=False)
    x, y = next(samples.as_numpy_iterator())
    assert x.shape == (8, 8, 3) and y.shape == () and int(samples.cardinality()) == 20
    flipped = samples.map(lambda x, y: (x[:, ::-1], y)).batch(4).prefetch(tf.data.AUTOTUNE)
    assert sum(len(y) for _, y in flipped.cache()) == 20
    assert len(list(samples.batch(7).unbatch())) == 20


def test_the_generators_options_beyond_kerass_signature(pets):
    def flip(image, rng):
        return image[:, ::-1]

    train, val = kg.image_dataset_from_directory(
        pets, validation_split=0.2, subset="both", seed=3, image_size=8, verbose=False,
        augment=flip, sampler=kg.samplers.RandomOverSampler(), dtype="uint8", cache=None)
    assert train.generator.augment is flip and val.generator.augment is None
    assert isinstance(train.generator.sampler, kg.samplers.RandomOverSampler)
    x, _ = next(iter(train))
    assert x.dtype == tf.uint8
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'augmnet'.*did you "
                                        r"mean `augment`"):
        kg.image_dataset_from_directory(pets, augmnet=flip)


@pytest.mark.parametrize("options", [dict(workers=2), dict(workers=2,
                                                            use_multiprocessing=True)],
                         ids=["threads", "processes"])
def test_the_dataset_is_made_by_the_generator_its_workers_and_stats(pets, options):
    ds = kg.image_dataset_from_directory(pets, image_size=6, batch_size=4, seed=4,
                                         verbose=False, stats=True, **options)
    plain = kg.image_dataset_from_directory(pets, image_size=6, batch_size=4, seed=4,
                                            verbose=False, format="kerasgen")
    for epoch in range(2):
        batches = [y.numpy() for _, y in ds]
        expected = [plain.at_epoch(epoch)[b][1] for b in range(len(plain))]
        np.testing.assert_array_equal(np.concatenate(batches), np.concatenate(expected))
    if not options.get("use_multiprocessing"):  # stats count this process's batches
        assert ds.generator.stats()["batches"] >= 10  # made by the generator: it counted


def test_the_dataset_resumes_from_a_state_between_epochs(pets):
    def make():
        return kg.image_dataset_from_directory(pets, image_size=6, batch_size=4, seed=4,
                                               verbose=False)

    first = make()
    for _ in range(2):
        list(first)
    state = first.generator.get_state()  # two whole passes: epochs 0 and 1 ended
    assert state["epoch"] == 2 and state["batch"] == 0
    resumed = make()
    resumed.generator.set_state(state)
    np.testing.assert_array_equal(np.concatenate([y for _, y in resumed]),
                                  np.concatenate([y for _, y in first]))  # epoch 2 both
    resumed.generator.set_state(first.generator.get_state(batches_done=2))
    with pytest.raises(ValueError, match="restored mid-epoch"):
        list(resumed)


def test_format_grain_as_kerass_and_kerasgen_for_the_generator(pets):
    pytest.importorskip("grain", reason="grain is in the test extra: pip install grain")
    import grain

    ds = kg.image_dataset_from_directory(pets, image_size=6, batch_size=8, seed=1,
                                         format="grain", verbose=False)
    assert isinstance(ds, grain.IterDataset) and ds.class_names == ["Cat", "Dog"]
    first, second = [[y.tolist() for _, y in ds] for _ in range(2)]
    assert first == second  # as Keras's grain datasets: every pass the same order
    np.testing.assert_array_equal(next(iter(ds))[0], ds.generator[0][0])
    gen = kg.image_dataset_from_directory(pets, image_size=6, format="kerasgen",
                                          verbose=False)
    assert isinstance(gen, kg.ImageFolderGenerator)


def test_keras_tutorial_trains_with_kg_in_place_of_keras_utils(pets, monkeypatch, capsys):
    """keras-io's "Image classification from scratch", sizes shrunk, calls kept
    (tests/keras_io/ runs keras.io's own file)."""
    monkeypatch.chdir(pets.parent)
    image_size = (32, 32)
    batch_size = 8
    train_ds, val_ds = kg.image_dataset_from_directory(
        "PetImages",
        validation_split=0.2,
        subset="both",
        seed=1337,
        image_size=image_size,
        batch_size=batch_size,
    )
    printed = capsys.readouterr().out
    assert "Found 20 files belonging to 2 classes." in printed
    assert "Using 16 files for training." in printed
    assert "Using 4 files for validation." in printed
    assert isinstance(train_ds, tf.data.Dataset)
    assert train_ds.class_names == val_ds.class_names == ["Cat", "Dog"]
    assert not set(train_ds.file_paths) & set(val_ds.file_paths)
    for images, labels in train_ds.take(1):
        assert images.dtype == tf.float32 and images.numpy().max() > 1  # 0..255
        assert labels.dtype == tf.int32 and labels.shape == (batch_size,)

    data_augmentation = keras.Sequential([keras.layers.RandomFlip("horizontal"),
                                          keras.layers.RandomRotation(0.1)])
    train_ds = train_ds.map(lambda img, label: (data_augmentation(img), label),
                            num_parallel_calls=tf.data.AUTOTUNE)
    train_ds = train_ds.prefetch(tf.data.AUTOTUNE)
    val_ds = val_ds.prefetch(tf.data.AUTOTUNE)

    def make_model(input_shape, num_classes):
        inputs = keras.Input(shape=input_shape)
        x = keras.layers.Rescaling(1.0 / 255)(inputs)
        x = keras.layers.Conv2D(8, 3, strides=2, padding="same")(x)
        x = keras.layers.BatchNormalization()(x)
        x = keras.layers.Activation("relu")(x)
        x = keras.layers.GlobalAveragePooling2D()(x)
        x = keras.layers.Dropout(0.5)(x)
        units = 1 if num_classes == 2 else num_classes
        outputs = keras.layers.Dense(units, activation=None)(x)
        return keras.Model(inputs, outputs)

    model = make_model(input_shape=image_size + (3,), num_classes=2)
    model.compile(optimizer=keras.optimizers.Adam(3e-4),
                  loss=keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=[keras.metrics.BinaryAccuracy(name="acc")])
    history = model.fit(train_ds, epochs=2, validation_data=val_ds, verbose=0)
    assert len(history.history["val_acc"]) == 2
    assert np.isfinite(history.history["loss"]).all()


def test_same_files_labels_and_pixels_as_keras_without_shuffle(pets):
    ours = kg.image_dataset_from_directory(pets, image_size=(16, 20), shuffle=False,
                                           batch_size=20, verbose=False, format="kerasgen")
    theirs = keras.utils.image_dataset_from_directory(pets, image_size=(16, 20),
                                                      shuffle=False, batch_size=20,
                                                      verbose=False)
    assert ours.file_paths == theirs.file_paths
    assert ours.class_names == theirs.class_names
    x, y = ours[0]
    tx, ty = next(iter(theirs))
    np.testing.assert_array_equal(y, ty.numpy())
    assert np.abs(x - tx.numpy()).mean() < 0.5  # OpenCV's bilinear vs TensorFlow's


def test_subset_validation_split_and_seed_checks(pets):
    train = kg.image_dataset_from_directory(pets, validation_split=0.2, subset="training",
                                            seed=1, image_size=8, verbose=False)
    val = kg.image_dataset_from_directory(pets, validation_split=0.2, subset="validation",
                                          seed=1, image_size=8, verbose=False)
    assert (len(train.file_paths), len(val.file_paths)) == (16, 4)
    assert val.generator.shuffle  # a single subset keeps the caller's shuffle, as Keras's
    unshuffled = kg.image_dataset_from_directory(pets, validation_split=0.2, shuffle=False,
                                                 subset="validation", verbose=False)
    assert len(unshuffled.file_paths) == 4  # Keras needs no seed without shuffling
    for kwargs, match in [
        (dict(validation_split=0.2, subset="both"), "`seed` must be given"),
        (dict(subset="training"), "If `subset` is set, `validation_split` must be set"),
        (dict(validation_split=0.2), "If `subset` is set, `validation_split` must be set"),
        (dict(subset="all", validation_split=0.2), "`subset` must be 'training'"),
        (dict(label_mode="raw"), "`label_mode` must be one of 'int'"),
        (dict(batch_size=None, format="kerasgen"), "a generator yields batches"),
        (dict(format="torch"), "`format` must be 'tf' .*, 'grain' .* or 'kerasgen'"),
        (dict(validation_split=2, subset="training", seed=1),
         r"`validation_split` must be a fraction between 0 and 1 .*Received: "
         r"validation_split=2"),
        (dict(data_format="channels_middle"), "`data_format` must be"),
    ]:
        with pytest.raises(ValueError, match=match):
            kg.image_dataset_from_directory(pets, verbose=False, **kwargs)


def test_data_format_format_and_label_mode_none(pets):
    first = kg.image_dataset_from_directory(pets, image_size=(6, 7), batch_size=4,
                                            data_format="channels_first",
                                            format="kerasgen", verbose=False)
    x, y = first[0]
    assert x.shape == (4, 3, 6, 7) and x.flags["C_CONTIGUOUS"]
    last = kg.image_dataset_from_directory(pets, image_size=(6, 7), batch_size=4,
                                           seed=first.seed, verbose=False)
    np.testing.assert_array_equal(np.moveaxis(next(iter(last))[0].numpy(), -1, 1), x)
    unlabelled = kg.image_dataset_from_directory(pets, label_mode=None, image_size=8,
                                                 verbose=False, format="kerasgen")
    assert isinstance(unlabelled[0], np.ndarray) and unlabelled.class_names is None


# ----------------------------------------------------------------- labels=
def test_labels_none_and_a_list_follow_kerass_file_order(tmp_path):
    root = tmp_path / "d"
    # 'a-b' sorts before 'a/x' as a path string (Keras's order), after it depth-first
    for rel in ["top.png", "a/1.png", "a/x/2.png", "a-b/3.png", "b/4.png"]:
        write_image(str(root / rel), seed=len(rel))
    theirs = keras.utils.image_dataset_from_directory(root, labels=None, shuffle=False,
                                                      image_size=(4, 4), verbose=False)
    flat = kg.ImageFolderGenerator(root, labels=None, shuffle=False, image_size=(4, 4),
                                   batch_size=8)
    assert flat.file_paths == theirs.file_paths
    assert flat.label_mode is None and isinstance(flat[0], np.ndarray)
    listed = kg.ImageFolderGenerator(root, labels=[0, 1, 1, 2, 0], shuffle=False,
                                     image_size=(4, 4), batch_size=8)
    assert listed.class_names == ["0", "1", "2"]
    assert listed[0][1].tolist() == [0, 1, 1, 2, 0]
    named = kg.ImageFolderGenerator(root, labels=("dog", "cat", "cat", "eel", "dog"),
                                    label_mode="categorical", shuffle=False,
                                    image_size=(4, 4), batch_size=8)
    assert named.class_names == ["cat", "dog", "eel"]
    assert named[0][1].argmax(1).tolist() == [1, 0, 0, 2, 1]
    wide = kg.ImageFolderGenerator(root, labels=[0, 3, 3, 0, 0], num_classes=4,
                                   image_size=(4, 4))
    assert wide.num_classes == 4


def test_real_valued_labels_are_regression_targets_as_keras_passes_them(tmp_path):
    root = tmp_path / "d"
    for rel in ["top.png", "a/1.png", "a/x/2.png", "a-b/3.png", "b/4.png"]:
        write_image(str(root / rel), seed=len(rel))
    values = [0.5, 1.25, -2.0, 3.0, 10.75]
    theirs = keras.utils.image_dataset_from_directory(
        root, labels=values, shuffle=False, image_size=(4, 4), verbose=False)
    ours = kg.image_dataset_from_directory(root, labels=values, shuffle=False,
                                           image_size=(4, 4), verbose=False)
    (_, y_theirs), = list(theirs)
    (_, y_ours), = list(ours)
    assert y_ours.dtype == y_theirs.dtype == tf.float32
    np.testing.assert_array_equal(y_ours.numpy(), y_theirs.numpy())
    gen = kg.ImageFolderGenerator(root, labels=values, image_size=(4, 4), batch_size=2,
                                  seed=1)
    assert gen.label_mode == "raw" and gen.class_names is None
    by_file = dict(zip(gen.file_paths, values))
    seen, order = {}, np.asarray(gen.epoch_plan(0))
    assert order.tolist() != list(range(5))  # shuffled
    for i in range(len(gen)):
        x, y = gen[i]
        assert y.dtype == np.float32
        for k, value in zip(order[2 * i:2 * i + 2], y):
            seen[gen.file_paths[k]] = float(value)
    assert seen == by_file  # each image keeps its own value, shuffled or not
    rows = kg.ImageFolderGenerator(root, labels=[[v, 2 * v] for v in values],
                                   image_size=(4, 4), batch_size=5, shuffle=False)
    np.testing.assert_array_equal(rows[0][1], np.asarray([[v, 2 * v] for v in values],
                                                         "float32"))
    train = kg.ImageFolderGenerator(root, labels=values, image_size=(4, 4), batch_size=2,
                                    validation_split=0.4, subset="training", seed=3)
    val = kg.ImageFolderGenerator(root, labels=values, image_size=(4, 4), batch_size=2,
                                  validation_split=0.4, subset="validation", seed=3)
    assert sorted(train.file_paths + val.file_paths) == sorted(gen.file_paths)
    model = keras.Sequential([keras.Input((4, 4, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Flatten(), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    history = model.fit(train, validation_data=val, epochs=2, verbose=0)
    assert np.isfinite(history.history["val_loss"]).all()


@pytest.mark.parametrize("labels,kwargs,match", [
    ([0.5, 1, "cat", 0, 0], {}, r"must hold numbers only.*'cat'"),
    ([0.5, 1, True, 0, 0], {}, r"must hold numbers only.*True"),
    ([[0.5, 1], [1, 2], [0.0], [1, 1], [2, 2]], {}, r"one length.*\[1, 2\]"),
    ([0.5, 1.5, 2.5, 0.0, float("nan")], {}, "NaN"),
    ([0.5, 1.5, 2.5, 0.0, 1.0], dict(label_mode="categorical"), "encodes classes"),
    ([0.5, 1.5], {}, "one label per image file"),
])
def test_real_valued_labels_that_cannot_be_targets_are_named(tmp_path, labels, kwargs,
                                                             match):
    for i, rel in enumerate(["a/1.png", "a/2.png", "b/3.png", "b/4.png", "b/5.png"]):
        write_image(str(tmp_path / rel), seed=i)
    with pytest.raises(ValueError, match=match):
        kg.ImageFolderGenerator(tmp_path, image_size=(4, 4), labels=labels, **kwargs)


@pytest.mark.parametrize("kwargs,match", [
    (dict(labels=[0, 1]), r"one label per image file. Received: 2 labels for the 5"),
    (dict(labels=[0, 2, 2, 0, 0]), r"no file has class \[1\]"),
    (dict(labels=[0, "cat", 1, 0, 0]), "all integer class ids or all class names"),
    (dict(labels="folders"), "`labels` must be 'inferred'"),
    (dict(labels=[0, 1, 1, 0, 0], class_names=["a", "b"]), "`class_names` goes with"),
    (dict(subset="both", validation_split=0.2, seed=1), r"ImageFolderGenerator\.split"),
    (dict(crop_to_aspect_ratio=True, pad_to_aspect_ratio=True), "Only one of"),
])
def test_keras_argument_errors(tmp_path, kwargs, match):
    for i, rel in enumerate(["a/1.png", "a/2.png", "b/3.png", "b/4.png", "b/5.png"]):
        write_image(str(tmp_path / rel), seed=i)
    with pytest.raises(ValueError, match=match):
        kg.ImageFolderGenerator(tmp_path, image_size=(4, 4), **kwargs)


def test_split_returns_the_pair(image_folder):
    def flip(image, rng):
        return image[:, ::-1]

    train, val = kg.ImageFolderGenerator.split(image_folder, validation_split=0.25, seed=3,
                                               image_size=(6, 6), augment=flip,
                                               drop_remainder=True, batch_size=2)
    assert train.subset == "training" and val.subset == "validation"
    assert not set(train.file_paths) & set(val.file_paths)
    assert len(train.file_paths) + len(val.file_paths) == 12
    assert train.augment is flip and train.drop_remainder and train.shuffle
    assert val.augment is None and not val.drop_remainder and not val.shuffle
    alone = kg.ImageFolderGenerator(image_folder, validation_split=0.25, seed=3,
                                    subset="validation", image_size=(6, 6))
    assert alone.file_paths == val.file_paths
    with pytest.raises(TypeError, match="takes no `subset`"):
        kg.ImageFolderGenerator.split(image_folder, validation_split=0.25, seed=3,
                                      subset="training")


# ----------------------------------------------------------------- resizing as Keras
@pytest.mark.parametrize("size", [(30, 40), (45, 37), (100, 130)])
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest", "bicubic", "area",
                                           "lanczos3", "lanczos5", "gaussian",
                                           "mitchellcubic"])
def test_every_keras_interpolation_is_close_to_tensorflows(tmp_path, interpolation, size):
    """Mean absolute difference under 1 (of 255) from tf.image.resize (clipped to 0..255,
    as uint8 images are): see the mapping in docs/image-folder-generator.md."""
    image = smooth_image(60, 80)
    write_png(tmp_path / "c" / "0.png", image)
    gen = kg.ImageFolderGenerator(tmp_path, image_size=size, interpolation=interpolation,
                                  cache=None)
    ours = gen[0][0][0]
    theirs = np.clip(tf.image.resize(image, size, method=interpolation).numpy(), 0, 255)
    assert np.abs(ours - theirs).mean() < 1.0


def test_interpolation_names_are_case_insensitive_as_keras(image_folder):
    gen = kg.ImageFolderGenerator(image_folder, image_size=(4, 4), interpolation="Lanczos3")
    assert gen.interpolation == "lanczos3"


@pytest.mark.parametrize("flag", ["crop_to_aspect_ratio", "pad_to_aspect_ratio"])
@pytest.mark.parametrize("shape,size", [((60, 80), (30, 30)), ((80, 50), (24, 40)),
                                        ((33, 91), (40, 30))])
def test_aspect_ratio_matches_keras(tmp_path, flag, shape, size):
    image = smooth_image(*shape)
    write_png(tmp_path / "c" / "0.png", image)
    ours = kg.image_dataset_from_directory(tmp_path, image_size=size, verbose=False,
                                           format="kerasgen", **{flag: True})[0][0][0]
    theirs = next(iter(keras.utils.image_dataset_from_directory(
        tmp_path, image_size=size, verbose=False, **{flag: True})))[0][0].numpy()
    assert np.abs(ours - np.clip(theirs, 0, 255)).mean() < 1.0
    if flag == "pad_to_aspect_ratio":  # the same black bars, to the pixel
        np.testing.assert_array_equal(ours.sum(-1) == 0, theirs.sum(-1) == 0)


def test_crop_and_pad_geometry(tmp_path):
    image = np.zeros((20, 60, 3), np.uint8)
    image[:, 20:40] = 200  # the centre third is grey, the sides black
    write_png(tmp_path / "c" / "0.png", image)
    crop = kg.ImageFolderGenerator(tmp_path, image_size=(10, 10), crop_to_aspect_ratio=True,
                                   dtype="uint8")[0][0][0]
    assert (crop == 200).all()  # only the centre square is kept
    pad = kg.ImageFolderGenerator(tmp_path, image_size=(30, 30), pad_to_aspect_ratio=True,
                                  dtype="uint8", interpolation="nearest")[0][0][0]
    assert (pad[:10] == 0).all() and (pad[20:] == 0).all()  # bars above and below
    assert (pad[10:20, 10:20] == 200).all()


# ----------------------------------------------------------------- unknown arguments
@pytest.mark.parametrize("call,match", [
    (lambda d, c: kg.ImageFolderGenerator(d, target_size=(8, 8)),
     r"^ImageFolderGenerator\(\) got unexpected keyword argument 'target_size'\. "
     r"`target_size`: kerasgen's is image_size=\(height, width\)"),
    (lambda d, c: kg.ImageFolderGenerator(os.path.join(d, "not-there"), target_size=8),
     r"^ImageFolderGenerator\(\) got unexpected keyword argument 'target_size'"),
    (lambda d, c: kg.ImageFolderGenerator(d, class_mode="sparse"),
     r"class_mode='sparse' is label_mode='int'"),
    (lambda d, c: kg.ImageFolderGenerator(d, classes=["cat"]), "kerasgen's is class_names="),
    (lambda d, c: kg.CSVGenerator(c, dataframe=None), r"^CSVGenerator\(\).*kerasgen's is csv="),
    (lambda d, c: kg.CSVGenerator(c, validate_filenames=False),
     "kerasgen always checks that listed files exist"),
    (lambda d, c: kg.CSVGenerator(c, weight_col="weight"),
     r"kerasgen reads no weight column; pass sample_weight="),
    (lambda d, c: kg.CSVGenerator(c, horizontal_flip=True, zoom_range=0.1),
     r"arguments 'horizontal_flip', 'zoom_range'.*augment="),
    (lambda d, c: kg.ArrayGenerator(np.zeros((4, 2)), batchsize=2),
     r"^ArrayGenerator\(\) got .*did you mean `batch_size`\?"),
    (lambda d, c: kg.SQLGenerator(os.path.join(d, "db.sqlite"),
                                   "SELECT filename, label FROM t", random_state=0),
     r"^SQLImageGenerator\(\) got .*kerasgen's is seed="),
    (lambda d, c: kg.ImageFolderGenerator(d, format="tf"), "every Keras backend reads"),
    # labels= where the labels come from elsewhere (Python alone said "got multiple
    # values for keyword argument 'labels'", from inside kerasgen)
    (lambda d, c: kg.CSVGenerator(c, labels=["cat"]),
     r"^CSVGenerator\(\) takes its labels from the `y_col` column \(y_col=\.\.\.\), not "
     r"from a `labels` argument\. Received: labels=\['cat'\]\.$"),
    (lambda d, c: kg.ArrayGenerator(np.zeros((4, 2)), labels=[0, 1, 0, 1]),
     r"^ArrayGenerator\(\) takes its labels from `y`"),
    (lambda d, c: kg.SQLGenerator(os.path.join(d, "db.sqlite"),
                                   "SELECT filename, label FROM t", labels=["cat"]),
     r"^SQLImageGenerator\(\) takes its labels from the `y_col` column"),
    (lambda d, c: kg.SQLGenerator(os.path.join(d, "db.sqlite"), "SELECT 1 AS a, 'cat' AS "
                                   "label", x_col=["a"], labels=["cat"]),
     r"^SQLFeatureGenerator\(\) takes its labels from the `y_col` column"),
])
def test_unknown_keyword_names_the_generator_and_kerasgens_name(image_folder, csv_file,
                                                                  call, match):
    import sqlite3

    db = os.path.join(image_folder, "db.sqlite")
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS t (filename TEXT, label TEXT)")
        connection.execute("INSERT INTO t VALUES ('cat/cat_0.png', 'cat')")
    with pytest.raises(TypeError, match=match):
        call(str(image_folder), csv_file)


def test_unknown_keyword_in_a_custom_subclass():
    class Records(kg.Generator):
        def __init__(self, n, **kwargs):
            super().__init__(num_samples=n, **kwargs)

        def load_sample(self, index):
            return np.zeros(2)

    with pytest.raises(TypeError, match=r"^Records\(\) got unexpected keyword argument "
                                        r"'suffle'\. `suffle`: did you mean `shuffle`\?"):
        Records(3, suffle=True)


# ----------------------------------------------------------------- workers=0, queue=0
@pytest.mark.parametrize("kwargs", [dict(workers=0), dict(workers=0, use_multiprocessing=True),
                                    dict(workers=2, max_queue_size=0)],
                         ids=["workers=0", "workers=0-processes", "max_queue_size=0"])
def test_workers_and_queue_zero_as_keras_accepts_them(image_folder, kwargs):
    gen = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4, seed=2,
                                  **kwargs)
    assert gen.workers == kwargs["workers"]
    assert gen.max_queue_size == kwargs.get("max_queue_size", 10)
    assert not gen.use_multiprocessing or gen.workers > 0  # no worker, no process
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(gen, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all() and gen.epoch == 2
    reference = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4, seed=2)
    reference.set_state(gen.get_state())
    np.testing.assert_array_equal(gen[0][0], reference[0][0])


# ----------------------------------------------------------------- command line, import
def test_python_m_kerasgen_help_starts_without_tensorflow():
    result = subprocess.run([sys.executable, "-m", "kerasgen", "--help"],
                            capture_output=True, text=True, timeout=60, env=ENV)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage: kerasgen")
    for command in ("preview", "inspect", "bench"):
        assert command in result.stdout
    assert "tensorflow" not in result.stderr.lower() and result.stderr == ""
    code = ("import sys, kerasgen.cli, kerasgen as kg; kg.inspect, kg.rebalance; "
            "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))")
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60, env=ENV)
    assert imported.stdout.strip() == "[]", imported.stderr[-2000:]


def test_public_names_load_lazily_and_dir_is_exact():
    assert dir(kg) == sorted(kg.__all__ + ["__version__"])
    for name in kg.__all__:
        assert getattr(kg, name) is not None
    assert kg.ImageFolderGenerator.__module__ == "kerasgen.generators"
    assert callable(kg.rebalance) and callable(kg.image_dataset_from_directory)
    with pytest.raises(AttributeError, match="no attribute 'ImageGenerator'"):
        kg.ImageGenerator


# Modules without a leading underscore, and why each is public: kg.__all__ names it, it
# defines a name of kg.__all__, or it is a documented entry point. Everything else is
# internal and starts with "_" (docs/architecture.md).
PUBLIC_MODULES = {
    "augment": "kg.augment", "callbacks": "kg.callbacks", "gpu": "kg.gpu",
    "samplers": "kg.samplers", "sources": "kg.sources", "viz": "kg.viz",
    "rebalance": "kg.rebalance",
    "base": "kg.Generator", "generators": "kg.ArrayGenerator and the image generators",
    "image_dataset": "kg.image_dataset_from_directory", "inspection": "kg.inspect",
    "sql": "kg.SQLGenerator", "tfrecord": "kg.TFRecordGenerator",
    "arrayrecord": "kg.ArrayRecordGenerator", "webdataset": "kg.WebDatasetGenerator",
    "stream": "kg.StreamGenerator", "detection": "kg.DetectionGenerator",
    "timeseries": "kg.TimeseriesGenerator and kg.timeseries_dataset_from_array",
    "text": "kg.text_dataset_from_directory",
    "audio": "kg.AudioFolderGenerator and kg.audio_dataset_from_directory",
    "table": "kg.TableGenerator",
    "cli": "the kerasgen command", "loader": "the loader stage (docs/architecture.md)",
}


INTERNAL_PACKAGES = {"pipeline": "how batches are made, below the public API",
                     "arrays": "batch arrays and the memory they live in",
                     "labels": "label modes, targets and their encoders",
                     "storage": "local and remote paths, the remote cache, confinement",
                     "loading": "the loader stage and its image options",
                     "formats": "the readers of shard and record formats",
                     "builders": "what the public generators' constructors share",
                     "adapter": "what base.Generator is made of beside itself"}


def _modules():
    """{dotted name relative to the package: path} of every kerasgen module; a package's
    `__init__.py` is the package's name ("samplers", "pipeline")."""
    package = Path(kg.__file__).parent
    found = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def test_every_module_is_public_on_purpose_or_internal_by_name():
    modules = set(_modules()) - {"__init__", "__main__"}
    internal = {m for m in modules if any(part.startswith("_") for part in m.split("."))
                or m.split(".")[0] in INTERNAL_PACKAGES}
    assert sorted(modules - internal) == sorted(PUBLIC_MODULES)
    for module, reason in PUBLIC_MODULES.items():
        if reason.startswith("kg.") and " " not in reason:
            assert reason[3:] in kg.__all__, (module, reason)
    for name in INTERNAL_PACKAGES:  # says so where a reader looks first
        assert "internal" in importlib.import_module(f"kerasgen.{name}").__doc__


# The layers of docs/architecture.md, lowest first. A folder is one layer (all of its
# modules); a module at the top level names its layer here. A module may import (outside
# `if TYPE_CHECKING:`) only modules of its own layer or a lower one, so the flow bytes ->
# source -> order/sampler -> loader -> augment -> batch -> feeding -> Generator shows in
# the imports and in the folders.
LAYERS = [
    ("foundations", {"_checks", "_redact", "_typing", "_seeding", "_atomic", "_progress",
                     "_stats", "_quiet", "_budget"}),
    ("arrays", {"arrays/"}),
    ("labels", {"labels/"}),
    ("storage", {"storage/"}),
    ("loading", {"loading/", "loader"}),
    ("formats", {"formats/"}),
    ("sources", {"sources/"}),
    ("samplers", {"samplers/"}),
    ("augment", {"augment", "_image_data_generator"}),
    ("pipeline", {"pipeline/", "_keras_compat"}),
    ("adapter", {"adapter/", "base"}),
    ("generators", {"builders/", "generators", "sql", "tfrecord", "arrayrecord",
                    "webdataset", "stream", "image_dataset", "detection", "timeseries",
                    "text", "audio", "table"}),
    ("around", {"callbacks", "inspection", "cli", "viz", "gpu", "rebalance", "_preload",
                "__init__", "__main__"}),
]
FOLDERS = {name[:-1] for _, names in LAYERS for name in names if name.endswith("/")}


def _layer(module):
    """The index in LAYERS of `module` ("storage.remote": the storage folder's layer)."""
    folder = module.split(".")[0]
    key = folder + "/" if folder in FOLDERS else module
    return next((k for k, (_, names) in enumerate(LAYERS) if key in names), None)


def _kerasgen_imports(path, known):
    """The kerasgen modules (of `known`) `path` imports at run time (TYPE_CHECKING blocks
    left out): `from kerasgen.pipeline import order` imports "pipeline.order",
    `from kerasgen.sources._core import X` "sources._core"."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    hidden = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
              and ast.unparse(block.test).endswith("TYPE_CHECKING")
              for node in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kerasgen"):
            rest = node.module[len("kerasgen."):] if node.module != "kerasgen" else ""
            for alias in node.names:
                child = f"{rest}.{alias.name}".lstrip(".")
                found.add(child if child in known else rest)
        elif isinstance(node, ast.Import):
            found |= {a.name[len("kerasgen."):] for a in node.names
                      if a.name.startswith("kerasgen.")}
    return found


def test_imports_point_one_way_down_the_layers():
    modules = _modules()
    layer_of = {m: _layer(m) for m in modules}
    assert [m for m, k in layer_of.items() if k is None] == [], \
        "put a new top-level module in a layer of LAYERS (or in a folder)"
    assert {p.parent.name for p in Path(kg.__file__).parent.glob("*/__init__.py")} == \
        FOLDERS, "a new folder is a layer: put it in LAYERS"
    upward = [f"{name} ({LAYERS[layer_of[name]][0]}) imports {other} "
              f"({LAYERS[layer_of[other]][0]})"
              for name, path in sorted(modules.items())
              for other in sorted(_kerasgen_imports(path, modules) - {name})
              if layer_of.get(other, -1) > layer_of[name]]
    assert upward == []


def test_preview_batch_is_the_generators_first_batch(image_folder):
    def jitter(image, rng):
        return np.clip(image.astype(int) + rng.integers(-20, 20), 0, 255).astype(np.uint8)

    for transform in (None, jitter):
        preview = PreviewBatch(str(image_folder), (10, 10), 5, 4, transform)
        gen = kg.ImageFolderGenerator(image_folder, image_size=(10, 10), batch_size=5,
                                      seed=4, augment=transform, label_mode="int",
                                      dtype="uint8", verbose=0)
        x, y = gen[0]
        np.testing.assert_array_equal(preview.x, x)
        np.testing.assert_array_equal(preview.y, y)
        assert preview.class_names == gen.class_names


def test_preview_batch_of_a_flat_folder_is_the_unlabeled_generators(tmp_path):
    for i in range(7):
        write_png(tmp_path / f"{i}.png", smooth_image(12, 14, seed=i))
    preview = PreviewBatch(str(tmp_path), (10, 10), 5, 4)
    gen = kg.ImageFolderGenerator(tmp_path, image_size=(10, 10), batch_size=5, seed=4,
                                  label_mode=None, dtype="uint8", verbose=0)
    np.testing.assert_array_equal(preview.x, gen[0])
    assert preview.y is None and preview.label_mode is None and preview.class_names == []
