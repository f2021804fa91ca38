"""Values that batches would silently change are refused, naming what is at fault:
sample weights without labels, x out of the batch dtype's range, augmentation output that
the batch cannot hold (values, type, shape), augmentation that cannot be called as
kerasgen calls it, and a `rescale` that zeroes or NaNs every pixel."""

import functools

import keras
import numpy as np
import pytest

import kerasgen as kg
from tests.conftest import write_image

Y = np.arange(10) % 2


def _x(dtype="float32"):
    return np.zeros((10, 4, 8, 3), dtype)


@pytest.fixture
def tiny_folder(tmp_path):
    """2 classes of 3 PNG images, 12x16."""
    root = tmp_path / "tiny"
    for c, name in enumerate(("cat", "dog")):
        for i in range(3):
            write_image(str(root / name / f"{name}_{i}.png"), seed=3 * c + i)
    return root


# ----------------------------------------------------------------- 1. sample_weight
@pytest.mark.parametrize("y, label_mode", [(None, None), (Y, None), (None, "raw")])
def test_sample_weight_without_labels_is_refused(y, label_mode):
    with pytest.raises(ValueError, match=r"`sample_weight` needs labels.*the weights would "
                                         r"be dropped"):
        kg.ArrayGenerator(_x(), y, sample_weight=np.ones(10), label_mode=label_mode)


def test_sample_weight_of_an_unlabeled_folder_is_refused(tiny_folder):
    with pytest.raises(ValueError, match=r"`sample_weight` needs labels: with "
                                         r"label_mode=None a batch is x alone"):
        kg.ImageFolderGenerator(tiny_folder, labels=None, image_size=4,
                                sample_weight=np.ones(6))


def test_sample_weight_with_labels_still_comes_third():
    x, y, w = kg.ArrayGenerator(_x(), Y, sample_weight=np.full(10, 2.0), batch_size=4)[0]
    assert x.shape == (4, 4, 8, 3) and w.tolist() == [2.0] * 4


# ----------------------------------------------------------------- 2. x and dtype
@pytest.mark.parametrize("value, dtype, source, becomes", [
    (-100, "uint8", "float32", "156"),       # wraps around
    (-100, "uint8", "int64", "156"),
    (300, "uint8", "int32", "44"),
    (0.5, "uint8", "float32", "0"),          # not whole
    (np.nan, "uint8", "float64", "0"),
    (np.inf, "uint8", "float32", "0"),
    (1e6, "float16", "float32", "inf"),      # beyond float16's 65504
    (-7e4, "float16", "int64", "-inf"),
    (1e300, "float32", "float64", "inf"),
])
def test_x_values_the_batch_dtype_cannot_hold_are_refused_naming_the_row(
        value, dtype, source, becomes):
    x = _x("float64")
    x[6, 2, 3, 1] = value
    x[8, 0, 0, 0] = value  # the first row at fault is named
    with pytest.raises(ValueError, match=rf"`x` must hold values that dtype='{dtype}' can "
                                         rf"hold .*Received: x\[6\] holds .*would turn into "
                                         rf"{becomes}"):
        kg.ArrayGenerator(x.astype(source), Y, dtype=dtype)


def test_x_dict_names_its_key_and_rows_past_the_first_chunk():
    x = np.zeros((5000, 3), "float32")
    x[4321, 1] = -1
    with pytest.raises(ValueError, match=r"`x\['meta'\]` must hold .*x\['meta'\]\[4321\]"):
        kg.ArrayGenerator({"meta": x, "other": np.zeros((5000, 2))}, np.zeros(5000),
                          dtype="uint8")


def test_x_that_fits_converts_unchanged():
    x = _x("float64")
    x[1] = 255.0
    x[2] = -np.inf  # inf and NaN stay what they are in a float dtype
    x[3] = np.nan
    gen = kg.ArrayGenerator(x[:2], Y[:2], dtype="uint8", shuffle=False)
    assert gen[0][0].max() == 255 and gen[0][0].dtype == np.uint8
    half = kg.ArrayGenerator(x, Y, dtype="float16", shuffle=False, batch_size=10)[0][0]
    assert np.isneginf(half[2]).all() and np.isnan(half[3]).all()
    kg.ArrayGenerator(np.full((2, 3), -65504), Y[:2], dtype="float16")  # ints in range


# ----------------------------------------------------------------- 3. augment's values
@pytest.mark.parametrize("augment, becomes", [
    (lambda im, rng: im / 255.0, "0"),
    (lambda im, rng: im.astype("int64") * 4, "[0-9]+"),
])
def test_augment_values_the_uint8_batch_cannot_hold_name_augment_and_the_file(
        tiny_folder, augment, becomes):
    gen = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), batch_size=6,
                                  shuffle=False, dtype="uint8", augment=augment)
    with pytest.raises(ValueError, match=rf"`augment` must return values that batches of "
                                         rf"dtype='uint8' can hold .*in its output for "
                                         rf".*cat_0\.png, which the batch would hold as "
                                         rf"{becomes}"):
        gen[0]


