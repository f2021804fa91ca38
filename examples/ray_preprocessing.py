"""Preprocessing on a Ray cluster: the batches of a kerasgen generator made by Ray actors
(`engine=kg.RayEngine(...)`), byte-identical to those made in the training process, also
after an actor is lost mid-epoch.

    pip install "kerasgen3[ray]"
    python examples/ray_preprocessing.py            # Ray on this machine (ray.init())
    RAY_ADDRESS=auto python examples/ray_preprocessing.py   # a running cluster

The data: scikit-learn's bundled digits (8x8 images, 10 classes), augmented per sample.
"""

import numpy as np
import ray
import keras
from sklearn.datasets import load_digits

import kerasgen as kg

if not ray.is_initialized():  # RAY_ADDRESS names a cluster; otherwise Ray starts here
    ray.init(logging_level="ERROR")

digits = load_digits()
x = digits.images[..., None].astype("float32") / 16.0
y = digits.target


def shift(image, rng):
    """A random shift of up to one pixel (per sample, from kerasgen's seeded draws)."""
    return np.roll(image, tuple(rng.integers(-1, 2, size=2)), axis=(0, 1))


def digits_generator(**kwargs):
    return kg.ArrayGenerator(x, y, batch_size=64, seed=7, augment=shift, **kwargs)


engine = kg.RayEngine(actors=2)
gen = digits_generator(engine=engine)
keras.utils.set_random_seed(0)  # the model's initial weights
model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                          keras.layers.Dense(64, activation="relu"),
                          keras.layers.Dense(10)])
model.compile(keras.optimizers.Adam(0.01),
              keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
history = model.fit(gen, epochs=5, verbose=0)
print(f"trained 5 epochs on Ray actors: accuracy {history.history['accuracy'][-1]:.2f}")

# The same batches as a generator without the engine: one epoch, compared byte for byte
local, remote = digits_generator(), digits_generator(engine=engine)
same = all(np.array_equal(a, b) for i in range(len(local))
           for a, b in zip(local[i], remote[i]))
print(f"{len(local)} batches identical to those made here: {same}")

# An actor lost mid-epoch: its batches are made again by a new actor, the same bytes
remote = digits_generator(engine=engine)
batches = []
for i in range(len(remote)):
    batches.append(remote[i])
    if i == 1:
        ray.kill(engine.actor_handles()[0], no_restart=True)
same = all(np.array_equal(a, b) for i in range(len(local))
           for a, b in zip(local[i], batches[i]))
print(f"an actor killed after batch 1: the epoch still identical: {same}")
