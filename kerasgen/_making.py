"""Batch making: batch `b` of an epoch, the same wherever and whenever it is made.

`BatchMaker.make(order, b, hooks)` is the one way a batch is made, in the training
loop's thread, on a work-ahead thread or in a worker process (see _feeding.py): the
samples that the order gives batch b (`_order.EpochOrder.batch`, SMOTE's partners
included), loaded, blended, augmented and assembled by the generator's `load_batch`
(its source's, or one sample at a time: `sources.load_each`), their targets
(`_labels.Targets.for_batch`), the batch augmentation and the sample weights. Every draw
is keyed by (seed, epoch, position in the epoch) or (seed, epoch, batch number), so a
batch is a pure function of the source, the seed, the epoch and b.
"""

from __future__ import annotations

import numbers
import time
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kerasgen import _batching as batching
from kerasgen import _seeding as seeding
from kerasgen import augment as augment_mod
from kerasgen._boxes import ImageBoxes
from kerasgen._paired import TargetImage

if TYPE_CHECKING:
    from kerasgen._labels import Targets
    from kerasgen._order import EpochOrder
    from kerasgen._stats import BatchTimings


class BatchHooks(Protocol):
    """What a batch is made with: the generator's hooks (a subclass may override them)."""

    def load_batch(self, indices: np.ndarray, positions: np.ndarray,
                   partners: np.ndarray | None = None,
                   lams: np.ndarray | None = None) -> tuple[Any, Any]: ...

    def describe_sample(self, index: int) -> str: ...

    def foresee(self, indices: np.ndarray) -> None: ...

    @property
    def dtype(self) -> str | None: ...

    @property
    def rescale(self) -> float | None: ...


_SAMPLE = "{sample}"  # where an augmentation error names its sample
FORESEE = 2  # batches after the one being made whose remote samples are fetched now


class _Unnamed(Exception):
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


class _UnnamedValueError(_Unnamed, ValueError):
    kind = ValueError


class _UnnamedTypeError(_Unnamed, TypeError):
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


