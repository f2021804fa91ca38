"""label_mode="input": each sample's target is its own augmented input (autoencoders)."""

import keras
import numpy as np
import pytest

import kerasgen as kg
from tests.test_remote import batches


def flip(image, rng):  # and invert: the fixture's images may be symmetric
    return 255 - image[:, ::-1] if rng.random() < 0.5 else image


COMMON = dict(label_mode="input", image_size=(8, 8), batch_size=4, seed=5, rescale=1 / 255,
              cache=None)


def test_an_autoencoder_trains_on_a_folder_whose_targets_are_the_augmented_inputs(
        image_folder):
    gen = kg.ImageFolderGenerator(image_folder, augment=flip, **COMMON)
    assert gen.label_mode == "input" and gen.num_samples == 12  # nested and all classes
    plain = kg.ImageFolderGenerator(image_folder, labels=None, image_size=(8, 8),
                                    batch_size=4, seed=5, rescale=1 / 255, augment=flip,
                                    cache=None)
    assert gen.file_paths == plain.file_paths
    for i in range(len(gen)):
        x, y = gen[i]
        np.testing.assert_array_equal(y, x)  # the target is the augmented input itself
        np.testing.assert_array_equal(x, plain[i])
    flipped = [not np.array_equal(gen[i][0], kg.ImageFolderGenerator(
        image_folder, **COMMON)[i][0]) for i in range(len(gen))]
    assert any(flipped)  # augment= reached the batches (and so the targets)
    model = keras.Sequential([
        keras.Input((8, 8, 3)),
        keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(3, 3, padding="same", activation="sigmoid")])
    model.compile(keras.optimizers.Adam(0.01), "mse")
    history = model.fit(gen, epochs=30, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]


def test_input_targets_are_the_same_with_threads_and_processes(image_folder):
    one = batches(kg.ImageFolderGenerator(image_folder, augment=flip, **COMMON))
    for options in (dict(workers=2), dict(workers=2, use_multiprocessing=True)):
        gen = kg.ImageFolderGenerator(image_folder, augment=flip, **COMMON, **options)
        got = batches(gen)
        gen.on_epoch_end()
        for (x, y), (x1, y1) in zip(got, one):
            np.testing.assert_array_equal(x, x1)
            np.testing.assert_array_equal(y, y1)


def test_arrays_and_csv_rows_take_input_targets(image_folder, csv_file):
    x = np.random.default_rng(0).random((10, 6)).astype("float32")
    gen = kg.ArrayGenerator(x, label_mode="input", batch_size=5, shuffle=False)
    got_x, got_y = gen[1]
    np.testing.assert_array_equal(got_x, x[5:])
    np.testing.assert_array_equal(got_y, x[5:])
    rows = kg.CSVGenerator(csv_file, directory=image_folder, label_mode="input",
                           image_size=(8, 8), batch_size=4, shuffle=False)
    x, y = rows[0]
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("make,match", [
    (lambda d: kg.ImageFolderGenerator(d, labels=[0] * 12, label_mode="input"),
     "takes no `labels` list"),
    (lambda d: kg.ArrayGenerator(np.zeros((4, 2)), np.zeros(4), label_mode="input"),
     "takes no labels"),
    (lambda d: kg.ImageFolderGenerator(d, label_mode="inputs"), "label_mode"),
])
def test_input_targets_refuse_labels(image_folder, make, match):
    with pytest.raises(ValueError, match=match):
        make(image_folder)
