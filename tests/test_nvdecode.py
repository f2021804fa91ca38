"""decoder="nvimgcodec": NVIDIA's nvImageCodec decodes a batch's JPEGs in one call. There
is no GPU in CI: these run its CPU backend, the same calls (kerasgen.loading.nvdecode)."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import kerasgen as kg

from .conftest import write_image

pytest.importorskip("nvidia.nvimgcodec", reason="in the test extra: pip install -e .[test]")


@pytest.fixture
def photos(tmp_path):
    """JPEGs (and one PNG) of 40x60, two classes."""
    root = tmp_path / "photos"
    for k in range(10):
        ext = ".png" if k == 3 else ".jpg"
        write_image(str(root / ("a" if k % 2 else "b") / f"{k}{ext}"), 40, 60, seed=k)
    return root


def batches(gen):
    return [gen[i] for i in range(len(gen))]


def counted(gen):
    """The sizes of the calls `gen` makes to nvImageCodec, as a list filled as it goes."""
    calls, decode = [], gen.loader.nv.decode
    gen.loader.nv.decode = lambda datas: calls.append(len(datas)) or decode(datas)
    return calls


def test_pixels_are_opencvs_where_no_reduced_decode_applies(photos):
    common = dict(image_size=(32, 48), batch_size=4, seed=3, cache=None)
    nv = kg.ImageFolderGenerator(photos, decoder="nvimgcodec", **common)
    cv = kg.ImageFolderGenerator(photos, **common)
    for (xa, ya), (xb, yb) in zip(batches(nv), batches(cv)):
        np.testing.assert_array_equal(xa, xb)  # the PNG through OpenCV, the JPEGs not
        np.testing.assert_array_equal(ya, yb)
    assert nv.loader.nv.device in ("cpu", "gpu")


def test_within_resize_error_of_opencvs_reduced_decode(tmp_path):
    import cv2

    rows, cols = np.mgrid[0:120, 0:160]
    for k in range(4):  # smooth photos, as photos are (noise would alias either way)
        image = np.stack([rows * 2, cols * 1.5, (rows + cols + 40 * k) % 256], -1)
        os.makedirs(tmp_path / "smooth" / "c", exist_ok=True)
        cv2.imwrite(str(tmp_path / "smooth" / "c" / f"{k}.jpg"), image.astype(np.uint8))
    common = dict(image_size=(24, 32), batch_size=4, cache=None, shuffle=False)
    x_nv = kg.ImageFolderGenerator(tmp_path / "smooth", decoder="nvimgcodec", **common)[0][0]
    x_cv = kg.ImageFolderGenerator(tmp_path / "smooth", **common)[0][0]  # at 1/4 size
    assert 0 < np.abs(x_nv - x_cv).mean() < 3


def test_batches_are_the_same_run_after_run_and_in_worker_processes(photos):
    common = dict(image_size=(16, 24), batch_size=3, seed=5, decoder="nvimgcodec",
                  augment=None, dtype="uint8", cache=None)
    first = batches(kg.ImageFolderGenerator(photos, **common))
    again = batches(kg.ImageFolderGenerator(photos, **common))
    processes = batches(kg.ImageFolderGenerator(photos, workers=2, use_multiprocessing=True,
                                                **common))
    for (a, _), (b, _), (c, _) in zip(first, again, processes):
        assert a.dtype == np.uint8
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def test_a_bad_jpeg_is_named_or_skipped_as_with_opencv(photos):
    bad = photos / "a" / "1.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 truncated")
    gen = kg.ImageFolderGenerator(photos, image_size=(16, 24), decoder="nvimgcodec",
                                  cache=None, batch_size=10)
    with pytest.raises(ValueError, match=rf"Cannot decode image file {bad}"):
        gen[0]
    skipping = kg.ImageFolderGenerator(photos, image_size=(16, 24), decoder="nvimgcodec",
                                       cache=None, batch_size=10, on_error="skip")
    with pytest.warns(UserWarning, match="Skipping an undecodable image"):
        skipping[0]
    assert skipping.skipped == [str(bad)]


def test_other_colour_modes_use_opencv(photos):
    common = dict(image_size=(16, 24), batch_size=10, cache=None, shuffle=False,
                  color_mode="grayscale")
    np.testing.assert_array_equal(
        kg.ImageFolderGenerator(photos, decoder="nvimgcodec", **common)[0][0],
        kg.ImageFolderGenerator(photos, **common)[0][0])


def test_augmented_batches_decode_with_it_and_augment_on_the_cpu_as_opencvs(photos):
    import albumentations as A

    transform = A.Compose([A.HorizontalFlip(p=0.5),
                           A.RandomResizedCrop(size=(20, 20), scale=(0.5, 1.0))])
    common = dict(image_size=(32, 48), batch_size=4, seed=7, cache=None, augment=transform,
                  dtype="float32", rescale=1 / 255, decode_threads=2)
    nv = kg.ImageFolderGenerator(photos, decoder="nvimgcodec", **common)
    calls = counted(nv)
    cv = kg.ImageFolderGenerator(photos, **common)
    for (xa, ya), (xb, yb) in zip(batches(nv), batches(cv)):
        assert xa.shape[1:] == (20, 20, 3) and xa.dtype == np.float32
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    assert sum(calls) == 9 and max(calls) > 1  # the 9 JPEGs, a thread's share per call


@pytest.mark.parametrize("sampler", ["smote", "balanced"])
def test_samplers_give_the_batches_they_give_with_opencv(photos, sampler):
    for k in (0, 2):  # class b: 3 images against a's 5 (one of a's a PNG)
        (photos / "b" / f"{k}.jpg").unlink()
    make = {"smote": lambda: kg.samplers.SMOTE(k_neighbors=2),
            "balanced": lambda: kg.samplers.BalancedBatchSampler()}[sampler]
    common = dict(image_size=(32, 48), batch_size=4, seed=11, cache=None,
                  augment=(lambda image, rng: image[:, ::-1] if rng.random() < 0.5 else image)
                  if sampler == "smote" else None)
    nv = kg.ImageFolderGenerator(photos, decoder="nvimgcodec", sampler=make(), **common)
    calls = counted(nv)
    cv = kg.ImageFolderGenerator(photos, sampler=make(), **common)
    for epoch in range(2):
        for (xa, ya), (xb, yb) in zip(batches(nv), batches(cv)):
            np.testing.assert_array_equal(xa, xb)  # SMOTE: blended from the same pixels
            np.testing.assert_array_equal(ya, yb)
        nv.on_epoch_end()
        cv.on_epoch_end()
    assert sum(calls) > 0
    # 8 files: SMOTE adds 2 synthetic; balanced batches of 2 + 2 cover a's 5 in 3 batches
    assert len(nv.epoch_plan()) == {"smote": 10, "balanced": 12}[sampler]


@pytest.fixture
def segmentation(tmp_path):
    """6 JPEG images 40x60 with PNG masks of classes 0-2."""
    for k in range(6):
        write_image(str(tmp_path / "images" / f"s{k}.jpg"), 40, 60, seed=k)
        mask = np.random.default_rng(k).integers(0, 3, (40, 60)).astype(np.uint8)
        os.makedirs(tmp_path / "masks", exist_ok=True)
        import cv2

        cv2.imwrite(str(tmp_path / "masks" / f"s{k}.png"), mask)
    return tmp_path


def test_masks_are_loaded_beside_its_images_as_with_opencv(segmentation):
    import albumentations as A

    for augment in (None, A.Compose([A.HorizontalFlip(p=0.5)])):
        common = dict(mask_dir=segmentation / "masks", label_mode="mask",
                      image_size=(32, 48), batch_size=3, seed=2, cache=None,
                      augment=augment, num_classes=3)
        nv = kg.ImageFolderGenerator(segmentation / "images", decoder="nvimgcodec",
                                     **common)
        calls = counted(nv)
        cv = kg.ImageFolderGenerator(segmentation / "images", **common)
        for (xa, ma), (xb, mb) in zip(batches(nv), batches(cv)):
            np.testing.assert_array_equal(xa, xb)
            np.testing.assert_array_equal(ma, mb)
        assert sum(calls) == 6


def flip_some(image, rng, mask=None):
    """A callable augment that flips half the samples, image and mask together, and notes
    the mask's dtype."""
    flip_some.dtypes.add(mask.dtype)
    if rng.random() < 0.5:
        return image[:, ::-1], mask[:, ::-1]
    return image, mask


