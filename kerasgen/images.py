"""Image decoding and resizing with OpenCV (which releases the GIL)."""

import cv2
import numpy as np

from kerasgen import _checks, _malloc

IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png", ".tif", ".tiff", ".webp")
COLOR_MODES = {"rgb": 3, "rgba": 4, "grayscale": 1}
# Keras's names (tf.image.resize's methods) -> the closest OpenCV method, measured against
# tf.image.resize (tests/test_dropin.py: mean absolute difference under 1 of 255). OpenCV
# has no Lanczos-5, Gaussian or Mitchell-Netravali kernel: Lanczos-5 takes OpenCV's
# Lanczos (8x8 taps), and the smooth Gaussian and Mitchell kernels come closest to bilinear.
# "nearest" (None) picks tf.image.resize's pixels exactly: its half-pixel-centre index
# arithmetic in float32, where OpenCV's fixed point breaks ties the other way.
INTERPOLATIONS = {
    "bilinear": cv2.INTER_LINEAR,
    "area": cv2.INTER_AREA,
    "bicubic": cv2.INTER_CUBIC,
    "nearest": None,
    "lanczos": cv2.INTER_LANCZOS4,
    "lanczos3": cv2.INTER_LANCZOS4,
    "lanczos5": cv2.INTER_LANCZOS4,
    "gaussian": cv2.INTER_LINEAR,
    "mitchellcubic": cv2.INTER_LINEAR,
}


def is_image_file(name):
    return name.lower().endswith(IMAGE_EXTENSIONS)


def check_color_mode(color_mode):
    return _checks.one_of("color_mode", color_mode, tuple(COLOR_MODES))


def check_interpolation(interpolation):
    if isinstance(interpolation, str):
        interpolation = interpolation.lower()  # Keras accepts any case
    return _checks.one_of("interpolation", interpolation, tuple(INTERPOLATIONS))


def aspect_mode(crop_to_aspect_ratio=False, pad_to_aspect_ratio=False):
    """None, "crop" or "pad" from Keras's two flags, which exclude each other."""
    if crop_to_aspect_ratio and pad_to_aspect_ratio:
        raise ValueError("Only one of `pad_to_aspect_ratio`, `crop_to_aspect_ratio` can be "
                         "True. Received: crop_to_aspect_ratio=True, "
                         "pad_to_aspect_ratio=True.")
    return "crop" if crop_to_aspect_ratio else ("pad" if pad_to_aspect_ratio else None)


def resize_key(interpolation, aspect=None):
    """What identifies a resize in a cache key: the OpenCV method itself, and the aspect."""
    return f"{interpolation}:{INTERPOLATIONS[interpolation]}" + (f"/{aspect}" if aspect else "")


def _to_uint8(image):
    if image.dtype == np.uint8:
        return image
    if image.dtype == np.uint16:
        return (image >> 8).astype(np.uint8)
    if np.issubdtype(image.dtype, np.floating):
        return np.clip(image * 255.0, 0, 255).astype(np.uint8)
    return np.clip(image, 0, 255).astype(np.uint8)


_REDUCED = {
    "rgb": {2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4,
            8: cv2.IMREAD_REDUCED_COLOR_8},
    "grayscale": {2: cv2.IMREAD_REDUCED_GRAYSCALE_2, 4: cv2.IMREAD_REDUCED_GRAYSCALE_4,
                  8: cv2.IMREAD_REDUCED_GRAYSCALE_8},
}
# OpenCV >= 4.11 decodes straight to RGB (libjpeg-turbo does the channel order for free)
_IMREAD_RGB = getattr(cv2, "IMREAD_COLOR_RGB", cv2.IMREAD_COLOR)
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def jpeg_size(data):
    """(height, width) from a JPEG's frame header, or None when `data` is no JPEG."""
    if len(data) < 4 or data[0] != 0xFF or data[1] != 0xD8:
        return None
    i, n = 2, len(data)
    while i + 9 < n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _SOF_MARKERS:
            return (int(data[i + 5]) << 8 | int(data[i + 6]),
                    int(data[i + 7]) << 8 | int(data[i + 8]))
        if marker == 0xD9 or marker == 0xDA:  # end of image / start of scan: no frame
            return None
        i += 2 + (int(data[i + 2]) << 8 | int(data[i + 3]))
    return None


def reduction(source_size, target_size):
    """The largest JPEG scale 1/r (r in 2, 4, 8) that keeps the image at least as large
    as the target on both sides, whichever way EXIF orientation turns it; 1 for none."""
    side = max(target_size)
    for r in (8, 4, 2):
        if min(source_size) >= r * side:
            return r
    return 1