def test_augment_values_beyond_float16_name_augment_and_the_sample():
    x = _x()
    x[3] = 1.0
    gen = kg.ArrayGenerator(x, Y, dtype="float16", shuffle=False,
                            augment=lambda s, rng: s * 1e5)
    with pytest.raises(ValueError, match=r"`augment` must return .*dtype='float16'.*"
                                         r"for sample 3, which the batch would hold as inf"):
        gen[0]


def test_augment_output_that_fits_is_kept(tiny_folder):
    gen = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), batch_size=6,
                                  shuffle=False, dtype="uint8",
                                  augment=lambda im, rng: np.rint(im / 2.0))  # whole floats
    plain = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), batch_size=6,
                                    shuffle=False, dtype="uint8")
    assert np.array_equal(gen[0][0], np.rint(plain[0][0] / 2.0).astype(np.uint8))
    rescaled = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), batch_size=6,
                                       shuffle=False, dtype="float16", rescale=1 / 255,
                                       augment=lambda im, rng: im.astype("float32") * 200)
    assert np.isfinite(rescaled[0][0]).all()


def test_augment_output_of_other_types_with_dtype_none_keeps_every_value(tiny_folder):
    """dtype=None: the batch took the first augmented sample's type (uint8), so a
    halved image (float64) lost its fractions; it is now stacked as float64."""
    def halve_some(im, rng):
        return im / 2 if rng.random() < 0.5 else im

    gen = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), batch_size=6, seed=0,
                                  shuffle=False, dtype=None, augment=halve_some)
    plain = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), batch_size=6,
                                    shuffle=False, dtype=None)[0][0]
    x = gen[0][0]
    assert x.dtype == np.float64
    halved = [np.array_equal(row, p / 2) and not np.array_equal(row, p)
              for row, p in zip(x, plain)]
    assert not halved[0] and sum(halved) > 0  # the first sample stays uint8
    for row, p, half in zip(x, plain, halved):
        np.testing.assert_array_equal(row, p / 2 if half else p)


def test_augmented_masks_that_are_no_class_ids_are_refused_naming_the_file(tmp_path):
    for i in range(2):
        write_image(str(tmp_path / "images" / f"s{i}.png"), seed=i)
        mask = np.zeros((12, 16), np.uint8)
        mask[2:6, 3:9] = 1
        (tmp_path / "masks").mkdir(exist_ok=True)
        import cv2
        cv2.imwrite(str(tmp_path / "masks" / f"s{i}.png"), mask)

    def blur_mask(image, rng, mask):  # interpolated, not moved: 0.5 is no class
        return image, mask * 0.5

    gen = kg.ImageFolderGenerator(tmp_path / "images", mask_dir=tmp_path / "masks",
                                  label_mode="mask", num_classes=2, image_size=(12, 16),
                                  batch_size=2, shuffle=False, augment=blur_mask)
    with pytest.raises(ValueError, match=r"`augment` must return masks of class ids .*"
                                         r"Received: 0.5 \(float64\) in the mask it returned "
                                         r"for .*s0\.png, which the batch would hold as 0"):
        gen[0]
    whole = kg.ImageFolderGenerator(tmp_path / "images", mask_dir=tmp_path / "masks",
                                    label_mode="mask", num_classes=2, image_size=(12, 16),
                                    batch_size=2, shuffle=False,
                                    augment=lambda image, rng, mask: (image, mask * 1.0))
    assert whole[0][1].dtype == np.int32 and set(np.unique(whole[0][1])) == {0, 1}


def test_augment_values_are_refused_through_fit(tiny_folder):
    gen = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), batch_size=3, seed=0,
                                  dtype="uint8", augment=lambda im, rng: im / 255.0)
    model = keras.Sequential([keras.Input((4, 8, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Flatten(), keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match=r"`augment` must return values that batches of "
                                         r"dtype='uint8' can hold.*\.png"):
        model.fit(gen, epochs=1, verbose=0)


# ----------------------------------------------------------------- 4. augment's shapes
def test_augment_returning_none_is_a_type_error_naming_augment(tiny_folder):
    gen = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), shuffle=False,
                                  augment=lambda im, rng: None)
    with pytest.raises(TypeError, match=r"`augment` must return the augmented sample as an "
                                        r"array.*Received: NoneType None for .*cat_0\.png"):
        gen[0]
    arrays = kg.ArrayGenerator(_x(), Y, augment=lambda s, rng: None, shuffle=False)
    with pytest.raises(TypeError, match=r"`augment` must return .*for sample 0"):
        arrays[0]


@pytest.mark.parametrize("augment, shape", [
    (lambda im, rng: im[..., 0], (4, 8)),  # one channel dropped: a model may want that
    (lambda im, rng: np.repeat(im[..., :1], 3, -1), (4, 8, 3)),  # grey to an RGB backbone
    (lambda im, rng: im.transpose(2, 0, 1), (3, 4, 8)),  # channels first
])
def test_augment_may_return_other_layouts_of_one_shape(tiny_folder, augment, shape):
    gen = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), shuffle=False,
                                  batch_size=4, augment=augment)
    assert gen[0][0].shape == (4,) + shape


