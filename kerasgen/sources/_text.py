"""Samples that are text files: `TextSource`, the source of
`kg.text_dataset_from_directory`.

Sample i is the text of file i, read as Keras's `text_dataset_from_directory` reads it:

- `decode=False`: the file's bytes as they are (`bytes`), cut to `max_length` bytes, as
  Keras's format="tf" reads them (`tf.io.read_file`, then `tf.strings.substr(text, 0,
  max_length)`, whose unit is the byte); a tf.data dataset carries them as tf.string.
- `decode=True`: the file as Python's `open(path, "r", encoding="utf-8").read()` reads it
  (`str`: UTF-8, universal newlines), cut to `max_length` characters, as Keras's
  format="grain" reads it.

A batch of texts is a 1-D numpy array of dtype object holding one `bytes` or `str` per
sample (a fixed-width 'S' or 'U' array would drop trailing NUL bytes, and take the
longest text's width for every row). Local files are read inside their folder
(`storage.paths`: a file replaced by a symbolic link leading out is refused), URLs
(s3://, gs://, https://...) through a `storage.remote.Store`, fetched ahead a batch at a
time.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from typing import Any

import numpy as np

from kerasgen import _checks
from kerasgen.loading import images
from kerasgen.sources._batch_request import BatchRequest, load_each
from kerasgen.storage import remote as _remote

__all__ = ["TextSource"]

# UTF-8 takes at most 4 bytes a character: 4 * max_length + 8 bytes hold max_length
# characters, after universal newlines, past a character or "\r\n" cut at the end
_BYTES_PER_CHAR, _SLACK = 4, 8


class TextSource:
    """Samples that are text files (see the module's docstring).

    Args:
        paths: one file path (or URL) per sample.
        labels: one label per sample (class ids of `class_names`, or real values), or
            None.
        class_names: the classes in class-id order, or None.
        max_length: the most bytes (`decode=False`) or characters (`decode=True`) of a
            sample; None: the whole file.
        decode: False: bytes, as Keras's format="tf"; True: UTF-8 `str`, as Keras's
            format="grain".
        root: None, or the `storage.paths.Root`s every local file must still lie in
            when it is opened (see `loading.images.read_file`).
        store: the `storage.remote.Store` that reads the paths that are URLs.
    """

    def __init__(self, paths: Sequence[str], labels: Any = None, *,
                 class_names: Sequence[str] | None = None, max_length: int | None = None,
                 decode: bool = False, root: Any = None,
                 store: _remote.Store | None = None) -> None:
        self.file_paths = list(paths)
        self.labels = labels
        self.class_names = None if class_names is None else list(class_names)
        self.max_length = (None if max_length is None
                           else _checks.positive_int("max_length", max_length))
        self.decode = bool(decode)
        self.root = root
        self.store = store
        self.remote = store is not None and _remote.any_url(self.file_paths)

    def __len__(self) -> int:
        return len(self.file_paths)

    def __repr__(self) -> str:
        return (f"TextSource({len(self)} files, max_length={self.max_length}, "
                f"decode={self.decode})")

    def describe(self, index: int) -> str:
        return f"text file {self.file_paths[index]}"

    def check(self, dtype: str | None) -> None:
        """Texts are strings: the batches keep them (dtype=None)."""
        if dtype is not None:
            _checks.fail("dtype", "None for texts (a batch of texts is an array of "
                         "strings, which no numeric dtype holds)", dtype,
                         hint="Turn texts into numbers in the model (TextVectorization) "
                         "or with batch_augment=kg.augment.map_batch(...)")

    def load(self, index: int) -> bytes | str:
        """The text of file `index`: bytes, or str with `decode`."""
        path = self.file_paths[int(index)]
        limit = self.max_length
        if limit is not None and self.decode:
            limit = limit * _BYTES_PER_CHAR + _SLACK
        data = self._read(path, limit)
        if not self.decode:
            return data if self.max_length is None else data[:self.max_length]
        whole = limit is None or len(data) < limit
        return decoded(data, whole, self.max_length, path)

    def _read(self, path: str, limit: int | None) -> bytes:
        if self.store is not None and _remote.is_url(path):
            data = self.store.read(path, "text file")
            return bytes(data[:limit] if limit is not None else data)
        return images.read_file(path, self.root, "text file", max_bytes=limit).tobytes()

    def load_batch(self, request: BatchRequest) -> tuple[np.ndarray, None]:
        """The texts of `request.indices`, one object array."""
        if request.partners is not None and (request.partners >= 0).any():
            raise ValueError("SMOTE blends samples, and texts cannot be blended. Use "
                             "RandomOverSampler or BalancedBatchSampler for texts.")
        if request.augment is not None:
            return load_each(request, self.load, self.describe, assemble=_texts,
                             finish=lambda x: x)
        if self.remote and self.store is not None:
            self.prefetch(request.indices)
        with request.stage("read"):
            return _texts([self.load(int(i)) for i in request.indices], request.indices), None

    # what a generator asks of a source whose samples are fetched from far away
    def prefetch(self, indices: np.ndarray) -> None:
        """Starts fetching the remote files of samples `indices`."""
        if self.remote and self.store is not None:
            urls = [self.file_paths[int(i)] for i in np.asarray(indices).ravel()]
            self.store.prefetch([u for u in urls if _remote.is_url(u)], "text file")

    def forget(self) -> None:
        if self.remote and self.store is not None:
            self.store.forget()


def _texts(samples: Sequence[Any], indices: np.ndarray) -> np.ndarray:
    """One object array holding `samples` (str or bytes) as they are."""
    batch = np.empty(len(samples), dtype=object)
    batch[:] = list(samples)
    return batch


def decoded(data: bytes, whole: bool, max_length: int | None, path: str) -> str:
    """`data` (the file's first bytes, or all of them when `whole`) as Python's text mode
    reads it: UTF-8 with universal newlines ("\\r\\n" and "\\r" become "\\n"), cut to
    `max_length` characters. A file that is not UTF-8 is a ValueError naming it."""
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=whole)
    except UnicodeDecodeError as error:
        raise ValueError(
            f"Cannot read text file {path} as UTF-8: {error}. Convert it to UTF-8, or "
            "read files as bytes with format='tf' (a tf.string holds any bytes)."
        ) from None
    if not whole and text.endswith("\r"):
        text = text[:-1]  # perhaps the first half of "\r\n": the cut drops it anyway
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if max_length is None else text[:max_length]
