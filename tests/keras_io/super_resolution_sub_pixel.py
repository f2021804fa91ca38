# ruff: noqa: E402, F841
# keras.io example, ported to run offline with kerasgen's image_dataset_from_directory.
#
# Source: keras-team/keras-io, examples/vision/super_resolution_sub_pixel.py,
#   the Keras 3 version ("Image Super-Resolution using an Efficient Sub-Pixel CNN",
#   author Xingyu Long, "Last modified: 2020/08/27", converted to Keras 3 by Md Awsfalur
#   Rahman), https://keras.io/examples/vision/super_resolution_sub_pixel/
#   Read from the code cells of its generated rendering
#   (examples/vision/md/super_resolution_sub_pixel.md, same version); the .py commit
#   stored in the code index (0b85c58c) is the older tf.keras version.
#
# Differences from the original (everything else is the original code, in order):
#   1. This prelude (down to "end of prelude"): Agg backend; KERAS_IO_LOADER picks the
#      loader; makes the BSR/ folder in a temporary working directory.
#   2. The swapped line: `from keras.preprocessing import image_dataset_from_directory`
#      -> `image_dataset_from_directory = kg.image_dataset_from_directory`, where `kg`
#      is `kerasgen` (default) or `keras.preprocessing` (KERAS_IO_LOADER=keras, i.e. the
#      original import).
#   3. `data_dir = keras.utils.get_file(origin=dataset_url, fname="BSR", untar=True)`
#      (the download) -> `data_dir = BSR_DIR`, the folder the prelude made in the
#      archive's layout: BSR/BSDS500/data/images/{train,val,test}/*.jpg (20, 10 and 52
#      small random JPEGs instead of 200, 100 and 200 photos; 52 test images so that the
#      final loop's test_img_paths[50:60] has two) and
#      BSR/BSDS500/data/groundTruth/{train,val,test}/*.mat (not images: both loaders
#      must skip them).
#   4. `epochs = 100` -> `epochs = EPOCHS` (1).
#   5. The prose between the cells is left out; each section heading is kept as a
#      comment.
#   The callback's `checkpoint_filepath = "/tmp/checkpoint.keras"` is the original's.

# ---- prelude (not in the original) ----------------------------------------------------
import atexit
import os
import shutil
import tempfile

import matplotlib

matplotlib.use("Agg")

import keras
import keras.preprocessing
import numpy as np
from PIL import Image

KERAS_IO_LOADER = os.environ.get("KERAS_IO_LOADER", "kerasgen")
if KERAS_IO_LOADER == "kerasgen":
    import kerasgen as kg
elif KERAS_IO_LOADER == "keras":
    kg = keras.preprocessing  # the original: from keras.preprocessing import ...
else:
    raise SystemExit(f"KERAS_IO_LOADER is 'kerasgen' or 'keras', not {KERAS_IO_LOADER!r}")
print(f"image_dataset_from_directory from {kg.__name__}")

EPOCHS = 1  # the original's epochs is 100
IMAGES_PER_SPLIT = {"train": 20, "val": 10, "test": 52}

WORKDIR = tempfile.mkdtemp(prefix="keras_io_super_resolution_sub_pixel_")
atexit.register(shutil.rmtree, WORKDIR, ignore_errors=True)
os.chdir(WORKDIR)
BSR_DIR = os.path.join(WORKDIR, "BSR")
_rng = np.random.default_rng(0)
for _split, _count in IMAGES_PER_SPLIT.items():
    _images = os.path.join(BSR_DIR, "BSDS500", "data", "images", _split)
    _truth = os.path.join(BSR_DIR, "BSDS500", "data", "groundTruth", _split)
    os.makedirs(_images)
    os.makedirs(_truth)
    for _index in range(_count):
        _name = str(100000 + 1000 * _index + int(_rng.integers(1000)))  # BSDS-like ids
        _size = (240, 160) if _index % 3 else (160, 240)  # landscape and portrait
        _small = _rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)  # smooth, small files
        Image.fromarray(_small).resize(_size, Image.BICUBIC).save(
            os.path.join(_images, _name + ".jpg"))
        with open(os.path.join(_truth, _name + ".mat"), "wb") as _f:
            _f.write(b"MATLAB 5.0 MAT-file" + bytes(109))
# ---- end of prelude -------------------------------------------------------------------

# ## Setup

import keras
from keras import layers
from keras import ops
from keras.utils import load_img
from keras.utils import array_to_img
from keras.utils import img_to_array
image_dataset_from_directory = kg.image_dataset_from_directory
import tensorflow as tf  #  only for data preprocessing

import os
import math
import numpy as np

from IPython.display import display

# ## Load data: BSDS500 dataset
# ### Download dataset

