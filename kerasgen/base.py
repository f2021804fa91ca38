"""`Generator`: the PyDataset adapter that wires kerasgen's stages together.

A generator takes a finished source (`kerasgen.sources`: how many samples there are,
their labels, how to load sample i), or, for a subclass, says the same itself
(`num_samples`, `labels`, `load_sample`). `__init__` makes one object per stage from
the arguments it owns: where batches are made (`pipeline.feeding.Placement`), the
targets (`labels.encoding.Targets`), the recipe of a batch (`pipeline.making.BatchMaker`: the
source, targets, augmentation, buffers, timings), the epochs' order
(`pipeline.order.EpochOrder`) and the feeding (`pipeline.feeding.Feeding`, which takes
the maker and the order). `gen[i]` goes one way down from here: feeding, maker, source,
loader; nothing below calls back into the generator. What stays here is the PyDataset
face (`len`, `gen[i]`), Keras's epoch lifecycle, views (`shard`, `at_epoch`) and state.
The hooks a subclass fills are `adapter.hooks.Hooks`'s, a base class (a subclass that fills
one loads through `adapter.hooks.HookSource`). See docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from keras.utils import PyDataset

from kerasgen import _checks, _keras_compat, _redact
from kerasgen.adapter import assembly as _assembly
from kerasgen.adapter import hooks as _hooks
from kerasgen.adapter import validation as _validation
from kerasgen.labels import targets as labels_mod
from kerasgen.adapter.assembly import AUTO
from kerasgen.adapter.readouts import Readouts
from kerasgen._typing import BatchAugmentSteps
from kerasgen.adapter.views import Views
from kerasgen.arrays import batching
from kerasgen.pipeline import feeding as _feeding
from kerasgen.arrays import malloc as _malloc
from kerasgen.sources import _core as sources_mod

if TYPE_CHECKING:
    import numpy.typing as npt

    from kerasgen.pipeline.ray_engine import RayEngine

_REDACTED = ("__init__", "validate")  # kerasgen's classes', wrapped by __init_subclass__


class Generator(PyDataset, _hooks.Hooks, Readouts, Views):
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
        num_shards: read only one shard of `num_shards` (see `shard`); "auto": this
            process's shard under the distribution in force (a multi-process
            `keras.distribution`: its `data_shard_id`; TensorFlow's
            MultiWorkerMirroredStrategy, inside its scope: the worker's), unsharded in
            one process (a seed is then required). None: unsharded, except under a
            multi-process Keras distribution with auto_shard_dataset=False, where it
            reads its process's shard as "auto" does, with a warning (docs/distributed.md).
        shard_index: which shard, 0 to `num_shards - 1` (None with "auto").
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
        engine: None, or `kg.RayEngine(...)`: Ray actors on a cluster's nodes make the
            batches, byte-identical to those made here (docs/distributed.md).

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
                 features: npt.ArrayLike | None = None, num_shards: int | str | None = None,
                 shard_index: int | None = None, stats: bool = False,
                 prefetch: int | str = AUTO, workers: int = 1,
                 use_multiprocessing: bool = False, max_queue_size: int = 10,
                 engine: RayEngine | None = None, **unknown: Any) -> None:
        if unknown:
            _checks.unknown_arguments(self, unknown)
        placement = _feeding.Placement(workers, use_multiprocessing, max_queue_size,
                                       prefetch, self.prefetch_auto, self.ahead_threads,
                                       engine)
        super().__init__(workers=placement.workers,
                         use_multiprocessing=placement.processes,  # as Keras reads them
                         max_queue_size=placement.max_queue_size)
        stages = _assembly.assemble(
            self, placement, source, num_samples, labels, batch_size=batch_size,
            shuffle=shuffle, seed=seed, label_mode=label_mode, num_classes=num_classes,
            class_names=class_names, dtype=dtype, augment=augment,
            batch_augment=batch_augment, sampler=sampler, drop_remainder=drop_remainder,
            sample_weight=sample_weight, mask_format=mask_format, features=features,
            num_shards=num_shards, shard_index=shard_index, stats=stats,
            rescale=self.__dict__.get("_rescale", _assembly.SOURCES_OWN))
        self._placement, self._targets, self._maker = placement, stages.targets, stages.maker
        self._stats, self._features = stages.timings, stages.features
        self._order, self._feeding = stages.order, stages.feeding
        self._epoch_open = False
        # (epoch, seed) the last `for batch in gen` pass began at
        self._passed: tuple[int, int] | None = None
        self._short_epoch_done = False  # a resumed, shortened epoch just ended in fit
        self.fit_wait_s = None  # set by kg.callbacks.PipelineStats each epoch

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

    # ----------------------------------------------------------------- epochs and state
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
        _keras_compat.refuse_strings(batch, self)
        return batch

    @_redact.errors
    def make_batch(self, index: int) -> Any:
        """Batch `index` of the current epoch, made here and now (no work-ahead, no
        worker): what `gen[index]` returns, the same bytes."""
        return self._feeding.make(index)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        # a copy (copy.copy and views come through here too) moves on its own
        state.update(_order=self._order.copy(), _feeding=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        ahead = state.pop("_ahead", True)
        self.__dict__.update(state)
        self._feeding = _assembly.new_feeding(  # a copy's own (none ahead in a worker)
            self._maker, self._order, self._placement, self.source, type(self).__name__,
            ahead)
