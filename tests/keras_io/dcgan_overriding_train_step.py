# ruff: noqa: E402, F401
# keras.io example, ported to run offline with kerasgen's image_dataset_from_directory.
#
# Source: keras-team/keras-io, examples/generative/dcgan_overriding_train_step.py,
#   the Keras 3 version ("DCGAN to generate face images", "Last modified: 2023/12/21",
#   author fchollet), https://keras.io/examples/generative/dcgan_overriding_train_step/
#   Read from the code cells of its generated rendering
#   (examples/generative/md/dcgan_overriding_train_step.md, same version); the .py
#   commits stored in the code index (cca4efba, 0d5f3278) are the older tf.keras version.
#   TensorFlow backend only: its train_step uses tf.GradientTape.
#
# Differences from the original (everything else is the original code, in order):
#   1. This prelude (down to "end of prelude"): Agg backend; KERAS_IO_LOADER picks the
#      loader; makes the celeba_gan/ folder in a temporary working directory.
#   2. `import gdown` is left out (the download tool; not installed here).
#   3. The download cell (`os.makedirs("celeba_gan")`, `gdown.download(...)` of
#      data.zip, `ZipFile(...).extractall("celeba_gan")`) is dropped: the prelude makes
#      what it unzips to, celeba_gan/img_align_celeba/000001.jpg ... (48 small random
#      JPEGs of CelebA's 178x218 size instead of 202,599 photos: with the original
#      batch_size=32, one full batch and one of 16).
#   4. The swapped line: `keras.utils.image_dataset_from_directory(` ->
#      `kg.image_dataset_from_directory(`, where `kg` is `kerasgen` (default) or
#      `keras.utils` (KERAS_IO_LOADER=keras, i.e. the original call).
#   5. The prose between the cells is left out; each section heading is kept as a
#      comment. (`epochs = 1` is the original's own value.)

# ---- prelude (not in the original) ----------------------------------------------------
import atexit
import os
import shutil
import tempfile

import matplotlib

matplotlib.use("Agg")

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

NUM_IMAGES = 48

WORKDIR = tempfile.mkdtemp(prefix="keras_io_dcgan_overriding_train_step_")
atexit.register(shutil.rmtree, WORKDIR, ignore_errors=True)
os.chdir(WORKDIR)
_rng = np.random.default_rng(0)
os.makedirs(os.path.join("celeba_gan", "img_align_celeba"))
for _index in range(1, NUM_IMAGES + 1):
    _small = _rng.integers(0, 256, (7, 6, 3), dtype=np.uint8)  # smooth, small files
    Image.fromarray(_small).resize((178, 218), Image.BICUBIC).save(
        os.path.join("celeba_gan", "img_align_celeba", f"{_index:06d}.jpg"))
# ---- end of prelude -------------------------------------------------------------------

# ## Setup

import keras
import tensorflow as tf

from keras import layers
from keras import ops
import matplotlib.pyplot as plt
import os
from zipfile import ZipFile

# ## Prepare CelebA data  (download cell dropped: the prelude made celeba_gan/)

dataset = kg.image_dataset_from_directory(
    "celeba_gan", label_mode=None, image_size=(64, 64), batch_size=32
)
dataset = dataset.map(lambda x: x / 255.0)


for x in dataset:
    plt.axis("off")
    plt.imshow((x.numpy() * 255).astype("int32")[0])
    break


# ## Create the discriminator

