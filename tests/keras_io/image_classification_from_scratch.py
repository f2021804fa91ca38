# ruff: noqa: E402
# keras.io example, ported to run offline with kerasgen's image_dataset_from_directory.
#
# Source: keras-team/keras-io, examples/vision/image_classification_from_scratch.py,
#   the Keras 3 version ("Last modified: 2023/11/09", author fchollet),
#   https://keras.io/examples/vision/image_classification_from_scratch/
#   Read from the code cells of its generated rendering
#   (examples/vision/md/image_classification_from_scratch.md, same version); the .py
#   commits stored in the code index (b8bb4c0d, 0e918412) are the older tf.keras version.
#
# Differences from the original (everything else is the original code, in order):
#   1. This prelude (down to "end of prelude"): Agg backend; KERAS_IO_LOADER picks the
#      loader; sizes as constants; makes the PetImages/ folder in a temporary working
#      directory instead of downloading it.
#   2. The `curl` / `unzip` / `ls` / `ls PetImages` shell cells are dropped (the prelude
#      makes the data: 40 small random JPEGs in each of PetImages/Cat and PetImages/Dog,
#      Cat/6779.jpg among them, and three files without the JFIF header for the
#      example's filter to delete: Cat/666.jpg and Dog/11702.jpg empty, as in the real
#      archive, and a Thumbs.db).
#   3. `image_size = (180, 180)` -> `image_size = IMAGE_SIZE` (64, 64);
#      `batch_size = 128` -> `batch_size = BATCH_SIZE` (16);
#      `epochs = 25` -> `epochs = EPOCHS` (1).
#   4. The swapped line: `keras.utils.image_dataset_from_directory(` ->
#      `kg.image_dataset_from_directory(`, where `kg` is `kerasgen` (default) or
#      `keras.utils` (KERAS_IO_LOADER=keras, i.e. the original call).
#   5. The prose docstrings between the cells are left out; each section heading is
#      kept as a comment.
#   `keras.utils.plot_model` needs pydot and graphviz, not installed here: the prelude
#   imports IPython.core.magics.namespace so that Keras takes it as the notebook the
#   example was written for and prints "You must install pydot" instead of raising.

# ---- prelude (not in the original) ----------------------------------------------------
import atexit
import os
import shutil
import tempfile

import matplotlib

matplotlib.use("Agg")

import IPython.core.magics.namespace  # noqa: F401  (plot_model prints, not raises)
import keras
import numpy as np
from PIL import Image

KERAS_IO_LOADER = os.environ.get("KERAS_IO_LOADER", "kerasgen")
if KERAS_IO_LOADER == "kerasgen":
    import kerasgen as kg
elif KERAS_IO_LOADER == "keras":
    kg = keras.utils  # the original: keras.utils.image_dataset_from_directory
else:
    raise SystemExit(f"KERAS_IO_LOADER is 'kerasgen' or 'keras', not {KERAS_IO_LOADER!r}")
print(f"image_dataset_from_directory from {kg.__name__}")

IMAGES_PER_CLASS = 40
IMAGE_SIZE = (64, 64)  # the original's image_size is (180, 180)
BATCH_SIZE = 16  # the original's batch_size is 128
EPOCHS = 1  # the original's epochs is 25

WORKDIR = tempfile.mkdtemp(prefix="keras_io_image_classification_from_scratch_")
atexit.register(shutil.rmtree, WORKDIR, ignore_errors=True)
os.chdir(WORKDIR)
_rng = np.random.default_rng(0)
for _folder, _first in (("Cat", 6760), ("Dog", 0)):
    os.makedirs(os.path.join("PetImages", _folder))
    for _index in range(_first, _first + IMAGES_PER_CLASS):
        _h, _w = (int(v) for v in _rng.integers(80, 160, size=2))
        _small = _rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)  # smooth, small files
        Image.fromarray(_small).resize((_w, _h), Image.BICUBIC).save(
            os.path.join("PetImages", _folder, f"{_index}.jpg"))
open(os.path.join("PetImages", "Cat", "666.jpg"), "wb").close()
open(os.path.join("PetImages", "Dog", "11702.jpg"), "wb").close()
with open(os.path.join("PetImages", "Cat", "Thumbs.db"), "wb") as _f:
    _f.write(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))
# ---- end of prelude -------------------------------------------------------------------

# ## Setup

import os
import numpy as np
import keras
from keras import layers
from tensorflow import data as tf_data
import matplotlib.pyplot as plt

