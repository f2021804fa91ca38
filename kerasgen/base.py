"""`Generator`: the PyDataset adapter that wires kerasgen's stages together.

A generator takes a finished source (`kerasgen.sources`: how many samples there are,
their labels, how to load sample i), or, for a subclass, says the same itself
(`num_samples`, `labels`, `load_sample`). `__init__` makes one object per stage from
the arguments it owns: where batches are made (`pipeline.feeding.Placement`), the
targets (`_labels.Targets`), the recipe of a batch (`pipeline.making.BatchMaker`: the
source, targets, augmentation, buffers, timings), the epochs' order
(`pipeline.order.EpochOrder`) and the feeding (`pipeline.feeding.Feeding`, which takes
the maker and the order). `gen[i]` goes one way down from here: feeding, maker, source,
loader; nothing below calls back into the generator. What stays here is the PyDataset
face (`len`, `gen[i]`), Keras's epoch lifecycle, views (`shard`, `at_epoch`) and state.
The hooks a subclass fills are `_hooks.Hooks`'s, a base class (a subclass that fills
one loads through `_hooks.HookSource`). See docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from keras.utils import PyDataset

from kerasgen import _checks, _hooks, _keras_compat, _redact, _validation
from kerasgen.pipeline import feeding as _feeding
from kerasgen.pipeline import making as _making
from kerasgen.pipeline import malloc as _malloc
from kerasgen.pipeline import order as _order
from kerasgen.sources import _core as sources_mod
from kerasgen.pipeline import batching
from kerasgen import _labels as labels_mod
from kerasgen import _seeding as seeding
from kerasgen import _stats as stats_mod
from kerasgen import samplers as samplers_mod
from kerasgen.samplers import _adapters as sampler_adapters
from kerasgen.pipeline.augmenting import Augmentation
from kerasgen.sources._image import check_rescale
from kerasgen._typing import BatchAugmentSteps

if TYPE_CHECKING:
    import numpy.typing as npt
    import tensorflow as tf

AUTO = "auto"
_REDACTED = ("__init__", "validate")  # kerasgen's classes', wrapped by __init_subclass__
_NOT_SET = object()  # no `self.labels` assigned by a subclass


class Generator(PyDataset, _hooks.Hooks):
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

    A dataset that is a `kerasgen.sources` source needs no subclass:
    `kg.Generator(source=my_source, label_mode="int", ...)`.

    Args:
        num_samples: how many samples the dataset holds (a subclass with `load_sample`).
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
            (segmentation: y is the mask returned with each sample), "input" (y is x
            itself, after augmentation: an autoencoder) or None.
            "auto" (the base class's default): "int" when labels are given, as every
            kerasgen generator with class labels (and Keras's image loader) defaults,
            otherwise None.
        num_classes: width of one-hot / multi-hot targets; inferred when None.
        source: what the samples are, instead of `num_samples`, `labels` and
            `load_sample`: an object with `__len__`, `labels`, `class_names`,
            `describe(i)` and `load(i)` (see `kerasgen.sources`; every kerasgen
            generator's `gen.source` is one, and `kg.sources.concatenate` and
            `kg.sources.zip` combine them).
        class_names: names of the classes, in class-id order (default: the source's).
        dtype: "float32", "float16", "uint8", or None to keep the samples' own dtype.
        augment: None, an albumentations transform (`A.Compose([...])`), or a callable
            `fn(x, rng) -> x`, applied per sample after loading (and after any cache),
            with `rng` a numpy Generator derived from (seed, epoch, position in the
            epoch). In mask mode it transforms image and mask together.
        batch_augment: None, a Keras preprocessing layer (RandomFlip, RandAugment,
            MixUp, CutMix...), a callable `fn(x, y, rng) -> (x, y)`, or a list of them,
            applied to each assembled batch with draws from (seed, epoch, batch index).
        stats: record where the time of making batches goes (see `stats()`).
        num_shards: read only one shard of `num_shards` (see `shard`).
        shard_index: which shard, 0 to `num_shards - 1`.
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
        workers: as `keras.utils.PyDataset`'s, with Keras's meaning: workers=0 (or 1
            without processes) makes batches in the training loop's thread, with no
            queue (use_multiprocessing is then False).
        use_multiprocessing: True: the generator runs `workers` processes of its own
            in place of Keras's (started with forkserver, batches handed over in shared
            memory, up to max_queue_size (0: 10) batches ahead within 256 MiB; see
            docs/performance.md).
        max_queue_size: batches the workers make ahead, as Keras's; 0 leaves the
            workers' queue unbounded.

    An unknown keyword argument is a TypeError naming the generator called; for the
    names of Keras's ImageDataGenerator and image_dataset_from_directory it says what
    kerasgen calls them.
    """

    prefetch_auto = 0  # batches worked ahead with prefetch="auto"
    # threads making batches ahead at once with prefetch (workers=1): 1, because a
    # subclass's load_sample may not expect two threads; the image generators, whose
    # loading is kerasgen's own, use 2
    ahead_threads = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """kerasgen's generator classes' constructors and `validate` raise with secrets
        redacted (`_redact.errors`): a URL's password or token, a storage option's key,
        never reach an error message. A user's subclass is left as written (its own
        warnings' stacklevels stay true); what kerasgen raises in it is redacted by the
        kerasgen constructor it calls."""
        super().__init_subclass__(**kwargs)
        if cls.__module__.split(".")[0] != "kerasgen":
            return
        for name in _REDACTED:
            if name in cls.__dict__:
                setattr(cls, name, _redact.errors(cls.__dict__[name]))

    @_redact.errors
    def __init__(self, num_samples: int | None = None,
                 labels: npt.ArrayLike | Mapping[str, npt.ArrayLike] | None = None, *,
                 source: sources_mod.Source | None = None, batch_size: int = 32,
                 shuffle: bool = True, seed: int | None = None,
                 label_mode: str | None = AUTO, num_classes: int | None = None,
                 class_names: Sequence[str] | None = None, dtype: str | None = "float32",
                 augment: Callable[..., Any] | None = None,
                 batch_augment: BatchAugmentSteps | None = None,
                 sampler: Any = None, drop_remainder: bool = False,
                 sample_weight: npt.ArrayLike | None = None, mask_format: str = "ids",
                 features: npt.ArrayLike | None = None, num_shards: int | None = None,
                 shard_index: int | None = None, stats: bool = False,
                 prefetch: int | str = AUTO, workers: int = 1,
                 use_multiprocessing: bool = False, max_queue_size: int = 10,
                 **unknown: Any) -> None:
        if unknown:
            _checks.unknown_arguments(self, unknown)
        placement = _feeding.Placement(workers, use_multiprocessing, max_queue_size,
                                       prefetch, self.prefetch_auto, self.ahead_threads)
        super().__init__(workers=placement.workers,
                         use_multiprocessing=placement.processes,  # as Keras reads them
                         max_queue_size=placement.max_queue_size)
        # an image source's memory cache shared with the worker processes
        source = placement.share(self._source(source, num_samples, labels))
        self.source: Any = source  # a sources.Source (typed Any for subclasses' kinds)
        self.num_samples = len(source)
        self.batch_size = _checks.positive_int("batch_size", batch_size)
        self.shuffle = bool(shuffle)
        sampler_adapters.check_seed(sampler, seed)  # before a None seed is drawn
        seed = seeding.resolve_seed(seed)
        self.dtype = _checks.one_of("dtype", dtype, batching.DTYPES)
        self.drop_remainder = bool(drop_remainder)
        self.augment, self.batch_augment, self.sampler = augment, batch_augment, sampler
        _validation.refuse_in_validation(self, sampler, augment, batch_augment,
                                         drop_remainder)
        label_mode = self._set_targets(label_mode, class_names, num_classes, mask_format,
                                       sample_weight)
        self._stats = stats_mod.BatchTimings() if stats else None
        if self._stats is not None and hasattr(source, "listing_s"):
            self._stats.add("list", source.listing_s)
        self._maker = _making.BatchMaker(
            self._batch_source(), self._targets, name=type(self).__name__,
            dtype=self.dtype, rescale=self.__dict__.get("_rescale", getattr(
                source, "rescale", None)),
            augment=None if augment is None else Augmentation(
                augment, label_mode, one_shape=self.batch_size > 1),
            batch_augment=batch_augment, label_mode=label_mode, timings=self._stats)
        placement.check(self._maker)
        self._placement = placement
        self._features = _order.check_features(features, self.num_samples)
        self._epoch_open = False
        # (epoch, seed) the last `for batch in gen` pass began at
        self._passed: tuple[int, int] | None = None
        self._short_epoch_done = False  # a resumed, shortened epoch just ended in fit
        self.fit_wait_s = None  # set by kg.callbacks.PipelineStats each epoch
        _order.check_shards(num_shards, shard_index)
        self.prefetch = placement.prefetch
        self._order = self._epoch_order(sampler, seed)
        if num_shards is not None:
            self._order = self._order.sharded(num_shards, shard_index)
        self._feeding = self._new_feeding()
        self._feeding.warm_up()
        self._order.refuse_empty()

    def _set_targets(self, label_mode: str | None, class_names: Sequence[str] | None,
                     num_classes: int | None, mask_format: str,
                     sample_weight: npt.ArrayLike | None) -> str | None:
        """The targets of the source's labels (`_labels.Targets`), checked, and what the
        source refuses of them; returns the label mode ("auto" resolved)."""
        source = self.source
        named = source.class_names
        if named is not None and class_names is not None and list(class_names) != list(
                named):
            raise ValueError(
                "`class_names` must be the source's own, which its labels are ids of. "
                f"Received: class_names={list(class_names)}, and the source names "
                f"{list(named)}. Leave class_names out, or build the source with them.")
        if label_mode == AUTO:
            label_mode = "int" if source.labels is not None else None
        self._targets = labels_mod.generator_targets(
            self.num_samples, source.labels, label_mode,
            source.class_names if class_names is None else class_names, num_classes,
            mask_format, sample_weight, describe=self.describe_sample)
        self.label_mode, self.mask_format = label_mode, mask_format
        self.sample_weight = self._targets.sample_weight
        sources_mod.check_batches(source, self.dtype, label_mode, self._targets.class_ids)
        return label_mode

    def _source(self, source: Any, num_samples: int | None, labels: Any) -> Any:
        """The source given, or a subclass's own (`num_samples`, `labels`)."""
        if source is None:
            if num_samples is None:
                raise TypeError(f"{type(self).__name__} needs `source` (a kerasgen source), "
                                "or `num_samples` with a load_sample method.")
            return _hooks.CountedSamples(type(self).__name__, num_samples, labels)
        if num_samples is not None or labels is not None:
            raise TypeError(
                "`source` holds the samples and their labels: pass no `num_samples` or "
                f"`labels` with it. Received: num_samples={num_samples!r}, labels="
                f"{'None' if labels is None else '<given>'}.")
        return sources_mod.check(source)

    def _batch_source(self) -> Any:
        """What the batch maker loads from: the source, or where this class fills a hook
        (or says itself what its samples are), the hooks over it."""
        cls = type(self)
        if isinstance(self.source, _hooks.CountedSamples) or any(
                getattr(cls, name) is not getattr(_hooks.Hooks, name) for name in _hooks.HOOKS):
            return _hooks.HookSource(self, self.source)
        return self.source

    def _epoch_order(self, sampler: Any, seed: int) -> _order.EpochOrder:
        context = None
        if sampler is not None:
            context = {"class_names": self.class_names, "features": self.sampler_features}
        order = _order.EpochOrder(
            self.num_samples, self.batch_size, sampler=sampler, shuffle=self.shuffle,
            seed=seed, drop_remainder=self.drop_remainder,
            labels=self._targets.class_ids,
            context=context, prepare=self._placement.processes)
        order.file_paths = sources_mod.file_paths_of(self.source)  # states record them
        return order

    def _new_feeding(self, ahead: bool = True) -> _feeding.Feeding:
        return _feeding.Feeding(self._maker, self._order, self._placement,
                                pace=getattr(self.source, "pace", None), ahead=ahead,
                                name=type(self).__name__)

    @property
    def rescale(self) -> float | None:
        """The factor applied when batches convert to a float dtype (the source's)."""
        maker = self.__dict__.get("_maker")
        if maker is not None:
            return maker.rescale
        return self.__dict__.get("_rescale", getattr(self.source, "rescale", None))

    @rescale.setter
    def rescale(self, value: float | None) -> None:
        self.__dict__["_rescale"] = check_rescale(value)
        if "_maker" in self.__dict__:
            self._maker.rescale = self.__dict__["_rescale"]

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
        if own_order and _keras_compat.in_predict() and not self.__dict__.get(
                "_warned_predict"):
            self.__dict__["_warned_predict"] = True  # once per generator
            _keras_compat.warn_predict_order(self, self.epoch)
        if not self.__dict__.get("_warned_evaluate") and (
                self.sampler is not None or self.augment is not None
                or self.batch_augment is not None) and _keras_compat.in_evaluate():
            changes = _validation.changes(self.sampler, self.augment, self.batch_augment)
            if changes:
                self.__dict__["_warned_evaluate"] = True  # once per generator
                _keras_compat.warn_evaluate_measures(self, changes)
        return len(self)

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
        return self._view(self._order.sharded(num_shards, index, remainder))

    def _view(self, order: _order.EpochOrder, ahead: bool = True) -> Generator:
        """A copy of this generator on `order`, with a feeding of its own."""
        view = type(self).__new__(type(self))
        view.__setstate__({**self.__getstate__(), "_order": order, "_ahead": ahead})
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
        return self._view(self._order.at_epoch(epoch), ahead=False)  # readers: any order

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
        if self._stats is not None:
            self._stats.new_pass()
        _keras_compat.note_epoch_begun(self)  # found by GeneratorCheckpoint without argument
        fit_data = _keras_compat.fit_data()
        labels_mod.check_fit_partners(self, fit_data)
        _validation.check_partner(self, fit_data, Generator)

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
        if isinstance(self.source, sources_mod.PrefetchingSource):
            self.source.forget()  # objects fetched ahead and not read: fetched anew

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
        if self._stats is not None:
            self._stats.new_pass()
        return order.epoch

    def __getitem__(self, index: int) -> Any:
        n_batches = len(self)
        index = _checks.batch_index(index, n_batches)
        if self._epoch_open:  # Keras is running an epoch: undo TensorFlow's malloc pin
            _malloc.keep()
        try:
            batch = self._feeding.get(index, n_batches)
        except Exception as error:  # name the batch, also when raised in a worker process
            if hasattr(error, "add_note"):
                error.add_note(f"kerasgen: while loading batch {index} of epoch "
                               f"{self.epoch} of {self!r}")
            _redact.redact_error(error)  # here, not by a wrapper: no frame of its own
            if getattr(error, "kerasgen_bad_file", None):  # the data's fault, not the
                raise error.with_traceback(None) from None  # code's: no kerasgen frames
            raise
        if self._stats is not None and not _keras_compat.in_probe():  # a training step
            self._stats.served(self.epoch, index, batching.batch_len(batch))
        return batch

    @_redact.errors
    def make_batch(self, index: int) -> Any:
        """Batch `index` of the current epoch, made here and now (no work-ahead, no
        worker): what `gen[index]` returns, the same bytes."""
        return self._feeding.make(index)

    @property
    def sampler_features(self) -> Any:
        """The feature space SMOTE searches for neighbours: `features=` when given, else
        the source's (`features`: x for arrays, 8x8 thumbnails for images)."""
        if self._features is not None:
            return self._features
        return sources_mod.features_of(self.source)

    # ----------------------------------------------------------------- what it counted
    def stats(self, reset: bool = False) -> dict[str, Any]:
        """What the generator served and where the time of making batches went (needs
        stats=True): `batches` and `samples` the caller used (each batch of an epoch
        once: after `fit`, the steps it trained on), `made` (batches made in this
        process, work ahead included), `busy_s` (time making them) and `wall_s`,
        `batches_per_s` and `samples_per_s` (served, over the wall time), seconds per
        stage (list, read, decode, augment, assemble; summed over the batches made), and
        `fit_wait_s`, the time model.fit waited on data in the last epoch (measured by
        kg.callbacks.PipelineStats, which leaves this record as it is). Worker processes
        make their batches elsewhere: there `made` and the stages stay 0. `reset=True`
        starts a new count after reading."""
        return stats_mod.report(self._stats, self.fit_wait_s, reset)

    @property
    def timings(self) -> stats_mod.BatchTimings | None:
        """The record of where the time of making batches goes (stats=True), or None."""
        return self._stats

    def class_counts(self) -> dict[str, dict[Any, int]]:
        """{"before": {class: count}, "after": {class: count in this epoch's plan}}."""
        return self._targets.class_counts(lambda: self._order.plan().indices)

    @property
    def sample_shape(self) -> tuple[int, ...] | None:
        """The shape of x's samples as batches hold them, where it is known before
        loading: the source's (an image generator's image_size and channels, an array's
        rows) after `augment` (applied once to a blank sample with sample 0's draws);
        None where it is not (a subclass's own samples, masks or boxes augmented with
        the image, an augmentation that refuses a blank sample)."""
        if "_sample_shape" not in self.__dict__:
            self.__dict__["_sample_shape"] = _validation.sample_shape(self)
        return self.__dict__["_sample_shape"]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        # a copy (copy.copy and views come through here too) moves on its own
        state.update(_order=self._order.copy(), _feeding=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        ahead = state.pop("_ahead", True)
        self.__dict__.update(state)
        self._feeding = self._new_feeding(ahead)  # a copy's own (none ahead in a worker)
