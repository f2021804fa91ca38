"""Code written for Keras, on kerasgen generators: unlabeled batches are `x` alone, a pass
over a generator is an epoch, a ported `Sequence` keeps its `self.labels`, and `predict`
on a shuffling generator says how its rows are ordered."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasgen as kg

X = np.arange(40 * 3, dtype="float32").reshape(40, 3)


# ----------------------------------------------------------------- unlabeled batches: x
class GAN(keras.Model):
    """keras.io's DCGAN shape: `train_step(self, real_images)` takes the batch as it
    comes, which for an unlabeled dataset is the image tensor itself."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1)
        self.seen = []

    def call(self, x):
        return self.dense(x)

    def train_step(self, real_images):
        self.seen.append(type(real_images).__name__)
        batch_size = tf.shape(real_images)[0]  # fails on a tuple: no .dtype
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(self(real_images) ** 2) + 0 * tf.cast(batch_size,
                                                                          "float32")
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        return {"loss": loss}


def test_a_gans_train_step_gets_the_images_alone(image_folder):
    dataset = kg.image_dataset_from_directory(image_folder, label_mode=None,
                                              image_size=(4, 4), batch_size=4, seed=0,
                                              verbose=False)
    model = GAN()
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.fit(dataset, epochs=1, verbose=0)
    assert model.seen and "tuple" not in model.seen


def test_fit_on_an_unlabeled_generator_gives_train_step_what_keras_pydataset_gives():
    """Keras's PyDataset adapter wraps a batch that is x alone as (x,) for every PyDataset
    (`_standardize_batch`); kerasgen's generators yield x alone, as a PyDataset may."""

    class Plain(keras.utils.PyDataset):
        def __len__(self):
            return 5

        def __getitem__(self, index):
            return X[index * 8:(index + 1) * 8]

    seen = {}
    for name, data in [("keras", Plain()), ("kerasgen", kg.ArrayGenerator(X, batch_size=8))]:
        model = GAN()
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
        try:
            model.fit(data, epochs=1, verbose=0)
        except ValueError:  # the tuple reaches call(): the same for both
            pass
        seen[name] = model.seen[:1]
    assert seen["keras"] == seen["kerasgen"] == ["tuple"]


def test_unlabeled_predict_has_one_row_per_sample_and_a_tuple_x_stays_wrapped():
    gen = kg.ArrayGenerator(X, batch_size=8, shuffle=False)
    assert isinstance(gen[0], np.ndarray)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Identity()])
    np.testing.assert_array_equal(model.predict(gen, verbose=0), X)
    both = kg.ArrayGenerator({"a": X, "b": X}, batch_size=8, shuffle=False)
    assert isinstance(both[0], dict)  # a dict of inputs alone, as Keras reads it


# ----------------------------------------------------------------- a pass is an epoch
def test_each_for_loop_over_a_generator_is_the_next_epoch():
    gen = kg.ArrayGenerator(X, batch_size=8, seed=3)
    passes = [np.concatenate(list(gen)) for _ in range(3)]
    assert gen.epoch == 2
    for epoch, seen in enumerate(passes):
        np.testing.assert_array_equal(seen, X[gen.epoch_plan(epoch)])
    assert not np.array_equal(passes[0], passes[1])
    again = kg.ArrayGenerator(X, batch_size=8, seed=3)
    np.testing.assert_array_equal(np.concatenate(list(again)), passes[0])  # one seed


def test_a_loop_that_calls_on_epoch_end_itself_advances_once_per_epoch():
    gen = kg.ArrayGenerator(X, batch_size=8, seed=3)
    for epoch in range(3):
        seen = np.concatenate([batch for batch in gen])
        np.testing.assert_array_equal(seen, X[gen.epoch_plan(epoch)])
        gen.on_epoch_end()  # as Keras does after each epoch of fit
    assert gen.epoch == 3


def test_fit_then_a_for_loop_reads_the_epoch_after_fits():
    gen = kg.ArrayGenerator(X, X[:, 0], batch_size=8, seed=5)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.fit(gen, epochs=2, verbose=0)
    assert gen.epoch == 2
    np.testing.assert_array_equal(np.concatenate([x for x, _ in gen]), X[gen.epoch_plan(2)])
    assert gen.epoch == 2  # a first pass serves the current epoch


# ----------------------------------------------------------------- a ported Sequence
class CaptchaDataset(kg.Generator):
    """keras.io's OCR `Sequence`, ported: `self.labels` is its own list of strings."""

    def __init__(self, images, labels, **kwargs):
        self.images = images
        self.labels = labels  # before super().__init__(), as ported code does
        super().__init__(num_samples=len(images), label_mode="raw", **kwargs)

    def load_sample(self, index):
        return self.images[index], np.float32(len(self.labels[index]))


def test_a_ported_sequence_keeps_its_own_labels_attribute():
    words = ["ab", "abc", "a", "abcd"] * 5
    gen = CaptchaDataset(X[:20], words, batch_size=5, shuffle=False)
    assert gen.labels is words
    x, y = gen[0]
    np.testing.assert_array_equal(y, [2, 3, 1, 4, 2])
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.fit(gen, epochs=1, verbose=0)
    gen.labels = ["x"] * 20  # and after super().__init__() too
    assert gen[0][1].tolist() == [1] * 5


def test_predict_on_a_shuffling_generator_warns_once_with_the_order():
    gen = kg.ArrayGenerator(X, batch_size=8, seed=1)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Identity()])
    with pytest.warns(UserWarning, match=r"order of epoch 0 .*row i is sample "
                                         r"gen\.epoch_plan\(0\)\[i\].*shuffle=False"):
        rows = model.predict(gen, verbose=0)
    np.testing.assert_array_equal(rows, X[gen.epoch_plan(0)])
    np.testing.assert_array_equal(rows[np.argsort(gen.epoch_plan(0))], X)  # as it says
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.predict(gen, verbose=0)  # once per generator
        model.predict(kg.ArrayGenerator(X, batch_size=8, shuffle=False), verbose=0)
