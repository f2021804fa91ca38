"""ArrayRecordGenerator: tf.train.Example records in ArrayRecord files (grain's format).

ArrayRecord files have random access of their own (`formats.arrayrecord`: an index of
chunks, each checked by its hash when read), so only the container differs from
TFRecordGenerator: the files (`Shards`: paths, globs, URLs read from local copies), the
parsing by `feature_spec`, the labels, the image decoding and the errors are
tfrecord.py's.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from kerasgen import _budget
from kerasgen import _checks
from kerasgen.loading import images
from kerasgen.loading.options import ImageOptions
from kerasgen._typing import (Cache, ColorMode, Decoder, ImageSize, Interpolation, LabelMode,
                              OnError, StrPath)
from kerasgen.formats.arrayrecord import (PIP, READER_OPTIONS,  # noqa: F401  (its names)
                                          ArrayRecordFiles, check_chunks, reader_class)
from kerasgen.formats.shards import Shards
from kerasgen.formats.tfrecord import import_example
from kerasgen.storage import remote as _remote
from kerasgen.storage.remote_cache import RemoteCache
from kerasgen.tfrecord import ExampleGenerator, FeatureKind

_example = functools.partial(import_example, "ArrayRecordGenerator", PIP, False)


class ArrayRecordGenerator(ExampleGenerator):
    """tf.train.Example records from ArrayRecord files (the format of google/grain),
    with ArrayRecord's random access: shuffling, samplers and workers work as for the
    other generators. The same `feature_spec`, labels, image decoding and errors as
    kg.TFRecordGenerator; only the file format differs. Needs array_record and
    TensorFlow (for the Example format): the [arrayrecord] extra. Records are checked
    by ArrayRecord's own chunk hashes: a mismatch is an error naming the file and the
    record.

    Remote files (URLs) are read from local copies downloaded once, when the generator
    is made, into `remote_cache`; worker processes read the same copies.

    Args:
        files: an ArrayRecord file, a glob pattern ("data/train-*.array_record", each
            pattern's matches sorted; one matching nothing is a FileNotFoundError naming
            it), or a list of them; local paths or URLs (s3://, gs://, https://, any
            protocol fsspec reads: the [remote] extra). Files written with
            group_size:1 (ArrayRecordWriter(path, "group_size:1")) read fastest; others
            get a warning.
        feature_spec: {feature key: kind}, kinds "image" (one encoded image, bytes_list),
            "label" (one class id, int64_list, or one class name, bytes_list), "float"
            (float_list) / "int" (int64_list, up to 2**24 in magnitude): numeric
            features, concatenated in key order when there are several. One "image"
            key, or numeric keys, make x. A feature whose list is not the one its kind
            reads is an error naming the feature, both kinds and the record; nothing is
            cast.
        storage_options: options of fsspec's filesystem for URLs (credentials,
            `client_kwargs={"endpoint_url": ...}`, ...).
        remote_cache: a folder (or `kg.RemoteCache(folder, max_bytes=...)`) keeping the
            local copies of remote files between runs, checked and shared by processes;
            None (default): a temporary folder of this process. A copy removed by
            another process's size bound is fetched again when next opened.
        image_size: for "image" features, as for ImageFolderGenerator (so are
            `color_mode`, `interpolation` and `rescale`).
        decoder: "opencv" (default) or "nvimgcodec", for "image" features.
        label_mode: "int" (default, as Keras) when there is a "label" feature, else None.
        cache: for "image" features, as for ImageFolderGenerator, except that it
            defaults to None (no cache; "memory", "auto" or a file path as there: a file
            cache keys each record by its file's version and its place in the file).
        on_error: as for ImageFolderGenerator: with "skip" a record whose image cannot
            be decoded is replaced by another record of its class, with a warning, and
            `gen.skipped` names it ("record 3 (byte 120) of x.tfrecord").
        decode_threads: for "image" features, as for ImageFolderGenerator (so are
            `max_pixels`, `bit_depth`, `crop_to_aspect_ratio` and `pad_to_aspect_ratio`;
            the image options make one `ImageOptions`).
        max_record_bytes: the most bytes a read may decode (default 268_435_456,
            256 MiB; None: no limit), as `max_pixels` guards decoding: each chunk's
            decoded size is read from its header when the generator is made, before
            ArrayRecordReader decodes any (a chunk is one record with group_size:1, or
            the group read whole for any of its records). Above it, a ValueError names
            the file, the records and the chunk's byte offset.
        **common: see kg.Generator.
    """

    def __init__(self, files: StrPath | Iterable[StrPath],
                 feature_spec: Mapping[str, FeatureKind] | None = None, *,
                 image_size: ImageSize = (256, 256), color_mode: ColorMode = "rgb",
                 interpolation: Interpolation = "bilinear", rescale: float | None = None,
                 decoder: Decoder = "opencv",
                 label_mode: LabelMode | Literal["auto"] | None = "auto",
                 class_names: Sequence[str] | None = None, verbose: int = 1,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES,
                 storage_options: Mapping[str, Any] | None = None,
                 remote_cache: StrPath | RemoteCache | None = None,
                 crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
                 cache: Cache = None, on_error: OnError = "raise",
                 decode_threads: int | None = None,
                 max_pixels: int | None = images.MAX_PIXELS, bit_depth: int | None = 8,
                 **common: Any) -> None:
        _checks.labels_come_from(self, common, "the feature of kind 'label' in "
                                 "`feature_spec`")
        limit = self.max_record_bytes = _budget.check_max_record_bytes(max_record_bytes)
        options = ImageOptions.of(locals()).for_dtype(common.get("dtype", "float32"))
        reader_class()  # before any file is fetched

        def open_container(store: _remote.Store) -> ArrayRecordFiles:
            return ArrayRecordFiles(Shards(files, "ArrayRecord file", store,
                                           verbose=verbose), verbose, limit)

        self._setup(open_container, feature_spec, options=options, label_mode=label_mode,
                    class_names=class_names, verbose=verbose,
                    storage_options=storage_options, remote_cache=remote_cache,
                    example=_example, common=common)

    @property
    def index(self) -> list[tuple[int, int]]:
        """(file number, record number in the file) per record."""
        return self.records.container.index  # type: ignore[attr-defined]
