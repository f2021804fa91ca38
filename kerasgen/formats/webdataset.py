"""WebDataset shards (tar files whose samples are members grouped by key): the indexed
read (`TarSamples`: every sample's image member by offset, its label read once) and the
streamed one (`WebDatasetRecords`), both by the tar rules of `formats.tar` and the label
rule of `formats.labels`, so a shard means the same samples and labels to both."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

import numpy as np

from kerasgen import _budget, _checks, _redact
from kerasgen._progress import progress
from kerasgen.formats import labels
from kerasgen.formats.base import OpenFiles, ShardReader, first_of, open_shard, read_at
from kerasgen.formats.tar import Sample, fields_of, list_samples, tar_samples
from kerasgen.storage import remote as _remote

WHAT = "WebDataset shard"
INDEX_THREADS = 8  # shards indexed at once
# image extensions suggested when a sample has no member of `image_key`
IMAGE_FIELDS = ("jpg", "jpeg", "png", "webp", "bmp", "gif", "tif", "tiff", "ppm", "pgm",
                "jp2", "jpe", "jfif")


def member_label(f: IO[bytes], sample: Sample, field: str, shard: str,
                 limit: int | None = _budget.MAX_RECORD_BYTES) -> int | str:
    """The label in member `field` of `sample` (`formats.labels.field_label`), once its
    size is checked against `limit` (max_record_bytes)."""
    offset, size, member = sample.fields[field]
    where = f"Member {member} of {shard} (sample {sample.key!r})"
    if limit is not None and size > limit:
        raise _budget.too_large(f"{where}, the label at byte {offset},", size, limit)
    labels.check_field(field, f"{member} of {shard}")
    return labels.field_label(read_at(f, offset, size), field, where)


class TarSamples:
    """The samples of WebDataset shards (local files: `shards.paths`), with the offset
    and size of each one's image member and, read once, its label.

    Args:
        shards: the shard files (`formats.shards.Shards`: local copies of remote ones).
        image_key: the image field, or alternatives separated by ";" (the first one a
            sample holds is read), as webdataset's `to_tuple("jpg;png")`.
        label_key: the label field (alternatives as for `image_key`), or None: no labels.
        verbose: progress bars of the index.
        max_record_bytes: the most bytes an image or label member may have (None: no
            limit); a larger one is a ValueError naming the shard and the member when
            the shards are indexed.
    """

    def __init__(self, shards: Any, image_key: str, label_key: str | None,
                 verbose: int = 1,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES) -> None:
        self.shards = shards
        self.max_record_bytes = max_record_bytes
        self.image_key, self.label_key = image_key, label_key
        self._image_fields = fields_of(image_key, "image_key")
        self._label_fields = None if label_key is None else fields_of(label_key, "label_key")
        count = len(shards)
        with ThreadPoolExecutor(min(INDEX_THREADS, count)) as pool:
            found = list(progress(pool.map(self._index_shard, range(count)),
                                  "Indexing WebDataset shards", count, verbose))
        parts = [part for part, _ in found]
        for number, part in enumerate(parts):
            if not part[0]:
                _redact.warn(f"{shards.names[number]} holds no sample: no member of it "
                             "is a field of a key (key.jpg, key.cls, ...).", stacklevel=3)
        self.keys: list[str] = [key for keys, _, _ in parts for key in keys]
        if not self.keys:
            raise ValueError(f"No samples in {', '.join(shards.names)}: no member of these "
                             "shards is a field of a key (key.jpg, key.cls, ...).")
        self.shard = np.concatenate([np.full(len(keys), number, np.int32)
                                     for number, (keys, _, _) in enumerate(parts)])
        self.offsets = np.concatenate([np.asarray(o, np.int64) for _, o, _ in parts])
        self.sizes = np.concatenate([np.asarray(s, np.int64) for _, _, s in parts])
        found_labels = [v for _, part in found if part is not None for v in part]
        self.labels: Any = None
        if label_key is not None:
            ints = all(isinstance(v, int) for v in found_labels)
            self.labels = np.asarray(found_labels, np.int64) if ints else found_labels
        self.files = OpenFiles(self.open_file)

    def __len__(self) -> int:
        return len(self.keys)

    def open_file(self, number: int) -> IO[bytes]:
        return self.shards.opened(number, lambda path: _checks.open_regular(
            path, f"the {WHAT}"))

    def _index_shard(self, number: int) -> tuple[tuple[list[str], list[int], list[int]],
                                                       list[Any] | None]:
        """((keys, image offsets, image sizes), labels or None) of shard `number`."""
        name = self.shards.shown(number)
        keys, offsets, sizes = [], [], []
        found: list[Any] | None = None if self._label_fields is None else []
        limit = self.max_record_bytes
        bound = sys.maxsize if limit is None else limit
        with self.open_file(number) as f:
            for sample in list_samples(f, name, self.max_record_bytes):
                offset, size, member = sample.fields[self._first(
                    sample, self._image_fields, "image_key", name)]
                if size > bound:
                    raise _budget.too_large(f"Member {member} of {name} (sample "
                                            f"{sample.key!r}, the image at byte {offset})",
                                            size, bound)
                keys.append(sample.key)
                offsets.append(offset)
                sizes.append(size)
                if found is not None and self._label_fields is not None:
                    field = self._first(sample, self._label_fields, "label_key", name)
                    found.append(member_label(f, sample, field, name, limit))
        return (keys, offsets, sizes), found

    def _first(self, sample: Sample, fields: list[str], argument: str, shard: str) -> str:
        """The first of `fields` that `sample` holds, or a ValueError naming it."""
        found = next((field for field in fields if field in sample.fields), None)
        if found is not None:
            return found
        given = self.image_key if argument == "image_key" else self.label_key
        if argument == "image_key":
            guesses = [f for f in sample.fields if f.rsplit(".", 1)[-1] in IMAGE_FIELDS]
            hint = (f"Pass image_key={';'.join(guesses)!r} (its image's field)" if guesses
                    else "Pass image_key= naming the field of its image")
        else:
            guesses = [f for f in sample.fields if labels.kind_of(f) in labels.LABEL_FIELDS]
            hint = (f"Pass label_key={';'.join(guesses)!r}" if guesses
                    else "Pass label_key= naming the field of its label")
            hint += ", or label_mode=None to read the images without labels"
        raise ValueError(
            f"Sample {sample.key!r} of {shard} has no member for {argument}={given!r}: its "
            f"members are {sample.members()}. {hint}.")

    def describe(self, index: int) -> str:
        """Sample `index` as errors and `gen.skipped` name it: "shard#key"."""
        return f"{self.shards.names[int(self.shard[index])]}#{self.keys[index]}"

    def read(self, index: int) -> np.ndarray:
        """The bytes of sample `index`'s image member."""
        number = int(self.shard[index])
        offset, size = int(self.offsets[index]), int(self.sizes[index])
        data = read_at(self.files.get(number), offset, size)
        if len(data) != size:
            raise ValueError(f"{self.shards.shown(number)} is truncated: the image of "
                             f"sample {self.keys[index]!r} ends early (the shard changed "
                             "after it was indexed).")
        return np.frombuffer(data, np.uint8)

    def version_at(self, index: int) -> tuple[int, int]:
        """(shard number, byte offset of its image) of sample `index`: what keys it in a
        decoded-image file cache (`formats.base.SampleVersions`)."""
        return int(self.shard[index]), int(self.offsets[index])

    def version(self, number: int) -> str:
        """What identifies the content of shard `number` (a decoded-image file cache is
        rebuilt when it changes)."""
        return self.shards.version(number)