@pytest.mark.parametrize("augment", [None, flip_some], ids=["plain", "augmented"])
def test_a_bad_mask_is_named_or_skipped_with_its_image(segmentation, augment):
    flip_some.dtypes = set()
    bad = segmentation / "masks" / "s4.png"
    bad.write_bytes(b"not a png")
    common = dict(mask_dir=segmentation / "masks", label_mode="mask", image_size=(16, 24),
                  batch_size=6, shuffle=False, seed=0, cache=None, augment=augment,
                  dtype="uint8")
    with pytest.raises(ValueError, match=rf"mask file {bad}"):
        kg.ImageFolderGenerator(segmentation / "images", decoder="nvimgcodec", **common)[0]
    skipping = kg.ImageFolderGenerator(segmentation / "images", on_error="skip",
                                       decoder="nvimgcodec", **common)
    calls = counted(skipping)
    with pytest.warns(UserWarning, match="Skipping an undecodable image"):
        x, masks = skipping[0]
    assert skipping.skipped == [str(segmentation / "images" / "s4.jpg")]
    assert sum(calls) >= 5  # the images, through nvImageCodec
    plain = kg.ImageFolderGenerator(segmentation / "images", on_error="skip", **common)
    with pytest.warns(UserWarning):
        px, pm = plain[0]
    np.testing.assert_array_equal(x, px)  # the same stand-in, image and mask
    np.testing.assert_array_equal(masks, pm)
    if augment is None:  # row 4 holds one other sample's image and that sample's mask
        twin = [j for j in range(6) if j != 4 and (x[j] == x[4]).all()]
        assert len(twin) == 1 and (masks[twin[0]] == masks[4]).all()
    else:
        assert flip_some.dtypes == {np.dtype(np.uint8)}  # the 8-bit PNGs' own dtype