dataset_url = "http://www.eecs.berkeley.edu/Research/Projects/CS/vision/grouping/BSR/BSR_bsds500.tgz"
data_dir = BSR_DIR
root_dir = os.path.join(data_dir, "BSDS500/data")

crop_size = 300
upscale_factor = 3
input_size = crop_size // upscale_factor
batch_size = 8

train_ds = image_dataset_from_directory(
    root_dir,
    batch_size=batch_size,
    image_size=(crop_size, crop_size),
    validation_split=0.2,
    subset="training",
    seed=1337,
    label_mode=None,
)

valid_ds = image_dataset_from_directory(
    root_dir,
    batch_size=batch_size,
    image_size=(crop_size, crop_size),
    validation_split=0.2,
    subset="validation",
    seed=1337,
    label_mode=None,
)


def scaling(input_image):
    input_image = input_image / 255.0
    return input_image


# Scale from (0, 255) to (0, 1)
train_ds = train_ds.map(scaling)
valid_ds = valid_ds.map(scaling)

for batch in train_ds.take(1):
    for img in batch:
        display(array_to_img(img))

dataset = os.path.join(root_dir, "images")
test_path = os.path.join(dataset, "test")

test_img_paths = sorted(
    [
        os.path.join(test_path, fname)
        for fname in os.listdir(test_path)
        if fname.endswith(".jpg")
    ]
)

# ## Crop and resize images


# Use TF Ops to process.
def process_input(input, input_size, upscale_factor):
    input = tf.image.rgb_to_yuv(input)
    last_dimension_axis = len(input.shape) - 1
    y, u, v = tf.split(input, 3, axis=last_dimension_axis)
    return tf.image.resize(y, [input_size, input_size], method="area")


def process_target(input):
    input = tf.image.rgb_to_yuv(input)
    last_dimension_axis = len(input.shape) - 1
    y, u, v = tf.split(input, 3, axis=last_dimension_axis)
    return y


train_ds = train_ds.map(
    lambda x: (process_input(x, input_size, upscale_factor), process_target(x))
)
train_ds = train_ds.prefetch(buffer_size=32)

valid_ds = valid_ds.map(
    lambda x: (process_input(x, input_size, upscale_factor), process_target(x))
)
valid_ds = valid_ds.prefetch(buffer_size=32)

for batch in train_ds.take(1):
    for img in batch[0]:
        display(array_to_img(img))
    for img in batch[1]:
        display(array_to_img(img))

# ## Build a model


class DepthToSpace(layers.Layer):
    def __init__(self, block_size):
        super().__init__()
        self.block_size = block_size

    def call(self, input):
        batch, height, width, depth = ops.shape(input)
        depth = depth // (self.block_size**2)

        x = ops.reshape(
            input, [batch, height, width, self.block_size, self.block_size, depth]
        )
        x = ops.transpose(x, [0, 1, 3, 2, 4, 5])
        x = ops.reshape(
            x, [batch, height * self.block_size, width * self.block_size, depth]
        )
        return x


def get_model(upscale_factor=3, channels=1):
    conv_args = {
        "activation": "relu",
        "kernel_initializer": "orthogonal",
        "padding": "same",
    }
    inputs = keras.Input(shape=(None, None, channels))
    x = layers.Conv2D(64, 5, **conv_args)(inputs)
    x = layers.Conv2D(64, 3, **conv_args)(x)
    x = layers.Conv2D(32, 3, **conv_args)(x)
    x = layers.Conv2D(channels * (upscale_factor**2), 3, **conv_args)(x)
    outputs = DepthToSpace(upscale_factor)(x)

    return keras.Model(inputs, outputs)


# ## Define utility functions

import matplotlib.pyplot as plt
from mpl_toolkits.axes_grid1.inset_locator import zoomed_inset_axes
from mpl_toolkits.axes_grid1.inset_locator import mark_inset
import PIL


def plot_results(img, prefix, title):
    """Plot the result with zoom-in area."""
    img_array = img_to_array(img)
    img_array = img_array.astype("float32") / 255.0

    # Create a new figure with a default 111 subplot.
    fig, ax = plt.subplots()
    im = ax.imshow(img_array[::-1], origin="lower")

    plt.title(title)
    # zoom-factor: 2.0, location: upper-left
    axins = zoomed_inset_axes(ax, 2, loc=2)
    axins.imshow(img_array[::-1], origin="lower")

    # Specify the limits.
    x1, x2, y1, y2 = 200, 300, 100, 200
    # Apply the x-limits.
    axins.set_xlim(x1, x2)
    # Apply the y-limits.
    axins.set_ylim(y1, y2)

    plt.yticks(visible=False)
    plt.xticks(visible=False)

    # Make the line.
    mark_inset(ax, axins, loc1=1, loc2=3, fc="none", ec="blue")
    plt.savefig(str(prefix) + "-" + title + ".png")
    plt.show()


