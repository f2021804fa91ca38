"""Augmentation: albumentations, callables, masks, batch-level layers, previews, reproducibility."""

import os
import subprocess
import sys

import albumentations as A
import cv2
import keras
import numpy as np
import pytest

import kerasgen as kg

from .conftest import write_image
from .test_keras import WORKERS


def pipeline(size=24):
    return A.Compose([
        A.HorizontalFlip(p=0.5),
        A.RandomResizedCrop(size=(size, size), scale=(0.3, 1.0), p=1.0),
        A.ColorJitter(brightness=0.3, contrast=0.3, saturation=0.3, hue=0.05, p=0.8),
    ])


@pytest.fixture
def photos(tmp_path):
    for c in ("a", "b"):
        for i in range(10):
            write_image(str(tmp_path / "photos" / c / f"{i}.png"), height=40, width=48,
                        seed=i + 100 * (c == "b"))
    return tmp_path / "photos"


def predicted(gen):
    """What model.predict reads of `gen`: epoch 0's batches, in its shuffled order (as
    kerasgen warns)."""
    identity = keras.Sequential([keras.Input(gen[0].shape[1:]), keras.layers.Identity()])
    with pytest.warns(UserWarning, match=r"model.predict\(\) reads .* in the order of epoch 0"):
        return identity.predict(gen, verbose=0)


@pytest.mark.parametrize("workers", WORKERS)
def test_albumentations_batches_are_identical_with_any_workers(photos, workers):
    def make(**kw):
        return kg.ImageFolderGenerator(photos, image_size=(40, 48), batch_size=4, seed=9,
                                       augment=pipeline(), label_mode=None, dtype="uint8",
                                       **kw)

    reference = np.concatenate([make()[i] for i in range(5)])
    np.testing.assert_array_equal(predicted(make(**workers)), reference)
    gen = make()
    np.testing.assert_array_equal(gen[2][0], gen[2][0])  # asked twice
    assert reference.shape == (20, 24, 24, 3)
    gen.on_epoch_end()
    assert not np.array_equal(np.concatenate([gen[i][0] for i in range(5)]), reference)