class WebDatasetRecords(ShardReader):
    """records="webdataset": samples of tar shards, streamed, as webdataset groups them;
    x is the first field of `image_key` a sample holds, the label the first of
    `label_key`, read by `formats.labels.field_label` (a label field that holds no
    label webdataset decodes is refused when the reader is made)."""

    kind = "webdataset"

    def __init__(self, names: Any, image_key: str | None, label_key: str | None,
                 labeled: bool = True, store: _remote.Store | None = None,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES) -> None:
        super().__init__(names, image_key, label_key, labeled, store, max_record_bytes)
        if labeled:
            for field in self.label_keys:
                labels.check_field(field, f"label_key={';'.join(self.label_keys)!r}")

    def _keys(self, key: Any, argument: str) -> list[str]:
        return fields_of(key, argument)  # lowercased, as members' fields are

    def records(self, name: str) -> Any:
        fields = self.image_keys + (self.label_keys if self.labeled else [])
        with open_shard(name, self.store) as f:
            yield from tar_samples(f, self.max_record_bytes, fields)

    def describe(self, raw: Any, where: str) -> str:
        return f"sample {raw['__key__']!r} ({where})"

    def parse(self, raw: Any, where: str) -> tuple[Any, Any]:
        x = first_of(raw, self.image_keys, "image_key", where)[1]
        if not self.labeled:
            return x, None
        field, data = first_of(raw, self.label_keys, "label_key", where)
        return x, labels.field_label(data, field, f"The {field!r} label of {where}",
                                     "must be")
