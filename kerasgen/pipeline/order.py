"""Epoch order: which samples each epoch holds, in which order, and where a run stands.

`EpochOrder` is the index layer under a generator. It owns the seed, the current epoch,
the offset (batches of the epoch consumed before a mid-epoch resume), the shard read,
the epoch's plan (from the sampler, kept for one epoch at a time) and the state that
`get_state` / `set_state` carry. It knows nothing of what a sample is: `slice(i)` hands
the batch maker a frozen `BatchSlice` of batch `i` (its samples, their places in the
epoch, the seed and the epoch), which is all a batch is made from. Whether a saved state
belongs to an order (its data, files, sampler, the way its batches are counted) is
`check_state`'s to say, before `set_state` moves there.

The plan of epoch e is a pure function of (seed, e): the sampler's
`plan(labels, seed, e, **context)`, with `kg.samplers.Shuffle` (shuffle=True) or
`Sequential` (shuffle=False) when no sampler is given; whatever the sampler returns
becomes a `kg.samplers.Plan`. A shard reads every num_shards-th batch of the shared plan.

What a sampler derives from the data once for every epoch (SMOTE's neighbor table) is
kept in the order's `memo` (a `kg.samplers.Memo`, passed to `plan` as the `memo`
keyword), never on the sampler object, which the user may share between generators.
The order's copies (a generator's views, its work-ahead, a worker process's unpickled
generator) share it or carry it with them.
"""

from __future__ import annotations

import copy
import math
import os
import reprlib
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kerasgen import _checks
from kerasgen import _seeding as seeding
from kerasgen import samplers as samplers_mod
from kerasgen.samplers import _adapters as sampler_adapters

REQUIRED = ("epoch", "seed", "num_samples")  # what set_state needs of a state


@dataclass(frozen=True)
class BatchSlice:
    """Batch `number` of the plan of `epoch`, as frozen data: what `pipeline.making.BatchMaker`
    makes a batch from, wherever it is made.

    Attributes:
        number: the batch in the whole epoch's plan (it keys the batch's draws).
        indices: its samples, in batch order.
        positions: their places in the epoch (they key each sample's draws).
        partners, lams: SMOTE's partners and blend factors (None: no synthetic sample).
        seed, epoch: the generator's seed and the batch's epoch.
        coming: the samples of the next batches (partners included), for a source that
            fetches remote objects ahead (None: not asked for).
    """

    number: int
    indices: np.ndarray
    positions: np.ndarray
    partners: np.ndarray | None
    lams: np.ndarray | None
    seed: int
    epoch: int
    coming: np.ndarray | None = None


def check_features(features: Any, num_samples: int) -> Any:
    """`features=` (SMOTE's feature space) checked: None or one row per sample."""
    if features is not None and len(features) != num_samples:
        raise ValueError(
            f"`features` must hold one row per sample ({num_samples}, in the order "
            f"of this generator's samples). Received: {len(features)} rows."
        )
    return features


def check_shards(num_shards: int | str | None, shard_index: int | None) -> None:
    """`num_shards` and `shard_index` go together, or num_shards="auto" alone (their
    values are checked by `EpochOrder.sharded`, "auto" by `pipeline.hosts.resolve`)."""
    if isinstance(num_shards, str) and num_shards == "auto":
        return
    if (num_shards is None) != (shard_index is None):
        raise ValueError("`num_shards` and `shard_index` go together. Received: "
                         f"num_shards={num_shards!r}, shard_index={shard_index!r}.")


