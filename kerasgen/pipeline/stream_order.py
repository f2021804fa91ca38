"""The order of a stream: which shards each pass, host and virtual stream read
(`ShardOrder`), a virtual stream reading them through a seeded shuffle buffer
(`VirtualStream`), and the batches they make (`StreamOrder`: batch b's raw records, as
a `StreamSlice` the shared batch maker makes the batch from, as `EpochOrder` hands it a
`BatchSlice`)."""

from __future__ import annotations

import copy
import dataclasses
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from kerasgen import _checks
from kerasgen import _seeding as seeding
from kerasgen.pipeline import hosts
from kerasgen.pipeline.order import BatchSlice


# Seeding streams of their own (kerasgen._seeding numbers the others 0-6).
SHARD_ORDER = 7  # the permutation of the shards of pass p: (seed, 7, pass)
SHUFFLE_BUFFER = 8  # the buffer of a stream: (seed, 8, pass, host_index, stream)
KEEP = 4  # raw batches of records a stream keeps (asked for, or passed on the way)
Item = tuple[int, int, Any]  # (shard number, record number in the shard, raw record)

class ShardOrder:
    """Which shards pass p, host `host_index` and virtual stream j read.

    Pass p's shards are the permutation of (seed, SHARD_ORDER, p) (shuffle=True) or
    their order; the host keeps [host_index::num_hosts] of them (every host the same
    number each pass) and deals them to its streams: stream j reads [j::num_streams].
    A host has at most as many streams as shards (`num_streams` is that number).
    num_hosts="auto" (host_index None): this process's shard under the distribution in
    force (`pipeline.hosts`), or one host; `num_hosts` and `host_index` hold the
    resolved numbers.
    """

    def __init__(self, num_shards: int, seed: int, shuffle: bool,
                 num_hosts: int | str = 1, host_index: int | None = 0,
                 num_streams: int = 4) -> None:
        self.num_shards, self.seed, self.shuffle = num_shards, seed, shuffle
        if isinstance(num_hosts, str) and num_hosts == hosts.AUTO:
            # seeded: the stream refuses seed=None with num_hosts != 1 and shuffle=True
            num_hosts, host_index = hosts.resolve(
                num_hosts, host_index, seeded=True, name="StreamGenerator",
                names=("num_hosts", "host_index")) or (1, 0)
        self.num_hosts = _checks.positive_int("num_hosts", num_hosts)
        host_index = 0 if host_index is None else host_index
        if self.num_hosts > num_shards:
            _checks.fail("num_hosts", f"at most the number of shards ({num_shards}): hosts "
                         "split the shards, and each host needs one", num_hosts)
        self.host_index = _checks.non_negative_int("host_index", host_index)
        if self.host_index >= self.num_hosts:
            _checks.fail("host_index", f"less than num_hosts={self.num_hosts}", host_index)
        self.requested_streams = _checks.positive_int("num_streams", num_streams)
        per_host = len(range(self.host_index, num_shards, self.num_hosts))
        self.num_streams = min(self.requested_streams, per_host)

    def host_shards(self, pass_: int) -> np.ndarray:
        order = (seeding.rng(self.seed, SHARD_ORDER, pass_).permutation(self.num_shards)
                 if self.shuffle else np.arange(self.num_shards))
        return order[self.host_index::self.num_hosts]

    def stream_shards(self, stream: int, pass_: int) -> list[int]:
        return self.host_shards(pass_)[stream::self.num_streams].tolist()

    def reachable(self, stream: int) -> set[int]:
        """Every shard that `stream` may read in some pass."""
        return (set(range(self.num_shards)) if self.shuffle
                else set(self.stream_shards(stream, 0)))


