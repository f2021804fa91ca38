import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # no update check at import
os.environ.setdefault("MPLBACKEND", "Agg")

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

CLASSES = ("cat", "dog", "fox")


def write_image(path, height=12, width=16, value=None, seed=0, ext_params=()):
    """A small colour image whose content encodes `value` (or random noise)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    if value is not None:
        image[...] = value
    assert cv2.imwrite(str(path), image, list(ext_params)), path
    return image


@pytest.fixture
def image_folder(tmp_path):
    """3 classes (cat 4, dog 3, fox 5 images), PNG and JPEG mixed, one nested folder."""
    root = tmp_path / "images"
    counts = {"cat": 4, "dog": 3, "fox": 5}
    k = 0
    for name, count in counts.items():
        for i in range(count):
            ext = ".png" if i % 2 == 0 else ".jpg"
            sub = "nested" if (name == "fox" and i == 4) else ""
            write_image(str(root / name / sub / f"{name}_{i}{ext}"), value=10 * k, seed=k)
            k += 1
    (root / "cat" / "notes.txt").write_text("not an image")
    return root


@pytest.fixture
def csv_file(tmp_path, image_folder):
    """A CSV listing the folder's images with string labels, relative to the folder."""
    lines = ["filename,label,weight"]
    for name in CLASSES:
        for path in sorted((image_folder / name).rglob("*")):
            if path.suffix in (".png", ".jpg"):
                lines.append(f"{path.relative_to(image_folder)},{name},1.0")
    csv_path = image_folder / "train.csv"
    csv_path.write_text("\n".join(lines) + "\n")
    return csv_path
