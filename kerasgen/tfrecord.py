"""TFRecordGenerator: tf.train.Example records with random access through an index.

A thin builder over `kerasgen.formats`: the files (`Shards`: paths, lists, glob patterns,
URLs; remote and compressed files materialised once as local files), the TFRecord
framing, CRC32C and index (`formats.tfrecord`), a feature's values (`formats.example`).
What ArrayRecordGenerator (arrayrecord.py) shares with it lives here: `Records`, the
tf.train.Example records of a *container* parsed by `feature_spec` and made a source.
A container knows only how many records there are and the bytes of record k:
`TFRecordFiles` (offsets of an index, CRC32C-checked), `ArrayRecordFiles`
(ArrayRecord's own random access).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from kerasgen import _budget, _checks, _redact
from kerasgen._progress import progress
from kerasgen.loading import images
from kerasgen.builders.common import worker_processes
from kerasgen._typing import (Cache, ColorMode, Decoder, ImageSize, Interpolation, LabelMode,
                              OnError, StrPath)
from kerasgen.base import Generator
from kerasgen.formats import example as example_mod
from kerasgen.formats.example import (A_LIST, FLOAT32_EXACT, KINDS, LISTS,  # noqa: F401
                                      SUGGEST, FeatureKind)
from kerasgen.formats.base import SampleVersions
from kerasgen.formats.names import expand  # noqa: F401  (the names this module had)
from kerasgen.formats.shards import Shards
from kerasgen.formats.tfrecord import (COMPRESSION_TYPES, PIP,  # noqa: F401
                                       CompressionType, Container, Framing, TFRecordFiles,
                                       check_compression, compression_of, decompress,
                                       google_crc32c, header_length, import_example,
                                       index_records, is_tfrecord, masked_crc)
from kerasgen.loader import DECODERS, ImageLoader  # noqa: F401  (DECODERS: its old name here)
from kerasgen.loading.options import ImageOptions
from kerasgen.storage import remote as _remote
from kerasgen.sources._arrays import ArraySource
from kerasgen.sources._image import ImageSource
from kerasgen.storage.remote_cache import RemoteCache



class Records:
    """The tf.train.Example records of a container (TFRecord offsets, ArrayRecord's
    random access: see `Container`), and their features by `feature_spec`.

    Args:
        container: the records' bytes, by number.
        feature_spec: {feature key: kind} (see TFRecordGenerator).
        example: imports and returns the Example class (again after unpickling).
        verbose: progress bars of the labels' scan.
    """

    def __init__(self, container: Container, feature_spec: Mapping[str, FeatureKind] | None,
                 example: Callable[[], Any] = import_example, verbose: int = 1) -> None:
        self.container = container
        self.feature_spec = example_mod.check_spec(feature_spec)
        spec = self.feature_spec
        self.image_key = next((k for k, v in spec.items() if v == "image"), None)
        self.label_key = next((k for k, v in spec.items() if v == "label"), None)
        self.numeric_keys = [k for k, v in spec.items() if v in ("float", "int")]
        self._import = example
        self._example = example()
        if not len(container):
            raise ValueError(f"No records in {', '.join(self.paths)}.")
        self.labels: list[Any] | None = None
        self.numeric: np.ndarray | None = None
        if self.label_key is not None or self.numeric_keys:
            self.labels, self.numeric = self._scan(verbose)
        else:  # images only: the first record's kind is checked now, each one when read
            self._read(self._record(0), self.image_key, 0)

    @property
    def paths(self) -> list[str]:
        """The files, as users gave them (globs expanded)."""
        return self.container.shards.names

    @property
    def index(self) -> Any:
        return getattr(self.container, "index", None)

    def source(self, options: ImageOptions, class_names: Sequence[str] | None,
               processes: int | None = None) -> ImageSource | ArraySource:
        """The records as a source: of "image" features, decoded by an ImageLoader of
        `options` (its cache, on_error, decode threads, max_pixels, decoder), or of
        numeric ones, in memory. `processes`: the worker processes sharing its cache."""
        if self.image_key is None:  # the image options apply to "image" features only
            return ArraySource(self.numeric, self.labels, class_names=class_names,
                               describe=self.describe)
        loader = ImageLoader([self.describe(i) for i in range(len(self.container))],
                             options, read=self.image_bytes, processes=processes,
                             store=SampleVersions(self))
        return _RecordImages(loader, self.labels, class_names=class_names,
                             rescale=options.rescale, describe=self.describe)

    # what a decoded-image file cache keys records by (formats.base.SampleVersions)
    def __len__(self) -> int:
        return len(self.container)

    @property
    def shards(self) -> Shards:
        return self.container.shards

    def version_at(self, k: int) -> tuple[int, int]:
        return self.container.version_at(k)

    def _scan(self, verbose: int) -> tuple[list[Any] | None, np.ndarray | None]:
        """Labels (and numeric features) of every record, read once."""
        labels: list[Any] = []
        numeric: list[np.ndarray] = []
        for k in progress(range(len(self.container)), "Reading labels", len(self.container),
                          verbose):
            example = self._record(k)
            if self.image_key is not None:  # the kind only: images are decoded later
                self._read(example, self.image_key, k)
            if self.label_key is not None:
                labels.append(self._read(example, self.label_key, k))
            if self.numeric_keys:
                numeric.append(self._numeric_row(example, k, numeric[0] if numeric else None))
        return (labels if self.label_key is not None else None,
                np.stack(numeric) if numeric else None)

    def _numeric_row(self, example: Any, k: int, first: np.ndarray | None) -> np.ndarray:
        row = np.concatenate([self._read(example, key, k)
                              for key in self.numeric_keys]).astype("float32")
        if first is not None and len(row) != len(first):
            sizes = {key: len(self._read(example, key, k)) for key in self.numeric_keys}
            raise ValueError(
                f"Numeric features must have the same length in every record: "
                f"{self.describe(0)} has {len(first)} values, "
                f"{self.describe(k)} has {len(row)} ({sizes}).")
        return row

    def _read(self, example: Any, key: str | None, k: int) -> Any:
        assert key is not None
        return example_mod.value(self._feature(example, key, k), self.feature_spec[key], key,
                      lambda: self.describe(k))

    def _feature(self, example: Any, key: str, k: int) -> Any:
        features = example.features.feature
        if key not in features:
            where = self.describe(k)
            raise ValueError(f"{where[0].upper()}{where[1:]} has no feature {key!r}. Its "
                             f"features: {sorted(features)}.")
        return features[key]

    def _record(self, k: int) -> Any:
        """Record `k` parsed (its bytes checked by the container)."""
        data = self.container.data(k)
        try:
            example = self._example.FromString(data)
        except Exception as error:
            # protobuf comes with TensorFlow (and has no type hints)
            decode_error = importlib.import_module("google.protobuf.message").DecodeError
            if not isinstance(error, decode_error):
                raise
            raise ValueError(self._not_an_example(
                k, len(data), f"it does not parse as one: {error}")) from error
        if data and not example.HasField("features"):  # only fields Example lacks
            raise ValueError(self._not_an_example(k, len(data),
                                                  "it parses, but holds no `features`"))
        return example

    def _not_an_example(self, k: int, size: int, why: str) -> str:
        where = self.describe(k)
        return (f"{where[0].upper()}{where[1:]} is not a tf.train.Example ({why}; "
                f"{size} bytes). {self.container.generator} reads files of serialized "
                f"tf.train.Example records (writer.write(example.SerializeToString())); "
                f"rewrite the file so, or leave it out of `files`.")

    def describe(self, index: int) -> str:
        return self.container.where(index)

    def image_bytes(self, index: int) -> np.ndarray:
        """The encoded image of record `index`."""
        data = self._read(self._record(index), self.image_key, index)
        return np.frombuffer(data, dtype=np.uint8)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_example", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._example = self._import()


class _RecordImages(ImageSource):
    """The images of TFRecord records: SMOTE searches `features=` only, as before
    records had thumbnails (decoding every record's image to find neighbours)."""

    @property
    def features(self) -> None:  # type: ignore[override]
        return None


class ExampleGenerator(Generator):
    """What TFRecordGenerator and ArrayRecordGenerator share: tf.train.Example records
    of a container (see `Records`), their feature spec, labels and image options."""

    prefetch_auto = 2

    def _setup(self, open_container: Callable[[_remote.Store], Container],
               feature_spec: Any, *, options: ImageOptions,
               label_mode: LabelMode | Literal["auto"] | None,
               class_names: Sequence[str] | None, verbose: int,
               storage_options: Mapping[str, Any] | None,
               remote_cache: StrPath | RemoteCache | None, example: Callable[[], Any],
               common: dict[str, Any]) -> None:
        """Checks the arguments and the dependencies (`example()` imports the Example
        class), opens the container (`open_container(store)`: the files listed, fetched
        and indexed) and starts the Generator; "image" features are decoded as
        `options` (one `ImageOptions`, checked when made) say."""
        known = inspect.signature(Generator.__init__).parameters
        unknown = {k: v for k, v in common.items() if k not in known}
        if unknown:  # Generator.__init__'s TypeError, before any file is fetched
            _checks.unknown_arguments(self, unknown)
        spec = example_mod.check_spec(feature_spec)  # before any file is read
        example()
        store = _remote.Store(storage_options, _remote.check_cache(remote_cache))
        self.records = Records(open_container(store), spec, example, verbose)
        if label_mode == "auto":
            label_mode = "int" if self.records.label_key is not None else None
        processes = worker_processes(common)
        self._image_options = options  # of "image" features (their source holds none else)
        super().__init__(source=self.records.source(options, class_names, processes),
                         label_mode=label_mode, **common)

    @property
    def image_options(self) -> ImageOptions:
        """The image options of "image" features, checked once (frozen): the keywords
        the generator was given, `rescale` as `gen.rescale` is now."""
        return self._image_options.with_rescale(self.rescale)

    # what users read, kept on the generator (the records and the source hold them)
    @property
    def paths(self) -> list[str]:
        """The files, as given (glob patterns expanded; URLs, not their local copies)."""
        return self.records.paths

    @property
    def local_paths(self) -> list[str]:
        """The local file read for each of `paths`: the file itself, or its copy (a
        remote or compressed file's, in the cache)."""
        return list(self.records.container.shards.paths)

    @property
    def feature_spec(self) -> dict[str, FeatureKind]:
        return self.records.feature_spec

    @property
    def image_key(self) -> str | None:
        return self.records.image_key

    @property
    def label_key(self) -> str | None:
        return self.records.label_key

    @property
    def numeric_keys(self) -> list[str]:
        return self.records.numeric_keys

    @property
    def loader(self) -> ImageLoader | None:
        """The ImageLoader of "image" features (None for numeric ones)."""
        return getattr(self.source, "loader", None)

    @property
    def skipped(self) -> list[str]:
        """Every record skipped so far (on_error="skip": its image could not be
        decoded), as errors name it; a URL's password and query values masked."""
        return [] if self.loader is None else _redact.redact_all(self.loader.skipped)

    @property
    def image_size(self) -> tuple[int, int] | None:
        """(height, width) of "image" features (None for numeric ones)."""
        return None if self.loader is None else self.loader.image_size

    @property
    def color_mode(self) -> ColorMode | None:
        return None if self.loader is None else self.loader.color_mode

    @property
    def interpolation(self) -> Interpolation | None:
        return None if self.loader is None else self.loader.interpolation


class TFRecordGenerator(ExampleGenerator):
    """tf.train.Example records from TFRecord files, with random access: an index of
    record offsets is built once (with a progress bar), so shuffling, samplers and
    workers work as for the other generators. Needs TensorFlow (for the Example format)
    and google-crc32c: every record's length and data are checked against their stored
    CRC32C, as tf.data does, and a mismatch is an error naming the file, the record and
    its byte offset. Images are decoded by the same `ImageLoader` as image files: a batch
    on a thread pool, the next batches ahead of the training loop.

    Remote files (URLs) and compressed files are read from local copies made once, when
    the generator is made: a remote file is downloaded (and checked) into `remote_cache`,
    a compressed one decompressed into it, streamed; worker processes read the same
    copies. Batch b of epoch e is then the same as from the local, uncompressed files.

    Args:
        files: a TFRecord file, a glob pattern ("data/train-*.tfrecord", each pattern's
            matches sorted; one matching nothing is a FileNotFoundError naming it), or a
            list of them; local paths or URLs (s3://, gs://, https://, any protocol
            fsspec reads: the [remote] extra).
        feature_spec: {feature key: kind}, kinds "image" (one encoded image, bytes_list),
            "label" (one class id, int64_list, or one class name, bytes_list), "float"
            (float_list) / "int" (int64_list, up to 2**24 in magnitude): numeric
            features, concatenated in key order when there are several. One "image"
            key, or numeric keys, make x. A feature whose list is not the one its kind
            reads is an error naming the feature, both kinds and the record; nothing is
            cast. (Its old name `features=` still works, with a DeprecationWarning;
            `features=` holding an array is SMOTE's feature space, as on every
            generator.)
        compression_type: None or "" (default: uncompressed), "GZIP" or "ZLIB", as
            tf.data.TFRecordDataset takes it, for every file. A compressed file is
            decompressed once into a local copy (kept in `remote_cache`, keyed by the
            file and its version), which is indexed. A compressed file read without
            it is an error naming the compression_type to pass; a corrupt or truncated
            stream is an error naming the file.
        storage_options: options of fsspec's filesystem for URLs (credentials,
            `client_kwargs={"endpoint_url": ...}`, ...).
        remote_cache: a folder (or `kg.RemoteCache(folder, max_bytes=...)`) keeping the
            local copies of remote and compressed files between runs, checked and shared
            by processes; None (default): a temporary folder of this process. A copy
            removed by another process's size bound is made again when next opened.
        image_size: for "image" features, as for ImageFolderGenerator (so are
            `color_mode`, `interpolation` and `rescale`).
        decoder: "opencv" (default) or "nvimgcodec", for "image" features: as for
            ImageFolderGenerator (JPEG records decoded by nvImageCodec, the GPU's where
            CUDA is present).
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
        max_record_bytes: the most bytes a record may declare (default 268_435_456,
            256 MiB; None: no limit), checked in each record's header before it is
            read, as `max_pixels` guards decoding, and while a compressed file is
            decompressed: its records' headers are checked as they come out, so a
            stream that is corrupt, or inflates to gigabytes, is refused within a
            megabyte, before it is written out. Above it, a ValueError names the file,
            the record and its byte offset.
        **common: see kg.Generator.
    """

    def __init__(self, files: StrPath | Iterable[StrPath],
                 feature_spec: Mapping[str, FeatureKind] | None = None, *,
                 compression_type: CompressionType | None = None,
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
        if isinstance(common.get("features"), Mapping):  # the old name of feature_spec
            if feature_spec is not None:
                raise TypeError("TFRecordGenerator got two feature specs: `feature_spec` and "
                                "a dict `features`. Pass the {feature key: kind} dict as "
                                "`feature_spec` only; `features=` is SMOTE's feature space "
                                "(an array, one row per record).")
            _redact.warn("TFRecordGenerator(features={key: kind}) is deprecated: the spec "
                         "is now `feature_spec=` (or the second positional argument); "
                         "`features=` is SMOTE's feature space, as on every generator.",
                         DeprecationWarning, stacklevel=2)
            feature_spec = common.pop("features")
        compression = check_compression(compression_type)
        self.compression_type = compression

        def open_container(store: _remote.Store) -> TFRecordFiles:
            return TFRecordFiles(Shards(files, "TFRecord file", store, compression,
                                        verbose, limit), verbose)

        self._setup(open_container, feature_spec, options=options, label_mode=label_mode,
                    class_names=class_names, verbose=verbose,
                    storage_options=storage_options, remote_cache=remote_cache,
                    example=import_example, common=common)

    @property
    def index(self) -> list[tuple[int, int, int, int]]:
        """(file number, data offset, length, record number in the file) per record (the
        offsets of the decompressed copy for a compressed file)."""
        return self.records.container.index  # type: ignore[attr-defined]

    @property
    def features(self) -> dict[str, FeatureKind]:
        """Deprecated: the {feature key: kind} dict is `feature_spec`."""
        _redact.warn("TFRecordGenerator.features is deprecated: use `feature_spec`.",
                     DeprecationWarning, stacklevel=2)
        return self.feature_spec


