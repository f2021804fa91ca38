"""The names programs written for `ImageDataGenerator`'s iterators read.

`ImageDataGenerator(...).flow_from_directory(...)`, `.flow_from_dataframe(...)` and
`.flow(x, y)` return a `keras.preprocessing.image.Iterator`; programs read its `n`,
`samples`, `class_indices`, `classes`, `filenames`, call `reset()`, and take batches with
`next(it)`. A kerasgen generator answers each with the same meaning (docs/migrating.md);
these are aliases and a batch cursor, the generator itself is unchanged.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from kerasgen.storage import remote as _remote

_CURSOR = threading.Lock()  # guards every generator's `next` position (held briefly)


class IteratorNames:
    """Mixed into kerasgen's generators: ImageDataGenerator's iterator names."""

    @property
    def n(self) -> int:
        """The number of samples (`num_samples`), as the iterator's `n`."""
        return int(self.num_samples)  # type: ignore[attr-defined]

    @property
    def samples(self) -> int:
        """The number of samples (`num_samples`), as `flow_from_directory`'s `samples`."""
        return int(self.num_samples)  # type: ignore[attr-defined]

    @property
    def class_indices(self) -> dict[str, int]:
        """{class name: class id}; empty without classes (as the iterator's)."""
        names = self.class_names  # type: ignore[attr-defined]
        return {} if names is None else {name: i for i, name in enumerate(names)}

    @property
    def classes(self) -> np.ndarray | None:
        """The class id of each sample, int32, in sample order (not the epoch's order:
        with shuffle=False, the order `model.predict(gen)` answers in); None where
        samples have no single class."""
        ids = self.labels  # type: ignore[attr-defined]
        return None if ids is None else np.asarray(ids, dtype="int32")

    @property
    def filenames(self) -> list[str]:
        """Each sample's file, relative to `directory` when the generator has one (as
        the iterator's), else as `file_paths` has it."""
        paths = getattr(self, "file_paths", None)
        if paths is None:
            raise AttributeError(
                f"{type(self).__name__} reads no files: it has no `filenames` "
                "(ImageDataGenerator's `flow(x, y)` has none either).")
        directory = getattr(self, "directory", None)
        if not directory:
            return list(paths)
        store = getattr(getattr(self, "loader", None), "store", None)
        if store is not None and _remote.is_url(str(directory)):
            return [store.relative(p, directory) for p in paths]
        return [os.path.relpath(p, directory) for p in paths]

    def reset(self) -> None:
        """Makes `next(gen)` start again at the epoch's first batch (the iterator's
        `reset()`). Indexing (`gen[i]`, `model.fit`, `model.predict`) has no position:
        it always starts at batch 0."""
        with _CURSOR:
            self.__dict__["_next_batch"] = 0

    def __next__(self) -> Any:
        """The next batch, as `next(iterator)` gives it: batches 0, 1, ... of this
        epoch, then, after the last one, `on_epoch_end()` (a new order when shuffling)
        and the next epoch's batch 0; never StopIteration, as the iterator's."""
        with _CURSOR:
            index = self.__dict__.get("_next_batch", 0)
            if index >= len(self):  # type: ignore[arg-type]
                self.on_epoch_end()  # type: ignore[attr-defined]
                index = 0
            self.__dict__["_next_batch"] = index + 1
        return self[index]  # type: ignore[index]
