"""Which shard of the data this process reads when several processes train one model.

`process_shard()` asks the distribution in force: Keras's (`keras.distribution`, set
with `set_distribution`) when it spans several processes, else TensorFlow's
`MultiWorkerMirroredStrategy` when one is current (inside its `scope()`; TensorFlow is
read only where it is already imported, never imported for this), else None: one
process, which reads every batch. `num_shards="auto"` (a stream's `num_hosts="auto"`)
is that shard; `automatic()` says when a generator built with no `num_shards` shards
itself (a Keras distribution with `auto_shard_dataset=False`); `resolve` decides.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import keras

from kerasgen import _checks, _redact

AUTO = "auto"


@dataclasses.dataclass(frozen=True)
class ProcessShard:
    """Shard `index` of `num_shards` (> 1) that `by` (in words) deals this process."""

    num_shards: int
    index: int
    by: str


def process_shard() -> ProcessShard | None:
    """This process's shard of the data under the distribution in force, or None (one
    process, or every process reads every batch)."""
    return keras_shard(keras.distribution.distribution()) or tf_shard()


def keras_shard(dist: Any) -> ProcessShard | None:
    """The shard Keras deals this process under `dist` (a `keras.distribution`
    Distribution, or None), as Keras shards a tf.data dataset itself
    (`Distribution.distribute_dataset`): one shard per model replica, at most one per
    process, read where `data_shard_id` says. Processes that hold parts of one replica
    (ModelParallel) read the same shard; one replica over all processes: None."""
    processes = getattr(dist, "num_processes", 1)
    if dist is None or processes <= 1:
        return None
    replicas = dist.num_model_replicas
    num_shards = min(processes, replicas)
    if num_shards <= 1:
        return None
    return ProcessShard(num_shards, int(dist.data_shard_id),
                        f"keras.distribution.{type(dist).__name__} over {processes} "
                        f"processes (data_shard_id={dist.data_shard_id})")


def tf_shard() -> ProcessShard | None:
    """This worker's shard under the current `tf.distribute.MultiWorkerMirroredStrategy`
    (TensorFlow already imported, inside `strategy.scope()`): one input pipeline per
    worker, as the `InputContext` the strategy hands `distribute_datasets_from_function`.
    None elsewhere (no TensorFlow, another strategy, one worker, an evaluator)."""
    distribute: Any = getattr(sys.modules.get("tensorflow"), "distribute", None)
    if distribute is None or not distribute.has_strategy():
        return None
    strategy = distribute.get_strategy()
    if not isinstance(strategy, distribute.MultiWorkerMirroredStrategy):
        return None
    return worker_shard(strategy.cluster_resolver)


def worker_shard(resolver: Any) -> ProcessShard | None:
    """The shard of the task `resolver` (a tf.distribute cluster resolver) names, numbered
    as TensorFlow's `multi_worker_util.id_in_cluster` (the chief 0, then the workers);
    None for one worker or another task type."""
    if resolver is None:
        return None
    spec = resolver.cluster_spec().as_dict()
    chiefs, workers = len(spec.get("chief", [])), len(spec.get("worker", []))
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type not in ("chief", "worker") or chiefs + workers <= 1:
        return None
    index = 0 if task_type == "chief" else chiefs + int(task_id)
    return ProcessShard(chiefs + workers, index,
                        f"tf.distribute.MultiWorkerMirroredStrategy over {chiefs + workers}"
                        f" workers (task {task_type}:{task_id})")


def automatic() -> ProcessShard | None:
    """The shard a generator built without `num_shards` reads: this process's, where a
    multi-process Keras distribution is set with `auto_shard_dataset=False` (the data's
    own sharding asked for: Keras refuses a PyDataset otherwise, and shards a tf.data
    dataset itself). None elsewhere: TensorFlow's strategies shard a dataset themselves
    (`AutoShardPolicy`), so a generator built for them reads every batch unless asked."""
    dist = keras.distribution.distribution()
    if dist is None or getattr(dist, "auto_shard_dataset", True):
        return None
    return keras_shard(dist)


def notice(name: str, shard: ProcessShard) -> str:
    """What a generator built without `num_shards` says when it shards itself."""
    return (f"{name} reads shard {shard.index} of {shard.num_shards} of each epoch: "
            f"{shard.by} is set with auto_shard_dataset=False, so each process reads its "
            "own shard. Pass num_shards=\"auto\" to say so (and silence this), or "
            "num_shards=1, shard_index=0 to read every batch in every process.")


def resolve(num_shards: int | str | None, index: int | None, *, seeded: bool, name: str,
            names: tuple[str, str] = ("num_shards", "shard_index"),
            ) -> tuple[int, int] | None:
    """(num_shards, index) a generator named `name` reads, from its arguments `names`:
    given; "auto" (this process's shard, or None: unsharded); None (unsharded, or this
    process's shard where `automatic()` finds one, said in a KerasgenWarning). `seeded`:
    the order is the same in every process (a seed given, or nothing shuffled); a
    process's shard of an order drawn from a seed each process drew is refused."""
    if isinstance(num_shards, str) and num_shards == AUTO:
        if index is not None:
            _checks.fail(names[1], f'None with {names[0]}="auto" (the distribution in '
                         "force says which shard this process reads)", index)
        found, why = process_shard(), f"{names[0]}={AUTO!r}"
    elif num_shards is None and index is None:
        found = automatic()
        if found is None:
            return None
        why = f"{found.by}, auto_shard_dataset=False"
    else:
        return None if num_shards is None else (num_shards, index)  # type: ignore[return-value]
    if not seeded:
        _checks.fail("seed", f"an integer when each process reads its own shard ({why}): "
                     "every process must draw the same order of each epoch", None,
                     hint="Pass the same seed in every process")
    if num_shards is None and found is not None:
        _redact.warn(notice(name, found), stacklevel=_callers())
    return None if found is None else (found.num_shards, found.index)


def _callers() -> int:
    """The stacklevel of the first caller outside kerasgen (the user's line), as
    `_redact.warn` counts frames (its own wrappers not counted)."""
    frame: Any = sys._getframe(1)  # noqa: SLF001 - resolve's frame
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("kerasgen"):
        level += frame.f_globals["__name__"] != "kerasgen._redact"
        frame = frame.f_back
    return level
