"""How `base.Generator.__init__` builds its stages from its arguments, one object per
stage, in the order they depend on each other: the source (given, or a subclass's own),
the targets (`labels.encoding.Targets`), the batch maker, the epochs' order and the feeding. The
generator holds them; none of them holds the generator."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kerasgen import _checks
from kerasgen.adapter import hooks as _hooks
from kerasgen.adapter import validation as _validation
from kerasgen.labels import targets as labels_mod
from kerasgen.labels import encoding as label_encoding
from kerasgen import _seeding as seeding
from kerasgen import _stats as stats_mod
from kerasgen.arrays import batching
from kerasgen.pipeline import feeding as _feeding
from kerasgen.pipeline import hosts as _hosts
from kerasgen.pipeline import making as _making
from kerasgen.pipeline import order as _order
from kerasgen.pipeline.augmenting import Augmentation
from kerasgen.samplers import _adapters as sampler_adapters
from kerasgen.sources import _core as sources_mod

if TYPE_CHECKING:
    import numpy.typing as npt

AUTO = "auto"
SOURCES_OWN = object()  # rescale=: none set by a subclass, the source's applies


@dataclasses.dataclass
class Stages:
    """The stage objects a generator holds (its private attributes, set by itself)."""

    targets: label_encoding.Targets
    maker: _making.BatchMaker
    order: _order.EpochOrder
    feeding: _feeding.Feeding
    timings: stats_mod.BatchTimings | None
    features: Any


def assemble(gen: Any, placement: _feeding.Placement, source: Any, num_samples: int | None,
             labels: Any, *, batch_size: int, shuffle: bool, seed: int | None,
             label_mode: str | None, num_classes: int | None,
             class_names: Sequence[str] | None, dtype: str | None,
             augment: Callable[..., Any] | None, batch_augment: Any, sampler: Any,
             drop_remainder: bool, sample_weight: Any, mask_format: str, features: Any,
             num_shards: int | str | None, shard_index: int | None, stats: bool,
             rescale: Any) -> Stages:
    """Builds the stages of `gen` (see `base.Generator`'s arguments): sets the options
    users read on it (its public attributes) and returns the stage objects. `rescale`:
    one a subclass set before `super().__init__()`, else the source's."""
    # an image source's memory cache shared with the worker processes
    source = placement.share(given_source(gen, source, num_samples, labels))
    gen.source = source  # a sources.Source (typed Any for subclasses' kinds)
    gen.num_samples = len(source)
    gen.batch_size = _checks.positive_int("batch_size", batch_size)
    gen.shuffle = bool(shuffle)
    sampler_adapters.check_seed(sampler, seed)  # before a None seed is drawn
    _order.check_shards(num_shards, shard_index)
    # "auto", or a multi-process Keras distribution: this process's shard (or none)
    shard = _hosts.resolve(num_shards, shard_index, name=type(gen).__name__,
                           seeded=seed is not None or not (shuffle or sampler is not None))
    seed = seeding.resolve_seed(seed)
    gen.dtype = _checks.one_of("dtype", dtype, batching.DTYPES)
    gen.drop_remainder = bool(drop_remainder)
    gen.augment, gen.batch_augment, gen.sampler = augment, batch_augment, sampler
    _validation.refuse_in_validation(gen, sampler, augment, batch_augment, drop_remainder)
    targets = make_targets(gen, label_mode, class_names, num_classes, mask_format,
                           sample_weight)
    label_mode = gen.label_mode
    timings = stats_mod.BatchTimings() if stats else None
    if timings is not None and hasattr(source, "listing_s"):
        timings.add("list", source.listing_s)
    maker = _making.BatchMaker(
        batch_source(gen), targets, name=type(gen).__name__, dtype=gen.dtype,
        rescale=getattr(source, "rescale", None) if rescale is SOURCES_OWN else rescale,
        augment=None if augment is None else Augmentation(
            augment, label_mode, one_shape=gen.batch_size > 1),
        batch_augment=batch_augment, label_mode=label_mode, timings=timings)
    placement.check(maker)
    features = _order.check_features(features, gen.num_samples)
    gen.prefetch = placement.prefetch
    order = epoch_order(gen, targets, placement, sampler, seed, features)
    if shard is not None:
        order = order.sharded(*shard)
    feeding = new_feeding(maker, order, placement, source, type(gen).__name__)
    feeding.warm_up()
    order.refuse_empty()
    return Stages(targets, maker, order, feeding, timings, features)


def make_targets(gen: Any, label_mode: str | None, class_names: Sequence[str] | None,
                 num_classes: int | None, mask_format: str,
                 sample_weight: npt.ArrayLike | None) -> label_encoding.Targets:
    """The targets of the source's labels (`labels.encoding.Targets`), checked, and what the
    source refuses of them; sets the label mode ("auto" resolved) on `gen`."""
    source = gen.source
    named = source.class_names
    if named is not None and class_names is not None and list(class_names) != list(
            named):
        raise ValueError(
            "`class_names` must be the source's own, which its labels are ids of. "
            f"Received: class_names={list(class_names)}, and the source names "
            f"{list(named)}. Leave class_names out, or build the source with them.")
    if label_mode == AUTO:
        label_mode = "int" if source.labels is not None else None
    targets = labels_mod.generator_targets(
        gen.num_samples, source.labels, label_mode,
        source.class_names if class_names is None else class_names, num_classes,
        mask_format, sample_weight, describe=gen.describe_sample)
    gen.label_mode, gen.mask_format = label_mode, mask_format
    gen.sample_weight = targets.sample_weight
    sources_mod.check_batches(source, gen.dtype, label_mode, targets.class_ids)
    return targets


def given_source(gen: Any, source: Any, num_samples: int | None, labels: Any) -> Any:
    """The source given, or a subclass's own (`num_samples`, `labels`)."""
    if source is None:
        if num_samples is None:
            raise TypeError(f"{type(gen).__name__} needs `source` (a kerasgen source), "
                            "or `num_samples` with a load_sample method.")
        return _hooks.CountedSamples(type(gen).__name__, num_samples, labels)
    if num_samples is not None or labels is not None:
        raise TypeError(
            "`source` holds the samples and their labels: pass no `num_samples` or "
            f"`labels` with it. Received: num_samples={num_samples!r}, labels="
            f"{'None' if labels is None else '<given>'}.")
    return sources_mod.check(source)


def batch_source(gen: Any) -> Any:
    """What the batch maker loads from: the source, or where this class fills a hook
    (or says itself what its samples are), the hooks over it."""
    cls = type(gen)
    if isinstance(gen.source, _hooks.CountedSamples) or any(
            getattr(cls, name) is not getattr(_hooks.Hooks, name) for name in _hooks.HOOKS):
        return _hooks.HookSource(gen, gen.source)
    return gen.source


def epoch_order(gen: Any, targets: label_encoding.Targets, placement: _feeding.Placement,
                sampler: Any, seed: int, features: Any) -> _order.EpochOrder:
    """The epochs' order of `gen`'s samples; a sampler gets the class names and the
    feature space (`features=`, else the source's) as context."""
    context = None
    if sampler is not None:
        context = {"class_names": targets.class_names,
                   "features": features if features is not None
                   else sources_mod.features_of(gen.source)}
    order = _order.EpochOrder(
        gen.num_samples, gen.batch_size, sampler=sampler, shuffle=gen.shuffle,
        seed=seed, drop_remainder=gen.drop_remainder, labels=targets.class_ids,
        context=context, prepare=placement.processes)
    order.file_paths = sources_mod.file_paths_of(gen.source)  # states record them
    return order


def new_feeding(maker: _making.BatchMaker, order: _order.EpochOrder,
                placement: _feeding.Placement, source: Any, name: str,
                ahead: bool = True) -> _feeding.Feeding:
    """Where the batches of `order` are made (see `pipeline.feeding.Feeding`)."""
    return _feeding.Feeding(maker, order, placement, pace=getattr(source, "pace", None),
                            ahead=ahead, name=name)
