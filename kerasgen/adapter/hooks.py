"""The subclass path: the hooks a `kg.Generator` subclass fills, and the source that calls
them.

A `kg.Generator` subclass may say itself what its samples are (`num_samples`, `labels`
and `load_sample`: `CountedSamples`), or override the hooks of a source's batches
(`load_sample`, `describe_sample`, `load_batch`, `assemble`, `augment_sample`,
`finish_x`). Then `HookSource` is the source its batch maker loads from: a source like
any other, whose members call the generator's hooks. A generator that overrides no hook
loads from its source directly, and never passes through here.

The default hooks (`Hooks`, a base class of `Generator`) serve the batch being made:
`HookSource.load_batch` holds its data-only `BatchRequest` for the thread making it, so
that a subclass's `super().load_batch(indices, positions, ...)` loads with that batch's
epoch and seed.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kerasgen import _checks
from kerasgen.arrays import batching
from kerasgen.sources import _batch_request as batch_request
from kerasgen.sources import _core as sources_mod
from kerasgen.sources._batch_request import BatchRequest

if TYPE_CHECKING:
    from kerasgen.pipeline.making import BatchMaker
    from kerasgen.pipeline.order import EpochOrder

HOOKS = ("load_sample", "describe_sample", "load_batch", "assemble", "augment_sample",
         "finish_x")  # the methods of `Hooks` a subclass may fill


class Hooks:
    """The hooks of a generator's batches, with their defaults: `Generator` inherits
    them, a subclass fills them. A generator whose class fills none loads from its
    source directly and never calls these while making a batch; one that fills any
    loads through `HookSource`, which calls them."""

    source: Any
    dtype: str | None
    rescale: float | None
    _maker: BatchMaker
    _order: EpochOrder

    def load_sample(self, index: int) -> Any:
        """Returns sample `index`: x, or (x, y) when the sample carries its own target
        (the source's; a subclass without a source implements it)."""
        return self.source.load(index)

    def describe_sample(self, index: int) -> str:
        """How error messages name sample `index` (a file, a row...)."""
        return self.source.describe(index)

    def load_batch(self, indices: np.ndarray, positions: np.ndarray,
                   partners: np.ndarray | None = None,
                   lams: np.ndarray | None = None) -> tuple[Any, Any]:
        """Loads, augments and assembles the samples `indices` into (x, y or None).

        `positions` are the samples' places in the epoch; with the epoch and the seed
        they key each sample's augmentation draws. Where `partners[k] >= 0` the sample is
        synthetic: x_i + lams[k] * (x_partner - x_i), made before augmentation. A
        source that loads whole batches (`load_batch(request)`) does it all; otherwise
        one sample at a time, through `load_sample`, `augment_sample`, `assemble` and
        `finish_x`.
        """
        request = self._serving(indices, positions, partners, lams)
        own_augment = type(self).augment_sample is not Hooks.augment_sample
        if isinstance(self.source, sources_mod.BatchSource):
            if own_augment and request.augment is not None:
                request = dataclasses.replace(request, augment=OwnAugment(self))
            return self.source.load_batch(request)
        augment = (self.augment_sample if own_augment or request.augment is not None
                   else None)
        return batch_request.load_each(request, self.load_sample, self.describe_sample,
                                       self.assemble, self.finish_x, augment)

    def _serving(self, indices: np.ndarray, positions: np.ndarray,
                 partners: np.ndarray | None, lams: np.ndarray | None,
                 ) -> BatchRequest:
        """The request for these samples of the batch being made on this thread (of the
        current epoch, for a hook called by hand)."""
        current = self._current_request()
        if current is None:
            order = self._order
            return self._maker.request(np.asarray(indices), np.asarray(positions),
                                       partners, lams, order.seed, order.epoch)
        return dataclasses.replace(current, indices=np.asarray(indices),
                                   positions=np.asarray(positions), partners=partners,
                                   lams=lams)

    def _current_request(self) -> BatchRequest | None:
        current = getattr(self._maker.source, "current", None)
        return None if current is None else current()

    def assemble(self, samples: Sequence[Any], indices: np.ndarray) -> Any:
        """Writes same-shaped samples into one preallocated batch."""
        return batch_request.assemble(samples, indices, self._maker.buffers,
                                      self.describe_sample)

    def augment_sample(self, x: Any, position: int,
                       mask: np.ndarray | None = None) -> tuple[Any, Any]:
        """Returns (x, mask) augmented with draws from (seed, epoch, position)."""
        augment = self._maker.augment
        if augment is None:
            return x, mask
        request = self._current_request()
        if request is None:  # called by hand: the current epoch's draws
            order = self._order
            return augment.apply(x, order.seed, order.epoch, int(position), mask,
                                 self.dtype, self.rescale)
        return augment.apply(x, request.seed, request.epoch, int(position), mask,
                             request.dtype, request.rescale)

    def finish_x(self, x_batch: Any) -> Any:
        """Converts an assembled batch to `dtype` in one vectorised step; a value the
        conversion would change (300.5 into uint8) is an error naming its sample."""
        request = self._current_request()

        def where(k: int) -> str:
            if request is None or k >= len(request.indices):
                return f"row {k} of the batch"
            return self.describe_sample(int(request.indices[k]))

        return batching.convert(x_batch, self.dtype, self.rescale, self._maker.buffers,
                                where)



class CountedSamples:
    """The source of a subclass that says itself what its samples are (`num_samples`,
    `labels`); its own `load_sample` and `describe_sample` load and name them."""

    def __init__(self, owner: str, num_samples: int, labels: Any) -> None:
        self.owner = owner
        self.num_samples = _checks.non_negative_int("num_samples", num_samples)
        self.labels = labels
        self.class_names = None

    def __len__(self) -> int:
        return self.num_samples

    def describe(self, index: int) -> str:
        return f"sample {index}"

    def load(self, index: int) -> Any:
        raise NotImplementedError(
            f"{self.owner} must implement load_sample(index) -> x or (x, y).")


class HookSource:
    """The source of generator `owner`, whose class fills hooks, over its source
    `inner`: samples are named, loaded and batched by the generator's methods; every
    other member (labels, features, file paths, remote prefetching...) is the inner
    source's."""

    def __init__(self, owner: Any, inner: Any) -> None:
        self.owner, self.inner = owner, inner
        self._local = threading.local()

    def __len__(self) -> int:
        return len(self.inner)

    # The protocols' members are defined here, not only reached through __getattr__:
    # from Python 3.12, isinstance() against a runtime protocol looks them up with
    # inspect.getattr_static, which never calls __getattr__, so a HookSource would be no
    # BatchSource and its owner's load_batch would never be called.
    @property
    def labels(self) -> Any:
        return self.inner.labels

    @property
    def class_names(self) -> Any:
        return self.inner.class_names

    @property
    def remote(self) -> bool:
        return bool(getattr(self.inner, "remote", False))

    def prefetch(self, indices: np.ndarray) -> None:
        if isinstance(self.inner, sources_mod.PrefetchingSource):
            self.inner.prefetch(indices)

    def forget(self) -> None:
        if isinstance(self.inner, sources_mod.PrefetchingSource):
            self.inner.forget()

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("inner")
        if inner is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(inner, name)

    def describe(self, index: int) -> str:
        return str(self.owner.describe_sample(index))

    def load(self, index: int) -> Any:
        return self.owner.load_sample(index)

    def load_batch(self, request: BatchRequest) -> tuple[Any, Any]:
        """The generator's `load_batch(indices, positions[, partners, lams])`, with
        `request` held for its default hooks on this thread."""
        self._local.request = request
        try:
            if request.partners is None:
                return self.owner.load_batch(request.indices, request.positions)
            return self.owner.load_batch(request.indices, request.positions,
                                         request.partners, request.lams)
        finally:
            self._local.request = None

    def current(self) -> BatchRequest | None:
        """The request of the batch this thread is making (None outside one: a hook
        called by hand)."""
        return getattr(self._local, "request", None)

    def __getstate__(self) -> dict[str, Any]:
        return {"owner": self.owner, "inner": self.inner}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()


class OwnAugment:
    """A subclass's own `augment_sample(x, position, mask)` in the place of the
    augmentation stage (what a source calls through `BatchRequest.augmented`)."""

    def __init__(self, owner: Any) -> None:
        self.owner = owner

    def apply(self, x: Any, seed: int, epoch: int, position: int, mask: Any = None,
              dtype: str | None = None, rescale: float | None = None) -> tuple[Any, Any]:
        return self.owner.augment_sample(x, position, mask)
