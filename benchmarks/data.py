"""The benchmarks' photo folder: file `i` is always the same JPEG, a random 4:3 crop of one
of scikit-learn's two bundled sample photos (china.jpg, flower.jpg; nothing downloaded),
maybe flipped and re-toned, in 10 class subfolders. Built once, reused by later runs.

Used by benchmarks/images.py (which builds it), augment.py (the same folder),
fit_cnn.py (`make_photo`, for its own folder of larger photos) and remote.py (which may
ask for smaller photos: `--photo-size`, a folder of their own).
"""

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent  # the repository
DATA_DIR = ROOT / "benchmarks" / ".data"       # git-ignored
NUM_CLASSES = 10
PHOTO_SIZE = (500, 375)  # (width, height) of the generated files
JPEG_QUALITY = 90
DATA_SEED = 1234
DEFAULT_NUM_FILES = 2000
DEFAULT_DATA = DATA_DIR / "photos"


def default_folder(num_files, size=None):
    """benchmarks/.data/photos for the default count, photos-N for another count N; for a
    photo `size` (width, height) other than PHOTO_SIZE, photos-WxH-N (any count)."""
    if size is not None and tuple(size) != PHOTO_SIZE:
        width, height = size
        return DEFAULT_DATA.with_name(f"{DEFAULT_DATA.name}-{width}x{height}-{num_files}")
    if num_files == DEFAULT_NUM_FILES:
        return DEFAULT_DATA
    return DEFAULT_DATA.with_name(f"{DEFAULT_DATA.name}-{num_files}")


def expected_files(num_files):
    """Relative paths of the files a folder of `num_files` holds (file i -> class i % 10)."""
    return [f"class_{i % NUM_CLASSES:02d}/img_{i:05d}.jpg" for i in range(num_files)]


def _image_files_under(folder):
    found = set()
    for dirpath, _, names in os.walk(folder):
        for name in names:
            if name.lower().endswith((".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp",
                                      ".tif", ".tiff")):
                found.add(os.path.relpath(os.path.join(dirpath, name), folder)
                          .replace(os.sep, "/"))
    return found


def make_photo(photos, index, size=PHOTO_SIZE):
    """File `index` (BGR, `size` = (width, height)): a random 4:3 crop of one sample
    photo, maybe flipped and re-toned."""
    rng = np.random.default_rng([DATA_SEED, index])
    photo = photos[int(rng.integers(len(photos)))]
    height, width = photo.shape[:2]  # 427 x 640
    crop_h = int(rng.uniform(0.55, 1.0) * height)
    crop_w = min(width, int(round(crop_h * 4 / 3)))
    top = int(rng.integers(0, height - crop_h + 1))
    left = int(rng.integers(0, width - crop_w + 1))
    crop = photo[top:top + crop_h, left:left + crop_w]
    if rng.random() < 0.5:
        crop = crop[:, ::-1]
    image = cv2.resize(np.ascontiguousarray(crop), size, interpolation=cv2.INTER_AREA)
    gain = rng.uniform(0.85, 1.15)  # slight brightness change: files differ even more
    image = np.clip(image.astype(np.float32) * gain, 0, 255).astype(np.uint8)
    return cv2.cvtColor(image, cv2.COLOR_RGB2BGR)


def build_data(folder, num_files, threads=1, size=None):
    """Writes the missing files of the benchmark folder, on `threads` threads (OpenCV
    releases the GIL), `size` = (width, height) pixels each (None: PHOTO_SIZE); returns
    (seconds, files written). Files already there are kept whatever their size: a folder
    per size (`default_folder(num_files, size)`) keeps them apart."""
    size = PHOTO_SIZE if size is None else tuple(size)
    folder = Path(folder)
    expected = expected_files(num_files)
    present = _image_files_under(folder) if folder.exists() else set()
    extra = present - set(expected)
    if extra:
        sys.exit(f"{folder} holds {len(extra)} image files that a {num_files}-file benchmark "
                 f"folder does not (e.g. {sorted(extra)[0]}). Every image in the folder is "
                 "read, so the count would be wrong: delete the folder, or pass another "
                 "--data or --num-files.")
    missing = [i for i, rel in enumerate(expected) if rel not in present]
    if not missing:
        return 0.0, 0
    from sklearn.datasets import load_sample_images

    start = time.perf_counter()
    photos = load_sample_images().images  # RGB uint8, 427x640 each, bundled with sklearn
    for c in range(NUM_CLASSES):
        (folder / f"class_{c:02d}").mkdir(parents=True, exist_ok=True)
    params = [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY]

    def write(i):
        ok, encoded = cv2.imencode(".jpg", make_photo(photos, i, size), params)
        if not ok:
            raise RuntimeError(f"cv2.imencode failed for file {i}")
        target = folder / expected[i]
        tmp = target.with_name(target.name + ".part")  # not an image name: never listed
        tmp.write_bytes(encoded.tobytes())
        os.replace(tmp, target)

    with ThreadPoolExecutor(max(1, threads)) as pool:
        list(pool.map(write, missing))
    return time.perf_counter() - start, len(missing)


def list_files(folder):
    """(paths, labels): sorted class subfolders, sorted files, as tutorials list them."""
    classes = sorted(d.name for d in os.scandir(folder) if d.is_dir())
    paths, labels = [], []
    for label, name in enumerate(classes):
        sub = os.path.join(folder, name)
        for fname in sorted(os.listdir(sub)):
            if fname.lower().endswith((".jpg", ".jpeg")):
                paths.append(os.path.join(sub, fname))
                labels.append(label)
    return paths, np.asarray(labels, dtype="int32")


def warm_page_cache(paths):
    """Reads every file once, so timed passes do not measure the disk."""
    for path in paths:
        with open(path, "rb") as f:
            f.read()
