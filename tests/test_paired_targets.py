"""label_mode="image" with target_dir=: each image paired with a target image (denoising,
super-resolution, colourisation), both transformed by the same augmentation draws."""

import copy
import random
import shutil

import albumentations as A
import cv2
import keras
import numpy as np
import pytest
from keras.src.trainers.data_adapters import get_data_adapter

import kerasgen as kg
from kerasgen import _seeding as seeding


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """noisy/<class>/<i>.jpg and clean/<class>/<i>.png: 16 bars on black, and the same
    bars with Gaussian noise (JPEGs: the noisy files need not share the clean ones'
    extension)."""
    root = tmp_path_factory.mktemp("pairs")
    rng = np.random.default_rng(0)
    for i in range(16):
        group = "a" if i < 8 else "b"
        for folder in ("clean", "noisy"):
            (root / folder / group).mkdir(parents=True, exist_ok=True)
        clean = np.zeros((16, 16, 3), np.uint8)
        clean[4:12, i % 8:i % 8 + 6] = (60 + 10 * i, 200, 255 - 8 * i)
        cv2.imwrite(str(root / "clean" / group / f"{i}.png"), clean)
        noisy = np.clip(clean + rng.normal(0, 40, clean.shape), 0, 255).astype(np.uint8)
        cv2.imwrite(str(root / "noisy" / group / f"{i}.jpg"), noisy)
    return root


COMMON = dict(label_mode="image", image_size=(16, 16), batch_size=4, seed=2, cache=None)


def test_a_denoiser_trains_through_fit_on_paired_folders(pairs):
    gen = kg.ImageFolderGenerator(pairs / "noisy", target_dir=pairs / "clean",
                                  rescale=1 / 255, **COMMON)
    assert gen.num_samples == 16 and gen.label_mode == "image"
    x, y = gen[0]
    assert x.shape == y.shape == (4, 16, 16, 3) and y.dtype == np.float32
    assert not np.array_equal(x, y) and y.max() <= 1.0
    model = keras.Sequential([
        keras.Input((16, 16, 3)),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(3, 3, padding="same", activation="sigmoid")])
    model.compile(keras.optimizers.Adam(0.01), "mse")
    history = model.fit(gen, epochs=25, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]


def test_each_target_is_its_images_own_file(pairs):
    gen = kg.ImageFolderGenerator(pairs / "noisy", target_dir=pairs / "clean",
                                  shuffle=False, dtype="uint8", **COMMON)
    for b in range(len(gen)):
        _, y = gen[b]
        for k in range(len(y)):
            path = gen.file_paths[4 * b + k].replace("noisy", "clean").replace(".jpg", ".png")
            np.testing.assert_array_equal(y[k], cv2.imread(path)[:, :, ::-1])


PIPELINE = A.Compose([A.HorizontalFlip(p=0.5), A.Affine(rotate=(-30, 30), p=1.0),
                      A.RandomBrightnessContrast(p=1.0), A.RandomCrop(12, 12, p=1.0)])


def test_both_images_get_the_same_draws_as_albumentations_gives_them(pairs, tmp_path):
    """Identical pairs stay identical through a geometric and photometric pipeline, and
    each equals albumentations called directly with the same draws and an additional
    target of type "image"."""
    shutil.copytree(pairs / "clean", tmp_path / "copy")
    gen = kg.ImageFolderGenerator(pairs / "clean", target_dir=tmp_path / "copy",
                                  augment=PIPELINE, shuffle=False, dtype="uint8", **COMMON)
    plain = kg.ImageFolderGenerator(pairs / "clean", target_dir=pairs / "noisy",
                                    shuffle=False, dtype="uint8", **COMMON)
    x, y = gen[1]
    assert x.shape == (4, 12, 12, 3)
    np.testing.assert_array_equal(x, y)
    inputs, targets = plain[1]
    augmented = kg.ImageFolderGenerator(pairs / "clean", target_dir=pairs / "noisy",
                                        augment=PIPELINE, shuffle=False, dtype="uint8",
                                        **COMMON)
    ax, ay = augmented[1]
    for k in range(4):
        rng = seeding.rng(2, seeding.AUGMENT, 0, 4 + k)
        direct = copy.deepcopy(PIPELINE)
        direct.add_targets({"target": "image"})
        direct.set_random_state(rng, random.Random(int(rng.integers(2**63))))
        out = direct(image=inputs[k], target=targets[k])
        np.testing.assert_array_equal(ax[k], out["image"])
        np.testing.assert_array_equal(ay[k], out["target"])


def test_pairs_are_the_same_with_threads_and_processes(pairs):
    one = kg.ImageFolderGenerator(pairs / "noisy", target_dir=pairs / "clean",
                                  augment=PIPELINE, **COMMON)
    expected = [one[b] for b in range(len(one))]
    for options in (dict(workers=2), dict(workers=2, use_multiprocessing=True)):
        gen = kg.ImageFolderGenerator(pairs / "noisy", target_dir=pairs / "clean",
                                      augment=PIPELINE, **COMMON, **options)
        got = list(get_data_adapter(gen, shuffle=False).get_numpy_iterator())
        gen.on_epoch_end()
        for (x, y), (x1, y1) in zip(got, expected, strict=True):
            np.testing.assert_array_equal(x, x1)
            np.testing.assert_array_equal(y, y1)