def decode(path, color_mode="rgb", target_size=None):
    """Decodes `path` to a uint8 (h, w, channels) array in `color_mode`.

    EXIF orientation is applied (as Keras does); 16-bit images are reduced to 8 bits;
    GIFs give their first frame. With `target_size`, a JPEG at least twice as large on
    both sides is decoded at 1/2, 1/4 or 1/8 scale (much faster, within ordinary resize
    error of a full decode). Raises ValueError naming the file when it cannot be decoded.
    """
    return decode_bytes(read_file(path), color_mode, target_size, f"image file {path}")


def read_file(path):
    """The bytes of an image file, as uint8; errors name the file."""
    try:
        return np.fromfile(path, dtype=np.uint8)
    except FileNotFoundError:
        raise FileNotFoundError(f"Image file not found: {path}") from None
    except OSError as error:
        raise ValueError(f"Cannot read image file {path}: {error}") from error


def decode_bytes(data, color_mode="rgb", target_size=None, name="image"):
    """`decode` for encoded bytes (a uint8 array or bytes); `name` is used in errors."""
    data = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes) else data
    if data.size == 0:
        raise ValueError(f"Cannot decode {name}: the file is empty (0 bytes).")
    flag = None
    if target_size is not None and color_mode in _REDUCED:
        size = jpeg_size(data)
        r = reduction(size, target_size) if size else 1
        if r > 1:
            flag = _REDUCED[color_mode][r]
    if flag is None:
        flag = {"grayscale": cv2.IMREAD_GRAYSCALE, "rgb": _IMREAD_RGB,
                "rgba": cv2.IMREAD_UNCHANGED}[color_mode]
    image = cv2.imdecode(data, flag)
    if image is not None and color_mode == "rgba" and (image.ndim == 2 or image.shape[2] != 4):
        image = cv2.imdecode(data, cv2.IMREAD_COLOR)  # no alpha: decode with EXIF applied
    if image is None:
        raise ValueError(
            f"Cannot decode {name}: it is corrupt, truncated or not an image format "
            "OpenCV reads."
        )
    image = _to_uint8(image)
    if color_mode == "grayscale":
        return image if image.ndim == 3 else image[:, :, None]
    if color_mode == "rgb":
        rgb = flag == _IMREAD_RGB and _IMREAD_RGB != cv2.IMREAD_COLOR
        return image if rgb else cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    if image.shape[2] == 4:
        return cv2.cvtColor(image, cv2.COLOR_BGRA2RGBA)
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGBA)


def load(path, image_size, color_mode="rgb", interpolation="bilinear", out=None,
         aspect=None):
    """Decodes and resizes `path` to (height, width, channels) uint8, into `out` if given."""
    return resize(decode(path, color_mode, image_size), image_size, color_mode,
                  interpolation, out, aspect)


def crop_box(shape, image_size):
    """(top, left, height, width) of the largest centred window of `shape` with the aspect
    ratio of `image_size`: keras.preprocessing.image.smart_resize's crop, to the pixel."""
    height, width = shape[:2]
    target_height, target_width = image_size
    crop_height = max(min(height, int(float(width * target_height) / target_width)), 1)
    crop_width = max(min(width, int(float(height * target_width) / target_height)), 1)
    return (int(float(height - crop_height) / 2), int(float(width - crop_width) / 2),
            crop_height, crop_width)


def pad_box(shape, image_size):
    """(top, left, height, width) where the image goes, resized to fit, inside `image_size`
    padded with zeros: tf.image.resize_with_pad's arithmetic (in float32), to the pixel."""
    height, width = (np.float32(v) for v in shape[:2])
    target_height, target_width = (np.float32(v) for v in image_size)
    ratio = max(width / target_width, height / target_height)
    fit_height, fit_width = height / ratio, width / ratio
    return (max(0, int(np.floor((target_height - fit_height) / np.float32(2)))),
            max(0, int(np.floor((target_width - fit_width) / np.float32(2)))),
            max(1, int(np.floor(fit_height))), max(1, int(np.floor(fit_width))))