class BatchMaker:
    """A generator's targets, its stats, its augmentation (`augment`, `batch_augment`,
    checked against its label_mode and worker processes) and the making of its batches.
    It holds nothing of one epoch: a generator and its views (`shard`, `at_epoch`) share
    it."""

    def __init__(self, targets: Targets, timings: BatchTimings | None = None,
                 augment: Any = None, batch_augment: Any = None,
                 label_mode: str | None = None, use_multiprocessing: bool = False,
                 foresight: bool = False) -> None:
        self.targets = targets
        self.input_targets = label_mode == "input"  # y is the augmented x itself
        self.foresight = foresight  # tell hooks.foresee the samples of coming batches
        self.timings = timings
        self.sample_augment = None if augment is None else augment_mod.SampleAugment(
            augment, with_masks=label_mode == "mask", with_boxes=label_mode == "boxes",
            with_targets=label_mode == "image")
        # the batches' dtype and rescale, which augmented samples must fit (read from
        # the generator at each batch), and the shapes of the first augmented sample,
        # which every later one must have
        self._into: tuple[str | None, float | None] = (None, None)
        self._shapes: Any = None
        self._one_shape = True
        self.batch_augment = (None if batch_augment is None
                              else augment_mod.BatchAugment(batch_augment))
        mixing = [type(s).__name__ for s in (self.batch_augment.steps
                                             if self.batch_augment else [])
                  if type(s).__name__ in ("MixUp", "CutMix")]
        if mixing and label_mode not in ("categorical", "multi_label", None):
            raise ValueError(
                f"{mixing[0]} in `batch_augment` mixes labels, so it needs float targets: "
                f"label_mode='categorical' (or 'multi_label'). Received: "
                f"label_mode={label_mode!r}.")
        if self.batch_augment is not None and self.batch_augment.uses_keras and (
                label_mode == "image"):
            raise ValueError(
                "Keras layers in `batch_augment` would take the target images for "
                "segmentation masks (moved with nearest-neighbour interpolation, no colour "
                "change). Use `augment` for what both images share, and a callable "
                "fn(x, y, rng) -> (x, y) in batch_augment for what the inputs alone get "
                "(noise, blur).")
        if self.batch_augment is not None and self.batch_augment.uses_keras and (
                use_multiprocessing):
            raise ValueError(
                "Keras layers in `batch_augment` run TensorFlow ops, which hang in forked "
                "worker processes. Received: use_multiprocessing=True. Use worker threads "
                "(use_multiprocessing=False) or put the layers in the model."
            )

    def make(self, order: EpochOrder, index: int, hooks: BatchHooks) -> Any:
        """Batch `index` of `order`'s epoch, loaded by `hooks`: x alone (no targets, as
        Keras's unlabeled datasets), (x, y) or (x, y, sample weights), timed into the
        statistics when they are on."""
        timings = self.timings
        if timings is None:
            return self._make(order, index, hooks)
        start = time.perf_counter()
        batch = self._make(order, index, hooks)
        timings.batch_done(start)
        return batch

    def _make(self, order: EpochOrder, index: int, hooks: BatchHooks) -> Any:
        # number: the batch in the whole epoch's plan, which keys the draws
        number, indices, partners, lams = order.batch(index)
        if self.foresight:
            self._foresee(order, index, hooks)
        start = number * order.batch_size
        positions = np.arange(start, start + len(indices))
        if self.sample_augment is not None:
            self._into = (hooks.dtype, hooks.rescale)
            self._one_shape = order.batch_size > 1  # batches of one sample may vary
        try:
            if partners is None:
                x, y = hooks.load_batch(indices, positions)
            else:
                x, y = hooks.load_batch(indices, positions, partners, lams)
        except _Unnamed as error:
            k = error.position - start
            if not 0 <= k < len(indices):
                raise
            raise error.named(hooks.describe_sample(int(indices[k]))) from None
        y = self.targets.for_batch(indices, y, hooks.describe_sample, type(hooks).__name__)
        if self.batch_augment is not None:
            rng = seeding.rng(order.seed, seeding.BATCH_AUGMENT, order.epoch, number)
            x, y = self.batch_augment(x, y, rng)
        if self.input_targets:
            y = x
        if y is None:  # x alone, as Keras; a tuple of inputs stays wrapped, (x,), so
            return (x,) if isinstance(x, (tuple, list)) else x  # Keras reads it as x
        weights = self.targets.weights(indices)
        return (x, y) if weights is None else (x, y, weights)

    def _foresee(self, order: EpochOrder, index: int, hooks: BatchHooks) -> None:
        """Tells `hooks` the samples of the FORESEE batches after `index`, so that a
        source reading remote objects fetches them while this batch is made."""
        for later in range(index + 1, min(index + 1 + FORESEE, order.num_batches())):
            _, ahead, partners, _ = order.batch(later)
            hooks.foresee(ahead if partners is None
                          else np.concatenate([ahead, partners[partners >= 0]]))

    def augment_sample(self, x: Any, seed: int, epoch: int, position: int,
                       mask: Any = None) -> tuple[Any, Any]:
        """(x, mask) augmented with draws from (seed, epoch, position); `mask` may be
        the image's boxes (`_boxes.ImageBoxes`), which albumentations moves with it."""
        if self.sample_augment is None:
            return x, mask
        rng = seeding.rng(seed, seeding.AUGMENT, epoch, position)
        if isinstance(mask, ImageBoxes):
            out, mask = self.sample_augment(x, rng, targets=mask)
            self._check_output(out, None, position)
            return out, mask
        if isinstance(mask, TargetImage):
            pair = self.sample_augment(x, rng, target=mask.image)
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise _UnnamedTypeError(
                    "`augment` must return (image, target) for image targets (it is "
                    "called as fn(image, rng, target=target)). Received: "
                    f"{type(pair).__name__} {_short(pair)} for {_SAMPLE}.", position)
            self._check_output(pair[0], pair[1], position)
            return pair[0], TargetImage(np.asarray(pair[1]))
        if mask is None:
            out, mask = self.sample_augment(x, rng), None
        else:
            pair = self.sample_augment(x, rng, mask=mask)
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise _UnnamedTypeError(
                    "`augment` must return (image, mask) in mask mode (it is called as "
                    "fn(image, rng, mask=mask)). Received: "
                    f"{type(pair).__name__} {_short(pair)} for {_SAMPLE}.", position)
            out, mask = pair
        self._check_output(out, mask, position)
        return out, mask

    def _check_output(self, x: Any, mask: Any, position: int) -> None:
        """Refuses an augmented sample that is no array, that has another shape than
        the first sample augmented (unless every batch is one sample: a model of
        variable input size may take them), or values that the batch's dtype cannot
        hold."""
        shapes = (_shapes(x, position), None if mask is None else _shapes(mask, position))
        if self._shapes is None:
            self._shapes = shapes
        elif shapes != self._shapes and self._one_shape:
            raise _UnnamedValueError(
                "`augment` must return one shape for every sample, as a batch holds one "
                f"shape. Received: {_shape_text(shapes)} for {_SAMPLE}, but "
                f"{_shape_text(self._shapes)} for the first sample it augmented. Crop or "
                "resize every sample to one size in the augmentation "
                "(A.RandomResizedCrop(size=...), say).", position)
        dtype, rescale = self._into
        if dtype is None:
            return
        for part in _parts(x):
            flat = batching.misfit(part, dtype, rescale)
            if flat is None:
                continue
            value = np.asarray(part).flat[flat]
            scaled = "" if rescale is None or np.dtype(dtype).kind != "f" else (
                f" times rescale={rescale}")
            raise _UnnamedValueError(
                f"`augment` must return values that batches of dtype={dtype!r} can hold"
                f"{scaled} ({batching.holds(dtype)}). Received: {value.item()!r} "
                f"({part.dtype}) in its output for {_SAMPLE}, which the batch would hold "
                f"as {batching.became(value, dtype, rescale)!r}. Return {dtype} values "
                "(round and clip them first), or pass a dtype that holds them "
                "(dtype='float32').", position)


def _shape_text(shapes: Any) -> str:
    """An augmented sample's shapes, (image, mask) or the image's alone, in words."""
    x, mask = shapes
    text = f"shape {x}" if isinstance(x, tuple) and all(
        isinstance(n, (int, type(None))) for n in x) else f"shapes {x}"
    return text if mask is None else f"{text} with a mask of shape {mask}"


def stand_ins(targets: Targets, num_samples: int, seed: int,
              index: int) -> tuple[np.ndarray, str]:
    """Replacements for undecodable sample `index`, in order: the other samples of its
    class, permuted by (seed, index) alone, so every worker picks the same one; and
    what they are called in an error."""
    labels = targets.class_ids
    if labels is not None:
        candidates = np.flatnonzero(labels == labels[index])
    else:
        candidates = np.arange(num_samples)
    candidates = candidates[candidates != index]
    group = (f"class {targets.class_names[labels[index]]!r}" if labels is not None
             and targets.class_names else "the dataset")
    return seeding.rng(seed, seeding.SKIP, index).permutation(candidates), group