discriminator = keras.Sequential(
    [
        keras.Input(shape=(64, 64, 3)),
        layers.Conv2D(64, kernel_size=4, strides=2, padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(128, kernel_size=4, strides=2, padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(128, kernel_size=4, strides=2, padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Flatten(),
        layers.Dropout(0.2),
        layers.Dense(1, activation="sigmoid"),
    ],
    name="discriminator",
)
discriminator.summary()

# ## Create the generator

latent_dim = 128

generator = keras.Sequential(
    [
        keras.Input(shape=(latent_dim,)),
        layers.Dense(8 * 8 * 128),
        layers.Reshape((8, 8, 128)),
        layers.Conv2DTranspose(128, kernel_size=4, strides=2, padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2DTranspose(256, kernel_size=4, strides=2, padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2DTranspose(512, kernel_size=4, strides=2, padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(3, kernel_size=5, padding="same", activation="sigmoid"),
    ],
    name="generator",
)
generator.summary()

# ## Override `train_step`


class GAN(keras.Model):
    def __init__(self, discriminator, generator, latent_dim):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.latent_dim = latent_dim
        self.seed_generator = keras.random.SeedGenerator(1337)

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.loss_fn = loss_fn
        self.d_loss_metric = keras.metrics.Mean(name="d_loss")
        self.g_loss_metric = keras.metrics.Mean(name="g_loss")

    @property
    def metrics(self):
        return [self.d_loss_metric, self.g_loss_metric]

    def train_step(self, real_images):
        # Sample random points in the latent space
        batch_size = ops.shape(real_images)[0]
        random_latent_vectors = keras.random.normal(
            shape=(batch_size, self.latent_dim), seed=self.seed_generator
        )

        # Decode them to fake images
        generated_images = self.generator(random_latent_vectors)

        # Combine them with real images
        combined_images = ops.concatenate([generated_images, real_images], axis=0)

        # Assemble labels discriminating real from fake images
        labels = ops.concatenate(
            [ops.ones((batch_size, 1)), ops.zeros((batch_size, 1))], axis=0
        )
        # Add random noise to the labels - important trick!
        labels += 0.05 * tf.random.uniform(tf.shape(labels))

        # Train the discriminator
        with tf.GradientTape() as tape:
            predictions = self.discriminator(combined_images)
            d_loss = self.loss_fn(labels, predictions)
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(
            zip(grads, self.discriminator.trainable_weights)
        )

        # Sample random points in the latent space
        random_latent_vectors = keras.random.normal(
            shape=(batch_size, self.latent_dim), seed=self.seed_generator
        )

        # Assemble labels that say "all real images"
        misleading_labels = ops.zeros((batch_size, 1))

        # Train the generator (note that we should *not* update the weights
        # of the discriminator)!
        with tf.GradientTape() as tape:
            predictions = self.discriminator(self.generator(random_latent_vectors))
            g_loss = self.loss_fn(misleading_labels, predictions)
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))

        # Update metrics
        self.d_loss_metric.update_state(d_loss)
        self.g_loss_metric.update_state(g_loss)
        return {
            "d_loss": self.d_loss_metric.result(),
            "g_loss": self.g_loss_metric.result(),
        }


# ## Create a callback that periodically saves generated images


class GANMonitor(keras.callbacks.Callback):
    def __init__(self, num_img=3, latent_dim=128):
        self.num_img = num_img
        self.latent_dim = latent_dim
        self.seed_generator = keras.random.SeedGenerator(42)

    def on_epoch_end(self, epoch, logs=None):
        random_latent_vectors = keras.random.normal(
            shape=(self.num_img, self.latent_dim), seed=self.seed_generator
        )
        generated_images = self.model.generator(random_latent_vectors)
        generated_images *= 255
        generated_images.numpy()
        for i in range(self.num_img):
            img = keras.utils.array_to_img(generated_images[i])
            img.save("generated_img_%03d_%d.png" % (epoch, i))


# ## Train the end-to-end model

epochs = 1  # In practice, use ~100 epochs

gan = GAN(discriminator=discriminator, generator=generator, latent_dim=latent_dim)
gan.compile(
    d_optimizer=keras.optimizers.Adam(learning_rate=0.0001),
    g_optimizer=keras.optimizers.Adam(learning_rate=0.0001),
    loss_fn=keras.losses.BinaryCrossentropy(),
)

gan.fit(
    dataset, epochs=epochs, callbacks=[GANMonitor(num_img=10, latent_dim=latent_dim)]
)