def get_lowres_image(img, upscale_factor):
    """Return low-resolution image to use as model input."""
    return img.resize(
        (img.size[0] // upscale_factor, img.size[1] // upscale_factor),
        PIL.Image.BICUBIC,
    )


def upscale_image(model, img):
    """Predict the result based on input image and restore the image as RGB."""
    ycbcr = img.convert("YCbCr")
    y, cb, cr = ycbcr.split()
    y = img_to_array(y)
    y = y.astype("float32") / 255.0

    input = np.expand_dims(y, axis=0)
    out = model.predict(input)

    out_img_y = out[0]
    out_img_y *= 255.0

    # Restore the image in RGB color space.
    out_img_y = out_img_y.clip(0, 255)
    out_img_y = out_img_y.reshape((np.shape(out_img_y)[0], np.shape(out_img_y)[1]))
    out_img_y = PIL.Image.fromarray(np.uint8(out_img_y), mode="L")
    out_img_cb = cb.resize(out_img_y.size, PIL.Image.BICUBIC)
    out_img_cr = cr.resize(out_img_y.size, PIL.Image.BICUBIC)
    out_img = PIL.Image.merge("YCbCr", (out_img_y, out_img_cb, out_img_cr)).convert(
        "RGB"
    )
    return out_img


# ## Define callbacks to monitor training


class ESPCNCallback(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.test_img = get_lowres_image(load_img(test_img_paths[0]), upscale_factor)

    # Store PSNR value in each epoch.
    def on_epoch_begin(self, epoch, logs=None):
        self.psnr = []

    def on_epoch_end(self, epoch, logs=None):
        print("Mean PSNR for epoch: %.2f" % (np.mean(self.psnr)))
        if epoch % 20 == 0:
            prediction = upscale_image(self.model, self.test_img)
            plot_results(prediction, "epoch-" + str(epoch), "prediction")

    def on_test_batch_end(self, batch, logs=None):
        self.psnr.append(10 * math.log10(1 / logs["loss"]))


early_stopping_callback = keras.callbacks.EarlyStopping(monitor="loss", patience=10)

checkpoint_filepath = "/tmp/checkpoint.keras"

model_checkpoint_callback = keras.callbacks.ModelCheckpoint(
    filepath=checkpoint_filepath,
    save_weights_only=False,
    monitor="loss",
    mode="min",
    save_best_only=True,
)

model = get_model(upscale_factor=upscale_factor, channels=1)
model.summary()

callbacks = [ESPCNCallback(), early_stopping_callback, model_checkpoint_callback]
loss_fn = keras.losses.MeanSquaredError()
optimizer = keras.optimizers.Adam(learning_rate=0.001)

# ## Train the model

epochs = EPOCHS

model.compile(
    optimizer=optimizer,
    loss=loss_fn,
)

model.fit(
    train_ds, epochs=epochs, callbacks=callbacks, validation_data=valid_ds, verbose=2
)

# The model weights (that are considered the best) are loaded into the model.
model.load_weights(checkpoint_filepath)

# ## Run model prediction and plot the results

total_bicubic_psnr = 0.0
total_test_psnr = 0.0

for index, test_img_path in enumerate(test_img_paths[50:60]):
    img = load_img(test_img_path)
    lowres_input = get_lowres_image(img, upscale_factor)
    w = lowres_input.size[0] * upscale_factor
    h = lowres_input.size[1] * upscale_factor
    highres_img = img.resize((w, h))
    prediction = upscale_image(model, lowres_input)
    lowres_img = lowres_input.resize((w, h))
    lowres_img_arr = img_to_array(lowres_img)
    highres_img_arr = img_to_array(highres_img)
    predict_img_arr = img_to_array(prediction)
    bicubic_psnr = tf.image.psnr(lowres_img_arr, highres_img_arr, max_val=255)
    test_psnr = tf.image.psnr(predict_img_arr, highres_img_arr, max_val=255)

    total_bicubic_psnr += bicubic_psnr
    total_test_psnr += test_psnr

    print(
        "PSNR of low resolution image and high resolution image is %.4f" % bicubic_psnr
    )
    print("PSNR of predict and high resolution is %.4f" % test_psnr)
    plot_results(lowres_img, index, "lowres")
    plot_results(highres_img, index, "highres")
    plot_results(prediction, index, "prediction")

print("Avg. PSNR of lowres images is %.4f" % (total_bicubic_psnr / 10))
print("Avg. PSNR of reconstructions is %.4f" % (total_test_psnr / 10))
