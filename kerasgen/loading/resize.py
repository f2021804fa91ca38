"""The resize of a decoded image with OpenCV (which releases the GIL), as Keras resizes:
its interpolation methods by Keras's names, the aspect kept by a crop or a pad
(`crop_to_aspect_ratio`, `pad_to_aspect_ratio`), the channels of each colour mode."""

import cv2
import numpy as np

from kerasgen import _checks

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
    if out is None:  # of the image's dtype: uint8, or uint16 at bit_depth=16
        out = np.empty((height, width, COLOR_MODES[color_mode]), dtype=image.dtype)
    elif out.dtype != image.dtype:  # writing it would cast every pixel
        raise ValueError(f"`out` must have the image's dtype ({image.dtype}). Received: "
                         f"out of dtype {out.dtype}.")
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
    code = INTERPOLATIONS[interpolation]  # OpenCV's method
    if code is None:  # nearest, as TensorFlow picks
        rows = _nearest(image.shape[0], height)
        out[...] = image[rows[:, None], _nearest(image.shape[1], width)].reshape(out.shape)
        return out
    dst = out[:, :, 0] if out.shape[2] == 1 else out
    resized = cv2.resize(image, (width, height), dst=dst, interpolation=code)
    if not np.shares_memory(resized, dst):  # OpenCV allocated anew: copy it over
        dst[...] = resized.reshape(dst.shape)
    return out


def _nearest(size, target):
    """Source indices of nearest-neighbour resizing: tf.image.resize's, to the pixel."""
    scale = np.float32(size) / np.float32(target)
    centres = (np.arange(target, dtype=np.float32) + np.float32(0.5)) * scale
    return np.minimum(np.floor(centres).astype(np.intp), size - 1)