def test_a_cached_image_keeps_its_own_mask(segmentation):
    common = dict(mask_dir=segmentation / "masks", label_mode="mask", image_size=(16, 24),
                  batch_size=3, shuffle=False, cache="memory")
    nv = kg.ImageFolderGenerator(segmentation / "images", decoder="nvimgcodec", **common)
    first = batches(nv)
    calls = counted(nv)
    again = batches(nv)  # from the cache: no decode
    assert calls == []
    fresh = batches(kg.ImageFolderGenerator(segmentation / "images", **common))
    for (xa, ma), (xb, mb), (xc, mc) in zip(first, again, fresh):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ma, mb)
        np.testing.assert_array_equal(xa, xc)
        np.testing.assert_array_equal(ma, mc)


def test_trains_through_fit_with_the_cache(photos, tmp_path):
    gen = kg.ImageFolderGenerator(photos, image_size=(16, 24), batch_size=4, seed=1,
                                  decoder="nvimgcodec", cache=tmp_path / "nv.cache")
    model = keras.Sequential([keras.Input((16, 24, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Flatten(), keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(gen, epochs=2, verbose=0)
    # a cache file made by one decoder is not read by the other (its pixels may differ)
    assert gen.loader.cache.key != kg.ImageFolderGenerator(
        photos, image_size=(16, 24), cache=tmp_path / "cv.cache").loader.cache.key


def test_the_librarys_search_for_gpu_libraries_prints_nothing(photos):
    code = ("import kerasgen as kg\n"
            f"gen = kg.ImageFolderGenerator({str(photos)!r}, image_size=(16, 24), "
            "decoder='nvimgcodec', cache=None, verbose=0)\n"
            "gen[0]\n"
            "print(gen.loader.nv.device)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr
    assert "nvjpeg" not in result.stderr.lower() and "Failed to load" not in result.stderr


def test_without_the_wheel_the_error_says_what_to_install(photos, monkeypatch):
    from kerasgen.loading import nvdecode as _nvdecode

    monkeypatch.setattr(_nvdecode, "available", lambda: False)
    with pytest.raises(ImportError, match=r'pip install "kerasgen3\[nvimgcodec\]"'):
        kg.ImageFolderGenerator(photos, decoder="nvimgcodec")
    with pytest.raises(ValueError, match="`decoder` must be one of"):
        kg.ImageFolderGenerator(photos, decoder="pillow")


def test_tfrecord_jpeg_records_decode_with_it(tmp_path):
    tf = pytest.importorskip("tensorflow")
    import cv2

    path = str(tmp_path / "photos.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for k in range(5):
            image = np.random.default_rng(k).integers(0, 256, (30, 40, 3), np.uint8)
            data = cv2.imencode(".png" if k == 2 else ".jpg", image)[1].tobytes()
            feature = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
                       "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[k % 2]))}
            writer.write(tf.train.Example(features=tf.train.Features(
                feature=feature)).SerializeToString())
    common = dict(feature_spec={"image": "image", "label": "label"}, image_size=(20, 24),
                  batch_size=5, shuffle=False, verbose=0)
    nv = kg.TFRecordGenerator(path, decoder="nvimgcodec", **common)
    calls = counted(nv)
    (xa, ya), (xb, yb) = nv[0], kg.TFRecordGenerator(path, **common)[0]
    np.testing.assert_array_equal(xa, xb)
    np.testing.assert_array_equal(ya, yb)
    assert sum(calls) == 4  # the JPEG records; the PNG through OpenCV
    with pytest.raises(ValueError, match="`decoder` must be one of"):  # checked up front
        kg.TFRecordGenerator(path, {"label": "int"}, decoder="pillow", verbose=0)


def test_cmyk_jpegs_are_opencvs_bit_for_bit_and_bad_ones_print_nothing(photos, capfd):
    """nvImageCodec's CMYK conversion differs from OpenCV's by 1 in places: CMYK JPEGs
    go to OpenCV. A JPEG it would fail on (garbage, a scan cut short) never reaches it,
    so it prints none of its coloured error lines."""
    from PIL import Image

    pixels = np.random.default_rng(3).integers(0, 256, (40, 60, 3), dtype=np.uint8)
    Image.fromarray(pixels).convert("CMYK").save(photos / "a" / "cmyk.jpg", quality=90)
    (photos / "b" / "garbage.jpg").write_bytes(b"\xff\xd8\xff\xe0 not much of a jpeg")
    common = dict(image_size=(40, 60), cache=None, batch_size=12, shuffle=False,
                  on_error="skip", verbose=0, seed=0)
    gen = kg.ImageFolderGenerator(photos, decoder="nvimgcodec", **common)
    calls = counted(gen)
    capfd.readouterr()
    with pytest.warns(UserWarning, match="Skipping an undecodable image"):
        x, y = gen[0]
    err = capfd.readouterr().err
    assert "[ERROR]" not in err and "\x1b[" not in err, err
    assert sum(calls) == 9  # the 9 good colour JPEGs; not the PNG, the CMYK, the garbage
    with pytest.warns(UserWarning):
        expected = kg.ImageFolderGenerator(photos, **common)[0][0]
    np.testing.assert_array_equal(x, expected)
