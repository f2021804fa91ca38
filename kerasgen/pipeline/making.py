"""Batch making: batch `b` of an epoch, the same wherever and whenever it is made.

`BatchMaker` is the recipe of a generator's batches: its source, targets, augmentation,
dtype, buffers and timings. `make(part)` makes one batch from a frozen `BatchSlice` of
the epoch's order (`pipeline.order.EpochOrder.slice`), in the training loop's thread, on a
work-ahead thread or in a worker process (see pipeline/feeding.py): the samples loaded, blended,
augmented and assembled by the source (`load_batch(request)` with a data-only
`sources.BatchRequest`, or `sources.load_each`, one sample at a time), their targets
(`labels.encoding.Targets.for_batch`), the batch augmentation and the sample weights. Every draw
is keyed by (seed, epoch, position in the epoch) or (seed, epoch, batch number), so a
batch is a pure function of the source, the seed, the epoch and b.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from kerasgen.arrays import batching
from kerasgen import _seeding as seeding
from kerasgen import augment as augment_mod
from kerasgen.sources import _batch_request as batch_request
from kerasgen.sources import _core as sources_mod
from kerasgen.pipeline.augmenting import Augmentation, Unnamed

if TYPE_CHECKING:
    from kerasgen.labels.encoding import Targets
    from kerasgen.pipeline.order import BatchSlice
    from kerasgen._stats import BatchTimings

FORESEE = 4  # batches after the one being made whose remote samples are fetched now


class BatchMaker:
    """How a generator's batches are made: its source (complete, shared by worker
    processes where they make the batches), targets, per-sample augmentation
    (`pipeline.augmenting.Augmentation`), batch augmentation (checked against the label mode),
    dtype and rescale, batch buffers and timings. It holds nothing of one epoch: a
    generator and its views (`shard`, `at_epoch`) share it, and worker processes get a
    copy of it with the order.

    `name` names the generator in errors (its class)."""

    def __init__(self, source: Any, targets: Targets, *, name: str = "Generator",
                 dtype: str | None = "float32", rescale: float | None = None,
                 augment: Augmentation | None = None, batch_augment: Any = None,
                 label_mode: str | None = None, timings: BatchTimings | None = None,
                 buffers: batching.BufferPool | None = None) -> None:
        self.source = source
        self.targets = targets
        self.name = name
        self.dtype, self.rescale = dtype, rescale
        self.augment = augment
        self.with_masks = label_mode == "mask"
        self.input_targets = label_mode == "input"  # y is the augmented x itself
        self.timings = timings
        self.buffers = batching.BufferPool() if buffers is None else buffers
        # batches after the one being made whose samples the source is told of (it
        # fetches remote objects ahead): `slice(b, maker.foresee)` carries them
        self.foresee = FORESEE if (isinstance(source, sources_mod.PrefetchingSource)
                                   and bool(source.remote)) else 0
        self.batch_augment = (None if batch_augment is None
                              else augment_mod.BatchAugment(batch_augment))
        self._types = batching.OneDtype()  # the first batch's dtypes (`_same_types`)
        self._load = (source.load_batch if isinstance(source, sources_mod.BatchSource)
                      else None)
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

    @property
    def keras_layers(self) -> bool:
        """Whether the batch augmentation runs Keras layers (TensorFlow ops)."""
        return self.batch_augment is not None and self.batch_augment.uses_keras

    def request(self, indices: np.ndarray, positions: np.ndarray,
                partners: np.ndarray | None, lams: np.ndarray | None, seed: int,
                epoch: int) -> batch_request.BatchRequest:
        """The data-only request the source loads a batch from."""
        return batch_request.BatchRequest(
            indices, positions, partners, lams, self.dtype, self.rescale, self.augment,
            self.with_masks, seed, epoch, self.buffers, self.timings,
            self.targets.class_ids, self.targets.class_names, len(self.source))

    def load(self, request: batch_request.BatchRequest, source: Any = None,
             ) -> tuple[Any, Any]:
        """(x, y or None) of `request`, loaded by the source (`source`: a batch's own,
        a stream's): its `load_batch`, or one sample at a time."""
        if source is None or source is self.source:
            if self._load is not None:
                return self._load(request)
            source = self.source
        elif isinstance(source, sources_mod.BatchSource):
            return source.load_batch(request)
        return batch_request.load_each(request, source.load, source.describe)

    def source_of(self, part: BatchSlice) -> Any:
        """The source that loads `part`: the generator's, or, for a stream's batch (a
        slice carrying its raw records, `pipeline.stream_order.StreamSlice`), the
        source of those records (`of_records`)."""
        records = getattr(part, "records", None)
        return self.source if records is None else self.source.of_records(records)

    def make(self, part: BatchSlice) -> Any:
        """The batch of `part`: x alone (no targets, as Keras's unlabeled datasets),
        (x, y) or (x, y, sample weights), timed into the statistics when they are on."""
        timings = self.timings
        if timings is None:
            return self._make(part)
        start = time.perf_counter()
        batch = self._make(part)
        timings.batch_done(start)
        return batch

    def _make(self, part: BatchSlice) -> Any:
        indices = part.indices
        source = self.source_of(part)
        if part.coming is not None and len(part.coming):
            source.prefetch(part.coming)
        request = self.request(indices, part.positions, part.partners, part.lams,
                               part.seed, part.epoch)
        try:
            x, y = self.load(request, source)
        except Unnamed as error:
            k = error.position - int(part.positions[0]) if len(indices) else -1
            if not 0 <= k < len(indices):
                raise
            raise error.named(source.describe(int(indices[k]))) from None
        y = self.targets.for_batch(indices, y, source.describe, self.name)
        if self.batch_augment is not None:
            rng = seeding.rng(part.seed, seeding.BATCH_AUGMENT, part.epoch, part.number)
            x, y = self.batch_augment(x, y, rng)
        if self.input_targets:
            y = x
        if y is None:  # x alone, as Keras; a tuple of inputs (or a scipy.sparse x, which
            # Keras's adapter does not read alone) stays wrapped, (x,): Keras reads it as x
            batch = (x,) if isinstance(x, (tuple, list)) or batching.is_sparse(x) else x
        else:
            weights = self.targets.weights(indices)
            batch = (x, y) if weights is None else (x, y, weights)
        self._same_types(batch, part, source)
        return batch

    def _same_types(self, batch: Any, part: BatchSlice, source: Any) -> None:
        """Refuses a batch whose arrays' dtypes differ from the first batch's made here
        (`batching.OneDtype`): Keras would cast it in silence."""
        self._types.check(batch, f"batch {part.number} of epoch {part.epoch}", lambda: (
            source.describe(int(part.indices[0])) if len(part.indices) else "none"),
            "Return one type for every sample from load_sample (float(y), say, or "
            "np.float32), or pass a `dtype` for x.")
