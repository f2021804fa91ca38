"""Caches of decoded, resized uint8 samples: in memory, or in a memory-mapped file.

A cache holds what the loader produced before augmentation, so cached epochs still
augment. Rows are filled as batches load them; a row is marked filled only after its
pixels are written.
"""

import hashlib
import json
import os
import warnings

import numpy as np


def cache_key(file_paths, shape, color_mode, interpolation):
    """Identifies the cached content: file list, file sizes and times, output shape."""
    digest = hashlib.sha256()
    digest.update(json.dumps([list(shape), color_mode, interpolation]).encode())
    for path in file_paths:
        stat = os.stat(path)
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


class MemoryCache:
    """Decoded samples in RAM. Shared by worker threads; each worker process has its own."""

    def __init__(self, num_samples, sample_shape):
        self.num_samples, self.sample_shape = num_samples, tuple(sample_shape)
        self._data = None
        self._filled = None

    def _arrays(self):
        if self._data is None:
            self._data = np.empty((self.num_samples,) + self.sample_shape, dtype=np.uint8)
            self._filled = np.zeros(self.num_samples, dtype=bool)
        return self._data, self._filled

    def get(self, index):
        data, filled = self._arrays()
        return data[index] if filled[index] else None

    def put(self, index, sample):
        data, filled = self._arrays()
        data[index] = sample
        filled[index] = True

    @property
    def num_filled(self):
        return 0 if self._filled is None else int(self._filled.sum())

    def __getstate__(self):  # worker processes start empty rather than copy gigabytes
        return {"num_samples": self.num_samples, "sample_shape": self.sample_shape,
                "_data": None, "_filled": None}


class FileCache(MemoryCache):
    """Decoded samples in a memory-mapped file (`path`) with a `path.json` description.

    Reused by later runs and shared by worker processes when the key (file list, sizes,
    modification times, image size, colour mode) matches; rebuilt otherwise.
    """

    def __init__(self, path, num_samples, sample_shape, key):
        super().__init__(num_samples, sample_shape)
        self.path, self.key = os.fspath(path), key
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"`cache` must be a file path in an existing folder. "
                                    f"Received: cache={self.path!r} ({folder} not found).")
        meta_path = self.path + ".json"
        meta = None
        if os.path.exists(meta_path):
            try:
                with open(meta_path) as f:
                    meta = json.load(f)
            except (OSError, ValueError):
                meta = None
        expected_size = num_samples * (int(np.prod(self.sample_shape)) + 1)
        if (meta is None or meta.get("key") != key or not os.path.exists(self.path)
                or os.path.getsize(self.path) != expected_size):
            if meta is not None:
                warnings.warn(f"The cache {self.path} was made for other files or settings; "
                              "rebuilding it.", stacklevel=4)
            with open(self.path, "wb") as f:
                f.truncate(expected_size)  # sparse zeros: nothing filled yet
            with open(meta_path, "w") as f:
                json.dump({"key": key, "num_samples": num_samples,
                           "sample_shape": list(self.sample_shape)}, f)

    def _arrays(self):
        if self._data is None:
            n = self.num_samples
            self._filled = np.memmap(self.path, dtype=np.uint8, mode="r+", shape=(n,))
            self._data = np.memmap(self.path, dtype=np.uint8, mode="r+", offset=n,
                                   shape=(n,) + self.sample_shape)
        return self._data, self._filled

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_data"] = state["_filled"] = None
        return state
