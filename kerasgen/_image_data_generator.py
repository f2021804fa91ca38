"""ImageDataGenerator's keyword arguments as kerasgen's: `kg.augment.from_image_data_generator`.

Keras's legacy `ImageDataGenerator(...)` draws, per image, one affine warp (rotation,
shift, shear, zoom: one matrix), then a channel shift, flips and a brightness factor,
in that order (`get_random_transform`, `apply_transform`). The albumentations pipeline
built here draws the same ranges in the same order; what differs is written beside
each (docs/migrating.md has the table).
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np

from kerasgen import _checks

PIP_ALBUMENTATIONS = 'pip install "albumentations>=2.0,<2.1"'


def import_albumentations() -> ModuleType:
    """albumentations, or an ImportError that says how to install it."""
    try:
        import albumentations
    except ImportError as error:
        raise ImportError(f"This needs albumentations (MIT-licensed 2.0.x line): "
                          f"{PIP_ALBUMENTATIONS}") from error
    return albumentations


_FILL = {"nearest": "BORDER_REPLICATE", "constant": "BORDER_CONSTANT",
         "reflect": "BORDER_REFLECT", "wrap": "BORDER_WRAP"}

# ImageDataGenerator's arguments kerasgen has no translation for, and what to use
_REFUSED = {
    "featurewise_center": "keras.layers.Normalization(axis=-1) as the model's first "
                          "layer, with .adapt(gen) over a generator of the training "
                          "images without augment (docs/migrating.md)",
    "featurewise_std_normalization": "keras.layers.Normalization(axis=-1) as the "
                                     "model's first layer, with .adapt(gen) over a "
                                     "generator of the training images without augment "
                                     "(docs/migrating.md)",
    "zca_whitening": "a whitening step of your own in batch_augment=",
    "samplewise_center": "a function in augment= (image - image.mean()), with "
                         "dtype='float32'",
    "samplewise_std_normalization": "a function in augment=, with dtype='float32'",
    "preprocessing_function": "augment=fn(image, rng) (it gets the uint8 image, before "
                              "the batch's dtype conversion)",
    "interpolation_order": "an albumentations pipeline of your own, whose Affine takes "
                           "interpolation= (1, Keras's default, is what this builds)",
}
_KNOWN = ("rotation_range", "width_shift_range", "height_shift_range", "shear_range",
          "zoom_range", "channel_shift_range", "fill_mode", "cval", "horizontal_flip",
          "vertical_flip", "brightness_range", "rescale", "validation_split", "dtype",
          "data_format", "zca_epsilon")  # zca_epsilon: only read with zca_whitening


def from_image_data_generator(**kwargs: Any) -> dict[str, Any]:
    """The generator keyword arguments for `ImageDataGenerator(**kwargs)`'s: `augment`
    (an albumentations pipeline drawing ImageDataGenerator's transforms), and `rescale`,
    `validation_split`, `dtype` as given. Pass them on:
    `kg.ImageFolderGenerator(folder, **kg.augment.from_image_data_generator(
    rotation_range=20, horizontal_flip=True, rescale=1 / 255), ...)`.

    Translated: rotation_range (degrees), width_shift_range and height_shift_range (a
    fraction of the size below 1, pixels from 1), shear_range (degrees), zoom_range (a
    float z: [1 - z, 1 + z]; or [lower, upper]; above 1 shows more of the image, as
    Keras's, each axis drawn apart), channel_shift_range (one value added to every
    channel), fill_mode and cval, horizontal_flip, vertical_flip, brightness_range
    ([lower, upper] factors), and data_format="channels_last". Keras draws the zoom
    factor uniformly; albumentations draws 1/zoom uniformly over the same bounds, and
    clips a channel shift to 0..255 where Keras clips to the image's own range.
    Featurewise and samplewise statistics, ZCA and preprocessing_function are refused,
    naming what to use instead; so is any other name.
    """
    for name in kwargs:
        if name in _REFUSED:
            if name == "interpolation_order" and kwargs[name] == 1:
                continue  # bilinear: the Affine's own
            if name != "interpolation_order" and _inactive(kwargs[name]):
                continue
            raise ValueError(f"from_image_data_generator does not translate `{name}`. "
                             f"Use {_REFUSED[name]}.")
        if name not in _KNOWN:
            raise TypeError(f"ImageDataGenerator has no argument {name!r} that "
                            f"from_image_data_generator knows. Known: {', '.join(_KNOWN)}.")
    if kwargs.get("data_format", "channels_last") not in (None, "channels_last"):
        raise ValueError("from_image_data_generator makes channels_last images (kerasgen's "
                         "decoders' layout). Received: data_format="
                         f"{kwargs['data_format']!r}. Transpose in the model, or use "
                         "kg.image_dataset_from_directory(data_format='channels_first').")
    out = {k: kwargs[k] for k in ("rescale", "validation_split", "dtype")
           if kwargs.get(k) is not None}
    steps = _steps(kwargs)
    if steps:
        out["augment"] = import_albumentations().Compose(steps)
    return out


def _inactive(value: Any) -> bool:
    """Whether an ImageDataGenerator argument left at its default asks for nothing."""
    return value is None or value is False or (isinstance(value, (int, float))
                                                and value == 0)


def _number(name: str, value: Any, low: float = 0.0) -> float:
    """A finite number >= `low` (an angle, a shift, a fill value): NaN, inf, a bool or a
    string would make a transform that draws nonsense, or fails inside albumentations
    without naming the argument."""
    return _checks.finite(name, value, "a finite number" + (
        f" >= {low:g}" if low > -math.inf else ""), low)


def _flag(name: str, value: Any) -> bool:
    """A flip's switch: True or False (None: False). A number or a string would flip
    with no probability the caller chose (0.5 is not a probability here)."""
    if value is None or value is False or value is True or isinstance(value, np.bool_):
        return bool(value)
    _checks.fail(name, "True or False", value)


_ZOOM = ("a float z below 1 (a zoom drawn from [1 - z, 1 + z]), or [lower, upper] with "
         "0 < lower <= upper (a zoom of 0 or less has no image)")


def _zoom(value: Any) -> tuple[float, float]:
    if isinstance(value, (list, tuple, np.ndarray)):
        return _checks.bounds("zoom_range", value, _ZOOM, low=0.0, above_low=True)
    z = _checks.finite("zoom_range", value, _ZOOM, low=0.0)
    if z >= 1:
        _checks.fail("zoom_range", _ZOOM, value)
    return 1 - z, 1 + z


def _shift(name: str, value: Any) -> tuple[str, float]:
    """("percent" or "px", the range's bound) of a width or height shift."""
    if isinstance(value, (list, tuple, np.ndarray)):
        _checks.fail(name, "a finite number >= 0 (a fraction of the size below 1, or "
                     "pixels from 1)", value, hint="A list of allowed shifts has no "
                     "translation.")
    shift = _number(name, value)
    return ("percent", shift) if shift < 1 else ("px", shift)


def _steps(kwargs: dict[str, Any]) -> list[Any]:
    """The albumentations transforms, in ImageDataGenerator's order."""
    import cv2


    A = import_albumentations()
    fill_mode = kwargs.get("fill_mode", "nearest")
    if not isinstance(fill_mode, str) or fill_mode not in _FILL:
        _checks.fail("fill_mode", "one of " + ", ".join(map(repr, sorted(_FILL))), fill_mode)
    cval = _number("cval", kwargs.get("cval", 0.0), low=-math.inf)
    steps = []
    rotation = _number("rotation_range", kwargs.get("rotation_range", 0))
    shear = _number("shear_range", kwargs.get("shear_range", 0))
    zoom = _zoom(kwargs.get("zoom_range", 0.0))
    shifts = {axis: _shift(name, kwargs.get(name, 0)) for axis, name in
              (("x", "width_shift_range"), ("y", "height_shift_range"))}
    if rotation or shear or zoom != (1.0, 1.0) or any(v for _, v in shifts.values()):
        kinds = {kind for kind, v in shifts.values() if v}
        if len(kinds) > 1:
            raise ValueError("`width_shift_range` and `height_shift_range` must both be "
                             "fractions (below 1) or both pixels (1 or more). Received: "
                             f"width_shift_range={kwargs.get('width_shift_range')!r}, "
                             f"height_shift_range={kwargs.get('height_shift_range')!r}")
        pixels = kinds == {"px"}
        translate = {axis: (-int(v), int(v)) if pixels else (-v, v)
                     for axis, (_, v) in shifts.items()}
        where = "translate_px" if pixels else "translate_percent"
        steps.append(A.Affine(
            rotate=(-rotation, rotation), shear={"x": (-shear, shear), "y": (0.0, 0.0)},
            scale={"x": (1 / zoom[1], 1 / zoom[0]), "y": (1 / zoom[1], 1 / zoom[0])},
            **{where: translate}, interpolation=cv2.INTER_LINEAR,
            border_mode=getattr(cv2, _FILL[fill_mode]), fill=cval, p=1.0))
    channel = _number("channel_shift_range", kwargs.get("channel_shift_range", 0))
    if channel:
        steps.append(A.RandomBrightnessContrast(
            brightness_limit=(-channel / 255, channel / 255), contrast_limit=(0.0, 0.0),
            brightness_by_max=True, p=1.0))
    if _flag("horizontal_flip", kwargs.get("horizontal_flip")):
        steps.append(A.HorizontalFlip(p=0.5))
    if _flag("vertical_flip", kwargs.get("vertical_flip")):
        steps.append(A.VerticalFlip(p=0.5))
    brightness = kwargs.get("brightness_range")
    if brightness is not None:
        factors = _checks.bounds(
            "brightness_range", brightness, "[lower, upper]: two finite factors with "
            "0 <= lower <= upper (1 keeps the image's brightness)", low=0.0)
        steps.append(A.MultiplicativeNoise(multiplier=factors, per_channel=False,
                                           elementwise=False, p=1.0))
    return steps
