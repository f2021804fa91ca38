"""ImageFolderGenerator: listing, class names, validation split, colour modes, formats."""

import os

import cv2
import numpy as np
import pytest

import kerasgen as kg

from .conftest import write_image


def test_lists_classes_recursively_and_ignores_other_files(image_folder):
    gen = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), shuffle=False)
    assert gen.class_names == ["cat", "dog", "fox"] and gen.num_classes == 3
    assert gen.num_samples == 12
    assert gen.labels.tolist() == [0] * 4 + [1] * 3 + [2] * 5
    assert any(os.sep + "nested" + os.sep in p for p in gen.file_paths)
    assert not any(p.endswith(".txt") for p in gen.file_paths)
    assert all(os.path.exists(p) for p in gen.file_paths)


def test_hidden_folders_and_files_are_ignored(image_folder):
    (image_folder / ".ipynb_checkpoints").mkdir()
    (image_folder / "cat" / ".hidden").mkdir()
    from .conftest import write_image as write
    write(str(image_folder / "cat" / ".hidden" / "x.png"))
    write(str(image_folder / "cat" / "._resource_fork.png"))
    gen = kg.ImageFolderGenerator(image_folder, image_size=(6, 6))
    assert gen.class_names == ["cat", "dog", "fox"] and gen.num_samples == 12


def test_class_names_choose_folders_and_order(image_folder):
    gen = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), class_names=["fox", "cat"],
                                  shuffle=False, label_mode="int")
    assert gen.class_names == ["fox", "cat"]
    assert gen.labels.tolist() == [0] * 5 + [1] * 4
    assert all("dog" not in p for p in gen.file_paths)
    with pytest.raises(ValueError, match="not found: \\['owl'\\]"):
        kg.ImageFolderGenerator(image_folder, class_names=["cat", "owl"])


