"""Whole passes of a loader over its files, outside batches: `validate` (every file and
mask decoded once, the bad ones listed) and `thumbnails` (small RGB images, SMOTE's
default feature space), each on the loader's decode pool, with progress."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from kerasgen.loading import images
from kerasgen._progress import progress
from kerasgen.loading.bad_files import BAD, bad_file


def validate(loader: Any) -> list[str]:
    """Decodes every file (and mask) of `loader` (an `ImageLoader`) once, in parallel,
    with progress; returns the bad paths: files that cannot be read or decoded, or are
    larger than `max_pixels` (a bad mask is listed by its own path)."""
    def check(index):
        try:
            loader.decoded(index, loader.image_size)
        except BAD:
            return loader.file_paths[index]
        if loader.mask_paths is not None:
            try:
                loader.load_mask(index)
            except BAD:
                return loader.mask_paths[index]
        return None

    results = loader.decode_pool.pool().map(check, range(len(loader.file_paths)))
    return [p for p in progress(results, "Validating images", len(loader.file_paths),
                                loader.verbose) if p is not None]


def thumbnails(loader: Any, indices: npt.ArrayLike, table: dict[int, np.ndarray | None],
               size: tuple[int, int] = (8, 8)) -> None:
    """Decodes the samples of `indices` missing from `table` as small float32 RGB
    thumbnails (in parallel, with progress for slow cases) and adds them. A bad file is
    an error naming it, or with on_error="skip" a skipped file (warned of, in the
    loader's `skipped`) whose entry is None."""
    todo = [int(i) for i in np.unique(indices) if int(i) not in table]

    def thumb(i):
        try:
            # at the loader's own depth: a thumbnail of a 16-bit file at
            # bit_depth=16 is no 8-bit reduction to warn of
            return i, images.resize(loader.decoded(i, size, "rgb"), size, "rgb")
        except BAD as error:
            if loader.bad.raising:
                raise bad_file(error, loader.file_paths[i]) from None
            loader.bad.record(loader.file_paths[i], error)
            return i, None

    for i, image in progress(loader.decode_pool.pool().map(thumb, todo), "Making thumbnails",
                             len(todo), loader.verbose):
        table[i] = None if image is None else image.astype(np.float32)
