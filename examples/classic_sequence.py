"""The classic hand-written keras.utils.Sequence, and the kerasgen line that replaces it.

`DataGenerator` below is the well-known tutorial pattern (list_IDs, a labels dict,
`__data_generation`, `on_epoch_end` with `np.random.shuffle`), here fed from scikit-learn's
bundled 8x8 digits instead of one .npy file per ID. Both pipelines train the same small
model for two epochs; then the script shows what the hand-written one gets wrong.

Run:  KERAS_BACKEND=tensorflow python examples/classic_sequence.py
"""

import warnings

import keras
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import kerasgen as kg


# --------------------------------------------------------------- the classic hand-written one
class DataGenerator(keras.utils.Sequence):
    "Generates data for Keras"

    def __init__(self, list_IDs, labels, images, batch_size=32, dim=(8, 8), n_channels=1,
                 n_classes=10, shuffle=True):
        "Initialization"
        self.dim = dim
        self.batch_size = batch_size
        self.labels = labels
        self.list_IDs = list_IDs
        self.images = images  # the tutorial reads np.load('data/' + ID + '.npy') instead
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.shuffle = shuffle
        self.on_epoch_end()

    def __len__(self):
        "Denotes the number of batches per epoch"
        return int(np.floor(len(self.list_IDs) / self.batch_size))

    def __getitem__(self, index):
        "Generate one batch of data"
        indexes = self.indexes[index * self.batch_size:(index + 1) * self.batch_size]
        list_IDs_temp = [self.list_IDs[k] for k in indexes]
        X, y = self.__data_generation(list_IDs_temp)
        return X, y

    def on_epoch_end(self):
        "Updates indexes after each epoch"
        self.indexes = np.arange(len(self.list_IDs))
        if self.shuffle == True:  # noqa: E712 (kept as in the tutorial)
            np.random.shuffle(self.indexes)

    def __data_generation(self, list_IDs_temp):
        "Generates data containing batch_size samples"  # X : (n_samples, *dim, n_channels)
        X = np.empty((self.batch_size, *self.dim, self.n_channels))
        y = np.empty((self.batch_size), dtype=int)
        for i, ID in enumerate(list_IDs_temp):
            X[i,] = self.images[ID]
            y[i] = self.labels[ID]
        return X, keras.utils.to_categorical(y, num_classes=self.n_classes)


def make_model():
    keras.utils.set_random_seed(0)  # same initial weights for both pipelines
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])
    model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
    return model


def main():
    digits = load_digits()  # bundled with scikit-learn, no download
    x = (digits.images / 16.0).astype("float32")[..., None]  # (1797, 8, 8, 1)
    y = digits.target
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, random_state=0, stratify=y)
    y_test_onehot = keras.utils.to_categorical(y_test, 10)

    # The hand-written way: IDs, a partition, a labels dict, and the class above.
    ids = [f"id-{i}" for i in range(len(x_train))]
    labels = dict(zip(ids, y_train))
    images = dict(zip(ids, x_train))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        classic = DataGenerator(ids, labels, images, batch_size=32)
        model = make_model()
        model.fit(classic, epochs=2, verbose=0)
    _, classic_acc = model.evaluate(x_test, y_test_onehot, verbose=0)

    # The kerasgen way: one line.
    gen = kg.ArrayGenerator(x_train, y_train, batch_size=32, seed=0, label_mode="categorical")
    model = make_model()
    model.fit(gen, epochs=2, verbose=0)
    _, kg_acc = model.evaluate(x_test, y_test_onehot, verbose=0)

    print(f"hand-written DataGenerator test accuracy: {classic_acc:.3f}")
    print(f"kg.ArrayGenerator         test accuracy: {kg_acc:.3f}")

    # ------------------------------------------------------------ what the classic gets wrong
    print("\nWhat the hand-written Sequence gets wrong:")
    n = len(ids)
    seen = len(classic) * classic.batch_size
    print(f"- __len__ uses floor: {n - seen} of {n} samples are dropped every epoch "
          f"({len(classic)} batches); kerasgen keeps the last partial batch "
          f"({len(gen)} batches) unless drop_remainder=True.")
    a = DataGenerator(ids, labels, images)[0][1].argmax(1)
    b = DataGenerator(ids, labels, images)[0][1].argmax(1)
    same_classic = np.array_equal(a, b)
    same_kg = np.array_equal(
        kg.ArrayGenerator(x_train, y_train, seed=0, label_mode="int")[0][1],
        kg.ArrayGenerator(x_train, y_train, seed=0, label_mode="int")[0][1])
    print(f"- np.random.shuffle uses the unseeded global RNG: two identical generators give "
          f"the same first batch? classic {same_classic}, kerasgen (seed=0) {same_kg}. "
          "Seeding np.random globally couples the order to every other global draw.")
    print("- the order lives in mutable state (self.indexes), so batch b of epoch e cannot "
          "be recomputed or resumed after a restart; kerasgen's order is a pure function of "
          f"(seed, epoch): gen.epoch_plan(1)[:5] = {gen.epoch_plan(1)[:5]}.")
    print("- on_epoch_end runs in __init__ and again when Keras 3 starts fit, so the data is "
          "shuffled twice before the first batch and an epoch counter kept there is off by "
          f"one; kerasgen ignores Keras's initial call (gen.epoch after 2 epochs: {gen.epoch}).")
    print("- add augmentation with np.random in __getitem__ and batches depend on the workers: "
          "forked processes inherit the same global RNG state and threads interleave draws; "
          "kerasgen's augment(x, rng) gets rng from (seed, epoch, position in the epoch).")
    super_warned = any("super().__init__" in str(w.message) for w in caught)
    print(f"- no super().__init__(**kwargs): Keras warns ({super_warned}) and it runs with "
          "workers=1: Keras 3's fit() no longer takes workers, the PyDataset must.")
    print("- X is float64 (np.empty default), twice the memory of float32, and every batch is "
          "a Python loop over samples; kerasgen gathers a batch with one np.take.")


if __name__ == "__main__":
    main()
