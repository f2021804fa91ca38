"""Bounding-box and keypoint geometry: formats, resizing with the image, padding.

Inside kerasgen a box is [x_min, y_min, x_max, y_max] in pixels of the image it belongs
to (Keras's "xyxy"), float32; a keypoint is [x, y] in pixels. Files and models speak
other formats: Keras's `bounding_box_format` names ("yxyx", "xywh", "center_xywh",
"rel_xyxy", ...; see `keras.utils.bounding_boxes.convert_format`) and albumentations'
("pascal_voc", "coco", "albumentations", "yolo"). `to_xyxy` and `from_xyxy` convert;
`checked` checks and converts the boxes of an annotation file in one vectorised pass,
its errors in the one form of an annotation's field (`field_error`).
"""

from __future__ import annotations

import itertools
import math
import numbers
import reprlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kerasgen import _checks
from kerasgen.loading import images

# Keras's bounding_box_format names (keras.utils.bounding_boxes)
FORMATS = ("xyxy", "yxyx", "xywh", "center_xywh", "center_yxhw",
           "rel_xyxy", "rel_yxyx", "rel_xywh", "rel_center_xywh")
# albumentations' BboxParams formats as Keras names them
ALBUMENTATIONS = {"pascal_voc": "xyxy", "coco": "xywh", "albumentations": "rel_xyxy",
                  "yolo": "rel_center_xywh"}
PAD = -1  # what pads boxes and labels, as keras.layers.MaxNumBoundingBoxes pads them
REL_TOLERANCE = 0.01  # how far beyond 0..1 a relative box may reach (rounding)
SHOW = reprlib.Repr()
SHOW.maxstring, SHOW.maxother, SHOW.maxlist, SHOW.maxdict, SHOW.maxlevel = 60, 60, 6, 4, 3

MISSING = object()


def field_error(field: str, requirement: str, value: Any, where: str,
                hint: str = "") -> ValueError:
    """The one message form for a field of an annotation file (a box among them):
    `field` must be X. Received: field=... in <entry of file>. (MISSING: no such key.)"""
    shown = f"no `{field}`" if value is MISSING else f"{field}={SHOW.repr(value)}"
    return ValueError(f"`{field}` must be {requirement}. Received: {shown} in {where}."
                      + (f" {hint}" if hint else ""))


def finite(value: Any) -> bool:
    """Whether `value` is a finite number (an integer beyond a float's range is not)."""
    try:
        return math.isfinite(value)
    except (OverflowError, TypeError):
        return False


def check_format(name: str, value: str) -> str:
    return _checks.one_of(name, value, FORMATS)


def to_xyxy(boxes: np.ndarray, fmt: str, height: float, width: float,
            dtype: str = "float32") -> np.ndarray:
    """(n, 4) boxes of format `fmt` on an image of (height, width) -> pixel xyxy."""
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    relative = fmt.startswith("rel_")
    base = fmt[4:] if relative else fmt
    if base == "yxyx":
        b = b[:, [1, 0, 3, 2]]
    elif base == "xywh":
        b = np.concatenate([b[:, :2], b[:, :2] + b[:, 2:]], axis=1)
    elif base in ("center_xywh", "center_yxhw"):
        if base == "center_yxhw":
            b = b[:, [1, 0, 3, 2]]
        half = b[:, 2:] / 2
        b = np.concatenate([b[:, :2] - half, b[:, :2] + half], axis=1)
    if relative:
        b = b * np.array([width, height, width, height])
    return b.astype(dtype)


def from_xyxy(boxes: np.ndarray, fmt: str, height: float, width: float,
              dtype: str = "float32") -> np.ndarray:
    """(n, 4) pixel xyxy boxes on an image of (height, width) -> format `fmt`."""
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    relative = fmt.startswith("rel_")
    base = fmt[4:] if relative else fmt
    if relative:
        b = b / np.array([width, height, width, height])
    if base == "yxyx":
        b = b[:, [1, 0, 3, 2]]
    elif base == "xywh":
        b = np.concatenate([b[:, :2], b[:, 2:] - b[:, :2]], axis=1)
    elif base in ("center_xywh", "center_yxhw"):
        b = np.concatenate([(b[:, :2] + b[:, 2:]) / 2, b[:, 2:] - b[:, :2]], axis=1)
        if base == "center_yxhw":
            b = b[:, [1, 0, 3, 2]]
    return b.astype(dtype)