class EpochOrder:
    """The order of a generator's epochs and its position in them.

    Args:
        num_samples, batch_size, drop_remainder: as the generator's.
        sampler: the generator's `sampler=` (None: `Shuffle()` or `Sequential()` after
            `shuffle`).
        seed: an int, or None to draw one once.
        labels: the class ids a sampler plans from (None: no single class per sample).
        context: keywords for the sampler's plan (class_names, features); the order adds
            num_samples, batch_size and its `memo`.
        prepare: find a synthetic plan's neighbours when it is made (worker processes,
            which would each search anew, then inherit them).
    """

    def __init__(self, num_samples: int, batch_size: int, *, sampler: Any = None,
                 shuffle: bool = True, seed: int | None = None, drop_remainder: bool = False,
                 labels: np.ndarray | None = None, context: Mapping[str, Any] | None = None,
                 prepare: bool = False) -> None:
        self.num_samples = num_samples
        self.batch_size = batch_size
        self.drop_remainder = bool(drop_remainder)
        given = sampler_adapters.as_sampler(sampler)
        if given is None:
            sampler = samplers_mod.Shuffle() if shuffle else samplers_mod.Sequential()
            given = sampler
        self.sampler: samplers_mod.Sampler = given  # plan(labels, seed, epoch, **context)
        self.sampler_name = sampler_adapters.identity(sampler)
        self.seed: int = seeding.resolve_seed(seed)
        self.labels = labels
        self.context: dict[str, Any] = {"num_samples": num_samples, "batch_size": batch_size,
                                        **(context or {})}
        self.prepare = prepare
        self.memo = samplers_mod.Memo()  # the sampler's derived data, shared by copies
        self.epoch = 0
        self.offset = 0  # batches of the current epoch skipped on a mid-epoch resume
        self.shard: tuple[int, int, str] | None = None  # (num_shards, index, remainder)
        # whole batches served in an order drawn from (seed, epoch): Keras's batch shuffle
        # of fit(shuffle=True), done here for it (see _keras_compat.adopt_adapter)
        self.batch_shuffle = False
        # the batch shuffle's ((seed, epoch, batches), permutation)
        self._batch_permutation: tuple[tuple[int, int, int], np.ndarray] | None = None
        self._cache: tuple[int, samplers_mod.Plan] | None = None  # of the epoch planned last
        self._source: str | None = None
        self.file_paths: Sequence[Any] | None = None  # set where the samples are files
        self._files: str | None = None

    # ----------------------------------------------------------------- plans
    def plan(self, epoch: int | None = None) -> samplers_mod.Plan:
        """The `Plan` of `epoch` (default: the current one)."""
        epoch = self.epoch if epoch is None else epoch
        cached = self._cache
        if cached is not None and cached[0] == epoch:
            return cached[1]
        plan = self.sampler.plan(self.labels, self.seed, epoch, memo=self.memo,
                                 **self.context)
        if not isinstance(plan, samplers_mod.Plan):
            plan = samplers_mod.Plan(np.asarray(plan, dtype="int64"))
        elif self.prepare:
            plan.prepare_all()
        indices = plan.indices
        if len(indices) and (indices.max() >= self.num_samples or indices.min() < 0):
            bad = indices[(indices >= self.num_samples) | (indices < 0)][0]
            raise ValueError(
                f"The sampler's plan names sample index {bad}, outside the "
                f"{self.num_samples} samples of this generator (indices 0 to "
                f"{self.num_samples - 1}). Received: sampler={self.sampler_name}.")
        self._cache = (epoch, plan)
        return plan

    def epoch_plan(self, epoch: int | None = None) -> np.ndarray | samplers_mod.Plan:
        """The plan as users read it: the index array, or the `Plan` itself where it
        holds synthetic samples."""
        plan = self.plan(epoch)
        return plan.indices if plan.slots is None else plan

    def epoch_batches(self) -> int:
        """Batches in the whole epoch's plan, before sharding and resuming."""
        n = len(self.plan())
        if self.drop_remainder:
            return n // self.batch_size
        return math.ceil(n / self.batch_size)

    def num_batches(self) -> int:
        """Batches this epoch serves: its shard's share, less those skipped on resume."""
        total = self.epoch_batches()
        if self.shard is not None:
            num_shards, _, remainder = self.shard
            total = (math.ceil(total / num_shards) if remainder == "pad"
                     else total // num_shards)
        return max(0, total - self.offset)

    def global_batch(self, index: int) -> int:
        """The batch of the epoch's plan that local batch `index` reads."""
        index += self.offset
        if self.shard is None:
            if self.batch_shuffle:
                index = int(self._batch_order()[index])
            return index
        num_shards, shard_index, _ = self.shard
        return (index * num_shards + shard_index) % self.epoch_batches()  # padding wraps

    def _batch_order(self) -> np.ndarray:
        """The batch shuffle's permutation of this epoch's batches, drawn once per
        (seed, epoch) from (seed, epoch) alone."""
        key = (self.seed, self.epoch, self.epoch_batches())
        cached = self._batch_permutation
        if cached is None or cached[0] != key:
            rng = seeding.rng(self.seed, seeding.BATCH_ORDER, self.epoch)
            cached = self._batch_permutation = (key, rng.permutation(key[2]))
        return cached[1]

    def batch(self, index: int,
              ) -> tuple[int, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """(batch number in the whole epoch, indices, partners or None, lams or None) of
        local batch `index`."""
        number = self.global_batch(index)
        start = number * self.batch_size
        return (number,) + self.plan().batch(start, start + self.batch_size)

    def slice(self, index: int, foresee: int = 0) -> BatchSlice:
        """Local batch `index` as a `BatchSlice`, with the samples of the `foresee`
        batches after it as `coming` (when foresee > 0)."""
        number, indices, partners, lams = self.batch(index)
        start = number * self.batch_size
        coming = None
        if foresee:
            later = [self.batch(b)[1:3] for b in range(
                index + 1, min(index + 1 + foresee, self.num_batches()))]
            coming = np.concatenate([np.asarray([], "int64")] + [
                ahead if partners_ is None else np.concatenate(
                    [ahead, partners_[partners_ >= 0]]) for ahead, partners_ in later])
        return BatchSlice(number, indices, np.arange(start, start + len(indices)),
                          partners, lams, self.seed, self.epoch, coming)

    # ----------------------------------------------------------------- moving
    def next_epoch(self) -> None:
        self.epoch += 1
        self.offset = 0

    def move_to(self, epoch: int, offset: int, seed: int, batch_shuffle: bool = False,
                ) -> None:
        """Serve batches of `epoch` at resume `offset` with `seed` (a worker process)."""
        if seed != self.seed:
            self.seed, self._cache = seed, None
        self.epoch, self.offset, self.batch_shuffle = epoch, offset, batch_shuffle

    def at_epoch(self, epoch: int) -> EpochOrder:
        """A copy serving `epoch` (from its start, or where this one stands in it)."""
        epoch = _checks.non_negative_int("epoch", epoch)
        view = self.copy()
        if epoch != self.epoch:
            view.forget_plan()
            view.epoch, view.offset = epoch, 0
        return view

    def sharded(self, num_shards: int, index: int | None, remainder: str = "pad",
                ) -> EpochOrder:
        """A copy reading shard `index` of `num_shards` (see Generator.shard). Both are
        checked here: an `index` that is not one (None included) is refused."""
        num_shards = _checks.positive_int("num_shards", num_shards)
        index = _checks.non_negative_int("index", index)
        if index >= num_shards:
            _checks.fail("index", f"in [0, num_shards) = [0, {num_shards})", index)
        _checks.one_of("remainder", remainder, ("pad", "drop"))
        view = self.copy()
        view.shard = None if num_shards == 1 else (num_shards, index, remainder)
        if view.num_batches() == 0 and view.offset == 0:
            raise ValueError(f"Shard {index} of {num_shards} would hold no batch: the epoch "
                             f"has {self.epoch_batches()} batches. Use fewer shards or a "
                             "smaller batch_size.")
        return view

    def refuse_empty(self) -> None:
        """Raises when the epoch serves no batch (checked when a generator is built)."""
        if self.num_batches() == 0:
            raise ValueError(
                f"The generator would yield no batch: {self.num_samples} samples, "
                f"batch_size={self.batch_size}, drop_remainder={self.drop_remainder}. "
                "Use a smaller batch_size or drop_remainder=False."
            )

    def copy(self) -> EpochOrder:
        """An independent copy of the position, sharing the plan made last (until it moves
        to another epoch or seed) and the memo."""
        return copy.copy(self)

    def __copy__(self) -> EpochOrder:
        """A shallow copy that keeps the plan made last (a pickle does not: see
        `__getstate__`)."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        return clone

    def forget_plan(self) -> None:
        """Drops the plan made last (made anew when asked for): after a change of epoch or
        seed."""
        self._cache = None

    # ----------------------------------------------------------------- state
    def source_name(self) -> str:
        """What the state records of the data: the sample count and a checksum of the
        class ids (computed once)."""
        if self._source is None:
            name = f"{self.num_samples} samples"
            if self.labels is not None:
                ids = np.ascontiguousarray(self.labels, dtype=np.int64)
                name += f", class ids crc32 {zlib.crc32(ids.tobytes()):08x}"
            self._source = name
        return self._source

    def files_name(self) -> str | None:
        """What the state records of the files read (None: samples are not files): their
        count and a checksum of their paths relative to their common folder, so a data
        set moved elsewhere still restores (computed once)."""
        if self.file_paths is None:
            return None
        if self._files is None:
            paths = [os.fspath(p) for p in self.file_paths]
            prefix = os.path.commonprefix(paths)
            cut = max(prefix.rfind(os.sep), prefix.rfind("/")) + 1
            names = "\0".join(p[cut:] for p in paths).encode(errors="surrogateescape")
            self._files = f"{len(paths)} files, names crc32 {zlib.crc32(names):08x}"
        return self._files

    def get_state(self, batches_done: int = 0) -> dict[str, Any]:
        position = self.offset + _checks.non_negative_int("batches_done", batches_done)
        epoch = self.epoch
        if position and position >= self.offset + self.num_batches():  # epoch complete
            epoch, position = epoch + 1, 0
        state: dict[str, Any] = {"epoch": epoch, "batch": position, "seed": self.seed,
                 "num_samples": self.num_samples, "batch_size": self.batch_size,
                 "shard": list(self.shard[:2]) if self.shard else None,
                 "sampler": self.sampler_name, "source": self.source_name()}
        if self.file_paths is not None:
            state["files"] = self.files_name()
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Moves to `state` (from `get_state`, here or in another process), or raises
        ValueError (TypeError for a state that is not a dict) and changes nothing: every
        check runs on a copy, which replaces this order's position only when all passed.
        States without "sampler", "source" or "files" (kerasgen before they were
        recorded) are not checked for them."""
        check_state(self, state)
        moved = self.copy()
        moved.seed = _checks.non_negative_int("state['seed']", state["seed"])  # None too
        moved.epoch = _checks.non_negative_int("state['epoch']", state["epoch"])
        moved.offset = 0
        if moved.seed != self.seed:
            moved.forget_plan()
        moved.offset = _checks.non_negative_int("state['batch']", state.get("batch", 0))
        if moved.offset and moved.num_batches() == 0:
            raise ValueError(f"The state's batch position ({moved.offset}) is past the end "
                             f"of epoch {moved.epoch}.")
        self.__dict__.update(moved.__dict__)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_cache"] = None  # made anew where needed (a worker process, a copy)
        return state

    def __repr__(self) -> str:
        return (f"EpochOrder(sampler={self.sampler_name}, seed={self.seed}, "
                f"epoch={self.epoch}, offset={self.offset}, shard={self.shard})")


def check_state(order: EpochOrder, state: Mapping[str, Any]) -> None:
    """Raises TypeError where `state` is not a dict, ValueError where it does not belong
    to `order` (other data, files, sampler, or a batch position counted another way);
    changes nothing. The values it moves to are checked by `EpochOrder.set_state`."""
    if not isinstance(state, Mapping):
        raise TypeError("`state` must be a dict from get_state(). Received: "
                        f"state={reprlib.repr(state)} (a {type(state).__name__}).")
    missing = [key for key in REQUIRED if key not in state]
    if missing:
        raise ValueError(
            f"The state lacks {', '.join(map(repr, missing))}: a state from "
            f"get_state() holds {', '.join(map(repr, REQUIRED))} at least. Received: "
            f"state with keys {sorted(map(str, state))}.")
    if state["num_samples"] != order.num_samples:
        raise ValueError(
            "The state belongs to a generator over "
            f"{state.get('num_samples')} samples, this one has {order.num_samples}. "
            "Restore it into a generator built over the same data."
        )
    if "source" in state and state["source"] != order.source_name():
        raise ValueError(
            f"The state belongs to other data: it was saved over "
            f"source={state['source']!r}, this generator reads "
            f"source={order.source_name()!r} (the same number of samples, other "
            "labels or another order). Restore it into a generator built over the "
            "same data."
        )
    if "files" in state and state["files"] != order.files_name():
        files = order.files_name()
        raise ValueError(
            f"The state belongs to other files: it was saved over "
            f"files={state['files']!r}, this generator reads "
            + (f"files={files!r} (the same number of samples and labels, other file "
               "names)" if files else "no files") + ". Restore it into a generator "
            "built over the same files.")
    if "sampler" in state and state["sampler"] != order.sampler_name:
        raise ValueError(
            f"The state was saved by a generator with sampler={state['sampler']}, "
            f"this one has sampler={order.sampler_name}. Restore it into a generator "
            "built with the same sampler (and shuffle)."
        )
    for key, mine in (("batch_size", order.batch_size),
                      ("shard", list(order.shard[:2]) if order.shard else None)):
        if key in state and state[key] != mine and state.get("batch"):
            raise ValueError(
                f"The state's batch position counts batches of a generator with "
                f"{key}={state[key]}, this one has {key}={mine}. Restore it into a "
                "generator built the same way."
            )
