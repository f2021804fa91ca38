"""kg.augment.from_image_data_generator: ImageDataGenerator's keyword arguments, against
Keras's own legacy ImageDataGenerator (shipped in Keras 3 under keras.src.legacy)."""

import re

import keras
import numpy as np
import pytest
from keras.src.legacy.preprocessing.image import ImageDataGenerator

import kerasgen as kg
from tests.test_remote import assert_same, batches

SIZE = 48  # square: Keras's legacy warp turns about (height/2, height/2) (docs/migrating.md)


def smooth_image(height=SIZE, width=SIZE):
    yy, xx = np.mgrid[0:height, 0:width]
    return np.stack([127 + 100 * np.sin(xx / 9.0), 127 + 100 * np.cos(yy / 7.0),
                     (xx + yy) * 2.0], -1).clip(0, 255).astype(np.uint8)


def ours(image, **kwargs):
    return kg.augment.from_image_data_generator(**kwargs)["augment"](
        image=image)["image"].astype("float32")


def theirs(image, **kwargs):
    return ImageDataGenerator(**kwargs).random_transform(image.astype("float32"), seed=1)


@pytest.mark.parametrize("kwargs,tolerance", [
    (dict(zoom_range=[0.5, 0.5]), 0.5),                 # below 1: zoomed in
    (dict(zoom_range=[0.7, 0.7]), 0.5),
    (dict(zoom_range=[2.0, 2.0]), 0.5),                 # above 1: zoomed out, edges repeated
    (dict(zoom_range=[2.0, 2.0], fill_mode="constant", cval=30), 0.5),
    (dict(zoom_range=[2.0, 2.0], fill_mode="reflect"), 0.5),
    (dict(zoom_range=[2.0, 2.0], fill_mode="wrap"), 5.0),  # scipy's wrap differs a little
    (dict(brightness_range=[1.5, 1.5]), 0.0),
    (dict(brightness_range=[0.5, 0.5]), 0.0),
])
def test_each_transform_draws_what_keras_draws(kwargs, tolerance):
    image = smooth_image()
    expected = theirs(image, **kwargs)
    assert np.abs(expected - image).mean() > 20  # the transform does something
    assert np.abs(ours(image, **kwargs) - expected).mean() <= tolerance


def test_ranges_become_the_same_albumentations_ranges():
    made = kg.augment.from_image_data_generator(
        rotation_range=20, width_shift_range=0.1, height_shift_range=0.2, shear_range=5,
        zoom_range=0.25, channel_shift_range=10, horizontal_flip=True, vertical_flip=True,
        brightness_range=[0.8, 1.2], rescale=1 / 255, validation_split=0.25)
    assert made["rescale"] == 1 / 255 and made["validation_split"] == 0.25
    names = [type(t).__name__ for t in made["augment"].transforms]
    assert names == ["Affine", "RandomBrightnessContrast", "HorizontalFlip", "VerticalFlip",
                     "MultiplicativeNoise"]  # ImageDataGenerator's order
    affine = made["augment"].transforms[0]
    assert tuple(affine.rotate) == (-20, 20)
    assert affine.translate_percent == {"x": (-0.1, 0.1), "y": (-0.2, 0.2)}
    assert affine.scale == {"x": (1 / 1.25, 1 / 0.75), "y": (1 / 1.25, 1 / 0.75)}
    pixels = kg.augment.from_image_data_generator(width_shift_range=4)["augment"]
    assert pixels.transforms[0].translate_px == {"x": (-4, 4), "y": (0, 0)}
    assert kg.augment.from_image_data_generator(rescale=0.5) == {"rescale": 0.5}


def test_flips_give_the_image_or_its_mirror_and_both_occur(tmp_path):
    import cv2

    image = smooth_image()
    for i in range(8):
        cv2.imwrite(str(tmp_path / f"{i}.png"), image[..., ::-1])  # cv2 writes BGR
    gen = kg.ImageFolderGenerator(tmp_path, labels=None, image_size=(SIZE, SIZE),
                                  batch_size=8, dtype="uint8", seed=2,
                                  **kg.augment.from_image_data_generator(
                                      horizontal_flip=True))
    seen = set()
    for x in gen[0]:
        seen.add("same" if np.array_equal(x, image) else
                 "mirror" if np.array_equal(x, image[:, ::-1]) else "other")
    assert seen == {"same", "mirror"}


