"""`Views`: other generators over the same data and stages, sharing what the original
built (a shard of every epoch, one epoch for a parallel reader), and the tf.data dataset
of the same batches. A base class of `base.Generator`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tensorflow as tf

    from kerasgen.pipeline import order as order_mod


class Views:
    """The views of a generator (see `base.Generator`): a copy on another order, with
    a feeding of its own (`__getstate__` / `__setstate__` make the copy)."""

    _order: order_mod.EpochOrder
    if TYPE_CHECKING:  # base.Generator's
        def __getstate__(self) -> dict[str, Any]: ...

        def __setstate__(self, state: dict[str, Any]) -> None: ...

    def shard(self, num_shards: int, index: int, remainder: str = "pad") -> Any:
        """A view of this generator holding shard `index` of `num_shards`.

        Each epoch the shared plan (from the shared seed) is cut into batches, dealt to
        the shards in turn: shards are disjoint, reshuffled every epoch, and together
        hold every batch. All shards get the same number of batches: with
        remainder="pad" (default) the last round is completed with batches from the
        epoch's start (at most num_shards - 1 batches seen twice); with "drop" the
        incomplete last round is left out (different batches each epoch). Samplers run
        on the whole data set, and each shard reads its share of their plan.

        On a generator that already reads a shard (`num_shards=`, "auto", or a
        multi-process Keras distribution's), the view is shard `index` of the whole
        data, in place of that shard, never a shard of the shard.
        """
        return self._view(self._order.sharded(num_shards, index, remainder))

    def _view(self, order: order_mod.EpochOrder, ahead: bool = True) -> Any:
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
        from kerasgen.adapter import tfdata

        return tfdata.to_tf_dataset(self, epochs, num_parallel_calls, prefetch)

    def at_epoch(self, epoch: int) -> Any:
        """A view of this generator serving `epoch` (for parallel readers of other epochs;
        it makes no batches ahead)."""
        return self._view(self._order.at_epoch(epoch), ahead=False)  # readers: any order
