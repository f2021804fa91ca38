"""Augmentation hooks: albumentations pipelines, plain callables, batch-level Keras layers.

Every draw comes from a numpy Generator derived from (seed, epoch, position) for a
sample, or (seed, epoch, batch index) for a batch, never from a shared random state: a
batch is byte-identical with any number of worker threads or processes, asked in any
order, and differs from one epoch to the next.

Importing this module does not import albumentations or TensorFlow.
"""

from __future__ import annotations

import copy
import inspect
import random
import threading
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from kerasgen import _checks
# `import_albumentations` lives below this module, so that `_image_data_generator` (whose
# translation needs it) imports nothing back from here: no import circle
from kerasgen._image_data_generator import (  # noqa: F401 - kg.augment.from_image_data_generator
    PIP_ALBUMENTATIONS as PIP_ALBUMENTATIONS,
    from_image_data_generator as from_image_data_generator,
    import_albumentations as import_albumentations)
from kerasgen._typing import Augment, BatchAugmentSteps, ImageSize

if TYPE_CHECKING:
    import albumentations

    from kerasgen.sources._boxes import ImageBoxes

__all__ = ["center_crop", "from_image_data_generator", "map_batch", "typical"]

# Keras layers rebuilt and called from two threads at once (the work-ahead's and the
# caller's) crashed TensorFlow in its random ops (a segmentation fault in
# stateless_random_gamma, MixUp's draw, seen under load): a generator's batch layers run
# one batch at a time, process-wide; their ops are multi-threaded inside TensorFlow.
_KERAS_LAYERS = threading.Lock()

def _is_albumentations(obj):
    return type(obj).__module__.split(".")[0] == "albumentations"


def _is_keras_layer(obj: object) -> TypeGuard[Any]:
    """Whether `obj` is a Keras layer (then typed Any, as Keras ships no hints), found
    by its classes' names so that Keras is not imported to tell."""
    return any(c.__module__.split(".")[0] == "keras" and c.__name__ == "Layer"
               for c in type(obj).__mro__)


def typical(image_size: ImageSize,
            scale: tuple[float, float] = (0.5, 1.0)) -> albumentations.Compose:
    """A typical training pipeline: horizontal flip, random resized crop, colour jitter.

    `scale`: (lower, upper) bounds of the crop's area, a fraction of the image's, with
    0 < lower <= upper <= 1. Returns an `albumentations.Compose`; needs albumentations
    installed.
    """
    height, width = _checks.image_size(image_size)
    scale = _checks.bounds("scale", scale, "(lower, upper): the crop's area as fractions "
                           "of the image's, with 0 < lower <= upper <= 1", low=0.0,
                           high=1.0, above_low=True)
    A = import_albumentations()
    return A.Compose([
        A.HorizontalFlip(p=0.5),
        A.RandomResizedCrop(size=(height, width), scale=scale, p=1.0),
        A.ColorJitter(brightness=0.2, contrast=0.2, saturation=0.2, hue=0.05, p=0.8),
    ])


def deterministic(step: Any) -> bool:
    """Whether an `augment` or `batch_augment` step gives the same output for every draw
    (its attribute `deterministic` is true: `center_crop`, the channels-first layout of
    `kg.image_dataset_from_directory(data_format=...)`, or a function of yours marked
    `fn.deterministic = True`): a preprocessing, which a validation generator keeps."""
    return bool(getattr(step, "deterministic", False))


def deterministic_part(value: Any) -> Any:
    """What of an `augment` or `batch_augment` value (a step or a list of them) is
    deterministic, or None: what `split()` gives the validation generator too."""
    if isinstance(value, (list, tuple)):
        kept = [step for step in value if deterministic(step)]
        return kept or None
    return value if value is not None and deterministic(value) else None


def map_batch(fn: Any) -> MapBatch:
    """tf.data's `dataset.map(fn)` for a kerasgen generator: `fn(x, y) -> (x, y)` reshapes
    every batch for the model (`y` into a dict of outputs, one target column of several,
    strings into token ids...). Pass it as `batch_augment=` (alone, or in a list after
    the random steps). Batches without targets call `fn(x)`, which returns x, or the
    pair (x, y) to make the targets, as Keras reads a tf.data element (a window split
    into inputs and labels, say).

    A map draws nothing, so it is a preprocessing: `split()`'s validation generator keeps
    it, and it is the same with any number of workers.

    ```python
    gen = kg.ArrayGenerator(x, y, batch_augment=kg.augment.map_batch(
        lambda x, y: (x, {"class": y[:, 0], "box": y[:, 1:]})))
    ```
    """
    if not callable(fn) or isinstance(fn, MapBatch):
        _checks.fail("fn", "a callable fn(x, y) -> (x, y) (tf.data's map function)", fn,
                     TypeError)
    return MapBatch(fn)


