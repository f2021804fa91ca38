"""Image decoding and resizing with OpenCV (which releases the GIL)."""

import os

import cv2
import numpy as np

from kerasgen import _checks

IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png", ".tif", ".tiff", ".webp")
COLOR_MODES = {"rgb": 3, "rgba": 4, "grayscale": 1}
INTERPOLATIONS = {
    "area": cv2.INTER_AREA,
    "bilinear": cv2.INTER_LINEAR,
    "bicubic": cv2.INTER_CUBIC,
    "nearest": cv2.INTER_NEAREST,
    "lanczos": cv2.INTER_LANCZOS4,
}


def is_image_file(name):
    return name.lower().endswith(IMAGE_EXTENSIONS)


def check_color_mode(color_mode):
    return _checks.one_of("color_mode", color_mode, tuple(COLOR_MODES))


def check_interpolation(interpolation):
    return _checks.one_of("interpolation", interpolation, tuple(INTERPOLATIONS))


def _to_uint8(image):
    if image.dtype == np.uint8:
        return image
    if image.dtype == np.uint16:
        return (image >> 8).astype(np.uint8)
    if np.issubdtype(image.dtype, np.floating):
        return np.clip(image * 255.0, 0, 255).astype(np.uint8)
    return np.clip(image, 0, 255).astype(np.uint8)


def decode(path, color_mode="rgb"):
    """Decodes `path` to a uint8 (h, w, channels) array in `color_mode`.

    EXIF orientation is applied (as Keras does); 16-bit images are reduced to 8 bits;
    GIFs give their first frame. Raises ValueError naming the file when it cannot be
    decoded.
    """
    if color_mode == "grayscale":
        image = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
    elif color_mode == "rgb":
        image = cv2.imread(path, cv2.IMREAD_COLOR)
    else:
        image = cv2.imread(path, cv2.IMREAD_UNCHANGED)
        if image is not None and (image.ndim == 2 or image.shape[2] != 4):
            image = cv2.imread(path, cv2.IMREAD_COLOR)  # no alpha: decode with EXIF
    if image is None:
        if not os.path.exists(path):
            raise FileNotFoundError(f"Image file not found: {path}")
        raise ValueError(
            f"Cannot decode image file {path}: it is corrupt, truncated, empty or not an "
            "image format OpenCV reads."
        )
    image = _to_uint8(image)
    if color_mode == "grayscale":
        return image[:, :, None]
    if color_mode == "rgb":
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    if image.shape[2] == 4:
        return cv2.cvtColor(image, cv2.COLOR_BGRA2RGBA)
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGBA)


def load(path, image_size, color_mode="rgb", interpolation="area", out=None):
    """Decodes and resizes `path` to (height, width, channels) uint8, into `out` if given."""
    image = decode(path, color_mode)
    height, width = image_size
    if out is None:
        out = np.empty((height, width, COLOR_MODES[color_mode]), dtype=np.uint8)
    if image.shape[:2] == (height, width):
        out[...] = image
        return out
    resized = cv2.resize(image, (width, height), interpolation=INTERPOLATIONS[interpolation])
    out[...] = resized.reshape(out.shape)
    return out
