"""A custom dataset in a few lines: subclass kg.Generator.

Each sample is a .npy file on disk with a class label. The subclass says how many samples
there are, their labels and how to load one; batching, per-epoch shuffling from one seed,
label encoding and workers come from kg.Generator.

Run:  KERAS_BACKEND=tensorflow python examples/custom_dataset.py
"""

import collections
import os
import tempfile

import keras
import numpy as np

import kerasgen as kg

Record = collections.namedtuple("Record", ["path", "label"])


class MyData(kg.Generator):
    def __init__(self, records, **kwargs):
        self.records = records
        super().__init__(num_samples=len(records), labels=[r.label for r in records], **kwargs)

    def load_sample(self, index):  # -> x, or (x, y) when it carries its own target
        return np.load(self.records[index].path)

    def describe_sample(self, index):  # how error messages name a sample
        return self.records[index].path


def write_records(folder, n, rng):
    """n small .npy feature vectors: "low" samples centred at -1, "high" ones at +1."""
    records = []
    for i in range(n):
        label = "high" if i % 2 else "low"
        centre = 1.0 if label == "high" else -1.0
        path = os.path.join(folder, f"sample_{i:03d}.npy")
        np.save(path, rng.normal(centre, 0.7, size=16).astype("float32"))
        records.append(Record(path, label))
    return records


def main():
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        records = write_records(folder, 96, rng)
        train = MyData(records[:64], batch_size=16, seed=42)
        val = MyData(records[64:], batch_size=16, shuffle=False)
        x, y = train[0]
        print(f"{train!r}")
        print(f"class_names={train.class_names}  batch x {x.shape} {x.dtype}, "
              f"y {y.shape} {y.dtype} (class ids)")

        model = keras.Sequential([
            keras.Input((16,)),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dense(train.num_classes, activation="softmax"),
        ])
        model.compile(optimizer=keras.optimizers.Adam(0.05),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        model.fit(train, validation_data=val, epochs=2, verbose=0)
        loss, accuracy = model.evaluate(val, verbose=0)
        print(f"custom dataset: trained 2 epochs on {train.num_samples} .npy files, "
              f"validation accuracy {accuracy:.2f}, train generator now at epoch "
              f"{train.epoch}")


if __name__ == "__main__":
    main()
