"""kerasgen quick start: train a small CNN from an image folder with a validation split.

Writes scikit-learn's bundled handwritten digits (real data, no download) as an image
folder, one subfolder per digit, then trains from two ImageFolderGenerators that share a
seeded split, and prints the validation accuracy.

    python examples/quickstart.py [--epochs 12] [--data demo_data/digits]
"""

import argparse
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import cv2  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import kerasgen as kg  # noqa: E402  (cheap: Keras starts on first use)
from kerasgen.cli import tensorflow_quiet  # noqa: E402

with tensorflow_quiet():  # TensorFlow's start-up log lines stay out of the demo's output
    import keras


def write_digits_folder(root):
    """One PNG per digit image (8x8, 0-16 scaled to 0-255) in root/<digit>/."""
    digits = load_digits()
    for k, (image, label) in enumerate(zip(digits.images, digits.target)):
        folder = os.path.join(root, str(label))
        os.makedirs(folder, exist_ok=True)
        pixels = np.round(image * (255 / 16)).astype(np.uint8)
        cv2.imwrite(os.path.join(folder, f"{k:04d}.png"), pixels)
    return len(digits.images)


def build_model(num_classes):
    return keras.Sequential([
        keras.Input((16, 16, 1)),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.25),
        keras.layers.Dense(num_classes, activation="softmax"),
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--data", default=os.path.join("demo_data", "digits"))
    args = parser.parse_args()

    start = time.time()
    if not os.path.isdir(args.data):
        print(f"Writing {write_digits_folder(args.data)} digit images to {args.data}/")
    common = dict(image_size=(16, 16), color_mode="grayscale", rescale=1 / 255,
                  validation_split=0.2, seed=1, batch_size=32)
    train = kg.ImageFolderGenerator(args.data, subset="training", **common)
    val = kg.ImageFolderGenerator(args.data, subset="validation", shuffle=False, **common)
    print(f"training: {train.num_samples} images, validation: {val.num_samples} images, "
          f"classes: {train.class_names}")

    keras.utils.set_random_seed(1)
    model = build_model(train.num_classes)
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(train, validation_data=val, epochs=args.epochs, verbose=2)
    loss, accuracy = model.evaluate(val, verbose=0)
    print(f"validation accuracy: {accuracy:.3f} ({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