class MapBatch:
    """See `map_batch`: a `batch_augment` step `(x, y, rng) -> fn(x, y)`, deterministic."""

    deterministic = True  # the same for every draw: validation keeps it (split())

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, x: Any, y: Any, rng: np.random.Generator) -> tuple[Any, Any]:
        if y is None:
            mapped = self.fn(x)
            if isinstance(mapped, tuple) and len(mapped) == 2:
                return mapped  # (inputs, targets), as Keras reads a 2-tuple element
            return mapped, None
        mapped = self.fn(x, y)
        if not isinstance(mapped, tuple) or len(mapped) != 2:
            raise TypeError(
                "A `map_batch` function must return the batch's (x, y), as tf.data's map "
                f"of an (x, y) dataset does. Received: {type(mapped).__name__}"
                + (f" of length {len(mapped)}" if isinstance(mapped, tuple) else "")
                + f" from {getattr(self.fn, '__name__', self.fn)!r}.")
        return mapped

    def __repr__(self) -> str:
        return f"map_batch({getattr(self.fn, '__qualname__', self.fn)!s})"


def center_crop(image_size: ImageSize) -> CenterCrop:
    """The central `image_size` (height, width) of each image: what a validation
    generator applies where training crops (`typical`, `A.RandomResizedCrop`), so that
    both give the model images of one size at a like scale (torchvision's
    Resize + CenterCrop). An image smaller than `image_size` on a side is first enlarged
    (bilinear, its aspect ratio kept) until it covers it. The same for every draw: a
    preprocessing, not an augmentation, so validation may use it (`split()` does).
    Pass it as `augment=`; masks are cropped alike."""
    return CenterCrop(_checks.image_size(image_size))


class CenterCrop:
    """See `center_crop`: a callable `fn(image, rng, mask=None)`, the same output for any
    draw (`deterministic`)."""

    deterministic = True  # a validation generator may take it (base.check_validation_partner)

    def __init__(self, size: tuple[int, int]) -> None:
        self.size = size

    def __repr__(self) -> str:
        return f"kg.augment.center_crop({self.size})"

    def __call__(self, image: np.ndarray, rng: np.random.Generator | None = None,
                 mask: np.ndarray | None = None) -> Any:
        out = self._crop(image, cv2_interpolation="linear")
        if mask is None:
            return out
        return out, self._crop(mask, cv2_interpolation="nearest")

    def _crop(self, image: np.ndarray, cv2_interpolation: str) -> np.ndarray:
        height, width = self.size
        h, w = image.shape[:2]
        scale = max(height / h, width / w)
        if scale > 1:  # enlarged until it covers the crop, aspect ratio kept
            import cv2

            h, w = max(height, round(h * scale)), max(width, round(w * scale))
            resized = cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR if
                                 cv2_interpolation == "linear" else cv2.INTER_NEAREST)
            image = resized.reshape((h, w) + image.shape[2:])
        top, left = (h - height) // 2, (w - width) // 2
        return np.ascontiguousarray(image[top:top + height, left:left + width])