def test_a_crop_of_one_size_is_kept(tiny_folder):
    gen = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), batch_size=4,
                                  shuffle=False, augment=lambda im, rng: im[:2])
    assert gen[0][0].shape == (4, 2, 8, 3) and gen[1][0].shape == (2, 2, 8, 3)


def test_augment_shapes_must_match_the_first_sample_across_batches(tiny_folder):
    # (which batch fails depends on which the work-ahead makes first)
    vary = lambda im, rng: im[:1 + int(rng.integers(3))]  # noqa: E731
    gen = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), batch_size=2,
                                  shuffle=False, seed=0, augment=vary)
    assert len({gen.source.load(i).shape for i in range(6)}) == 1  # all loaded alike
    with pytest.raises(ValueError, match=r"`augment` must return one shape for every "
                                         r"sample.*Received: shape \(\d, 8, 3\) for "
                                         r".*\.png, but shape \(\d, 8, 3\) for the first"):
        for b in range(len(gen)):
            gen[b]
    # one sample per batch: a model of variable input size takes them, as before
    single = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), batch_size=1,
                                     shuffle=False, seed=0, augment=vary)
    assert len({single[b][0].shape for b in range(len(single))}) > 1
    # seeded: unseeded draws gave five samples of one shape once in 81 runs
    arrays = kg.ArrayGenerator(_x(), Y, shuffle=False, batch_size=5, seed=0,
                               augment=lambda s, rng: s[:1 + int(rng.integers(3))])
    with pytest.raises(ValueError, match=r"`augment` must return one shape .*for sample \d"):
        arrays[0]


# ----------------------------------------------------------------- 5. augment's signature
@pytest.mark.parametrize("augment", [lambda im: im, lambda: 0, lambda im, rng, extra: im])
def test_augment_that_cannot_take_image_and_rng_is_refused_when_built(tiny_folder, augment):
    with pytest.raises(TypeError, match=r"`augment` must be .*fn\(image, rng\) -> image"
                                        r".*its signature is"):
        kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), augment=augment)
    with pytest.raises(TypeError, match=r"`augment` must be"):
        kg.ArrayGenerator(_x(), Y, augment=augment)


def test_mask_mode_augment_must_take_the_mask():
    masks = np.zeros((10, 4, 8), np.uint8)
    with pytest.raises(TypeError, match=r"`augment` must be .*fn\(image, rng, mask=mask\)"):
        kg.ArrayGenerator(_x(), masks, label_mode="mask", augment=lambda im, rng: im)
    gen = kg.ArrayGenerator(_x(), masks, label_mode="mask",
                            augment=lambda im, rng, mask: (im, mask))
    assert gen[0][1].shape == (10, 4, 8)
    with pytest.raises(TypeError, match=r"`augment` must return \(image, mask\)"):
        kg.ArrayGenerator(_x(), masks, label_mode="mask",
                          augment=lambda im, rng, mask: im)[0]


class _Flip:
    def __call__(self, image, rng):
        return image[:, ::-1]


def _scaled(image, rng, factor):
    return image * factor


@pytest.mark.parametrize("augment", [
    _Flip(), functools.partial(_scaled, factor=1), lambda *args: args[0],
    lambda image, rng, **options: image, lambda image, rng=None: image,
])
def test_every_callable_form_of_augment_still_works(augment):
    x, y = kg.ArrayGenerator(_x(), Y, augment=augment, batch_size=4)[0]
    assert x.shape == (4, 4, 8, 3)


def test_albumentations_augment_still_works(tiny_folder):
    A = pytest.importorskip("albumentations")
    gen = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), dtype="uint8",
                                  augment=A.Compose([A.HorizontalFlip(p=0.5)]))
    assert gen[0][0].shape == (6, 4, 8, 3)


# ----------------------------------------------------------------- 6. rescale
@pytest.mark.parametrize("rescale", [float("nan"), 0, 0.0, float("inf"), -float("inf")])
def test_rescale_that_would_zero_or_nan_every_batch_is_refused(tiny_folder, rescale):
    with pytest.raises(ValueError, match=r"`rescale` must be a finite, non-zero number.*"
                                         rf"Received: rescale={rescale!r}"):
        kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), rescale=rescale)


def test_rescale_that_overflows_float16_is_refused(tiny_folder):
    with pytest.raises(ValueError, match=r"`rescale` must keep pixels .* dtype='float16'.*"
                                         r"Received: rescale=1000.0, which makes 255 into inf"):
        kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), rescale=1000,
                                dtype="float16")
    gen = kg.ImageFolderGenerator(tiny_folder, image_size=(4, 8), rescale=-1 / 255)
    assert (gen[0][0] <= 0).all()