def _box_values(value: Any, field: str, fmt: str, where: str) -> None:
    """Raises the error of one box that is not 4 finite numbers."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(
            value) != 4 or not all(isinstance(v, numbers.Real) and not isinstance(
                v, (bool, np.bool_)) and finite(v) for v in value):
        raise field_error(field, f"4 finite numbers ({fmt})", value, where)


def checked(values: Sequence[Any], fmt: str, where: Callable[[int], str],
            field: str = "bbox", fix: str = "") -> np.ndarray:
    """(n, 4) xyxy float64 of `values` (n boxes of 4 numbers in format `fmt`), in one
    pass: every box checked (4 finite numbers, not ending before it starts; a relative
    one within 0..1, `REL_TOLERANCE` aside, and kept relative: rel_xyxy). `where(k)`
    names box k in errors, `field` the column or key, `fix` what to check."""
    if not len(values):
        return np.zeros((0, 4))
    arr = None
    try:
        kinds = set(map(type, itertools.chain.from_iterable(values)))
        if all(issubclass(k, numbers.Real) and not issubclass(k, (bool, np.bool_))
               for k in kinds) and not any(isinstance(v, (str, bytes)) for v in values):
            arr = np.array(values, np.float64).reshape(len(values), -1)
    except (TypeError, ValueError, OverflowError):
        arr = None
    if arr is None or arr.shape[1] != 4 or not np.isfinite(arr).all():
        for k, value in enumerate(values):  # the first bad one, named
            _box_values(value, field, fmt, where(k))
        arr = np.array(values, np.float64).reshape(-1, 4)  # mixed numeric types
    xyxy = to_xyxy(arr, fmt, 1, 1, "float64")
    backwards = np.flatnonzero((xyxy[:, 2] < xyxy[:, 0]) | (xyxy[:, 3] < xyxy[:, 1]))
    if len(backwards):
        k = int(backwards[0])
        raise field_error(field, f"a box that does not end before it starts ({fmt})",
                          values[k], where(k), f"That is x {xyxy[k, 0]:g}..{xyxy[k, 2]:g}, "
                          f"y {xyxy[k, 1]:g}..{xyxy[k, 3]:g}." + (f" {fix}" if fix else ""))
    if fmt.startswith("rel_"):
        beyond = np.flatnonzero(((xyxy < -REL_TOLERANCE) | (xyxy > 1 + REL_TOLERANCE))
                                .any(axis=1))
        if len(beyond):
            k = int(beyond[0])
            raise field_error("box_format", "the format of the boxes", fmt, where(k),
                       f"Its box {SHOW.repr(values[k])} lies beyond 0..1 of the image, "
                       f"so it is in pixels: pass box_format={fmt[4:]!r} (rel_ formats "
                       "are fractions of the image's width and height).")
    return xyxy


def resize_geometry(size: tuple[int, int], image_size: tuple[int, int],
                    aspect: str | None) -> tuple[np.ndarray, np.ndarray, tuple[int, int, int, int]]:
    """(scale [sx, sy], offset [ox, oy], window (top, left, height, width) of the output
    that holds image content) of the loader's resize of an image of `size` (height,
    width) to `image_size`: a point (x, y) of the file lands at (x, y) * scale + offset.
    `aspect` as `loading.images.resize` takes it: None stretches, "crop" cuts the centred
    window first, "pad" fits and pads."""
    height, width = size
    out_h, out_w = image_size
    if aspect == "crop":
        top, left, crop_h, crop_w = images.crop_box((height, width), image_size)
        scale = np.array([out_w / crop_w, out_h / crop_h])
        return scale, -np.array([left, top]) * scale, (0, 0, out_h, out_w)
    if aspect == "pad":
        top, left, fit_h, fit_w = images.pad_box((height, width), image_size)
        return (np.array([fit_w / width, fit_h / height]), np.array([left, top]),
                (top, left, fit_h, fit_w))
    return np.array([out_w / width, out_h / height]), np.zeros(2), (0, 0, out_h, out_w)


def resized_boxes(boxes: np.ndarray, size: tuple[int, int], image_size: tuple[int, int],
                  aspect: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(boxes on the resized image, the rows kept): pixel xyxy boxes of an image of
    `size` moved as the loader resizes it, clipped to the image content; a box with no
    area left (cut away by crop_to_aspect_ratio) is not kept."""
    scale, offset, (top, left, h, w) = resize_geometry(size, image_size, aspect)
    b = np.asarray(boxes, np.float64).reshape(-1, 4) * np.tile(scale, 2) + np.tile(offset, 2)
    b = np.clip(b, [left, top, left, top], [left + w, top + h, left + w, top + h])
    kept = (b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])
    return b[kept], np.flatnonzero(kept)


def resized_points(points: np.ndarray, size: tuple[int, int], image_size: tuple[int, int],
                   aspect: str | None) -> np.ndarray:
    """Pixel (x, y) keypoints of an image of `size` moved as the loader resizes it (a
    point cut away by crop_to_aspect_ratio lies outside the image)."""
    scale, offset, _ = resize_geometry(size, image_size, aspect)
    return (np.asarray(points, np.float64).reshape(-1, 2) * scale + offset).astype(np.float32)


def pad(rows: Sequence[np.ndarray], length: int, width: int | None,
        dtype: str) -> np.ndarray:
    """Rows of per-sample arrays (n_i, width) or (n_i,) as one (b, length[, width])
    array, padded with PAD."""
    shape = (len(rows), length) + (() if width is None else (width,))
    out = np.full(shape, PAD, dtype)
    for k, row in enumerate(rows):
        out[k, :len(row)] = row
    return out


class ImageBoxes:
    """The detection targets of one loaded image: `boxes` (n, 4) pixel xyxy float64 on
    the loaded (resized) image (float64: albumentations' boxes, converted to the
    batch's format, round to float32 as albumentations' own do), `classes` (n,) int32
    class ids, `keypoints` (k, 2) pixel (x, y) float32 with NaN where a point is not
    annotated (or dropped), or None without keypoints."""

    __slots__ = ("boxes", "classes", "keypoints")

    def __init__(self, boxes: np.ndarray, classes: np.ndarray,
                 keypoints: np.ndarray | None = None) -> None:
        self.boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
        self.classes = np.asarray(classes, np.int32).reshape(-1)
        self.keypoints = None if keypoints is None else np.asarray(
            keypoints, np.float32).reshape(-1, 2)

    def __repr__(self) -> str:
        return (f"ImageBoxes({len(self.boxes)} boxes"
                + ("" if self.keypoints is None else f", {len(self.keypoints)} keypoints")
                + ")")