def resize(image, image_size, color_mode="rgb", interpolation="bilinear", out=None,
           aspect=None):
    """Resizes a decoded image to (height, width, channels) uint8, into `out` if given.

    `aspect`: None stretches the image to `image_size`; "crop" first cuts the largest
    centred window with the target's aspect ratio (Keras's crop_to_aspect_ratio); "pad"
    resizes the whole image to fit and pads it, centred, with zeros (pad_to_aspect_ratio).
    """
    height, width = image_size
    if out is None:
        out = np.empty((height, width, COLOR_MODES[color_mode]), dtype=np.uint8)
    if aspect == "crop":
        top, left, crop_height, crop_width = crop_box(image.shape, image_size)
        image = image[top:top + crop_height, left:left + crop_width]
    elif aspect == "pad":
        top, left, fit_height, fit_width = pad_box(image.shape, image_size)
        if (fit_height, fit_width) != (height, width):
            out[...] = 0
            resize(image, (fit_height, fit_width), color_mode, interpolation,
                   out[top:top + fit_height, left:left + fit_width])
            return out
    if image.shape[:2] == (height, width):
        out[...] = image
        return out
    if INTERPOLATIONS[interpolation] is None:  # nearest, as TensorFlow picks
        rows = _nearest(image.shape[0], height)
        out[...] = image[rows[:, None], _nearest(image.shape[1], width)].reshape(out.shape)
        return out
    dst = out[:, :, 0] if out.shape[2] == 1 else out
    resized = cv2.resize(image, (width, height), dst=dst,
                         interpolation=INTERPOLATIONS[interpolation])
    if not np.shares_memory(resized, dst):  # OpenCV allocated anew: copy it over
        dst[...] = resized.reshape(dst.shape)
    return out


def _nearest(size, target):
    """Source indices of nearest-neighbour resizing: tf.image.resize's, to the pixel."""
    scale = np.float32(size) / np.float32(target)
    centres = (np.arange(target, dtype=np.float32) + np.float32(0.5)) * scale
    return np.minimum(np.floor(centres).astype(np.intp), size - 1)


def load_mask(path, image_size, out=None, aspect=None):
    """A segmentation mask of class ids, resized with nearest neighbour to (h, w) (after
    the crop or inside the padding of `aspect`, as its image; padding is class 0).

    Masks are single-channel images (8- or 16-bit PNG, say); a 3-channel mask is
    accepted when its channels are equal. EXIF orientation is applied as for images.
    """
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except FileNotFoundError:
        raise FileNotFoundError(f"Mask file not found: {path}") from None
    mask = cv2.imdecode(data, cv2.IMREAD_ANYDEPTH | cv2.IMREAD_ANYCOLOR) if data.size else None
    if mask is None:
        raise ValueError(f"Cannot decode mask file {path}: it is empty, corrupt or not an "
                         "image format OpenCV reads.")
    if mask.ndim == 3:
        if not (mask == mask[:, :, :1]).all():
            raise ValueError(f"Mask {path} has {mask.shape[2]} different channels; a mask "
                             "must hold one class id per pixel (a single-channel image).")
        mask = mask[:, :, 0]
    height, width = image_size
    if aspect == "crop":
        top, left, crop_height, crop_width = crop_box(mask.shape, image_size)
        mask = mask[top:top + crop_height, left:left + crop_width]
    elif aspect == "pad":
        top, left, fit_height, fit_width = pad_box(mask.shape, image_size)
        padded = np.zeros((height, width), mask.dtype)
        padded[top:top + fit_height, left:left + fit_width] = cv2.resize(
            mask, (fit_width, fit_height), interpolation=cv2.INTER_NEAREST)
        mask = padded
    if mask.shape != (height, width):
        mask = cv2.resize(mask, (width, height), interpolation=cv2.INTER_NEAREST)
    if out is None:
        return mask
    out[...] = mask
    return out


def tune_malloc(mmap_threshold=32 << 20, trim_threshold=64 << 20):
    """Sets glibc's mmap and trim thresholds for the whole process (Linux, glibc) now and
    re-applies them before each batch of every Keras epoch; returns whether glibc took
    them (False elsewhere).

    You rarely need it: in `fit`, `evaluate` and `predict` kerasgen already applies these
    defaults, because TensorFlow pins the mmap threshold at 128 KiB whenever Keras feeds a
    PyDataset (see docs/performance.md). Call it for other values. Outside `fit`, a fixed
    threshold replaces glibc's own adaptive one for the whole process.
    `leave_malloc()` turns all of this off.
    """
    return _malloc.tune(mmap_threshold, trim_threshold)


def leave_malloc():
    """kerasgen stops setting glibc's malloc thresholds in this process (the environment
    variable KERASGEN_MALLOC=leave does the same from the start)."""
    _malloc.leave()
