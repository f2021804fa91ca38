"""What a source's `load_batch` is asked for, and a batch made one sample at a time:
`BatchRequest` (data only: the samples, their places in the epoch, SMOTE partners, the
dtype, the augmentation, the stand-ins of a bad sample) and `load_each` (each sample
loaded, blended, augmented, then the batch assembled and converted)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np

from kerasgen.arrays import batching
from kerasgen import _seeding as seeding
from kerasgen import _stats as stats

__all__ = ["BatchRequest"]


@dataclass(frozen=True)
class BatchRequest:
    """What a source's `load_batch` is asked for: data only, no callback into the
    generator.

    Attributes:
        indices: the samples of the batch, in batch order.
        positions: their places in the epoch (they key the augmentation's draws).
        partners, lams: SMOTE: where partners[k] >= 0, row k is synthetic,
            x_k + lams[k] * (x_partner - x_k), made before augmentation (None: none).
        dtype, rescale: the batch's dtype ("float32", "float16", "uint8", "uint16",
            None: the samples' own) and the factor applied when converting to a float
            dtype.
        augment: the augmentation stage (`pipeline.augmenting.Augmentation`), or None; a source
            calls `request.augmented(x, position, mask)`.
        with_masks: the samples' y is a segmentation mask, augmented with x.
        seed, epoch: the generator's seed and the batch's epoch (they key every draw,
            and the stand-in of a bad file).
        buffers: the batch-array pool (`arrays.batching.BufferPool`): batches allocated there
            are reused once Keras lets go of them.
        timings: the generator's `_stats.BatchTimings` (stats=True), or None; a source
            times its stages with `request.stage(name)`.
        class_ids, class_names, num_samples: what picks the stand-ins of a bad sample
            (on_error="skip", `request.substitutes(i)`): the other samples of its class
            (all samples where there are no class ids).
        window: (start, end): this request is a part's, holding samples start..end of
            the whole (a concatenation's part), numbered from 0 in it.
    """

    indices: np.ndarray
    positions: np.ndarray
    partners: np.ndarray | None = None
    lams: np.ndarray | None = None
    dtype: str | None = "float32"
    rescale: float | None = None
    augment: Any = None
    with_masks: bool = False
    seed: int = 0
    epoch: int = 0
    buffers: batching.BufferPool = dataclasses.field(default_factory=batching.BufferPool)
    timings: Any = None
    class_ids: np.ndarray | None = None
    class_names: Sequence[str] | None = None
    num_samples: int | None = None
    window: tuple[int, int | None] = (0, None)

    def stage(self, name: str) -> AbstractContextManager[object]:
        """A context adding its time to stage `name` of the generator's stats."""
        return stats.stage(self.timings, name)

    def augmented(self, x: Any, position: int, mask: Any = None) -> tuple[Any, Any]:
        """(x, mask) augmented with the draws of (seed, epoch, position)."""
        return self.augment.apply(x, self.seed, self.epoch, int(position), mask,
                                  self.dtype, self.rescale)

    def substitutes(self, index: int) -> tuple[np.ndarray, str]:
        """What may stand in for a bad sample `index` (numbered in this request's
        window), in order: the other samples of its class, permuted by (seed, index)
        alone, so every worker picks the same one; and what they are called in an
        error."""
        start, end = self.window
        whole = index + start
        labels = self.class_ids
        if labels is not None:
            candidates = np.flatnonzero(labels == labels[whole])
        else:
            candidates = np.arange(self.num_samples or 0)
        candidates = candidates[candidates != whole]
        group = (f"class {self.class_names[labels[whole]]!r}" if labels is not None
                 and self.class_names else "the dataset")
        candidates = seeding.rng(self.seed, seeding.SKIP, whole).permutation(candidates)
        if start or end is not None:  # a part's own samples only
            inside = (candidates >= start) & (candidates < (
                end if end is not None else np.iinfo(np.int64).max))
            candidates = candidates[inside] - start
        return candidates, group

    def part(self, rows: np.ndarray, indices: np.ndarray, start: int = 0,
             end: int | None = None) -> BatchRequest:
        """The request for `rows` of this batch, read as `indices` of a part holding
        samples start..end of this one (partners and stand-ins renumbered in it)."""
        partners = None if self.partners is None else self.partners[rows]
        if partners is not None and start:
            partners = np.where(partners >= 0, partners - start, -1)
        base = self.window[0]
        return dataclasses.replace(
            self, indices=indices, positions=self.positions[rows], partners=partners,
            lams=None if self.lams is None else self.lams[rows],
            window=(base + start, None if end is None else base + end))


def load_each(request: BatchRequest, load: Callable[[int], Any],
              describe: Callable[[int], str],
              assemble: Callable[[Sequence[Any], np.ndarray], Any] | None = None,
              finish: Callable[[Any], Any] | None = None,
              augment: Callable[[Any, int, Any], tuple[Any, Any]] | None = None,
              ) -> tuple[Any, Any]:
    """A batch made one sample at a time: each loaded (`load(i)` -> x or (x, y)),
    blended with its SMOTE partner, augmented (`augment(x, position, mask)`, by default
    `request.augmented` where the request has an augmentation), then the batch
    assembled and converted (`assemble(samples, indices)`, `finish(x)`; by default into
    `request.buffers`, a sample of another shape named by `describe(i)`)."""
    if assemble is None:
        assemble = default_assemble(request, describe)
    if finish is None:
        def finish(x: Any) -> Any:  # a value the cast would change: named, not cast
            return batching.convert(x, request.dtype, request.rescale, request.buffers,
                                    lambda k: describe(int(request.indices[k])))
    if augment is None and request.augment is not None:
        augment = request.augmented
    xs, ys = [], []
    partners, lams = request.partners, request.lams
    for k, (index, position) in enumerate(zip(request.indices, request.positions)):
        with request.stage("read"):
            sample = load(int(index))
            x, y = sample if isinstance(sample, tuple) else (sample, None)
            if partners is not None and lams is not None and partners[k] >= 0:
                other = load(int(partners[k]))
                other = other[0] if isinstance(other, tuple) else other
                x = batching.blend(x, other, lams[k])
        if augment is not None:
            with request.stage("augment"):
                if request.with_masks:
                    x, y = augment(x, int(position), y)
                else:
                    x, _ = augment(x, int(position), None)
        xs.append(x)
        ys.append(y)
    with request.stage("assemble"):
        y_batch = None if ys[0] is None else assemble(ys, request.indices)
        return finish(assemble(xs, request.indices)), y_batch


def assemble(samples: Sequence[Any], indices: np.ndarray, buffers: batching.BufferPool,
             describe: Callable[[int], str]) -> Any:
    """Stacks same-shaped samples into one batch from `buffers`, of the dtype that holds
    every sample (`batching.stack`); a sample of another shape, or of a type no array
    holds with the others', is an error naming it (`describe(index)`)."""
    return batching.stack(samples, buffers, lambda k: describe(int(indices[k])))


def default_assemble(request: BatchRequest, describe: Callable[[int], str],
                     ) -> Callable[[Sequence[Any], np.ndarray], Any]:
    """`assemble` into `request.buffers`, naming samples by `describe`."""
    return lambda samples, indices: assemble(samples, indices, request.buffers, describe)