def test_augmentation_runs_through_fit(photos):
    gen = kg.ImageFolderGenerator(photos, image_size=(40, 48), batch_size=5, seed=1,
                                  augment=pipeline(16), rescale=1 / 255)
    model = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(2, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy")
    history = model.fit(gen, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_callable_augment_needs_no_albumentations(photos):
    def flip(image, rng):
        return image[:, ::-1] if rng.random() < 0.5 else image

    gen = kg.ImageFolderGenerator(photos, image_size=(8, 8), batch_size=20, seed=3,
                                  shuffle=False, augment=flip, dtype="uint8")
    plain = kg.ImageFolderGenerator(photos, image_size=(8, 8), batch_size=20,
                                    shuffle=False, dtype="uint8")[0][0]
    out = gen[0][0]
    flipped = [not np.array_equal(o, p) for o, p in zip(out, plain)]
    assert 0 < sum(flipped) < 20
    for o, p, f in zip(out, plain, flipped):
        np.testing.assert_array_equal(o, p[:, ::-1] if f else p)


def write_pair(root, name, size=(32, 40), seed=0):
    """An image whose red channel is bright exactly where its mask is class 2."""
    rng = np.random.default_rng(seed)
    mask = np.zeros(size, np.uint8)
    top, left = rng.integers(2, 12, 2)
    mask[top:top + 14, left:left + 18] = 2
    image = np.zeros(size + (3,), np.uint8)
    image[..., 2] = np.where(mask == 2, 230, 20)  # BGR: red channel
    os.makedirs(root / "images", exist_ok=True)
    os.makedirs(root / "masks", exist_ok=True)
    cv2.imwrite(str(root / "images" / f"{name}.bmp"), image)  # lossless; mask is .png
    cv2.imwrite(str(root / "masks" / f"{name}.png"), mask)


def agreement(x, masks):
    """Fraction of pixels where 'red is bright' matches 'mask is class 2', away from the
    region's edges (where bilinear images and nearest-neighbour masks differ by design)."""
    kernel = np.ones((3, 3), np.uint8)
    scores = []
    for image, mask in zip(x, masks):
        region = (mask == 2).astype(np.uint8)
        interior = cv2.erode(region, kernel) == cv2.dilate(region, kernel)
        scores.append(np.mean(((image[..., 0] > 125) == (mask == 2))[interior]))
    return float(np.mean(scores))


def test_masks_get_the_geometric_transform_of_their_image(tmp_path):
    for i in range(6):
        write_pair(tmp_path, f"s{i}", seed=i)
    lines = ["image,mask"] + [f"images/s{i}.bmp,masks/s{i}.png" for i in range(6)]
    (tmp_path / "seg.csv").write_text("\n".join(lines) + "\n")
    transform = A.Compose([A.HorizontalFlip(p=0.5), A.VerticalFlip(p=0.5),
                           A.RandomResizedCrop(size=(24, 24), scale=(0.4, 1.0))])
    csv = kg.CSVGenerator(tmp_path / "seg.csv", x_col="image", mask_col="mask",
                          label_mode="mask", image_size=(32, 40), batch_size=6, seed=0,
                          augment=transform, dtype="uint8", num_classes=3)
    x, masks = csv[0]
    assert x.shape == (6, 24, 24, 3) and masks.shape == (6, 24, 24)
    assert masks.dtype == np.int32 and set(np.unique(masks)) <= {0, 2}
    assert agreement(x, masks) > 0.99
    folder = kg.ImageFolderGenerator(tmp_path / "images", mask_dir=tmp_path / "masks",
                                     label_mode="mask", image_size=(32, 40), batch_size=6,
                                     seed=0, augment=transform, dtype="uint8",
                                     mask_format="one_hot", num_classes=3)
    fx, onehot = folder[0]
    assert onehot.shape == (6, 24, 24, 3) and np.allclose(onehot.sum(-1), 1)
    assert agreement(fx, onehot.argmax(-1)) > 0.99
    plain = kg.ImageFolderGenerator(tmp_path / "images", mask_dir=tmp_path / "masks",
                                    label_mode="mask", image_size=(16, 20), batch_size=6,
                                    shuffle=False)
    px, pm = plain[0]
    assert pm.shape == (6, 16, 20) and agreement(px, pm) > 0.99


def test_mask_errors(tmp_path):
    for i in range(3):
        write_pair(tmp_path, f"s{i}", seed=i)
    os.remove(tmp_path / "masks" / "s1.png")
    with pytest.raises(FileNotFoundError, match=r"1 image has no mask.*s1.bmp"):
        kg.ImageFolderGenerator(tmp_path / "images", mask_dir=tmp_path / "masks",
                                label_mode="mask")
    with pytest.raises(ValueError, match="`mask_dir` and label_mode='mask' go together"):
        kg.ImageFolderGenerator(tmp_path / "images", label_mode="mask")
    write_pair(tmp_path, "s1", seed=1)
    with pytest.raises(ValueError, match="mask_format='one_hot' needs `num_classes`"):
        kg.ImageFolderGenerator(tmp_path / "images", mask_dir=tmp_path / "masks",
                                label_mode="mask", mask_format="one_hot")
    gen = kg.ImageFolderGenerator(tmp_path / "images", mask_dir=tmp_path / "masks",
                                  label_mode="mask", num_classes=2, image_size=(8, 8))
    with pytest.raises(ValueError, match=r"Mask values must be class ids in \[0, 2\).*s\d.bmp"):
        gen[0]


def test_array_masks_with_augmentation():
    rng = np.random.default_rng(0)
    masks = (rng.random((8, 16, 16)) > 0.5).astype(np.uint8)
    x = np.repeat(masks[..., None] * 200, 3, axis=-1).astype(np.uint8)
    gen = kg.ArrayGenerator(x, masks, label_mode="mask", batch_size=8, seed=2, dtype="uint8",
                            augment=A.Compose([A.HorizontalFlip(), A.RandomRotate90()]))
    xb, mb = gen[0]
    assert gen.num_classes == 2
    np.testing.assert_array_equal(xb[..., 0] > 100, mb == 1)
    assert not np.array_equal(xb[..., 0] > 100, masks == 1)  # something moved


def test_batch_augment_with_keras_layers_is_seeded(photos):
    def make(**kw):
        return kg.ImageFolderGenerator(photos, image_size=(12, 12), batch_size=10, seed=5,
                                       **kw)

    flip = make(batch_augment=keras.layers.RandomFlip("horizontal"))
    first = flip[0][0]
    np.testing.assert_array_equal(first, make(batch_augment=keras.layers.RandomFlip(
        "horizontal"))[0][0])
    flip.on_epoch_end()
    assert not np.array_equal(flip[0][0], first)
    mixed = make(batch_augment=keras.layers.MixUp(alpha=0.4), label_mode="categorical")
    x, y = mixed[0]
    assert np.allclose(y.sum(axis=1), 1) and ((y > 0) & (y < 1)).any()  # soft labels
    with pytest.raises(ValueError, match="hang in forked worker processes"):
        make(batch_augment=keras.layers.RandomFlip(), workers=2, use_multiprocessing=True)


def test_batch_augment_callable(photos):
    def darken(x, y, rng):
        return x * rng.uniform(0.5, 0.9), y

    gen = kg.ImageFolderGenerator(photos, image_size=(8, 8), batch_size=10, seed=5,
                                  batch_augment=[darken], shuffle=False)
    plain = kg.ImageFolderGenerator(photos, image_size=(8, 8), batch_size=10,
                                    shuffle=False)
    ratio = gen[0][0].sum() / plain[0][0].sum()
    assert 0.5 <= ratio <= 0.9
    with pytest.raises(TypeError, match="`batch_augment` must be"):
        kg.ImageFolderGenerator(photos, batch_augment=lambda x: x)


def test_show_batch_and_preview_command(photos, tmp_path):
    gen = kg.ImageFolderGenerator(photos, image_size=(32, 32), batch_size=8, seed=0,
                                  augment=pipeline(32), label_mode="int")
    path = kg.viz.show_batch(gen, n=6, path=str(tmp_path / "grid.png"))
    image = cv2.imread(path)
    assert image is not None and image.shape[0] > 100 and image.std() > 10
    out = tmp_path / "cli.png"
    result = subprocess.run(
        [sys.executable, "-m", "kerasgen.cli", "preview", str(photos), "--out", str(out),
         "-n", "4", "--image-size", "32", "--augment"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "4 samples of 20 in 2 classes" in result.stdout
    assert cv2.imread(str(out)) is not None
    missing = subprocess.run([sys.executable, "-m", "kerasgen.cli", "preview",
                              str(tmp_path / "nope")], capture_output=True, text=True,
                             timeout=120, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert missing.returncode == 2 and "nope" in missing.stderr


def test_show_batch_overlays_masks(tmp_path):
    for i in range(4):
        write_pair(tmp_path, f"s{i}", seed=i)
    gen = kg.ImageFolderGenerator(tmp_path / "images", mask_dir=tmp_path / "masks",
                                  label_mode="mask", image_size=(32, 40), batch_size=4)
    assert cv2.imread(kg.viz.show_batch(gen, path=str(tmp_path / "m.png"))) is not None


def test_show_batch_leaves_the_matplotlib_backend_alone(photos, tmp_path):
    # a notebook's inline backend (here a non-default one, chosen as a notebook chooses
    # its own) must still be the backend after kg.viz drew
    code = (
        "import matplotlib; matplotlib.use('svg'); import kerasgen as kg\n"
        f"gen = kg.ImageFolderGenerator({str(photos)!r}, image_size=(16, 16), batch_size=4)\n"
        f"kg.viz.show_batch(gen, n=4, path={str(tmp_path / 'grid.png')!r})\n"
        f"kg.viz.plot_class_distribution(gen, path={str(tmp_path / 'bars.png')!r})\n"
        "print(matplotlib.get_backend())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["svg"]
    assert cv2.imread(str(tmp_path / "grid.png")) is not None
    assert cv2.imread(str(tmp_path / "bars.png")) is not None


def test_importing_kerasgen_does_not_import_albumentations():
    code = ("import sys, kerasgen; assert 'albumentations' not in sys.modules, "
            "'imported'; print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-1000:]


def test_missing_albumentations_gives_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "albumentations", None)
    with pytest.raises(ImportError, match=r'pip install "albumentations>=2.0,<2.1"'):
        kg.augment.typical((32, 32))


@pytest.mark.parametrize("scale", [(1.0, 0.5), (0.0, 1.0), (0.5, 1.5), (0.5,),
                                   (float("nan"), 1.0), "0.5"])
def test_typical_refuses_a_malformed_scale_naming_it(scale):
    """An inverted scale raised albumentations' own error about RandomResizedCrop."""
    with pytest.raises(ValueError, match=r"^`scale` must be \(lower, upper\): the crop's "
                                         r"area as fractions of the image's, with 0 < "
                                         r"lower <= upper <= 1\. Received: scale="):
        kg.augment.typical((32, 32), scale=scale)
    crop = kg.augment.typical((32, 32), scale=(0.25, 1.0))[1]
    assert tuple(crop.scale) == (0.25, 1.0)


def test_mixup_with_integer_labels_fails_before_training():
    import keras

    x = np.zeros((8, 16, 16, 3), np.uint8)
    with pytest.raises(ValueError, match="MixUp in `batch_augment` mixes labels"):
        kg.ArrayGenerator(x, np.arange(8) % 2, label_mode="int",
                          batch_augment=keras.layers.MixUp())
