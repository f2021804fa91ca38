"""Which cache a loader keeps its decoded samples in, from `cache=`: none, every sample
in memory, as many as the budget holds ("auto"), a file reused by later runs (keyed by
the files, the pixels' shape and how they were made), shared memory for worker
processes. The caches themselves are `loading.cache`'s."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from kerasgen import _checks
from kerasgen.loading import images
from kerasgen.loading import cache as cache_mod

WORDS = ("none", "memory", "auto")


def choose(spec: Any, file_paths: Sequence[str], shape: tuple[int, int, int], *,
           color_mode: str, interpolation: str, aspect: str | None, decoder: str,
           version: Any = None, processes: int | None = None) -> cache_mod.MemoryCache | None:
    """The cache `spec` asks for, of `file_paths`' samples, each `shape` bytes
    (height, width, channels * bytes per pixel); a memory cache is in shared memory
    when `processes` (worker processes) share it. `version`: the store's, part of a
    file cache's key."""
    if isinstance(spec, str) and spec.strip().lower() in WORDS:
        word = spec.strip().lower()  # "None", "Memory ": the options, not file names
        spec = None if word == "none" else word
    if isinstance(spec, str) and not spec.strip():
        _checks.fail("cache", "'auto', None, 'memory' or a file path", spec)
    if spec is None:
        return None
    cache: cache_mod.MemoryCache
    if spec == "memory":
        cache = cache_mod.MemoryCache(len(file_paths), shape)
    elif spec == "auto":  # as many samples as fit in the budget, in this process
        row = int(np.prod(shape))
        cache = cache_mod.MemoryCache(len(file_paths), shape,
                                      capacity=cache_mod.auto_budget() // row)
    elif isinstance(spec, (str, os.PathLike)):
        how = f"{images.resize_key(interpolation, aspect)} pixels{images.PIXEL_RULES}"
        if decoder != "opencv":  # another decoder: other pixels, another cache
            how = f"{how} {decoder}"
        key = cache_mod.cache_key(file_paths, shape, color_mode, how, version)
        return cache_mod.FileCache(spec, len(file_paths), shape, key)
    else:
        _checks.fail("cache", "'auto', None, 'memory' or a file path", spec, TypeError)
    if processes is not None:
        return cache_mod.SharedMemoryCache(cache.num_samples, cache.sample_shape,
                                           cache.capacity)
    return cache