def test_an_image_data_generator_setup_trains_through_fit_and_is_reproducible(image_folder):
    options = kg.augment.from_image_data_generator(
        rotation_range=20, width_shift_range=0.1, height_shift_range=0.1, zoom_range=0.1,
        horizontal_flip=True, fill_mode="nearest", rescale=1 / 255, validation_split=0.25)
    common = dict(image_size=(8, 8), batch_size=3, seed=1, cache=None, **options)
    train = kg.ImageFolderGenerator(image_folder, subset="training", **common)
    threads = kg.ImageFolderGenerator(image_folder, subset="training", workers=2, **common)
    assert_same(batches(threads), batches(train))
    assert train[0][0].max() <= 1.0
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(train, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(featurewise_center=True), ValueError, "Normalization"),
    (dict(zca_whitening=True), ValueError, "whitening"),
    (dict(interpolation_order=0), ValueError, "interpolation="),
    (dict(preprocessing_function=np.sqrt), ValueError, "augment=fn"),
    (dict(target_size=(8, 8)), TypeError, "target_size"),
    (dict(zoom_range=[0.0, 1.0]), ValueError, "zoom_range"),
    (dict(fill_mode="mirror"), ValueError, "fill_mode"),
    (dict(data_format="channels_first"), ValueError, "channels_last"),
    (dict(width_shift_range=[-2, 0, 2]), ValueError, "width_shift_range"),
    (dict(width_shift_range=0.1, height_shift_range=3), ValueError, "both"),
    (dict(brightness_range=0.5), ValueError, "brightness_range"),
    (dict(rotation_range=-5), ValueError, "rotation_range"),
])
def test_what_has_no_translation_is_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        kg.augment.from_image_data_generator(**kwargs)


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("name, value, requirement", [
    ("brightness_range", [1.2, 0.8], r"\[lower, upper\]: two finite factors with 0 <= "
                                     r"lower <= upper"),                       # inverted
    ("brightness_range", [-0.5, 1.0], r"0 <= lower <= upper"),                 # negative
    ("brightness_range", [NAN, 1.0], r"two finite factors"),
    ("brightness_range", (0.5, INF), r"two finite factors"),
    ("brightness_range", [0.8], r"\[lower, upper\]"),                         # length
    ("brightness_range", [0.5, 1.0, 1.5], r"\[lower, upper\]"),
    ("brightness_range", [True, 2], r"\[lower, upper\]"),                     # type
    ("brightness_range", "0.5,1", r"\[lower, upper\]"),
    ("zoom_range", [1.2, 0.8], r"\[lower, upper\] with 0 < lower <= upper"),
    ("zoom_range", [0.0, 1.0], r"0 < lower"),
    ("zoom_range", [0.8, INF], r"0 < lower <= upper"),
    ("zoom_range", [0.5, 1.0, 2.0], r"\[lower, upper\]"),
    ("zoom_range", 1.5, r"a float z below 1"),
    ("zoom_range", NAN, r"a float z below 1"),
    ("zoom_range", "0.2", r"a float z below 1"),
    ("rotation_range", -5, r"a finite number >= 0"),
    ("rotation_range", NAN, r"a finite number >= 0"),
    ("rotation_range", INF, r"a finite number >= 0"),
    ("rotation_range", "20", r"a finite number >= 0"),
    ("shear_range", INF, r"a finite number >= 0"),
    ("width_shift_range", INF, r"a finite number >= 0"),
    ("height_shift_range", -0.1, r"a finite number >= 0"),
    ("width_shift_range", [0.1], r"a finite number >= 0 \(a fraction of the size below 1, "
                                 r"or pixels from 1\)"),
    ("channel_shift_range", -10, r"a finite number >= 0"),
    ("channel_shift_range", INF, r"a finite number >= 0"),
    ("cval", NAN, r"a finite number"),
    ("fill_mode", ["nearest"], r"one of 'constant', 'nearest', 'reflect', 'wrap'"),
    ("fill_mode", "mirror", r"one of 'constant'"),
    ("horizontal_flip", 0.5, r"True or False"),
    ("vertical_flip", "yes", r"True or False"),
])
def test_malformed_arguments_are_refused_naming_them(name, value, requirement):
    """An inverted brightness_range raised albumentations' own error about `multiplier`;
    inf ranges, a flip of 0.5 and an unhashable fill_mode were taken or failed unnamed."""
    with pytest.raises(ValueError, match=rf"^`{name}` must be .*{requirement}.*Received: "
                                         rf"{name}={re.escape(repr(value))}"):
        kg.augment.from_image_data_generator(**{name: value})


def test_well_formed_ranges_in_any_sequence_are_taken():
    out = kg.augment.from_image_data_generator(
        zoom_range=np.array([0.8, 1.25]), brightness_range=(0.5, 1.5),
        horizontal_flip=np.bool_(True), vertical_flip=None, cval=-1)
    names = [type(step).__name__ for step in out["augment"]]
    assert names == ["Affine", "HorizontalFlip", "MultiplicativeNoise"]
    assert out["augment"][2].multiplier == (0.5, 1.5)


def test_defaults_left_as_keras_writes_them_ask_for_nothing():
    assert kg.augment.from_image_data_generator(
        featurewise_center=False, samplewise_center=False, zca_whitening=False,
        zca_epsilon=1e-6, preprocessing_function=None, interpolation_order=1,
        rotation_range=0, zoom_range=0.0, fill_mode="nearest", cval=0.0,
        horizontal_flip=False, brightness_range=None) == {}


def test_featurewise_statistics_come_from_normalization_adapted_on_a_generator(
        image_folder):
    with pytest.raises(ValueError, match=r"Normalization.*adapt\(gen\)"):
        kg.augment.from_image_data_generator(featurewise_std_normalization=True)
    plain = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=5,
                                    rescale=1 / 255, cache=None)
    norm = keras.layers.Normalization(axis=-1)
    norm.adapt(plain)  # one pass, x only, exact per-channel statistics
    pixels = np.concatenate([plain[i][0] for i in range(len(plain))]).reshape(-1, 3)
    np.testing.assert_allclose(norm.mean.numpy().ravel(), pixels.mean(0), rtol=1e-5)
    np.testing.assert_allclose(norm.variance.numpy().ravel(), pixels.var(0), rtol=1e-4)
    model = keras.Sequential([keras.Input((8, 8, 3)), norm, keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    train = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=5,
                                    rescale=1 / 255, cache=None, seed=0,
                                    **kg.augment.from_image_data_generator(
                                        horizontal_flip=True))
    assert np.isfinite(model.fit(train, epochs=2, verbose=0).history["loss"]).all()