class SampleAugment:
    """Applies `augment` to one sample (and its mask) with a given numpy Generator.

    `augment` is an albumentations transform (reseeded per sample through
    `set_random_state`, one private copy per thread) or a callable
    `fn(image, rng) -> image`; in mask mode the callable is called as
    `fn(image, rng, mask=mask)` and returns `(image, mask)` (`with_masks`): a callable
    that cannot be called so is refused here, before any batch.
    """

    def __init__(self, augment: Augment, *, with_masks: bool = False,
                 with_boxes: bool = False, with_targets: bool = False) -> None:
        if not callable(augment):
            _checks.fail("augment", "None, an albumentations transform or a callable "
                         "fn(image, rng) -> image", augment, TypeError)
        self.augment = augment
        self.albumentations = _is_albumentations(augment)
        if with_boxes:
            check_box_augment(augment, keypoints=False)
        elif not self.albumentations:
            _check_signature(augment, with_masks, with_targets)
        self._local = threading.local()

    def _transform(self):
        transform = getattr(self._local, "transform", None)
        if transform is None:  # the transforms hold random state: one copy per thread
            transform = self._local.transform = copy.deepcopy(self.augment)
        return transform

    def __call__(self, image: np.ndarray, rng: np.random.Generator,
                 mask: np.ndarray | None = None, targets: ImageBoxes | None = None,
                 target: np.ndarray | None = None) -> Any:
        """The augmented image; (image, mask) when `mask` is given; (image, its
        ImageBoxes) when `targets` (boxes, keypoints) are; (image, target image) when
        `target` is (the same draws: albumentations' additional target "image")."""
        if not self.albumentations:
            if target is not None:
                return self.augment(image, rng, target=target)
            if mask is None:
                return self.augment(image, rng)
            return self.augment(image, rng, mask=mask)
        transform = self._transform()
        transform.set_random_state(rng, random.Random(int(rng.integers(2**63))))
        if targets is not None:
            return _with_boxes(transform, image, targets)
        if target is not None:
            if TARGET_IMAGE not in getattr(transform, "additional_targets", {}):
                transform.add_targets({TARGET_IMAGE: "image"})
            out = transform(image=image, **{TARGET_IMAGE: target})
            return out["image"], out[TARGET_IMAGE]
        if mask is None:
            return transform(image=image)["image"]
        out = transform(image=image, mask=mask)
        return out["image"], out["mask"]

    def __getstate__(self):
        return {"augment": self.augment, "albumentations": self.albumentations}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local = threading.local()


def _params(transform: Any, kind: str) -> Any:
    """The BboxParams ("bboxes") or KeypointParams ("keypoints") of a Compose, or None."""
    processor = (getattr(transform, "processors", None) or {}).get(kind)
    return None if processor is None else processor.params


KEYPOINT_FORMATS = ("xy", "yx")  # the keypoint formats of albumentations taken here
TARGET_IMAGE = "kerasgen_target_image"  # the name a target image is passed under


def check_box_augment(augment: Any, keypoints: bool) -> None:
    """Refuses an `augment` that cannot move boxes (and keypoints) with the image: only
    an albumentations Compose with bbox_params (and keypoint_params) can."""
    if not _is_albumentations(augment) or _params(augment, "bboxes") is None:
        _checks.fail(
            "augment", "an albumentations Compose with bbox_params, A.Compose([...], "
            "bbox_params=A.BboxParams(format='pascal_voc', label_fields=['labels']))",
            augment, TypeError, "Boxes must move with their image, and only albumentations "
            "says how each transform moves them (any `format` and `label_fields` do: "
            "kerasgen converts, and passes the class ids under each label field).")
    if keypoints:
        params = _params(augment, "keypoints")
        if params is None:
            _checks.fail("augment", "an albumentations Compose with keypoint_params as "
                         "well (the images have keypoints): A.Compose([...], bbox_params="
                         "..., keypoint_params=A.KeypointParams(format='xy'))", augment,
                         TypeError)
        if params.format not in KEYPOINT_FORMATS:
            raise ValueError(f"`augment`'s KeypointParams must have format 'xy' or 'yx' "
                             f"(points without angle or scale). Received: "
                             f"format={params.format!r}.")


def _with_boxes(transform: Any, image: np.ndarray, targets: ImageBoxes) -> Any:
    """(image, ImageBoxes) after `transform`: the boxes go in the Compose's own format
    with a fifth column, their row, so that the rows albumentations keeps (cut by a
    crop, below min_visibility) are known exactly; the class ids go under each label
    field, and come back from `targets` by row. Keypoints likewise, a missing one (NaN)
    left out and still missing after."""
    from kerasgen.sources import _boxes as boxes_mod

    params = _params(transform, "bboxes")
    height, width = image.shape[:2]
    fmt = boxes_mod.ALBUMENTATIONS[params.format]
    n = len(targets.boxes)
    rows = np.concatenate([boxes_mod.from_xyxy(targets.boxes, fmt, height, width,
                                               "float64"),
                           np.arange(n, dtype=np.float64)[:, None]], axis=1)
    data: dict[str, Any] = {"image": image, "bboxes": rows}
    for field in params.label_fields or ():
        data[field] = targets.classes
    points = targets.keypoints
    if points is not None:
        kparams = _params(transform, "keypoints")
        known = np.flatnonzero(~np.isnan(points).any(axis=1))
        xy = points[known] if kparams.format == "xy" else points[known][:, ::-1]
        data["keypoints"] = np.concatenate([xy, known.astype(np.float32)[:, None]], axis=1)
        for field in kparams.label_fields or ():
            data[field] = known.astype(np.int32)
    out = transform(**data)
    new = out["image"]
    height, width = new.shape[:2]
    kept = np.asarray(out["bboxes"], np.float64).reshape(-1, rows.shape[1])
    order = kept[:, -1].astype(np.int64)
    boxes = boxes_mod.to_xyxy(kept[:, :4], fmt, height, width, "float64")
    moved = None
    if points is not None:
        moved = np.full(points.shape, np.nan, np.float32)
        found = np.asarray(out["keypoints"], np.float64).reshape(-1, 3)
        moved[found[:, 2].astype(np.int64)] = (found[:, :2] if kparams.format == "xy"
                                               else found[:, 1::-1])
    return new, boxes_mod.ImageBoxes(boxes, targets.classes[order], moved)