class VirtualStream:
    """Virtual stream `stream` of a host: its shards of each pass (`order`) read by
    `read` (shard number -> Items) one after another, through a shuffle buffer of
    `buffer_size` records drawn from (seed, SHUFFLE_BUFFER, pass, host, stream): the
    buffer is filled, then each incoming record takes the place of a uniformly chosen
    buffered one, which is emitted; at the pass's end the buffer is drained in a random
    order. `batch(k)` is records [k * batch_size, (k + 1) * batch_size) of what it
    emits, passes following one another.

    It remembers where each pass it met began (`pass_starts`: pass -> records emitted
    before it) and restarts from the latest one at or before a batch it is already
    past. One lock per stream; a forked worker process starts reading afresh.
    """

    def __init__(self, order: ShardOrder, stream: int, read: Callable[[int], Iterator[Item]],
                 batch_size: int, buffer_size: int, names: Sequence[str]) -> None:
        self.order, self.stream, self.read = order, stream, read
        self.batch_size, self.buffer_size, self.names = batch_size, buffer_size, names
        self.pass_starts: dict[int, int] = {0: 0}
        self._setup()

    def _setup(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._records: Iterator[Item] | None = None
        self._emitted = 0  # records taken from _records
        self._kept: OrderedDict[int, list[Item]] = OrderedDict()
        self._empty: set[int] = set()  # shards of the empty passes in a row

    def __getstate__(self) -> dict[str, Any]:
        keep = ("order", "stream", "read", "batch_size", "buffer_size", "names",
                "pass_starts")
        return {k: self.__dict__[k] for k in keep}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()

    # ----------------------------------------------------------------- positions
    def pass_at(self, position: int) -> tuple[int, int]:
        """(pass, its start) of the latest known pass that starts at or before the
        record `position` of the stream."""
        with self._lock:
            starts = dict(self.pass_starts)
        p = max(q for q, start in starts.items() if start <= position)
        return p, starts[p]

    def move_to(self, pass_: int, start: int) -> None:
        """Forgets all reading: the next read begins at pass `pass_`, which starts at
        record `start`."""
        with self._lock:
            self._drop()
            self.pass_starts = {pass_: start}
            self._kept.clear()

    # ----------------------------------------------------------------- reading
    def batch(self, k: int) -> list[Item]:
        if self._pid != os.getpid():  # a forked process: the parent's file is not ours
            self._setup()
        with self._lock:
            kept = self._kept.get(k)
            if kept is not None:
                return kept
            try:
                return self._read_to(k)
            except BaseException:
                self._drop()
                raise

    def _read_to(self, k: int) -> list[Item]:
        size = self.batch_size
        start = k * size
        if self._records is None or start < self._emitted:
            p = max(q for q, s in self.pass_starts.items() if s <= start)
            self._drop()
            self._records, self._emitted = self._passes(p), self.pass_starts[p]
            self._empty = set()
            self._take(-self._emitted % size, keep=False)  # to a batch's first record
        while self._emitted < start:
            m = self._emitted // size
            records = self._take(size, keep=k - m <= KEEP)
            if records:
                self._keep(m, records)
        records = self._take(size, keep=True)
        self._keep(k, records)
        return records

    def _take(self, n: int, keep: bool) -> list[Item]:
        assert self._records is not None
        taken = []
        for _ in range(n):
            item = next(self._records)
            self._emitted += 1
            if keep:
                taken.append(item)
        return taken

    def _keep(self, k: int, records: list[Item]) -> None:
        self._kept[k] = records
        self._kept.move_to_end(k)
        while len(self._kept) > KEEP:
            self._kept.popitem(last=False)

    def _drop(self) -> None:
        if self._records is not None:
            records, self._records = self._records, None
            records.close()  # type: ignore[attr-defined]

    def _passes(self, p: int) -> Iterator[Item]:
        """The records emitted from pass p on, without end."""
        while True:
            self.pass_starts[p] = self._emitted
            count = 0
            for item in self._pass(p):
                count += 1
                yield item
            if count:
                self._empty.clear()
            else:
                self._no_records(p)
            p += 1

    def _pass(self, p: int) -> Iterator[Item]:
        shards = self.order.stream_shards(self.stream, p)
        items = (item for shard in shards for item in self.read(shard))
        size = self.buffer_size
        if size <= 1:
            yield from items
            return
        rng = seeding.rng(self.order.seed, SHUFFLE_BUFFER, p, self.order.host_index,
                          self.stream)
        buffer: list[Item] = []
        slots: list[int] = []
        for item in items:
            if len(buffer) < size:
                buffer.append(item)
                continue
            if not slots:
                slots = rng.integers(0, size, 256).tolist()[::-1]
            i = slots.pop()
            out, buffer[i] = buffer[i], item
            yield out
        for i in rng.permutation(len(buffer)).tolist():
            yield buffer[i]

    def _no_records(self, p: int) -> None:
        """Refuses a stream that can never emit a record again: when the empty passes
        in a row have read every shard it may read, all of them are empty."""
        self._empty.update(self.order.stream_shards(self.stream, p))
        reachable = self.order.reachable(self.stream)
        if not self._empty >= reachable:
            return
        shown = ", ".join(self.names[s] for s in sorted(reachable)[:5]) + (
            ", ..." if len(reachable) > 5 else "")
        if len(reachable) == self.order.num_shards:
            raise ValueError(f"Every shard is empty ({len(reachable)} shards: {shown}): the "
                             "stream holds no record to make a batch of.")
        raise ValueError(
            f"Every shard of virtual stream {self.stream} (of host {self.order.host_index})"
            f" is empty ({shown}): with shuffle=False stream j reads the host's shards "
            "[j::num_streams] in every pass, so it would never make a batch. Remove the "
            f"empty shards, or pass a smaller num_streams (now {self.order.num_streams}).")



@dataclasses.dataclass(frozen=True)
class StreamSlice(BatchSlice):
    """Batch `number` of a stream: a `BatchSlice` whose `indices` number its records
    0..n-1 in the batch, `positions` their places in the stream (b * batch_size + k, they
    key each record's draws), and `records` the raw records themselves ((shard, record
    number, raw) each), which the stream's source (`sources._stream_records`) parses,
    decodes and labels."""

    records: tuple[Item, ...] = ()


class StreamOrder:
    """The batches of a stream: batch b (b = `offset` + the index asked for) is the
    (b // num_streams)-th batch of virtual stream b % num_streams (`slice`). It stands
    where `EpochOrder` stands for a random-access generator, under the same feeding
    (`pipeline.feeding`): a stream has one endless epoch (0), `offset` is the batch
    `gen[0]` is (a restored state moves it), and worker processes get a copy of it
    (its streams' known pass starts with it) and move it to each batch's offset and
    seed (`move_to`).

    Args:
        shards: the `ShardOrder` (seed, shuffle, hosts, streams).
        read: shard number -> its records, (shard, record number, raw) each.
        batch_size: records per batch.
        buffer_size: records of each stream's shuffle buffer (0: none).
        names: the shards' names (in errors).
    """

    epoch = 0  # a stream is one endless epoch
    batch_shuffle = False

    def __init__(self, shards: ShardOrder, read: Callable[[int], Iterator[Item]],
                 batch_size: int, buffer_size: int, names: Sequence[str]) -> None:
        self.shard_order = shards
        self.read, self.batch_size, self.buffer_size = read, batch_size, buffer_size
        self.names = names
        self.offset = 0
        self.streams = self._new_streams()

    def _new_streams(self) -> list[VirtualStream]:
        return [VirtualStream(self.shard_order, j, self.read, self.batch_size,
                              self.buffer_size, self.names)
                for j in range(self.shard_order.num_streams)]

    @property
    def seed(self) -> int:
        return self.shard_order.seed

    @property
    def num_streams(self) -> int:
        return self.shard_order.num_streams

    def records(self, index: int) -> list[Item]:
        """The raw records of batch `offset + index`, read from its stream."""
        b = self.offset + int(index)
        return self.streams[b % self.num_streams].batch(b // self.num_streams)

    def slice(self, index: int, foresee: int = 0) -> StreamSlice:
        """Batch `offset + index` as a `StreamSlice` (`foresee` is not used: a stream
        is read in order, never fetched ahead by sample)."""
        b = self.offset + int(index)
        records = tuple(self.records(index))
        start = b * self.batch_size
        return StreamSlice(b, np.arange(len(records)),
                           np.arange(start, start + len(records)), None, None, self.seed,
                           0, None, records)

    def move_to(self, epoch: int, offset: int, seed: int, batch_shuffle: bool = False,
                ) -> None:
        """Serve batches from `offset` with `seed` (a worker process, before each
        batch): a new seed reads the shards anew."""
        if seed != self.seed:
            order = self.shard_order
            self.shard_order = ShardOrder(order.num_shards, seed, order.shuffle,
                                          order.num_hosts, order.host_index,
                                          order.requested_streams)
            self.streams = self._new_streams()
        self.offset = offset

    def at_epoch(self, epoch: int) -> StreamOrder:
        """A view at this position, reading through the same streams (their locks keep
        the readers apart); its offset is its own."""
        return copy.copy(self)

    def copy(self) -> StreamOrder:
        """A copy (for worker processes, which pickle it: each stream then starts from
        the latest pass start it knows)."""
        return copy.copy(self)

    def next_epoch(self) -> None:
        """Nothing: a stream's batches go on across Keras's epochs."""

    # ----------------------------------------------------------------- state
    def get_state(self, batches_done: int, identity: Mapping[str, Any]) -> dict[str, Any]:
        """The seed, the next batch (`offset + batches_done`) and, for each stream,
        (pass, start) of the pass its next batch lies in, with `identity` (what
        identifies the stream)."""
        batch = self.offset + batches_done
        streams = [list(stream.pass_at(len(range(j, batch, self.num_streams))
                                       * self.batch_size))
                   for j, stream in enumerate(self.streams)]
        return {"seed": self.seed, "batch": batch, **identity, "streams": streams}

    def set_state(self, state: Mapping[str, Any], identity: Mapping[str, Any]) -> None:
        """Moves to `get_state`'s dict; refuses (changing nothing) a state of another
        stream (`identity` differs) or one get_state could not have written."""
        if not isinstance(state, Mapping):
            raise TypeError("`state` must be a dict from get_state(). Received: "
                            f"state of type {type(state).__name__}.")
        missing = [k for k in ("seed", "batch", "streams", *identity) if k not in state]
        if missing:
            raise ValueError(f"The state lacks {', '.join(map(repr, missing))}: it is not "
                             "a StreamGenerator's get_state().")
        changed = [f"{k}={state[k]!r} (this generator: {v!r})"
                   for k, v in identity.items() if state[k] != v]
        if changed:
            raise ValueError("The state belongs to another stream: it was saved with "
                             + ", ".join(changed) + ".")
        seed = _checks.non_negative_int("state['seed']", state["seed"])
        batch = _checks.non_negative_int("state['batch']", state["batch"])
        streams = state["streams"]
        if not (isinstance(streams, Sequence) and len(streams) == self.num_streams and all(
                isinstance(s, Sequence) and len(s) == 2 and all(
                    isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in s)
                and (s[0] > 0 or s[1] == 0) for s in streams)):
            raise ValueError(f"state['streams'] must hold one [pass, start] pair of "
                             f"non-negative integers per stream ({self.num_streams}). "
                             f"Received: {streams!r}.")
        for j, (_, start) in enumerate(streams):
            if start > len(range(j, batch, self.num_streams)) * self.batch_size:
                raise ValueError(f"state['streams'][{j}] starts its pass at record {start}, "
                                 f"after the record where batch {batch} needs stream {j}: "
                                 "it is not a state get_state() wrote.")
        self.move_to(0, batch, seed)
        for stream, (pass_, start) in zip(self.streams, streams):
            stream.move_to(pass_, start)
