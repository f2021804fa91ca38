"""Batch making: batch `b` of an epoch, the same wherever and whenever it is made.

`BatchMaker.make(gen, b)` is the one way a batch is made, in the training loop's thread,
on a work-ahead thread or in a worker process (see _feeding.py): the samples that the
order gives batch b (`_order.EpochOrder.batch`, SMOTE's partners included), loaded,
blended, augmented and assembled by the generator's `load_batch` (its default is
`BatchMaker.load_batch`), their targets (`_labels.Targets.for_batch`), the batch
augmentation and the sample weights. Every draw is keyed by (seed, epoch, position in
the epoch) or (seed, epoch, batch number), so a batch is a pure function of the
generator, its seed, the epoch and b.
"""

import time

import numpy as np

from kerasgen import _batching as batching
from kerasgen import _seeding as seeding
from kerasgen import augment as augment_mod


class BatchMaker:
    """A generator's augmentation (`augment`, `batch_augment`, checked against its
    label_mode and worker processes) and the making of its batches. It holds nothing of
    one epoch: a generator and its views (`shard`, `at_epoch`) share it."""

    def __init__(self, augment=None, batch_augment=None, label_mode=None,
                 use_multiprocessing=False):
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

    def make(self, gen, index):
        """Batch `index` of `gen`'s epoch: x alone (no targets, as Keras's unlabeled
        datasets), (x, y) or (x, y, sample weights), timed into `gen`'s statistics when
        they are on."""
        timings = gen._stats
        if timings is None:
            return self._make(gen, index)
        start = time.perf_counter()
        batch = self._make(gen, index)
        x = batch[0] if isinstance(batch, tuple) else batch  # x alone: unlabeled
        timings.batch_done(start, len(next(iter(x.values())) if isinstance(x, dict) else x))
        return batch

    def _make(self, gen, index):
        # number: the batch in the whole epoch's plan, which keys the draws
        number, indices, partners, lams = gen._order.batch(index)
        start = number * gen.batch_size
        positions = np.arange(start, start + len(indices))
        if partners is None:
            x, y = gen.load_batch(indices, positions)
        else:
            x, y = gen.load_batch(indices, positions, partners, lams)
        y = gen._targets.for_batch(indices, y, gen.describe_sample, type(gen).__name__)
        if self.batch_augment is not None:
            rng = seeding.rng(gen.seed, seeding.BATCH_AUGMENT, gen.epoch, number)
            x, y = self.batch_augment(x, y, rng)
        if y is None:  # x alone, as Keras; a tuple of inputs stays wrapped, (x,), so
            return (x,) if isinstance(x, (tuple, list)) else x  # Keras reads it as x
        weights = gen._targets.weights(indices)
        return (x, y) if weights is None else (x, y, weights)

    def load_batch(self, gen, indices, positions, partners=None, lams=None):
        """`Generator.load_batch`'s default: one sample at a time through `gen`'s hooks
        (`load_sample`, `augment_sample`, `assemble`, `finish_x`)."""
        xs, ys = [], []
        for k, (index, position) in enumerate(zip(indices, positions)):
            with gen._stage("read"):
                sample = gen.load_sample(int(index))
                x, y = sample if isinstance(sample, tuple) else (sample, None)
                if partners is not None and partners[k] >= 0:
                    other = gen.load_sample(int(partners[k]))
                    other = other[0] if isinstance(other, tuple) else other
                    x = batching.blend(x, other, lams[k])
            with gen._stage("augment"):
                if gen.label_mode == "mask":
                    x, y = gen.augment_sample(x, position, mask=y)
                else:
                    x, _ = gen.augment_sample(x, position)
            xs.append(x)
            ys.append(y)
        with gen._stage("assemble"):
            y_batch = None if ys[0] is None else gen.assemble(ys, indices)
            return gen.finish_x(gen.assemble(xs, indices)), y_batch

    def augment_sample(self, x, seed, epoch, position, mask=None):
        """(x, mask) augmented with draws from (seed, epoch, position)."""
        if self.sample_augment is None:
            return x, mask
        rng = seeding.rng(seed, seeding.AUGMENT, epoch, position)
        if mask is None:
            return self.sample_augment(x, rng), None
        return self.sample_augment(x, rng, mask=mask)
