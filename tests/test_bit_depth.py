"""bit_depth=16: 16-bit PNG and TIFF files keep their 16 bits (uint16 or float32
batches, 0..65535), 8-bit files scale to them; by default a 16-bit file is reduced to 8
bits as Keras's loader reduces it, with one warning."""

import cv2
import keras
import numpy as np
import pytest

import kerasgen as kg
from kerasgen.loading import images as _images


@pytest.fixture
def deep(tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for i in range(4):
        cv2.imwrite(str(tmp_path / "a" / f"{i}.png"),
                    rng.integers(0, 65536, (12, 12, 3)).astype(np.uint16))
        cv2.imwrite(str(tmp_path / "b" / f"{i}.tif"),
                    rng.integers(0, 65536, (12, 12, 3)).astype(np.uint16))
        cv2.imwrite(str(tmp_path / "b" / f"{i}.jpg"),
                    rng.integers(0, 256, (12, 12, 3)).astype(np.uint8))
    return tmp_path


@pytest.mark.parametrize("options", [dict(dtype="uint16"), dict(dtype="uint16", cache="memory"),
                                     dict(bit_depth=16), dict(dtype="uint16", cache=None)])
def test_sixteen_bit_files_keep_their_bits(deep, options):
    gen = kg.ImageFolderGenerator(deep, image_size=(12, 12), shuffle=False, batch_size=12,
                                  verbose=0, **options)
    for _ in range(2):  # the second pass reads the cache
        x, _ = gen[0]
        for k, path in enumerate(gen.file_paths):
            raw = cv2.imread(path, cv2.IMREAD_UNCHANGED)[:, :, ::-1].astype(np.uint32)
            expected = raw if not path.endswith(".jpg") else (
                cv2.imread(path)[:, :, ::-1].astype(np.uint32) * 257)
            np.testing.assert_array_equal(x[k], expected)


@pytest.mark.parametrize("color_mode", ["rgb", "grayscale", "rgba"])
def test_one_and_four_channel_sixteen_bit_files_in_each_color_mode(tmp_path, color_mode):
    rng = np.random.default_rng(1)
    (tmp_path / "a").mkdir()
    gray = rng.integers(0, 65536, (10, 10)).astype(np.uint16)
    bgra = rng.integers(0, 65536, (10, 10, 4)).astype(np.uint16)
    cv2.imwrite(str(tmp_path / "a" / "g.png"), gray)
    cv2.imwrite(str(tmp_path / "a" / "r.png"), bgra)
    gen = kg.ImageFolderGenerator(tmp_path, dtype="uint16", color_mode=color_mode,
                                  image_size=(10, 10), batch_size=2, shuffle=False, verbose=0)
    x, _ = gen[0]
    assert x.dtype == np.uint16
    if color_mode == "grayscale":
        np.testing.assert_array_equal(x[0, :, :, 0], gray)
    elif color_mode == "rgb":
        np.testing.assert_array_equal(x[0], np.stack([gray] * 3, -1))
        np.testing.assert_array_equal(x[1], bgra[:, :, 2::-1])
    else:
        np.testing.assert_array_equal(x[1], bgra[:, :, [2, 1, 0, 3]])


def test_by_default_sixteen_bits_are_reduced_as_keras_does_with_one_warning(deep, monkeypatch):
    monkeypatch.setattr(_images, "_warned_deep", False)
    with pytest.warns(UserWarning, match="16 bits per sample.*bit_depth=16"):
        gen = kg.ImageFolderGenerator(deep / "a", labels=None, image_size=(12, 12),
                                      shuffle=False, batch_size=4, verbose=0)
        x = gen[0]
    keras_x = next(iter(keras.utils.image_dataset_from_directory(
        deep / "a", labels=None, image_size=(12, 12), shuffle=False, batch_size=4))).numpy()
    np.testing.assert_array_equal(x, keras_x)


def test_a_sixteen_bit_folder_trains_through_fit(deep):
    gen = kg.ImageFolderGenerator(deep, bit_depth=16, rescale=1 / 65535, image_size=(12, 12),
                                  batch_size=4, seed=1, verbose=0)
    model = keras.Sequential([keras.Input((12, 12, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(2)])
    model.compile(keras.optimizers.Adam(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(gen, epochs=15, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]


@pytest.mark.parametrize("options,match", [
    (dict(bit_depth=12), "bit_depth"),
    (dict(bit_depth=16, dtype="float16"), "0 to 65535"),
    (dict(bit_depth=16, decoder="nvimgcodec"), "8-bit images"),
])
def test_what_sixteen_bits_cannot_take_is_refused(deep, options, match):
    with pytest.raises(ValueError, match=match):
        kg.ImageFolderGenerator(deep, image_size=(12, 12), verbose=0, **options)


def test_a_dtype_that_cannot_hold_sixteen_bits_is_named(deep):
    """It named `rescale` (rescale=None) for a dtype that cannot hold 65535."""
    with pytest.raises(ValueError, match=r"^`dtype` must hold the pixels \(0 to 65535 at "
                                         r"bit_depth=16\)\. Received: dtype='uint8' .*"
                                         r"make 65535 into 255"):
        kg.ImageFolderGenerator(deep, image_size=(12, 12), bit_depth=16, dtype="uint8",
                                verbose=0)


def test_smote_at_sixteen_bits_warns_of_no_reduction(deep, monkeypatch):
    """SMOTE's thumbnails were decoded at 8 bits, warning that 16-bit files 'are reduced'
    to a user who passed bit_depth=16."""
    import warnings

    monkeypatch.setattr(_images, "_warned_deep", False)
    gen = kg.ImageFolderGenerator(deep, image_size=(12, 12), bit_depth=16, batch_size=12,
                                  sampler=kg.samplers.SMOTE(k_neighbors=2, seed=0), seed=0,
                                  verbose=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, y = gen[0]
    assert x.dtype == np.float32 and x.max() > 255  # 0..65535, blended
