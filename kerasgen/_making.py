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

import time
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kerasgen import _seeding as seeding
from kerasgen import augment as augment_mod

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


class BatchMaker:
    """A generator's targets, its stats, its augmentation (`augment`, `batch_augment`,
    checked against its label_mode and worker processes) and the making of its batches.
    It holds nothing of one epoch: a generator and its views (`shard`, `at_epoch`) share
    it."""

    def __init__(self, targets: Targets, timings: BatchTimings | None = None,
                 augment: Any = None, batch_augment: Any = None,
                 label_mode: str | None = None, use_multiprocessing: bool = False) -> None:
        self.targets = targets
        self.timings = timings
        self.sample_augment = None if augment is None else augment_mod.SampleAugment(augment)
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
        start = number * order.batch_size
        positions = np.arange(start, start + len(indices))
        if partners is None:
            x, y = hooks.load_batch(indices, positions)
        else:
            x, y = hooks.load_batch(indices, positions, partners, lams)
        y = self.targets.for_batch(indices, y, hooks.describe_sample, type(hooks).__name__)
        if self.batch_augment is not None:
            rng = seeding.rng(order.seed, seeding.BATCH_AUGMENT, order.epoch, number)
            x, y = self.batch_augment(x, y, rng)
        if y is None:  # x alone, as Keras; a tuple of inputs stays wrapped, (x,), so
            return (x,) if isinstance(x, (tuple, list)) else x  # Keras reads it as x
        weights = self.targets.weights(indices)
        return (x, y) if weights is None else (x, y, weights)

    def augment_sample(self, x: Any, seed: int, epoch: int, position: int,
                       mask: Any = None) -> tuple[Any, Any]:
        """(x, mask) augmented with draws from (seed, epoch, position)."""
        if self.sample_augment is None:
            return x, mask
        rng = seeding.rng(seed, seeding.AUGMENT, epoch, position)
        if mask is None:
            return self.sample_augment(x, rng), None
        return self.sample_augment(x, rng, mask=mask)


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