def _check_signature(augment: Any, with_masks: bool, with_targets: bool = False) -> None:
    """Refuses a callable that cannot be called as augmentation calls it: fn(image, rng)
    (fn(image, rng, mask=mask) with masks, fn(image, rng, target=target) with target
    images). One whose signature Python cannot read (some builtins and extension types)
    is taken on trust."""
    try:
        signature = inspect.signature(augment)
    except (TypeError, ValueError):
        return
    keyword = "target" if with_targets else "mask" if with_masks else None
    call = (f"fn(image, rng, {keyword}={keyword}) -> (image, {keyword})" if keyword
            else "fn(image, rng) -> image")
    try:
        if keyword:
            signature.bind(None, None, **{keyword: None})
        else:
            signature.bind(None, None)
    except TypeError as error:
        _checks.fail("augment", f"an albumentations transform or a callable {call}, "
                     "taking the sample and a numpy Generator for its random draws",
                     augment, TypeError,
                     f"It cannot be called so: its signature is {signature} ({error}).")


class BatchAugment:
    """Applies batch-level augmentation to an assembled batch (x, y).

    Each step is a Keras preprocessing layer (RandomFlip, RandAugment, MixUp, CutMix...),
    rebuilt per batch with a seed derived from (seed, epoch, batch index), or a callable
    `fn(x, y, rng) -> (x, y)`. A sequence of steps runs in order.
    """

    def __init__(self, steps: BatchAugmentSteps) -> None:
        steps = list(steps) if isinstance(steps, (list, tuple)) else [steps]
        for step in steps:
            if _is_keras_layer(step):
                if "seed" not in step.get_config():
                    raise ValueError(
                        f"`batch_augment` layer {type(step).__name__} takes no seed, so its "
                        "draws cannot be made reproducible. Put it in the model instead."
                    )
            elif not callable(step) or len(inspect.signature(step).parameters) < 3:
                _checks.fail("batch_augment", "a Keras preprocessing layer, a callable "
                             "fn(x, y, rng) -> (x, y), or a list of them", step, TypeError)
        self.steps = steps
        self._is_layer = [_is_keras_layer(s) for s in steps]
        self.uses_keras = any(self._is_layer)

    def __call__(self, x: np.ndarray, y: np.ndarray | None,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        """The batch (x, y) after every step, in order."""
        for step, is_layer in zip(self.steps, self._is_layer):
            if is_layer:
                seed = int(rng.integers(2**31))
                with _KERAS_LAYERS:  # one at a time: see _KERAS_LAYERS
                    x, y = self._apply_layer(step, x, y, seed)
            else:
                x, y = step(x, y, rng)
        return x, y

    @staticmethod
    def _apply_layer(layer, x, y, seed):
        from keras import ops

        layer = type(layer).from_config({**layer.get_config(), "seed": seed})
        if y is None:
            return ops.convert_to_numpy(layer(x, training=True)), None
        is_mask = isinstance(y, np.ndarray) and y.ndim >= 3
        if not is_mask:
            out = layer({"images": x, "labels": y}, training=True)
            return ops.convert_to_numpy(out["images"]), ops.convert_to_numpy(out["labels"])
        masks = y[..., None] if y.ndim == 3 else y  # Keras wants a channel axis
        out = layer({"images": x, "segmentation_masks": masks}, training=True)
        masks = ops.convert_to_numpy(out["segmentation_masks"]).astype(y.dtype)
        return ops.convert_to_numpy(out["images"]), masks.reshape(masks.shape[:3] + y.shape[3:])
