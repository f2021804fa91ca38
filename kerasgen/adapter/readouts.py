"""`Readouts`: what a generator tells of its data and its run (its labels and classes,
epoch and seed, the plan of an epoch, the sample shape, the rescale, what it counted),
read from the stage objects it holds. A base class of `base.Generator`, which keeps the
Keras face, the lifecycle and the state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kerasgen import _seeding as seeding
from kerasgen import _stats as stats_mod
from kerasgen.adapter import validation as _validation
from kerasgen.loading.options import check_rescale
from kerasgen.sources import _core as sources_mod

if TYPE_CHECKING:
    from kerasgen import samplers as samplers_mod

NOT_SET = object()  # no `self.labels` assigned by a subclass


class Readouts:
    """What users read of a generator (see `base.Generator`)."""

    # the stage objects `base.Generator.__init__` makes
    _order: Any
    _feeding: Any
    _targets: Any
    _stats: Any
    _features: Any
    _maker: Any
    fit_wait_s: float | None
    source: Any
    num_samples: int
    batch_size: int
    shuffle: bool
    label_mode: Any

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
        own = self.__dict__.get("_own_labels", NOT_SET)
        return self._targets.class_ids if own is NOT_SET else own

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

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_samples={self.num_samples}, "
                f"batch_size={self.batch_size}, shuffle={self.shuffle}, seed={self.seed}, "
                f"label_mode={self.label_mode!r}, epoch={self.epoch}"
                + (f", shard={list(self._order.shard[:2])}" if self._order.shard else "")
                + ")")

    def epoch_plan(self, epoch: int | None = None) -> np.ndarray | samplers_mod.Plan:
        """The sample indices of `epoch` (default: the current one), in batch order (a
        `kg.samplers.Plan` where the sampler makes synthetic samples, as SMOTE)."""
        return self._order.epoch_plan(epoch)

    @property
    def sampler_features(self) -> Any:
        """The feature space SMOTE searches for neighbours: `features=` when given, else
        the source's (`features`: x for arrays, 8x8 thumbnails for images)."""
        if self._features is not None:
            return self._features
        return sources_mod.features_of(self.source)

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
