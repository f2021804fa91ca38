"""What every format's reader shares: the errors a shard's bytes raise, reads by offset,
a per-thread bounded cache of open shard files, and `ShardReader`, the streamed read of
one shard's records (each format's reader is a subclass, in its own module)."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import IO, Any

from kerasgen import _budget, _checks
from kerasgen.storage import remote as _remote

# (image_key, label_key) by default, by reader kind
KEYS = {"webdataset": ("jpg;png;jpeg", "cls"), "tfrecord": ("image", "label"),
        "arrayrecord": ("image", "label"), "callable": ("image", "label"),
        "parquet": ("image", "label"), "arrow": ("image", "label")}
OPEN_PER_THREAD = 16  # shard files a thread keeps open (least recently used closed)

Item = tuple[int, int, Any]  # (shard number, record number in the shard, raw record)
ReadShard = Callable[[str], Iterable[Any]]  # records=fn: fn(shard) -> its records


class Broken(ValueError):
    """A shard that cannot be read on; the message is the reason alone (the reader
    names the shard and the record)."""


class TooLarge(ValueError):
    """A sample or record above max_record_bytes (`_budget.too_large`'s error in the
    streamed readers); the reader names the shard and the record."""


_PREAD = getattr(os, "pread", None)


def read_at(f: IO[bytes], offset: int, size: int) -> bytes:
    """`size` bytes of the open file `f` from `offset` (fewer at its end)."""
    if _PREAD is not None:
        return _PREAD(f.fileno(), size, offset)
    f.seek(offset)
    return f.read(size)


class OpenFiles:
    """Shard files kept open per thread: `get(number)` is `open_one(number)`, opened
    once by each thread that asks, at most `most` per thread (the least recently used
    closed). Picklable: a copy opens its own."""

    def __init__(self, open_one: Callable[[int], Any], most: int = OPEN_PER_THREAD) -> None:
        self.open_one, self.most = open_one, most
        self._local = threading.local()

    def get(self, number: int) -> Any:
        handles = getattr(self._local, "files", None)
        if handles is None:
            handles = self._local.files = OrderedDict()  # least recent first
        handle = handles.get(number)
        if handle is not None:
            handles.move_to_end(number)
            return handle
        if len(handles) >= self.most:
            old = handles.popitem(last=False)[1]
            close = getattr(old, "close", None)
            if close is not None:
                close()
        handle = handles[number] = self.open_one(number)
        return handle

    def __getstate__(self) -> dict[str, Any]:
        return {"open_one": self.open_one, "most": self.most}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()


def open_shard(name: str, store: _remote.Store) -> IO[bytes]:
    """The shard `name` open for reading: a URL through `store` (ranges read under its
    retry budget and breaker), a local regular file (a FIFO or a device is refused)
    otherwise."""
    try:
        if _remote.is_url(name):
            return store.open_stream(name, "shard")
        return _checks.open_regular(_remote.local(name), "shard")
    except FileNotFoundError:
        raise FileNotFoundError(f"Shard not found: {name}") from None


def alternatives(key: Any, argument: str) -> list[str]:
    """The alternatives of `key` ("image;jpg" -> ["image", "jpg"]), case kept."""
    if not isinstance(key, str) or not key.strip() or any(
            not part.strip() or part != part.strip() for part in key.split(";")):
        _checks.fail(argument, "a key, or alternatives separated by ';' ('jpg;png')", key,
                     TypeError if not isinstance(key, str) else ValueError)
    return key.split(";")


def first_of(record: Mapping[str, Any], keys: list[str], argument: str,
             where: str) -> tuple[str, Any]:
    """(key, value) of the first of `keys` that `record` holds, or a ValueError naming
    `where` and what the record holds."""
    found = next((k for k in keys if k in record), None)
    if found is None:
        held = ", ".join(repr(k) for k in record if k != "__key__")
        raise ValueError(f"{where[0].upper() + where[1:]} has no {';'.join(keys)!r} "
                         f"({argument}): it holds {held}. Pass {argument}= naming one of "
                         "them" + (", or label_mode=None to read no labels"
                                   if argument == "label_key" else "") + ".")
    return found, record[found]


class ShardReader:
    """How the records of one shard are read as a stream (`__call__`: (shard number,
    record number, raw record) in order, errors naming the shard and the record) and
    what a raw record holds (`parse`: (x, label)). One subclass per format:
    `formats.webdataset.WebDatasetRecords`, `formats.tfrecord.TFRecordRecords`, and
    `CallableRecords` (records=fn). Picklable."""

    kind = "callable"

    def __init__(self, names: Sequence[str], image_key: str | None, label_key: str | None,
                 labeled: bool = True, store: _remote.Store | None = None,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES) -> None:
        self.names = list(names)
        self.labeled = labeled  # whether `parse` must find a label
        self.store = store if store is not None else _remote.Store()  # reads URLs
        self.max_record_bytes = max_record_bytes  # what one record may take
        image_key = KEYS[self.kind][0] if image_key is None else image_key
        label_key = KEYS[self.kind][1] if label_key is None else label_key
        self.image_keys = self._keys(image_key, "image_key")
        self.label_keys = self._keys(label_key, "label_key")

    def _keys(self, key: Any, argument: str) -> list[str]:
        return alternatives(key, argument)

    def records(self, name: str) -> Iterable[Any]:
        raise NotImplementedError

    def parse(self, raw: Any, where: str) -> tuple[Any, Any]:
        """(x, label) of a raw record (label None when `labeled` is False); `where`
        (from `describe`) names it in errors."""
        raise NotImplementedError

    def describe(self, raw: Any, where: str) -> str:
        """The raw record at `where` ("record k of shard s") as errors name it."""
        return where

    def __call__(self, shard: int) -> Iterator[Item]:
        name, number = self.names[shard], 0
        try:
            for raw in self.records(name):
                yield shard, number, raw
                number += 1
        except FileNotFoundError as error:
            if str(error) == f"Shard not found: {name}":
                raise
            raise FileNotFoundError(f"Cannot read record {number} of shard {name}: "
                                    f"{error}") from error
        except Broken as error:
            raise ValueError(f"Cannot read record {number} of shard {name}: {error}. "
                             "Restore an intact copy, or write the shard again.") from None
        except TooLarge as error:
            raise ValueError(f"Cannot read record {number} of shard {name}: "
                             f"{error}") from None
        except (ConnectionError, PermissionError):
            raise  # the store's, naming the shard: a transfer, never a bad shard
        except (OSError, ValueError, EOFError) as error:
            raise ValueError(f"Cannot read record {number} of shard {name}: "
                             f"{type(error).__name__}: {error}") from error


class CallableRecords(ShardReader):
    """records=fn: `fn(shard)` gives the records of a shard, each (x, label), a dict
    (x at `image_key`, the label at `label_key`) or x alone."""

    def __init__(self, fn: Callable[[str], Iterable[Any]], names: Sequence[str],
                 image_key: str | None, label_key: str | None, labeled: bool = True) -> None:
        super().__init__(names, image_key, label_key, labeled)
        self.fn = fn

    def records(self, name: str) -> Iterable[Any]:
        return self.fn(name)

    def parse(self, raw: Any, where: str) -> tuple[Any, Any]:
        if isinstance(raw, tuple) and len(raw) == 2:
            return raw
        if isinstance(raw, Mapping):
            x = first_of(raw, self.image_keys, "image_key", where)[1]
            labeled = self.labeled
            return x, (first_of(raw, self.label_keys, "label_key", where)[1] if labeled
                       else None)
        return raw, None


class SampleVersions(_remote.Store):
    """The store of a loader whose images come from records (`read=`), not files: it
    reads no URL; a decoded-image file cache keys each sample (as `samples.describe(k)`
    names it) by `samples.version_at(k)`: (shard number, where the sample lies in it),
    the shard's version (`samples.shards.version(number)`, asked once) and that place."""

    def __init__(self, samples: Any) -> None:
        super().__init__()
        self.samples = samples
        self._found: tuple[dict[str, int], dict[int, str]] | None = None

    def version(self, path: str) -> str | None:
        if self._found is None:
            self._found = ({self.samples.describe(k): k for k in range(len(self.samples))},
                           {})
        numbers, shards = self._found
        index = numbers.get(path)
        if index is None:
            return None
        number, at = self.samples.version_at(index)
        if number not in shards:
            shards[number] = self.samples.shards.version(number)
        return f"{shards[number]}@{at}"

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_found"] = None
        return state