# ## Load the data: the Cats vs Dogs dataset
# ### Raw data download  (shell cells dropped: the prelude made PetImages/)
# ### Filter out corrupted images

num_skipped = 0
for folder_name in ("Cat", "Dog"):
    folder_path = os.path.join("PetImages", folder_name)
    for fname in os.listdir(folder_path):
        fpath = os.path.join(folder_path, fname)
        try:
            fobj = open(fpath, "rb")
            is_jfif = b"JFIF" in fobj.peek(10)
        finally:
            fobj.close()

        if not is_jfif:
            num_skipped += 1
            # Delete corrupted image
            os.remove(fpath)

print(f"Deleted {num_skipped} images.")

# ## Generate a `Dataset`

image_size = IMAGE_SIZE
batch_size = BATCH_SIZE

train_ds, val_ds = kg.image_dataset_from_directory(
    "PetImages",
    validation_split=0.2,
    subset="both",
    seed=1337,
    image_size=image_size,
    batch_size=batch_size,
)

# ## Visualize the data


plt.figure(figsize=(10, 10))
for images, labels in train_ds.take(1):
    for i in range(9):
        ax = plt.subplot(3, 3, i + 1)
        plt.imshow(np.array(images[i]).astype("uint8"))
        plt.title(int(labels[i]))
        plt.axis("off")

# ## Using image data augmentation

data_augmentation_layers = [
    layers.RandomFlip("horizontal"),
    layers.RandomRotation(0.1),
]


def data_augmentation(images):
    for layer in data_augmentation_layers:
        images = layer(images)
    return images


plt.figure(figsize=(10, 10))
for images, _ in train_ds.take(1):
    for i in range(9):
        augmented_images = data_augmentation(images)
        ax = plt.subplot(3, 3, i + 1)
        plt.imshow(np.array(augmented_images[0]).astype("uint8"))
        plt.axis("off")


# ## Standardizing the data
# ## Two options to preprocess the data
# ## Configure the dataset for performance

# Apply `data_augmentation` to the training images.
train_ds = train_ds.map(
    lambda img, label: (data_augmentation(img), label),
    num_parallel_calls=tf_data.AUTOTUNE,
)
# Prefetching samples in GPU memory helps maximize GPU utilization.
train_ds = train_ds.prefetch(tf_data.AUTOTUNE)
val_ds = val_ds.prefetch(tf_data.AUTOTUNE)

# ## Build a model


def make_model(input_shape, num_classes):
    inputs = keras.Input(shape=input_shape)

    # Entry block
    x = layers.Rescaling(1.0 / 255)(inputs)
    x = layers.Conv2D(128, 3, strides=2, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)

    previous_block_activation = x  # Set aside residual

    for size in [256, 512, 728]:
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)

        # Project residual
        residual = layers.Conv2D(size, 1, strides=2, padding="same")(
            previous_block_activation
        )
        x = layers.add([x, residual])  # Add back residual
        previous_block_activation = x  # Set aside next residual

    x = layers.SeparableConv2D(1024, 3, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)

    x = layers.GlobalAveragePooling2D()(x)
    if num_classes == 2:
        units = 1
    else:
        units = num_classes

    x = layers.Dropout(0.25)(x)
    # We specify activation=None so as to return logits
    outputs = layers.Dense(units, activation=None)(x)
    return keras.Model(inputs, outputs)


model = make_model(input_shape=image_size + (3,), num_classes=2)
keras.utils.plot_model(model, show_shapes=True)

# ## Train the model

epochs = EPOCHS

callbacks = [
    keras.callbacks.ModelCheckpoint("save_at_{epoch}.keras"),
]
model.compile(
    optimizer=keras.optimizers.Adam(3e-4),
    loss=keras.losses.BinaryCrossentropy(from_logits=True),
    metrics=[keras.metrics.BinaryAccuracy(name="acc")],
)
model.fit(
    train_ds,
    epochs=epochs,
    callbacks=callbacks,
    validation_data=val_ds,
)

# ## Run inference on new data

img = keras.utils.load_img("PetImages/Cat/6779.jpg", target_size=image_size)
plt.imshow(img)

img_array = keras.utils.img_to_array(img)
img_array = keras.ops.expand_dims(img_array, 0)  # Create batch axis

predictions = model.predict(img_array)
score = float(keras.ops.sigmoid(predictions[0][0]))
print(f"This image is {100 * (1 - score):.2f}% cat and {100 * score:.2f}% dog.")
