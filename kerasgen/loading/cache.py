"""Caches of decoded, resized uint8 samples: in memory, or in a memory-mapped file.

A cache holds what the loader produced before augmentation, so cached epochs still
augment. Rows are filled as batches load them; a row is marked filled only after its
pixels are written (and, in a file, its checksum).
"""

from __future__ import annotations

import errno
import hashlib
import importlib
import json
import mmap
import os
import threading
import weakref
import zlib
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import Any, NoReturn

import numpy as np

from kerasgen import _atomic, _checks
from kerasgen.arrays import shm as _shm
from kerasgen import _redact
from kerasgen.storage.remote_cache import object_url


def _optional_module(name: str) -> ModuleType | None:
    """The module `name`, or None where that optional dependency is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# hardware CRC32C: about 6 us per 224x224x3 sample, zlib's CRC32 about 40 us; an optional
# dependency (kerasgen[tfrecord])
google_crc32c = _optional_module("google_crc32c")


def crc32c(index: int, row: np.ndarray) -> int:
    """The checksum of sample `index`'s row: CRC32C of the index (8 bytes) and the row."""
    assert google_crc32c is not None  # chosen as the checksum only where it is installed
    row = row.view()
    row.flags.writeable = False  # google_crc32c reads read-only buffers only
    return google_crc32c.extend(google_crc32c.value(index.to_bytes(8, "little")), row)


def crc32(index: int, row: np.ndarray) -> int:
    """As `crc32c`, with zlib's CRC32 (where google-crc32c's C code is not installed)."""
    # numpy's stubs give an array the buffer protocol only from Python 3.12
    return zlib.crc32(row, zlib.crc32(index.to_bytes(8, "little")))  # type: ignore[arg-type]


_checksum: Callable[[int, np.ndarray], int]
if google_crc32c is not None and google_crc32c.implementation == "c":
    CHECKSUM, _checksum = "crc32c", crc32c
else:
    CHECKSUM, _checksum = "crc32", crc32

FILE_FORMAT = 2  # 2: checksums after the flags (1: key, flags, samples)


def cache_key(file_paths: Iterable[str], shape: Sequence[int], color_mode: str,
              interpolation: str, version: Callable[[str], Any] | None = None) -> str:
    """Identifies the cached content: file list (a URL without its credentials or
    signature, so a re-signed URL keeps its cache), file sizes and times (or what
    `version(path)` says of a path, a remote object's ETag say), output shape, and the
    file's format (its layout and checksum)."""
    digest = hashlib.sha256()
    digest.update(json.dumps([FILE_FORMAT, CHECKSUM, list(shape), color_mode,
                              interpolation]).encode())
    for path in file_paths:
        mark = version(path) if version is not None else None
        if mark is None:
            stat = os.stat(path)
            mark = f"{stat.st_size}\0{stat.st_mtime_ns}"
        name = object_url(path) if "://" in path else path  # a re-signed URL: the same
        digest.update(f"{name}\0{mark}\n".encode())
    return digest.hexdigest()


KEY_BYTES = 64  # a file cache starts with its key, checked by every process opening it


def _is_key(text: str) -> bool:
    """Whether `text` (a file's first KEY_BYTES, stripped) is a cache key: a sha256 hex
    digest, which every kerasgen file cache (of any format) starts with."""
    return len(text) == KEY_BYTES and all(c in "0123456789abcdef" for c in text)


