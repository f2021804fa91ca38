"""`Generator`: the PyDataset adapter that wires kerasgen's stages together.

A subclass says how many samples there are, their labels, and how to load sample i
(`load_sample`). `__init__` makes one object per stage from the arguments it owns: the
targets (`_labels.Targets`), the epochs' order (`_order.EpochOrder`), the making of a
batch (`_making.BatchMaker`) and where batches are made (`_feeding.Feeding`). What stays
here is the PyDataset face (`len`, `gen[i]`), Keras's epoch lifecycle, views (`shard`,
`at_epoch`) and the hooks a subclass fills or calls. See docs/architecture.md.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from keras.utils import PyDataset

from kerasgen import _checks, _feeding, _keras_compat, _making, _malloc, _order
from kerasgen import _batching as batching
from kerasgen import _labels as labels_mod
from kerasgen import _seeding as seeding
from kerasgen import _stats as stats_mod
from kerasgen import samplers as samplers_mod

if TYPE_CHECKING:
    import numpy.typing as npt
    import tensorflow as tf

AUTO = "auto"
_NOT_SET = object()  # no `self.labels` assigned by a subclass


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
        labels: one label per sample, as you have them: class names or integer class
            ids (a list of labels per sample or a (n, C) 0/1 array for "multi_label";
            any array for "raw"), or None. `gen.labels` holds the same labels as
            class ids.
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
        prefetch: batches made ahead, on background threads, while the training loop
            consumes the current one (with workers=1; with workers > 1 the generator's
            own worker threads or processes work ahead, up to max_queue_size batches).
            0 turns it off. "auto": 4 for the image generators (made two at a time),
            0 for arrays and custom subclasses (whose `load_sample` may not expect a
            second thread); at most 256 MiB ahead.
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
    # threads making batches ahead at once with prefetch (workers=1): 1, because a
    # subclass's load_sample may not expect two threads; the image generators, whose
    # loading is kerasgen's own, use 2
    ahead_threads = 1

    def __init__(self, num_samples: int,
                 labels: npt.ArrayLike | Mapping[str, npt.ArrayLike] | None = None, *,
                 batch_size: int = 32, shuffle: bool = True, seed: int | None = None,
                 label_mode: str | None = AUTO, num_classes: int | None = None,
                 class_names: Sequence[str] | None = None, dtype: str | None = "float32",
                 augment: Callable[..., Any] | None = None,
                 batch_augment: Callable[..., Any] | Sequence[Callable[..., Any]] | None = None,
                 sampler: Any = None, drop_remainder: bool = False,
                 sample_weight: npt.ArrayLike | None = None, mask_format: str = "ids",
                 features: npt.ArrayLike | None = None, num_shards: int | None = None,
                 shard_index: int | None = None, stats: bool = False,
                 prefetch: int | str = AUTO, workers: int = 1,
                 use_multiprocessing: bool = False, max_queue_size: int = 10,
                 **unknown: Any) -> None:
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
        self.augment, self.batch_augment, self.sampler = augment, batch_augment, sampler
        if label_mode == AUTO:
            label_mode = "categorical" if labels is not None else None
        self._maker = _making.BatchMaker(augment, batch_augment, label_mode,
                                         use_multiprocessing)
        self._targets = labels_mod.generator_targets(
            self.num_samples, labels, label_mode, class_names, num_classes, mask_format,
            sample_weight, describe=self.describe_sample)
        self.label_mode, self.mask_format = label_mode, mask_format
        self.sample_weight = self._targets.sample_weight
        self._features = _order.check_features(features, self.num_samples)
        context = None
        if sampler is not None:
            context = {"class_names": self.class_names, "features": self.sampler_features}
        self._order = _order.EpochOrder(
            self.num_samples, self.batch_size, sampler=sampler, shuffle=self.shuffle,
            seed=seed, drop_remainder=self.drop_remainder,
            labels=self._targets.class_ids,
            context=context, prepare=self.use_multiprocessing)
        self._epoch_open = False
        self._passed = None  # (epoch, seed) the last `for batch in gen` pass began at
        self._short_epoch_done = False  # a resumed, shortened epoch just ended in fit
        self._stats = stats_mod.BatchTimings() if stats else None
        self.fit_wait_s = None  # set by kg.callbacks.PipelineStats each epoch
        _order.check_shards(num_shards, shard_index)
        self.prefetch = _feeding.prefetch_depth(prefetch, self.prefetch_auto)
        self._feeding = _feeding.Feeding(self)
        self._feeding.warm_up()
        self._buffers = batching.BufferPool()  # batch arrays, reused when Keras let go
        if num_shards is not None:
            self._order = self._order.sharded(num_shards, shard_index)
        self._order.refuse_empty()

    # ----------------------------------------------------------------- the source
    def load_sample(self, index: int) -> Any:
        """Returns sample `index`: x, or (x, y) when the sample carries its own target."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement load_sample(index) -> x or (x, y)."
        )

    def describe_sample(self, index: int) -> str:
        """How error messages name sample `index` (a file, a row...)."""
        return f"sample {index}"

    # ----------------------------------------------------------------- what users read
    @property
    def epoch(self) -> int:
        """The epoch whose batches `gen[i]` returns now."""
        return self._order.epoch

    @property
    def seed(self) -> int:
        """The seed every random draw derives from (drawn once when given as None)."""
        return self._order.seed

    @seed.setter
    def seed(self, seed: int | None) -> None:
        order = self._order
        order.move_to(order.epoch, order.offset, seeding.resolve_seed(seed),
                      order.batch_shuffle)
        self._feeding.forget()

    @property
    def labels(self) -> Any:
        """The `labels=` given, as class ids: one int per sample, in source order, so
        that `gen.class_names[gen.labels[i]]` names the class of sample i (the class
        name given for it, or, for integer ids, the name of that id). None where
        samples have no single class ("multi_label", most "raw" targets, no labels).

        A subclass may assign `self.labels` (as a ported `keras.utils.Sequence` does,
        before or after `super().__init__()`): `gen.labels` is then its own attribute,
        and kerasgen's class ids (which its samplers use) are unchanged, only not shown
        here."""
        own = self.__dict__.get("_own_labels", _NOT_SET)
        return self._targets.class_ids if own is _NOT_SET else own

    @labels.setter
    def labels(self, value: Any) -> None:
        self.__dict__["_own_labels"] = value

    @property
    def class_names(self) -> list[str] | None:
        """The names of the classes, in class-id order (None where unknown)."""
        return self._targets.class_names

    @property
    def num_classes(self) -> int | None:
        """The number of classes: the width of one-hot and multi-hot targets."""
        return self._targets.num_classes

    @property
    def num_batches(self) -> int:
        """Batches in this epoch, as Keras reads it (`len(gen)`). Keras's adapter is
        adopted here (see _keras_compat): no tf.data autotuning, and no extra batch
        shuffle when this generator orders its own epochs."""
        own_order = self.shuffle or self.sampler is not None
        changed = _keras_compat.adopt_adapter(own_order,
                                              own_workers=self._feeding.own_workers)
        if changed in ("batch shuffle", "in order"):  # Keras's fit(shuffle=...), done here
            shuffled = changed == "batch shuffle"
            if shuffled != self._order.batch_shuffle:
                self._order.batch_shuffle = shuffled
                self._feeding.forget()
        self._feeding.prepare()
        if own_order and _keras_compat.in_predict():
            self._warn_predict_order()
        return len(self)

    def _warn_predict_order(self) -> None:
        """Once per generator: `predict` reads the batches in the epoch's order, which is
        not the source order when the generator shuffles or samples."""
        if self.__dict__.get("_warned_predict"):
            return
        self.__dict__["_warned_predict"] = True
        epoch = self.epoch
        warnings.warn(
            f"model.predict() reads {type(self).__name__} in the order of epoch {epoch} "
            f"(shuffle={self.shuffle}, sampler={self.sampler!r}), so prediction row i is "
            f"sample gen.epoch_plan({epoch})[i], not sample i (Keras then ends the epoch: "
            "the next predict reads the next one). Pass shuffle=False (and no sampler) "
            "for predictions in source order, or reorder them: "
            f"preds[np.argsort(gen.epoch_plan({epoch}))].", UserWarning, stacklevel=3)

    def __len__(self) -> int:
        return self._order.num_batches()

    def shard(self, num_shards: int, index: int, remainder: str = "pad") -> Generator:
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
        view = copy.copy(self)  # with a feeding of its own (__setstate__)
        view._order = order
        return view

    def to_tf_dataset(self, epochs: int | None = None, num_parallel_calls: int | None = None,
                      prefetch: int | None = None) -> tf.data.Dataset:
        """A tf.data.Dataset yielding exactly this generator's batches, epoch after epoch
        from the current one (`epochs` of them; None: forever, so pass
        steps_per_epoch=len(gen) to fit). Batches are computed in parallel, in order.
        Needs TensorFlow."""
        from kerasgen import _tfdata as tfdata

        return tfdata.to_tf_dataset(self, epochs, num_parallel_calls, prefetch)

    def at_epoch(self, epoch: int) -> Generator:
        """A view of this generator serving `epoch` (for parallel readers of other epochs;
        it makes no batches ahead)."""
        order = self._order.at_epoch(epoch)
        view = copy.copy(self)
        view._order = order
        view._feeding = _feeding.Feeding(view, ahead=False)  # parallel readers: any order
        return view

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_samples={self.num_samples}, "
                f"batch_size={self.batch_size}, shuffle={self.shuffle}, seed={self.seed}, "
                f"label_mode={self.label_mode!r}, epoch={self.epoch})")

    # ----------------------------------------------------------------- epochs and state
    def epoch_plan(self, epoch: int | None = None) -> np.ndarray | samplers_mod.Plan:
        """The sample indices of `epoch` (default: the current one), in batch order (a
        `kg.samplers.Plan` where the sampler makes synthetic samples, as SMOTE)."""
        return self._order.epoch_plan(epoch)

    def on_epoch_begin(self) -> None:
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

    def on_epoch_end(self) -> None:
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
        self._order.batch_shuffle = False  # an adapter's next epoch asks for it anew
        self._order.next_epoch()
        self._feeding.epoch_ended()

    def get_state(self, batches_done: int = 0) -> dict[str, Any]:
        """A small JSON-able dict; `set_state` on a fresh generator resumes from it.

        `batches_done`: batches of the current epoch already consumed (by model.fit, say);
        the state then resumes mid-epoch, with the batch after them. The state holds the
        epoch, the batch position, the seed, and what identifies the run: num_samples,
        batch_size, shard, the sampler (its repr), the source (a checksum of the labels)
        and, for image files, the file list (a count and a checksum of the paths).
        """
        return self._order.get_state(batches_done)

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Resumes from `get_state()`'s dict. A ValueError, changing nothing, for a state
        of other data (sample count, labels), another sampler or shuffle, or (mid-epoch)
        another batch_size or shard."""
        self._order.set_state(state)
        self._epoch_open = False
        self._passed = None
        self._feeding.forget()

    # ----------------------------------------------------------------- batches
    def __iter__(self) -> Iterator[Any]:
        """The batches of one epoch, in order. A pass is an epoch, as over a tf.data
        dataset: the next pass serves the next epoch (a new order and new augmentation
        draws), unless `on_epoch_end()` (Keras's, or the caller's) has already advanced
        the generator since this pass began."""
        self.begin_pass()
        for index in range(len(self)):
            yield self[index]

    def begin_pass(self) -> int:
        """Starts a pass over the epochs (a `for` loop over the generator, an iterator of
        the tf.data dataset `kg.image_dataset_from_directory` returns) and returns the
        epoch it serves: the current one, or the next when an earlier pass began at the
        current one and nothing (Keras, or the caller) advanced since."""
        order = self._order
        if self._passed == (order.epoch, order.seed):
            self.on_epoch_end()
        self._passed = (order.epoch, order.seed)
        return order.epoch

    def __getitem__(self, index: int) -> Any:
        n_batches = len(self)
        index = _checks.batch_index(index, n_batches)
        if self._epoch_open:  # Keras is running an epoch: undo TensorFlow's malloc pin
            _malloc.keep()
        try:
            return self._feeding.get(index, n_batches)
        except Exception as error:  # name the batch, also when raised in a worker process
            if hasattr(error, "add_note"):
                error.add_note(f"kerasgen: while loading batch {index} of epoch "
                               f"{self.epoch} of {self!r}")
            raise

    def _pace(self, waited: bool) -> None:
        """Hears from the work-ahead whether the caller waited for a batch made ahead
        (the image generators size their decoding to it)."""

    def load_batch(self, indices: np.ndarray, positions: np.ndarray,
                   partners: np.ndarray | None = None,
                   lams: np.ndarray | None = None) -> tuple[Any, Any]:
        """Loads, augments and assembles the samples `indices` into (x, y or None).

        `positions` are the samples' places in the epoch; with the epoch and the seed
        they key each sample's augmentation draws. Where `partners[k] >= 0` the sample is
        synthetic: x_i + lams[k] * (x_partner - x_i), made before augmentation.
        """
        return self._maker.load_batch(self, indices, positions, partners, lams)

    def assemble(self, samples: Sequence[Any], indices: np.ndarray) -> Any:
        """Writes same-shaped samples into one preallocated batch."""
        batch = batching.allocate(samples[0], len(samples), self._buffers)
        for k, (sample, index) in enumerate(zip(samples, indices)):
            batching.write(batch, k, sample, lambda i=int(index): self.describe_sample(i))
        return batch

    def augment_sample(self, x: Any, position: int,
                       mask: np.ndarray | None = None) -> tuple[Any, Any]:
        """Returns (x, mask) augmented with draws from (seed, epoch, position)."""
        order = self._order
        return self._maker.augment_sample(x, order.seed, order.epoch, position, mask)

    def finish_x(self, x_batch: Any) -> Any:
        """Converts an assembled batch to `dtype` in one vectorised step."""
        return batching.convert(x_batch, self.dtype, self.rescale, self._buffers)

    @property
    def sampler_features(self) -> Any:
        """The feature space SMOTE searches for neighbours: `features=` when given."""
        return self._features

    # ----------------------------------------------------------------- what it counted
    def stats(self, reset: bool = False) -> dict[str, Any]:
        """Where the time of making batches went (needs stats=True): batches, samples,
        busy and wall seconds, batches/s, seconds per stage (list, read, decode, augment,
        assemble; summed over batches), and `fit_wait_s`, the time model.fit
        waited on data in the last epoch (measured by kg.callbacks.PipelineStats).
        Counts batches made in this process (worker threads included, worker processes
        not). `reset=True` starts a new count after reading."""
        return stats_mod.report(self._stats, self.fit_wait_s, reset)

    def _stage(self, name: str) -> Any:
        return stats_mod.stage(self._stats, name)

    def class_counts(self) -> dict[str, dict[Any, int]]:
        """{"before": {class: count}, "after": {class: count in this epoch's plan}}."""
        return self._targets.class_counts(lambda: self._order.plan().indices)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        # a copy (copy.copy and views come through here too) moves on its own
        state.update(_order=self._order.copy(), _feeding=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._feeding = _feeding.Feeding(self)  # a copy's own (none ahead in a worker)