def test_targets_of_their_own_size_and_colour_mode_and_a_callable_augment(pairs):
    def flip(image, rng, target):  # always: the expected target below is flipped
        return image[:, ::-1], target[:, ::-1]

    sr = kg.ImageFolderGenerator(pairs / "noisy", target_dir=pairs / "clean",
                                 label_mode="image", image_size=(8, 8), target_image_size=(16, 16),
                                 target_color_mode="grayscale", augment=flip, shuffle=False,
                                 batch_size=4, dtype="uint8", cache=None)
    x, y = sr[0]
    assert x.shape == (4, 8, 8, 3) and y.shape == (4, 16, 16, 1)
    clean = cv2.imread(sr.file_paths[0].replace("noisy", "clean").replace(".jpg", ".png"),
                       cv2.IMREAD_GRAYSCALE)
    np.testing.assert_allclose(y[0, :, :, 0], clean[:, ::-1], atol=1)


def test_noise_for_the_inputs_alone_goes_in_a_batch_augment_callable(pairs):
    def noise(x, y, rng):
        return x + rng.normal(0, 0.1, x.shape).astype(x.dtype), y

    gen = kg.ImageFolderGenerator(pairs / "clean", target_dir=pairs / "clean",
                                  batch_augment=noise, rescale=1 / 255, **COMMON)
    x, y = gen[0]
    assert not np.array_equal(x, y) and np.abs(x - y).std() > 0.05


def test_a_bad_file_of_a_pair_replaces_the_whole_pair(pairs, tmp_path):
    shutil.copytree(pairs, tmp_path / "p")
    (tmp_path / "p" / "clean" / "a" / "3.png").write_bytes(b"not a png")
    with pytest.warns(UserWarning, match="3.png"):
        gen = kg.ImageFolderGenerator(tmp_path / "p" / "noisy",
                                      target_dir=tmp_path / "p" / "clean", on_error="skip",
                                      shuffle=False, dtype="uint8", **COMMON)
        x, y = gen[0]
    plain = kg.ImageFolderGenerator(pairs / "noisy", target_dir=pairs / "clean",
                                    shuffle=False, dtype="uint8", **COMMON)
    k = [p.endswith("3.jpg") for p in gen.file_paths].index(True)
    assert k < 4
    both = [j for j in range(16) if np.array_equal(plain.source.loader.load(j), x[k])]
    assert both and both[0] != k  # another pair's input...
    np.testing.assert_array_equal(y[k], plain.source.target_loader.load(both[0]))  # ...and target
    assert any(p.endswith("3.png") for p in gen.skipped)
    with pytest.raises(ValueError, match="3.png"):
        kg.ImageFolderGenerator(tmp_path / "p" / "noisy", target_dir=tmp_path / "p" / "clean",
                                shuffle=False, **COMMON)[0]


@pytest.mark.parametrize("options,error,match", [
    (dict(label_mode="int"), ValueError, "`target_dir` and label_mode='image' go together"),
    (dict(augment=PIPELINE, target_image_size=(8, 8)), ValueError, "must be one size"),
    (dict(batch_augment=keras.layers.RandomFlip(seed=1)), ValueError, "segmentation masks"),
    (dict(labels=[0] * 16), ValueError, "takes no `labels` list"),
    (dict(augment=lambda image, rng: image), TypeError, "target=target"),
])
def test_what_paired_targets_cannot_take_is_refused_by_name(pairs, options, error, match):
    with pytest.raises(error, match=match):
        kg.ImageFolderGenerator(pairs / "noisy", target_dir=pairs / "clean",
                                **dict(COMMON, **options))


def test_a_missing_target_and_a_target_dir_without_its_mode_are_named(pairs, tmp_path):
    shutil.copytree(pairs / "clean", tmp_path / "clean")
    (tmp_path / "clean" / "b" / "9.png").unlink()
    with pytest.raises(FileNotFoundError, match=r"1 image has no target image .*9.jpg"):
        kg.ImageFolderGenerator(pairs / "noisy", target_dir=tmp_path / "clean", **COMMON)
    with pytest.raises(ValueError, match="`target_dir` and label_mode='image'"):
        kg.ImageFolderGenerator(pairs / "noisy", label_mode="image")
    with pytest.raises(ValueError, match="target_image_size"):
        kg.ImageFolderGenerator(pairs / "noisy", target_image_size=(4, 4))


def test_a_csv_list_pairs_images_by_its_target_column(pairs):
    import pandas as pd

    names = [f"{'a' if i < 8 else 'b'}/{i}" for i in range(16)]
    frame = pd.DataFrame({"filename": [f"noisy/{n}.jpg" for n in names],
                          "clean": [f"clean/{n}.png" for n in names]})
    rows = kg.CSVGenerator(frame, directory=pairs, target_col="clean", shuffle=False,
                           dtype="uint8", **COMMON)
    folder = kg.ImageFolderGenerator(pairs / "noisy", target_dir=pairs / "clean",
                                     shuffle=False, dtype="uint8", **COMMON)
    order = [folder.file_paths.index(p) for p in rows.file_paths]
    x, y = rows[0]
    for k in range(4):
        fx, fy = folder[order[k] // 4]
        np.testing.assert_array_equal(x[k], fx[order[k] % 4])
        np.testing.assert_array_equal(y[k], fy[order[k] % 4])
    with pytest.raises(ValueError, match="`target_col` and label_mode='image'"):
        kg.CSVGenerator(frame, directory=pairs, target_col="clean")
    with pytest.raises(ValueError, match="target_col"):
        kg.CSVGenerator(frame, directory=pairs, target_col="nope", **COMMON)
