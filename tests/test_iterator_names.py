"""ImageDataGenerator's iterator names (`n`, `samples`, `class_indices`, `classes`,
`filenames`, `reset()`, `next()`), against Keras's own legacy ImageDataGenerator (still
shipped in Keras 3 under keras.src.legacy), and a program written for it."""

import keras
import numpy as np
import pandas as pd
import pytest
from keras.src.legacy.preprocessing.image import ImageDataGenerator

import kerasgen as kg


def program(it, model):
    """What a flow_from_directory program does: a batch by next(), fit, reset(), then
    predictions lined up with `classes` and `filenames`."""
    x, _ = next(it)
    model.fit(it, epochs=1, verbose=0)
    it.reset()
    predicted = model.predict(it, verbose=0).argmax(axis=1)
    names = {v: k for k, v in it.class_indices.items()}
    report = [(f, names[c], names[p]) for f, c, p in zip(it.filenames, it.classes, predicted)]
    return x.shape, it.n, it.samples, len(predicted), [(f, c) for f, c, _ in report]


def tiny_model():
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy")
    return model


def test_a_flow_from_directory_program_gives_what_keras_iterator_gives(image_folder):
    theirs = ImageDataGenerator(rescale=1 / 255).flow_from_directory(
        str(image_folder), target_size=(8, 8), batch_size=4, class_mode="sparse",
        shuffle=False)
    ours = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4,
                                   rescale=1 / 255, shuffle=False)
    assert program(ours, tiny_model()) == program(theirs, tiny_model())
    assert ours.class_indices == theirs.class_indices
    np.testing.assert_array_equal(ours.classes, theirs.classes)
    assert ours.classes.dtype == theirs.classes.dtype
    ours.reset()  # batches by next() follow `classes`, then start the next epoch
    labels = np.concatenate([next(ours)[1] for _ in range(len(ours))])
    np.testing.assert_array_equal(labels, ours.classes)
    np.testing.assert_array_equal(next(ours)[0], ours[0][0])


def test_next_walks_the_epochs_order_and_reshuffles_after_the_last_batch(image_folder):
    gen = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=5, seed=4)
    first = [next(gen)[1] for _ in range(len(gen))]
    for got, i in zip(first, range(len(gen))):
        np.testing.assert_array_equal(got, gen[i][1])
    assert gen.epoch == 0
    again = next(gen)  # past the last batch: on_epoch_end(), then the new epoch's first
    assert gen.epoch == 1
    np.testing.assert_array_equal(again[1], gen[0][1])


def test_a_flow_from_dataframe_program_reads_the_same_names(image_folder):
    files = sorted(p.relative_to(image_folder).as_posix()
                   for p in image_folder.rglob("*") if p.suffix in (".png", ".jpg"))
    df = pd.DataFrame({"filename": files, "class": [f.split("/")[0] for f in files]})
    theirs = ImageDataGenerator().flow_from_dataframe(
        df, directory=str(image_folder), target_size=(8, 8), class_mode="sparse",
        batch_size=4, shuffle=False)
    ours = kg.CSVGenerator(df, directory=image_folder, y_col="class", image_size=(8, 8),
                           batch_size=4, shuffle=False)
    assert ours.filenames == theirs.filenames == files
    assert ours.class_indices == theirs.class_indices
    np.testing.assert_array_equal(ours.classes, theirs.classes)
    assert ours.n == ours.samples == theirs.n == theirs.samples


def test_array_generators_have_the_flow_iterators_names_but_no_files():
    x, y = np.zeros((10, 4, 4, 3), "float32"), np.arange(10) % 2
    theirs = ImageDataGenerator().flow(x, y, batch_size=4, shuffle=False)
    ours = kg.ArrayGenerator(x, y, batch_size=4, shuffle=False)
    assert ours.n == theirs.n == 10
    np.testing.assert_array_equal(next(ours)[1], next(theirs)[1])
    with pytest.raises(AttributeError, match="reads no files"):
        ours.filenames