def auto_budget() -> int:
    """Bytes cache="auto" may keep in RAM: 1 GiB, or a tenth of the machine's memory when
    that is less."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 8 << 30
    return min(1 << 30, memory // 10)


class MemoryCache:
    """Decoded samples in RAM. Shared by worker threads; each worker process has its own.
    With `capacity`, only samples 0..capacity-1 are kept (the others load every time)."""

    def __init__(self, num_samples: int, sample_shape: Sequence[int],
                 capacity: int | None = None) -> None:
        self.num_samples, self.sample_shape = num_samples, tuple(sample_shape)
        self.capacity = num_samples if capacity is None else min(num_samples, capacity)
        self._data: np.ndarray | None = None
        self._filled: np.ndarray | None = None
        self._lock = threading.Lock()

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._data is None:
            with self._lock:
                if self._data is None:
                    self._filled = np.zeros(self.capacity, dtype=bool)
                    self._data = np.empty((self.capacity,) + self.sample_shape,
                                          dtype=np.uint8)
        assert self._data is not None and self._filled is not None  # made together above
        return self._data, self._filled

    def get(self, index: int) -> np.ndarray | None:
        if index >= self.capacity:
            return None
        data, filled = self._arrays()
        return data[index] if filled[index] else None

    def put(self, index: int, sample: np.ndarray) -> None:
        if index >= self.capacity:
            return
        data, filled = self._arrays()
        data[index] = sample
        filled[index] = True

    def __getstate__(self) -> dict[str, Any]:  # worker processes start empty, not a copy
        state = self.__dict__.copy()
        state.update(_data=None, _filled=None, _lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


class SharedMemoryCache(MemoryCache):
    """A MemoryCache in anonymous shared memory, filled and read by the training process
    and a generator's own worker processes alike (use_multiprocessing=True): the memory
    travels to them with the generator's pickle (see _shm.pass_fd). Pickled any
    other way, a copy starts empty, as a MemoryCache does."""

    def _layout(self) -> tuple[int, int]:
        flags = -(-self.capacity // 64) * 64  # samples start 64-byte aligned
        return flags, flags + self.capacity * int(np.prod(self.sample_shape))

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._data is None:
            with self._lock:
                if self._data is None:
                    self._map(_shm.shared_memory(
                        max(1, self._layout()[1]), "the decoded-image cache",
                        "cache=None, or a file path as `cache`"))
        assert self._data is not None and self._filled is not None  # made together above
        return self._data, self._filled

    def _map(self, fd: int) -> None:
        flags, size = self._layout()
        memory = np.frombuffer(mmap.mmap(fd, max(1, size)), np.uint8)
        self._fd = fd
        self._closer = weakref.finalize(self, os.close, fd)
        self._filled = memory[:self.capacity]
        self._data = memory[flags:size].reshape((self.capacity,) + self.sample_shape)

    def __getstate__(self) -> dict[str, Any]:
        token = None
        if _shm.passing():  # pickled for kerasgen's workers: the memory goes along
            self._arrays()
            token = _shm.pass_fd(self._fd)
        state = super().__getstate__()
        state.pop("_fd", None)
        state.pop("_closer", None)
        state["_token"] = token
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        token = state.pop("_token", None)
        super().__setstate__(state)
        fd = _shm.received_fd(token)
        if fd is not None:
            self._map(fd)


def _amount(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if size >= scale:
            return f"{size} bytes ({size / scale:.1f} {unit})"
    return f"{size} bytes"


class FileCache(MemoryCache):
    """Decoded samples in a memory-mapped file (`path`): the key, a filled flag per
    sample, a checksum per sample, then the samples (see `layout`).

    A filled row is served only when its checksum (CRC32C with google-crc32c installed,
    else zlib's CRC32, of the sample index and the row's bytes) matches: a row whose
    bytes or flag were changed on disk is a cache miss, decoded and written again, with
    one warning naming the file.

    Reused by later runs and shared by worker processes when the key (file list, sizes,
    modification times, image size, colour mode) matches; rebuilt otherwise, as a new
    file put in place atomically, so a process still reading the old one keeps reading
    it. A process that opens a file rebuilt for other data refuses it.

    The file's disk space is reserved when it is made (posix_fallocate): writing into a
    memory map beyond what the disk can hold kills the process with SIGBUS, so a disk
    too full for the cache is an OSError here instead. A file found shorter than its
    layout (truncated by another program) is refused when mapped and before every read
    or write; a truncation between that check and the access cannot be caught.
    """

    def __init__(self, path: str | os.PathLike[str], num_samples: int,
                 sample_shape: Sequence[int], key: str) -> None:
        super().__init__(num_samples, sample_shape)
        self.path, self.key = os.fspath(path), key
        _checks.output_file("cache", self.path)  # not a folder, FIFO or device; its folder
        self._sums_at, self._data_at, self.size = layout(num_samples, self.sample_shape)
        self._mapping: mmap.mmap | None = None
        self._sums: np.ndarray | None = None
        self._warned = False
        found = self._stored_key()
        if found and not _is_key(found):
            _checks.fail("cache", "a new path or a kerasgen cache file", self.path, hint=(
                "It is an existing file that is not a kerasgen cache (not one of your "
                "images, a CSV or a model file, say), which building a cache there would "
                "overwrite. Give the cache a path of its own"))
        if found == key and os.path.getsize(self.path) == self.size:
            return
        if found == key:
            _redact.warn(f"The cache {self.path} has {os.path.getsize(self.path)} bytes, "
                         f"not the {self.size} it was made with (truncated or changed by "
                         "another program); rebuilding it.", stacklevel=4)
        elif found:  # another kerasgen cache (an empty file is simply used)
            _redact.warn(f"The cache {self.path} was made for other files or settings; "
                         "rebuilding it. Give each generator its own cache file.",
                         stacklevel=4)
        with _atomic.replacing(self.path) as f:
            try:
                f.write(key.encode().ljust(KEY_BYTES, b" "))
                f.flush()
            except OSError as error:
                if error.errno in (errno.ENOSPC, errno.EDQUOT):
                    self._no_room(error)
                raise
            self._reserve(f.fileno())  # zeros: nothing filled yet

    def _reserve(self, fd: int) -> None:
        try:
            if not hasattr(os, "posix_fallocate"):
                raise OSError(errno.EOPNOTSUPP, "posix_fallocate is not available")
            os.posix_fallocate(fd, 0, self.size)
            return
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                self._no_room(error)
        # This file system cannot reserve space: check that it is free, at least.
        free = os.statvfs(fd)
        if free.f_bavail * free.f_frsize < self.size:
            self._no_room(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        os.ftruncate(fd, self.size)

    def _no_room(self, error: OSError) -> NoReturn:
        raise OSError(error.errno, (
            f"Cannot reserve {_amount(self.size)} for the image cache {self.path} "
            f"({error.strerror}). Free that much space on its "
            "disk, give `cache` a path on a disk with room, or use cache='auto' (RAM, up "
            "to a budget) or cache=None.")) from error

    def _stored_key(self) -> str | None:
        try:
            with _checks.open_regular(self.path, "the cache file") as f:
                return f.read(KEY_BYTES).decode(errors="replace").strip()
        except FileNotFoundError:
            return None
        except OSError as error:  # unreadable: not known to be a cache, so not replaced
            _checks.fail("cache", "a path kerasgen can read and write", self.path,
                         hint=str(error))

    def _check_size(self) -> None:
        assert self._mapping is not None  # mapped by `_arrays`, which every caller runs first
        found = self._mapping.size()  # the mapped file's size now (fstat), not the path's
        if found < self.size:
            raise RuntimeError(
                f"The cache file {self.path} was truncated to {found} bytes while in use "
                f"(its layout needs {self.size}); reading it would crash the process. "
                "Another program changed it: delete it and build the generator again.")

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._data is None:
            with self._lock:
                if self._data is None:
                    with open(self.path, "r+b") as f:
                        key = f.read(KEY_BYTES).decode(errors="replace").strip()
                        if key != self.key:
                            raise RuntimeError(
                                f"The cache file {self.path} was rebuilt for other files "
                                "or settings after this generator was built (another "
                                "generator uses the same path). Give each generator its "
                                "own cache file.")
                        found = os.fstat(f.fileno()).st_size
                        if found < self.size:
                            raise RuntimeError(
                                f"The cache file {self.path} has {found} bytes, not the "
                                f"{self.size} its layout needs: another program truncated "
                                "it. Delete it and build the generator again.")
                        self._mapping = mmap.mmap(f.fileno(), self.size)
                    memory = np.frombuffer(self._mapping, np.uint8)
                    n = self.num_samples
                    self._filled = memory[KEY_BYTES:KEY_BYTES + n]
                    self._sums = memory[self._sums_at:self._sums_at + 4 * n].view("<u4")
                    self._data = memory[self._data_at:self.size].reshape(
                        (n,) + self.sample_shape)
        assert self._data is not None and self._filled is not None  # made together above
        return self._data, self._filled

    def get(self, index: int) -> np.ndarray | None:
        data, filled = self._arrays()
        self._check_size()
        if not filled[index]:
            return None
        row = data[index]
        assert self._sums is not None  # set by `_arrays` with the rows
        if _checksum(int(index), row) == self._sums[index]:
            return row
        self._corrupt(index)
        return None  # a miss: the loader decodes the sample and puts it back

    def _corrupt(self, index: int) -> None:
        with self._lock:
            if self._warned:
                return
            self._warned = True
        _redact.warn(f"The cache file {self.path} holds a sample whose checksum does not "
                     f"match its bytes (sample {index}: changed on disk, or a flag set "
                     "by something other than kerasgen). Such samples are decoded again "
                     "and rewritten; if this repeats, delete the file (it is rebuilt) or "
                     "check the disk.", stacklevel=4)

    def put(self, index: int, sample: np.ndarray) -> None:
        data, filled = self._arrays()
        self._check_size()
        assert self._sums is not None  # set by `_arrays` with the rows
        filled[index] = False  # a reader meanwhile decodes for itself
        data[index] = sample
        self._sums[index] = _checksum(int(index), data[index])
        filled[index] = True

    def __getstate__(self) -> dict[str, Any]:  # a worker process maps the file itself
        state = super().__getstate__()
        state.update(_mapping=None, _sums=None)
        return state


def layout(num_samples: int, sample_shape: Sequence[int]) -> tuple[int, int, int]:
    """(checksums' offset, samples' offset, file size) of a cache file: the key
    (KEY_BYTES), a flag byte per sample, a little-endian uint32 checksum per sample
    (4-byte aligned), then the samples (64-byte aligned)."""
    sums = -(-(KEY_BYTES + num_samples) // 4) * 4
    data = -(-(sums + 4 * num_samples) // 64) * 64
    return sums, data, data + num_samples * int(np.prod(sample_shape))
