"""The augmentation stage: one sample augmented with draws from (seed, epoch, position),
its output checked before it reaches a batch.

`Augmentation` wraps the user's `augment` (an albumentations transform or a callable,
through `augment.SampleAugment`) for one label mode. A source calls it on each sample of
a batch (through `BatchRequest.augmented`); what it returns must be an array of the
first augmented sample's shape that the batch's dtype can hold. Where only the sample's
position is known, errors are raised as `Unnamed` (a ValueError or TypeError), which
`pipeline.making.BatchMaker` names with the sample's file or row.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from kerasgen.arrays import batching
from kerasgen import _seeding as seeding
from kerasgen import augment as augment_mod
from kerasgen.sources._boxes import ImageBoxes
from kerasgen.sources._paired import TargetImage

_SAMPLE = "{sample}"  # where an augmentation error names its sample


class Unnamed(Exception):
    """An error of a sample's augmentation, raised where only the sample's position in
    the epoch is known; `BatchMaker.make` raises it as `kind`, naming the sample."""

    kind: type[Exception] = ValueError

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message.replace(_SAMPLE, f"the sample at position {position} "
                                         "of the epoch"))
        self.message, self.position = message, position

    def __reduce__(self) -> Any:  # as the plain error it stands for
        return self.kind, (str(self),)

    def named(self, name: str) -> Exception:
        return self.kind(self.message.replace(_SAMPLE, name))


class _UnnamedValueError(Unnamed, ValueError):
    kind = ValueError


class _UnnamedTypeError(Unnamed, TypeError):
    kind = TypeError


def _array_like(value: Any) -> bool:
    """Whether `value` can be a batch's row (an array, a number, or what converts to an
    array: a list, a tensor, an image object)."""
    return isinstance(value, (np.ndarray, np.generic, numbers.Number, str, bytes, list)) or (
        hasattr(value, "__array__") or hasattr(value, "__array_interface__"))


def _shapes(value: Any, position: int) -> Any:
    """The shapes of an augmented sample (nested as it is: a dict or tuple of arrays);
    a part that is no array is a TypeError naming `augment`."""
    if isinstance(value, dict):
        return {key: _shapes(part, position) for key, part in value.items()}
    if isinstance(value, tuple):
        return tuple(_shapes(part, position) for part in value)
    if not _array_like(value):
        raise _UnnamedTypeError(
            "`augment` must return the augmented sample as an array (a numpy.ndarray, "
            "or a dict or tuple of them, as the sample it gets). Received: "
            f"{type(value).__name__} {_short(value)} for {_SAMPLE}. Return the new image "
            "(`return image`), not the result of an in-place operation.", position)
    shape = getattr(value, "shape", None)
    return tuple(shape) if shape is not None else np.shape(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _parts(value: Any) -> Any:
    """The arrays of an augmented sample (a dict or tuple of them, nested)."""
    if isinstance(value, dict):
        for part in value.values():
            yield from _parts(part)
    elif isinstance(value, tuple):
        for part in value:
            yield from _parts(part)
    elif isinstance(value, (np.ndarray, np.generic)):
        yield value


class Augmentation:
    """A generator's per-sample augmentation (`augment=`) for its label mode: masks,
    boxes or target images move with the image. `one_shape`: every augmented sample must
    have the first one's shape (batches of more than one sample). It holds nothing of
    an epoch; the first augmented sample's shapes are kept to check the later ones."""

    def __init__(self, augment: Any, label_mode: str | None = None,
                 one_shape: bool = True) -> None:
        self.augment = augment_mod.SampleAugment(
            augment, with_masks=label_mode == "mask", with_boxes=label_mode == "boxes",
            with_targets=label_mode == "image")
        self.one_shape = one_shape
        self._shapes: Any = None

    def apply(self, x: Any, seed: int, epoch: int, position: int, mask: Any = None,
              dtype: str | None = None, rescale: float | None = None) -> tuple[Any, Any]:
        """(x, mask) augmented with draws from (seed, epoch, position); `mask` may be
        the image's boxes (`sources._boxes.ImageBoxes`), which albumentations moves with it.
        The output must fit batches of `dtype` (after `rescale`)."""
        into = (dtype, rescale)
        rng = seeding.rng(seed, seeding.AUGMENT, epoch, position)
        if isinstance(mask, ImageBoxes):
            out, mask = self.augment(x, rng, targets=mask)
            self._check_output(out, None, position, into)
            return out, mask
        if isinstance(mask, TargetImage):
            pair = self.augment(x, rng, target=mask.image)
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise _UnnamedTypeError(
                    "`augment` must return (image, target) for image targets (it is "
                    "called as fn(image, rng, target=target)). Received: "
                    f"{type(pair).__name__} {_short(pair)} for {_SAMPLE}.", position)
            self._check_output(pair[0], pair[1], position, into)
            return pair[0], TargetImage(np.asarray(pair[1]))
        if mask is None:
            out, mask = self.augment(x, rng), None
        else:
            pair = self.augment(x, rng, mask=mask)
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise _UnnamedTypeError(
                    "`augment` must return (image, mask) in mask mode (it is called as "
                    "fn(image, rng, mask=mask)). Received: "
                    f"{type(pair).__name__} {_short(pair)} for {_SAMPLE}.", position)
            out, mask = pair
        self._check_output(out, mask, position, into)
        return out, mask

    def _check_output(self, x: Any, mask: Any, position: int,
                      into: tuple[str | None, float | None]) -> None:
        """Refuses an augmented sample that is no array, that has another shape than
        the first sample augmented (unless every batch is one sample: a model of
        variable input size may take them), or values that the batch's dtype cannot
        hold."""
        shapes = (_shapes(x, position), None if mask is None else _shapes(mask, position))
        if self._shapes is None:
            self._shapes = shapes
        elif shapes != self._shapes and self.one_shape:
            raise _UnnamedValueError(
                "`augment` must return one shape for every sample, as a batch holds one "
                f"shape. Received: {_shape_text(shapes)} for {_SAMPLE}, but "
                f"{_shape_text(self._shapes)} for the first sample it augmented. Crop or "
                "resize every sample to one size in the augmentation "
                "(A.RandomResizedCrop(size=...), say).", position)
        dtype, rescale = into
        if dtype is None:
            return
        for part in _parts(x):
            flat = batching.misfit(part, dtype, rescale)
            if flat is None:
                continue
            value, scaled, now = batching.misfit_facts(part, flat, dtype, rescale)
            raise _UnnamedValueError(
                f"`augment` must return values that batches of dtype={dtype!r} can hold"
                f"{scaled} ({batching.holds(dtype)}). Received: {value} in its output for "
                f"{_SAMPLE}, which the batch would hold as {now}. Return {dtype} values "
                "(round and clip them first), or pass a dtype that holds them "
                "(dtype='float32').", position)


def _shape_text(shapes: Any) -> str:
    """An augmented sample's shapes, (image, mask) or the image's alone, in words."""
    x, mask = shapes
    text = f"shape {x}" if isinstance(x, tuple) and all(
        isinstance(n, (int, type(None))) for n in x) else f"shapes {x}"
    return text if mask is None else f"{text} with a mask of shape {mask}"