def test_validation_split_is_disjoint_complete_and_stratified(image_folder):
    common = dict(image_size=(6, 6), validation_split=0.4, seed=5)
    train = kg.ImageFolderGenerator(image_folder, subset="training", **common)
    val = kg.ImageFolderGenerator(image_folder, subset="validation", **common)
    assert not set(train.file_paths) & set(val.file_paths)
    everything = kg.ImageFolderGenerator(image_folder, image_size=(6, 6))
    assert sorted(train.file_paths + val.file_paths) == sorted(everything.file_paths)
    assert np.bincount(val.labels).tolist() == [2, 1, 2]  # round(0.4 * 4, 3, 5)
    other_seed = kg.ImageFolderGenerator(image_folder, subset="validation",
                                         **{**common, "seed": 6})
    assert other_seed.file_paths != val.file_paths or other_seed.labels.size == 0


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(subset="training"), ValueError, "`subset` needs `validation_split`"),
    (dict(validation_split=0.2), ValueError, "`validation_split` needs `subset`"),
    (dict(validation_split=1.0, subset="training", seed=1), ValueError,
     "strictly between 0 and 1"),
    (dict(validation_split=0.2, subset="test", seed=1), ValueError, "`subset` must be one of"),
    (dict(validation_split=0.2, subset="training"), ValueError, "`seed` must be given"),
])
def test_split_arguments_are_checked(image_folder, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        kg.ImageFolderGenerator(image_folder, **kwargs)


def test_color_modes_and_unusual_files(tmp_path):
    root = tmp_path / "imgs" / "a"
    os.makedirs(root)
    gray = np.full((10, 10), 77, np.uint8)
    cv2.imwrite(str(root / "gray.png"), gray)
    rgba = np.zeros((10, 10, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 200, 128  # BGRA: blue 200, alpha 128
    cv2.imwrite(str(root / "alpha.png"), rgba)
    deep = np.full((10, 10, 3), 65535, np.uint16)
    cv2.imwrite(str(root / "deep.png"), deep)
    for ext in ("bmp", "tif", "webp"):
        write_image(str(root / f"pic.{ext}"), value=(30, 60, 90))
    from PIL import Image
    Image.fromarray(np.full((10, 10, 3), (90, 60, 30), np.uint8)).save(root / "pic.gif")
    gen = kg.ImageFolderGenerator(tmp_path / "imgs", image_size=(5, 5), shuffle=False,
                                  batch_size=16, dtype="uint8", color_mode="rgba")
    with pytest.warns(UserWarning, match="deep.png has 16 bits per sample; it is reduced"):
        x, _ = gen[0]
    assert x.shape == (7, 5, 5, 4) and x.dtype == np.uint8
    by_name = {os.path.basename(p): img for p, img in zip(gen.file_paths, x)}
    assert by_name["alpha.png"][0, 0].tolist() == [0, 0, 200, 128]
    assert by_name["gray.png"][0, 0].tolist() == [77, 77, 77, 255]
    assert by_name["deep.png"][0, 0].tolist() == [255, 255, 255, 255]
    assert by_name["pic.bmp"][0, 0, :3].tolist() == [90, 60, 30]  # written BGR, read RGB
    assert np.abs(by_name["pic.gif"][0, 0, :3].astype(int) - [90, 60, 30]).max() <= 8
    grayscale = kg.ImageFolderGenerator(tmp_path / "imgs", image_size=(5, 5),
                                        color_mode="grayscale", batch_size=16)
    assert grayscale[0][0].shape == (7, 5, 5, 1)
    rgb = kg.ImageFolderGenerator(tmp_path / "imgs", image_size=(5, 5), batch_size=16)
    assert rgb[0][0].shape == (7, 5, 5, 3)


def test_dtype_and_rescale(image_folder):
    common = dict(image_size=(6, 6), shuffle=False, batch_size=4)
    raw = kg.ImageFolderGenerator(image_folder, dtype="uint8", **common)[0][0]
    assert raw.dtype == np.uint8
    with pytest.raises(ValueError, match="`rescale` applies to float batches only"):
        kg.ImageFolderGenerator(image_folder, dtype="uint8", rescale=1 / 255)
    scaled = kg.ImageFolderGenerator(image_folder, rescale=1 / 255, **common)[0][0]
    assert scaled.dtype == np.float32
    np.testing.assert_allclose(scaled, raw / 255, atol=1e-6)
    half = kg.ImageFolderGenerator(image_folder, dtype="float16", **common)[0][0]
    assert half.dtype == np.float16


def test_flat_folder_for_inference(tmp_path):
    for i in range(3):
        write_image(str(tmp_path / "flat" / f"{i}.png"), seed=i)
    gen = kg.ImageFolderGenerator(tmp_path / "flat", image_size=(4, 4), label_mode=None)
    assert gen.num_samples == 3 and gen.class_names is None and gen.labels is None
    assert isinstance(gen[0], np.ndarray) and gen[0].shape == (3, 4, 4, 3)  # x alone
    with pytest.raises(ValueError, match="No class subfolders"):
        kg.ImageFolderGenerator(tmp_path / "flat")


def test_folder_errors(tmp_path, image_folder):
    with pytest.raises(FileNotFoundError, match="missing_dir"):
        kg.ImageFolderGenerator(tmp_path / "missing_dir")
    (tmp_path / "empty" / "a").mkdir(parents=True)
    (tmp_path / "empty" / "a" / "readme.txt").write_text("x")
    with pytest.raises(ValueError, match="No images found"), pytest.warns(UserWarning):
        kg.ImageFolderGenerator(tmp_path / "empty")
    for kwargs, match in [
        (dict(image_size=(0, 5)), "`image_size` must be a tuple of two positive integers"),
        (dict(image_size=(5,)), "`image_size` must be"),
        (dict(color_mode="cmyk"), "`color_mode` must be one of"),
        (dict(label_mode="onehot"), "`label_mode` must be one of"),
        (dict(dtype="float64"), "`dtype` must be one of"),
        (dict(interpolation="magic"), "`interpolation` must be one of"),
        (dict(batch_size=0), "`batch_size` must be a positive integer. Received: batch_size=0"),
    ]:
        with pytest.raises(ValueError, match=match):
            kg.ImageFolderGenerator(image_folder, **kwargs)
    with pytest.raises(ValueError, match="at most two classes"):
        kg.ImageFolderGenerator(image_folder, label_mode="binary")
    (image_folder / "owl").mkdir()
    with pytest.warns(UserWarning, match="owl.*holds no images"):
        gen = kg.ImageFolderGenerator(image_folder)
    assert gen.class_names[-1] == "owl" and gen.num_classes == 4


def test_corrupt_file_is_named_at_load_time(image_folder):
    bad = image_folder / "dog" / "broken.jpg"
    bad.write_bytes(b"\xff\xd8 not really a jpeg")
    gen = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), shuffle=False,
                                  batch_size=16)
    with pytest.raises(ValueError, match="broken.jpg"):
        gen[0]
