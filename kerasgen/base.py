"""`Generator`: the PyDataset that wires source, sampler, loader, augmentation and batching.

A subclass says how many samples there are, their labels, and how to load sample i
(`load_sample`). The order of the epochs (seed, epoch, resume position, shard, plan and
state) is an `_order.EpochOrder`; label encoding, augmentation, batch assembly and
workers are wired here.
"""

import copy
import numbers
import time

import numpy as np
from keras.utils import PyDataset

from kerasgen import _ahead, _checks, _keras_compat, _malloc, _order, _workers
from kerasgen import _batching as batching
from kerasgen import _labels as labels_mod
from kerasgen import augment as augment_mod
from kerasgen import samplers as samplers_mod
from kerasgen import _seeding as seeding
from kerasgen import _stats as stats_mod

AUTO = "auto"


class Generator(PyDataset):
    """Base class of every kerasgen generator; subclass it for a custom dataset.

    ```python
    class MyData(kg.Generator):
        def __init__(self, records, **kwargs):
            self.records = records
            super().__init__(num_samples=len(records),
                             labels=[r.label for r in records], **kwargs)

        def load_sample(self, index):   # -> x, or (x, y) when it carries its own target
            return np.load(self.records[index].path)
    ```

    Args:
        num_samples: how many samples the dataset holds.
        labels: one label per sample (class names or integer ids; a list of labels per
            sample or a (n, C) 0/1 array for "multi_label"; any array for "raw"), or None.
        batch_size: samples per batch; the last partial batch is kept unless
            `drop_remainder=True`.
        shuffle: reshuffle each epoch; the order of epoch e is a pure function of
            (seed, e). False keeps the source order.
        seed: int, or None to draw one seed once (shown by `repr`).
        label_mode: "int", "categorical", "binary", "multi_label", "raw", "mask"
            (segmentation: y is the mask returned with each sample) or None.
            "auto" (the base class's default): "categorical" when labels are given,
            otherwise None.
        num_classes: width of one-hot / multi-hot targets; inferred when None.
        class_names: names of the classes, in class-id order.
        dtype: "float32", "float16", "uint8", or None to keep the samples' own dtype.
        augment: None, an albumentations transform (`A.Compose([...])`), or a callable
            `fn(x, rng) -> x`, applied per sample after loading (and after any cache),
            with `rng` a numpy Generator derived from (seed, epoch, position in the
            epoch). In mask mode it transforms image and mask together.
        batch_augment: None, a Keras preprocessing layer (RandomFlip, RandAugment,
            MixUp, CutMix...), a callable `fn(x, y, rng) -> (x, y)`, or a list of them,
            applied to each assembled batch with draws from (seed, epoch, batch index).
        stats: record where the time of making batches goes (see `stats()`).
        num_shards, shard_index: read only shard `shard_index` of `num_shards` (see
            `shard`).
        sampler: None, a `kg.samplers` sampler (RandomOverSampler, RandomUnderSampler,
            BalancedBatchSampler, SMOTE), an imbalanced-learn sampler (anything with
            `fit_resample` and `sample_indices_`), or any `kg.samplers.Sampler`: an
            object with `plan(labels, seed, epoch, **context) -> indices or Plan`. It
            chooses the samples of each epoch, anew from (seed, epoch); len(gen) follows
            the plan. None: `Shuffle()` order with shuffle=True, else `Sequential()`.
        features: for SMOTE, the feature space of the neighbour search (n, ...) (the
            data itself for arrays; small thumbnails for images by default).
        drop_remainder: drop the last partial batch.
        sample_weight: optional per-sample weights, returned as the batch's third element.
        mask_format: for label_mode="mask": "ids" ((n, h, w) int32 class ids) or
            "one_hot" ((n, h, w, num_classes) float32).
        prefetch: batches made ahead, on a background thread, while the training loop
            consumes the current one (with workers=1; with workers > 1 the generator's
            own worker threads or processes work ahead, up to max_queue_size batches).
            0 turns it off. "auto": 2 for the
            image generators, 0 for arrays and custom subclasses (whose `load_sample`
            may not expect a second thread); at most 256 MiB ahead.
        workers, use_multiprocessing, max_queue_size: as `keras.utils.PyDataset`'s, with
            Keras's meaning: workers=0 (or 1 without processes) makes batches in the
            training loop's thread, with no queue (use_multiprocessing is then False);
            max_queue_size=0 leaves the workers' queue unbounded. With
            use_multiprocessing=True the generator runs `workers` processes of its own
            in place of Keras's (started with forkserver, batches handed over in shared
            memory, up to max_queue_size (0: 10) batches ahead within 256 MiB; see
            docs/performance.md).

    An unknown keyword argument is a TypeError naming the generator called; for the
    names of Keras's ImageDataGenerator and image_dataset_from_directory it says what
    kerasgen calls them.
    """

    rescale = None  # image generators set a factor applied when converting to float
    prefetch_auto = 0  # batches worked ahead with prefetch="auto"

    def __init__(self, num_samples, labels=None, *, batch_size=32, shuffle=True, seed=None,
                 label_mode=AUTO, num_classes=None, class_names=None, dtype="float32",
                 augment=None, batch_augment=None, sampler=None, drop_remainder=False,
                 sample_weight=None, mask_format="ids", features=None, num_shards=None,
                 shard_index=None, stats=False, prefetch=AUTO, workers=1,
                 use_multiprocessing=False, max_queue_size=10, **unknown):
        if unknown:
            _checks.unknown_arguments(self, unknown)
        workers = _checks.non_negative_int("workers", workers)
        super().__init__(
            workers=workers,
            # as Keras reads them: no worker (workers=0) starts no process either
            use_multiprocessing=bool(use_multiprocessing) and workers > 0,
            max_queue_size=_checks.non_negative_int("max_queue_size", max_queue_size),
        )
        self.num_samples = _checks.non_negative_int("num_samples", num_samples)
        self.batch_size = _checks.positive_int("batch_size", batch_size)
        self.shuffle = bool(shuffle)
        samplers_mod.check_seed(sampler, seed)  # before a None seed is drawn
        seed = seeding.resolve_seed(seed)
        self.dtype = _checks.one_of("dtype", dtype, batching.DTYPES)
        self.drop_remainder = bool(drop_remainder)
        self.augment = augment
        self._augmenter = None if augment is None else augment_mod.SampleAugment(augment)
        self.batch_augment = batch_augment
        self._batch_augmenter = (None if batch_augment is None
                                 else augment_mod.BatchAugment(batch_augment))
        mixing = [type(s).__name__ for s in (self._batch_augmenter.steps
                                             if self._batch_augmenter else [])
                  if type(s).__name__ in ("MixUp", "CutMix")]
        if mixing and label_mode not in ("categorical", "multi_label", None, AUTO):
            raise ValueError(
                f"{mixing[0]} in `batch_augment` mixes labels, so it needs float targets: "
                f"label_mode='categorical' (or 'multi_label'). Received: "
                f"label_mode={label_mode!r}.")
        if self._batch_augmenter is not None and self._batch_augmenter.uses_keras and (
                use_multiprocessing):
            raise ValueError(
                "Keras layers in `batch_augment` run TensorFlow ops, which hang in forked "
                "worker processes. Received: use_multiprocessing=True. Use worker threads "
                "(use_multiprocessing=False) or put the layers in the model."
            )
        self.mask_format = _checks.one_of("mask_format", mask_format, labels_mod.MASK_FORMATS)
        self.sampler = sampler
        if features is not None and len(features) != self.num_samples:
            raise ValueError(
                f"`features` must hold one row per sample ({self.num_samples}, in the order "
                f"of this generator's samples). Received: {len(features)} rows."
            )
        self._features = features
        if label_mode == AUTO:
            label_mode = "categorical" if labels is not None else None
        _checks.one_of("label_mode", label_mode, labels_mod.LABEL_MODES)
        if label_mode == "mask" and mask_format == "one_hot" and num_classes is None and (
                class_names is None):
            raise ValueError("mask_format='one_hot' needs `num_classes` (or `class_names`): "
                             "the width of the one-hot masks. Received: num_classes=None.")
        if labels is None and label_mode not in (None, "raw", "mask"):
            raise ValueError(
                f"label_mode={label_mode!r} needs labels, but none were given. Pass "
                "`labels` (one per sample) or use label_mode=None."
            )
        if labels is not None and _length(labels) != self.num_samples:
            raise ValueError(
                f"`labels` must hold one entry per sample ({self.num_samples}). "
                f"Received: {_length(labels)} labels."
            )
        self._targets = labels_mod.encode(labels, label_mode, class_names, num_classes,
                                          describe=self.describe_sample)
        self.label_mode = label_mode
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype="float32")
            if sample_weight.shape != (self.num_samples,):
                raise ValueError(
                    f"`sample_weight` must have shape ({self.num_samples},), one weight "
                    f"per sample. Received: shape {sample_weight.shape}."
                )
            if not np.isfinite(sample_weight).all():
                i = int(np.flatnonzero(~np.isfinite(sample_weight))[0])
                raise ValueError(f"`sample_weight` must be finite. Received: "
                                 f"{sample_weight[i]} at {self.describe_sample(i)}.")
        self.sample_weight = sample_weight
        context = None
        if sampler is not None:
            context = {"class_names": self.class_names, "features": self.sampler_features}
        self._order = _order.EpochOrder(
            self.num_samples, self.batch_size, sampler=sampler, shuffle=self.shuffle,
            seed=seed, drop_remainder=self.drop_remainder, labels=self.labels,
            context=context, prepare=self.use_multiprocessing)
        self._epoch_open = False
        self._short_epoch_done = False  # a resumed, shortened epoch just ended in fit
        self._stats = stats_mod.BatchTimings() if stats else None
        self.fit_wait_s = None  # set by kg.callbacks.PipelineStats each epoch
        if (num_shards is None) != (shard_index is None):
            raise ValueError("`num_shards` and `shard_index` go together. Received: "
                             f"num_shards={num_shards!r}, shard_index={shard_index!r}.")
        if prefetch != AUTO and (isinstance(prefetch, bool)
                                 or not isinstance(prefetch, numbers.Integral) or prefetch < 0):
            _checks.fail("prefetch", "'auto' or a non-negative integer", prefetch)
        self.prefetch = self.prefetch_auto if prefetch == AUTO else int(prefetch)
        self._ahead = self._new_ahead()
        if self._ahead is not None and self.use_multiprocessing:
            _workers.warm_up()
        self._ahead_view = None
        self._buffers = batching.BufferPool()  # batch arrays, reused when Keras let go
        if num_shards is not None:
            self._order = self._order.sharded(num_shards, shard_index)
        if len(self) == 0:
            raise ValueError(
                f"The generator would yield no batch: {self.num_samples} samples, "
                f"batch_size={self.batch_size}, drop_remainder={self.drop_remainder}. "
                "Use a smaller batch_size or drop_remainder=False."
            )

    # ----------------------------------------------------------------- the source
    def load_sample(self, index):
        """Returns sample `index`: x, or (x, y) when the sample carries its own target."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement load_sample(index) -> x or (x, y)."
        )

    def describe_sample(self, index):
        """How error messages name sample `index` (a file, a row...)."""
        return f"sample {index}"

    # ----------------------------------------------------------------- what users read
    @property
    def epoch(self):
        """The epoch whose batches `gen[i]` returns now."""
        return self._order.epoch

    @property
    def seed(self):
        """The seed every random draw derives from (drawn once when given as None)."""
        return self._order.seed

    @seed.setter
    def seed(self, seed):
        order = self._order
        order.move_to(order.epoch, order.offset, seeding.resolve_seed(seed))
        self._forget_ahead()

    @property
    def labels(self):
        """One int class id per sample (None when samples have no single class)."""
        return self._targets.class_ids

    @property
    def class_names(self):
        return self._targets.class_names

    @property
    def num_classes(self):
        return self._targets.num_classes

    @property
    def num_batches(self):
        """Batches in this epoch, as Keras reads it (`len(gen)`). Keras's adapter is
        adopted here (see _keras_compat): no tf.data autotuning, and no extra batch
        shuffle when this generator orders its own epochs."""
        own_workers = self._ahead is not None and (self.use_multiprocessing
                                                   or self.workers > 1)
        changed = _keras_compat.adopt_adapter(self.shuffle or self.sampler is not None,
                                              own_workers=own_workers)
        if changed == "kept pool":  # Keras's pool makes the batches: none made here ahead
            self._keras_pool_kept = True
        elif changed == "enqueuer":
            self._keras_pool_kept = False
        return len(self)

    def __len__(self):
        return self._order.num_batches()

    def shard(self, num_shards, index, remainder="pad"):
        """A view of this generator holding shard `index` of `num_shards`.

        Each epoch the shared plan (from the shared seed) is cut into batches, dealt to
        the shards in turn: shards are disjoint, reshuffled every epoch, and together
        hold every batch. All shards get the same number of batches: with
        remainder="pad" (default) the last round is completed with batches from the
        epoch's start (at most num_shards - 1 batches seen twice); with "drop" the
        incomplete last round is left out (different batches each epoch). Samplers run
        on the whole data set, and each shard reads its share of their plan.
        """
        order = self._order.sharded(num_shards, index, remainder)
        view = copy.copy(self)
        view._order = order
        view._ahead = view._new_ahead()
        return view

    def to_tf_dataset(self, epochs=None, num_parallel_calls=None, prefetch=None):
        """A tf.data.Dataset yielding exactly this generator's batches, epoch after epoch
        from the current one (`epochs` of them; None: forever, so pass
        steps_per_epoch=len(gen) to fit). Batches are computed in parallel, in order.
        Needs TensorFlow."""
        from kerasgen import _tfdata as tfdata

        return tfdata.to_tf_dataset(self, epochs, num_parallel_calls, prefetch)

    def at_epoch(self, epoch):
        """A view of this generator serving `epoch` (for parallel readers of other epochs;
        it makes no batches ahead)."""
        order = self._order.at_epoch(epoch)
        view = copy.copy(self)
        view._order = order
        view._ahead = view._ahead_view = None  # parallel readers ask out of order
        return view

    def __repr__(self):
        return (f"{type(self).__name__}(num_samples={self.num_samples}, "
                f"batch_size={self.batch_size}, shuffle={self.shuffle}, seed={self.seed}, "
                f"label_mode={self.label_mode!r}, epoch={self.epoch})")

    # ----------------------------------------------------------------- order
    def epoch_plan(self, epoch=None):
        """The sample indices of `epoch` (default: the current one), in batch order (a
        `kg.samplers.Plan` where the sampler makes synthetic samples, as SMOTE)."""
        return self._order.epoch_plan(epoch)

    def on_epoch_begin(self):
        if self._short_epoch_done:
            self._short_epoch_done = False
            raise RuntimeError(
                "This generator was restored mid-epoch, and Keras keeps the epoch length it "
                "saw when fit started, so the next epoch would be cut short. Finish the "
                "interrupted epoch with its own model.fit(gen, epochs=1), then fit the "
                "remaining epochs in a new model.fit call."
            )
        self._epoch_open = True
        _keras_compat.note_epoch_begun(self)  # found by GeneratorCheckpoint without argument
        labels_mod.check_fit_partners(self, _keras_compat.fit_data())

    def on_epoch_end(self):
        """Advances to the next epoch (new order, new augmentation draws)."""
        if _keras_compat.called_from_keras_reset():
            # Keras's EpochIterator.reset() ends no epoch: before the first batch on
            # TensorFlow, and after the batch the JAX and torch trainers draw to build the
            # model (an epoch is open then; its batches are served again from batch 0).
            self._short_epoch_done = False  # a new fit: Keras measures the length anew
            self._epoch_open = False
            return
        self._short_epoch_done = self._order.offset > 0 and self._epoch_open
        self._epoch_open = False
        self._order.next_epoch()
        self._forget_ahead()
        self._keras_pool_kept = False
        if self._pool is not None:
            self._pool.stop()  # as Keras's pool: no worker process outlives the epoch

    def get_state(self, batches_done=0):
        """A small JSON-able dict; `set_state` on a fresh generator resumes from it.

        `batches_done`: batches of the current epoch already consumed (by model.fit, say);
        the state then resumes mid-epoch, with the batch after them. The state holds the
        epoch, the batch position, the seed, and what identifies the run: num_samples,
        batch_size, shard, the sampler (its repr), the source (a checksum of the labels)
        and, for image files, the file list (a count and a checksum of the paths).
        """
        return self._order.get_state(batches_done)

    def set_state(self, state):
        """Resumes from `get_state()`'s dict. A ValueError, changing nothing, for a state
        of other data (sample count, labels), another sampler or shuffle, or (mid-epoch)
        another batch_size or shard."""
        self._order.set_state(state)
        self._epoch_open = False
        self._forget_ahead()

    # ----------------------------------------------------------------- batches
    def __getitem__(self, index):
        n_batches = len(self)
        if not isinstance(index, (int, np.integer)):
            raise TypeError(f"Batch index must be an integer. Received: {index!r}")
        if index < 0:
            index += n_batches
        if not 0 <= index < n_batches:
            raise IndexError(f"Batch index out of range: {index} for a generator of "
                             f"{n_batches} batches.")
        if self._epoch_open:  # Keras is running an epoch: undo TensorFlow's malloc pin
            _malloc.keep()
        try:
            if self._ahead is not None and not self._keras_pool_kept:
                return self._ahead.get(self.epoch, int(index), n_batches)
            return self._timed_batch(index)
        except Exception as error:  # name the batch, also when raised in a worker process
            if hasattr(error, "add_note"):
                error.add_note(f"kerasgen: while loading batch {index} of epoch "
                               f"{self.epoch} of {self!r}")
            raise

    def _new_ahead(self):
        """The work-ahead of this generator (None where it does not apply): on worker
        processes of its own with use_multiprocessing, on `workers` threads of its own
        with workers > 1, else (prefetch > 0) on one thread."""
        self._pool = None
        self._keras_pool_kept = False
        depth = max(self.workers, self.max_queue_size or 10)  # Keras's queue, in batches
        if self.use_multiprocessing:
            if not _workers.can_start():  # a worker (of kerasgen or of Keras's pool)
                return None
            return _ahead.WorkAhead(self._make_ahead, depth, submit=self._submit_to_workers)
        if self.workers > 1:
            return _ahead.WorkAhead(self._make_ahead, depth, threads=self.workers)
        if not self.prefetch:
            return None
        return _ahead.WorkAhead(self._make_ahead, self.prefetch, pace=self._pace)

    def _pace(self, waited):
        """Hears from the work-ahead whether the caller waited for a batch made ahead
        (the image generators size their decoding to it)."""

    def _submit_to_workers(self, epoch, index):
        """Batch `index` of `epoch`, asked of the worker processes (a Future)."""
        if self._pool is None:
            self._pool = _workers.WorkerPool(self, self.workers)
        order = self._order
        offset = order.offset if epoch == order.epoch else 0
        return self._pool.submit(epoch, offset, index, order.seed)

    def _worker_batch(self, epoch, offset, index, seed):
        """In a worker process: batch `index` of `epoch` at resume `offset`."""
        self._order.move_to(epoch, offset, seed)
        return self._timed_batch(index)

    def _forget_ahead(self):
        """Drops the batches made ahead: the epoch, seed or position changed."""
        self._ahead_view = None
        if self._ahead is not None:
            self._ahead.reset()

    def _make_ahead(self, epoch, index):
        """Batch `index` of `epoch`, made on a view fixed at that epoch (so that Keras's
        on_epoch_end, arriving while it is made, changes nothing in it)."""
        view = self._ahead_view
        if view is None or view.epoch != epoch:
            view = self._ahead_view = self.at_epoch(epoch)
        return view._timed_batch(index)

    def _timed_batch(self, index):
        if self._stats is None:
            return self._batch(index)
        start = time.perf_counter()
        batch = self._batch(index)
        x = batch[0]
        self._stats.batch_done(start, len(next(iter(x.values())) if isinstance(x, dict)
                                          else x))
        return batch

    def _batch(self, index):
        # batch_number: the batch in the whole epoch's plan, which keys the draws
        batch_number, indices, partners, lams = self._order.batch(index)
        start = batch_number * self.batch_size
        positions = np.arange(start, start + len(indices))
        if partners is None:
            x, y = self.load_batch(indices, positions)
        else:
            x, y = self.load_batch(indices, positions, partners, lams)
        if self.label_mode == "mask":
            if y is None:
                raise ValueError(f"label_mode='mask' needs masks, but {type(self).__name__} "
                                 "loaded none: load_sample must return (x, mask).")
            y = labels_mod.encode_masks(y, self.num_classes, self.mask_format,
                                        self.describe_sample, indices)
        elif self._targets.label_mode is not None:
            if y is not None:
                raise ValueError(
                    f"load_sample() returned (x, y), but this generator also encodes "
                    f"`labels` with label_mode={self.label_mode!r}. Pass label_mode=None "
                    "to use load_sample's y (labels then only describe the classes), or "
                    "return x alone."
                )
            y = self._targets.batch(indices)
        if self._batch_augmenter is not None:
            rng = seeding.rng(self.seed, seeding.BATCH_AUGMENT, self.epoch, batch_number)
            x, y = self._batch_augmenter(x, y, rng)
        if y is None:
            return (x,)
        if self.sample_weight is not None:
            return x, y, self.sample_weight[indices]
        return x, y

    def load_batch(self, indices, positions, partners=None, lams=None):
        """Loads, augments and assembles the samples `indices` into (x, y or None).

        `positions` are the samples' places in the epoch; with the epoch and the seed
        they key each sample's augmentation draws. Where `partners[k] >= 0` the sample is
        synthetic: x_i + lams[k] * (x_partner - x_i), made before augmentation.
        """
        xs, ys = [], []
        for k, (index, position) in enumerate(zip(indices, positions)):
            with self._stage("read"):
                sample = self.load_sample(int(index))
                x, y = sample if isinstance(sample, tuple) else (sample, None)
                if partners is not None and partners[k] >= 0:
                    other = self.load_sample(int(partners[k]))
                    other = other[0] if isinstance(other, tuple) else other
                    x = batching.blend(x, other, lams[k])
            with self._stage("augment"):
                if self.label_mode == "mask":
                    x, y = self.augment_sample(x, position, mask=y)
                else:
                    x, _ = self.augment_sample(x, position)
            xs.append(x)
            ys.append(y)
        with self._stage("assemble"):
            y_batch = None if ys[0] is None else self.assemble(ys, indices)
            return self.finish_x(self.assemble(xs, indices)), y_batch

    def assemble(self, samples, indices):
        """Writes same-shaped samples into one preallocated batch."""
        batch = batching.allocate(samples[0], len(samples), self._buffers)
        for k, (sample, index) in enumerate(zip(samples, indices)):
            batching.write(batch, k, sample, lambda i=int(index): self.describe_sample(i))
        return batch

    @property
    def sampler_features(self):
        """The feature space SMOTE searches for neighbours: `features=` when given."""
        return self._features

    def stats(self, reset=False):
        """Where the time of making batches went (needs stats=True): batches, samples,
        busy and wall seconds, batches/s, seconds per stage (list, read, decode, augment,
        assemble; summed over batches), and `fit_wait_s`, the time model.fit
        waited on data in the last epoch (measured by kg.callbacks.PipelineStats).
        Counts batches made in this process (worker threads included, worker processes
        not). `reset=True` starts a new count after reading."""
        if self._stats is None:
            raise ValueError("Statistics are off. Build the generator with stats=True.")
        summary = self._stats.summary()
        summary["fit_wait_s"] = self.fit_wait_s
        if reset:
            self._stats.reset()
        return summary

    def _stage(self, name):
        return stats_mod.stage(self._stats, name)

    def class_counts(self):
        """{"before": {class: count}, "after": {class: count in this epoch's plan}}."""
        if self.labels is None:
            raise ValueError("class_counts() needs one class label per sample.")
        after = self._order.plan().indices
        names = self.class_names

        def named(ids):
            counts = np.bincount(self.labels[ids], minlength=self.num_classes or 0)
            return {(names[c] if names and c < len(names) else c): int(n)
                    for c, n in enumerate(counts)}

        return {"before": named(np.arange(self.num_samples)), "after": named(after)}

    def augment_sample(self, x, position, mask=None):
        """Returns (x, mask) augmented with draws from (seed, epoch, position)."""
        if self._augmenter is None:
            return x, mask
        order = self._order
        rng = seeding.rng(order.seed, seeding.AUGMENT, order.epoch, position)
        if mask is None:
            return self._augmenter(x, rng), None
        return self._augmenter(x, rng, mask=mask)

    def finish_x(self, x_batch):
        """Converts an assembled batch to `dtype` in one vectorised step."""
        return batching.convert(x_batch, self.dtype, self.rescale, self._buffers)

    def __getstate__(self):
        state = self.__dict__.copy()
        # a copy (copy.copy and views come through here too) moves on its own
        state.update(_order=self._order.copy(), _ahead_view=None, _ahead=None, _pool=None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._ahead = self._new_ahead()  # a copy's own (none in a worker process)


def _length(values):
    if isinstance(values, dict):
        return len(next(iter(values.values()))) if values else 0
    return len(values)
