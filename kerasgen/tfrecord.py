"""TFRecordGenerator: tf.train.Example records with random access through an index."""

from __future__ import annotations

import importlib
import os
import struct
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

try:
    import google_crc32c
except ImportError:  # named with the pip command in TFRecordGenerator(...)
    google_crc32c = None  # type: ignore[assignment]

from kerasgen import _checks
from kerasgen._batching import EXACT_INTEGERS
from kerasgen._image_source import ImageSource, check_rescale
from kerasgen.base import Generator
from kerasgen.loader import DECODERS, ImageLoader
from kerasgen.sources import ArraySource
from kerasgen._progress import progress
from kerasgen._typing import (ColorMode, Decoder, ImageSize, Interpolation, LabelMode,
                              StrPath)

KINDS = ("image", "label", "float", "int")
FeatureKind = Literal["image", "label", "float", "int"]  # KINDS
# The tf.train.Feature lists each kind reads; anything else is an error, never a cast.
LISTS = {"image": ("bytes_list",), "label": ("int64_list", "bytes_list"),
         "float": ("float_list",), "int": ("int64_list",)}
A_LIST = {"bytes_list": "a bytes_list", "int64_list": "an int64_list",
          "float_list": "a float_list"}
SUGGEST = {"bytes_list": "'image' (encoded image bytes) or 'label' (class names)",
           "int64_list": "'int' (or 'label' for one class id)", "float_list": "'float'"}
PIP = 'pip install "kerasgen3[tfrecord]"'
FLOAT32_EXACT = EXACT_INTEGERS["float32"]  # larger integers would be rounded in batches


def _import_example():
    try:
        from tensorflow.core.example.example_pb2 import Example
    except ImportError as error:
        raise ImportError(f"TFRecordGenerator needs TensorFlow: {PIP} (or pip install "
                          "tensorflow-cpu)") from error
    if google_crc32c is None:
        raise ImportError(f"TFRecordGenerator checks each record's CRC32C with the "
                          f"google-crc32c package: {PIP} (or pip install google-crc32c)")
    return Example


def masked_crc(data: bytes) -> int:
    """The masked CRC32C that TFRecord files store after a record's length and data."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def index_records(paths: Sequence[StrPath], verbose: int = 1,
                  ) -> list[tuple[int, int, int, int]]:
    """[(file number, data offset, length, record number in the file)] of every record,
    reading only the 12-byte headers; the CRC of each length is checked here, before the
    length is trusted."""
    index = []
    for number, path in enumerate(progress(paths, "Indexing TFRecord files", len(paths),
                                           verbose)):
        with _checks.open_regular(path, "the TFRecord file") as f:
            size = os.fstat(f.fileno()).st_size
            offset = record = 0
            while offset < size:
                header = f.read(12)
                if len(header) < 12:
                    raise ValueError(f"{path} is truncated: an incomplete header of record "
                                     f"{record} at byte {offset}.")
                (length,), (stored,) = struct.unpack("<Q", header[:8]), \
                    struct.unpack("<I", header[8:])
                if masked_crc(header[:8]) != stored:
                    if record == 0:
                        _refuse_compressed(path, header)
                    raise ValueError(
                        f"{path} is corrupt: the length of record {record} (at byte "
                        f"{offset}) fails its CRC32C check. Rewrite the file, or restore "
                        f"an intact copy.")
                data_offset = offset + 12
                offset = data_offset + length + 4
                if offset > size:
                    raise ValueError(f"{path} is truncated: record {record} at byte "
                                     f"{data_offset - 12} claims {length} bytes.")
                index.append((number, data_offset, length, record))
                record += 1
                f.seek(offset)
    return index


def _refuse_compressed(path: StrPath, head: bytes) -> None:
    """Raises a ValueError saying so when `head`, the first bytes of `path`, start a
    GZIP or ZLIB stream (TFRecordWriter's compressed forms), not a record."""
    kind = None
    if head[:2] == b"\x1f\x8b":
        kind = "GZIP"
    elif head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        kind = "ZLIB"
    if kind is not None:
        raise ValueError(
            f"{path} is compressed with {kind} (compression_type={kind!r} when written); "
            "kerasgen reads uncompressed TFRecord files, whose records it reads by offset. "
            f"Decompress it (for GZIP: gunzip), or rewrite it without compression.")


def _value(feature, kind, key, describe):
    """The value(s) of `feature` read as `kind`, or a ValueError naming the feature, the
    kind asked for and the list the record holds (`describe()` says which record)."""
    which = feature.WhichOneof("kind")
    values = getattr(feature, which).value if which else ()
    if which is not None and which not in LISTS[kind]:
        hint = (f"Declare it {SUGGEST[which]}." if kind != "label" else
                "A label is one class id (int64_list) or one class name (bytes_list).")
        raise ValueError(
            f"`feature_spec[{key!r}]` is {kind!r}, which reads {' or '.join(LISTS[kind])}, "
            f"but feature {key!r} of {describe()} is {A_LIST[which]}. {hint}")
    if kind in ("image", "label"):
        if len(values) != 1:
            raise ValueError(
                f"`feature_spec[{key!r}]` is {kind!r}, which takes one value per record, but "
                f"feature {key!r} of {describe()} holds {len(values)}.")
        value = values[0]
        return value.decode() if kind == "label" and isinstance(value, bytes) else value
    if kind == "float":
        return np.asarray(values, dtype="float32")
    ints = np.asarray(values, dtype="int64")
    inexact = (ints > FLOAT32_EXACT) | (ints < -FLOAT32_EXACT)
    if inexact.any():
        raise ValueError(
            f"Feature {key!r} of {describe()} holds {int(ints[inexact.argmax()])}: numeric "
            f"features are float32 in batches, which hold integers exactly only up to "
            f"2**24. Leave the feature out of `feature_spec`, or scale it.")
    return ints


class TFRecordGenerator(Generator):
    """tf.train.Example records from TFRecord files, with random access: an index of
    record offsets is built once (with a progress bar), so shuffling, samplers and
    workers work as for the other generators. Needs TensorFlow (for the Example format)
    and google-crc32c: every record's length and data are checked against their stored
    CRC32C, as tf.data does, and a mismatch is an error naming the file, the record and
    its byte offset. Images are decoded by the same `ImageLoader` as image files: a batch
    on a thread pool, the next batches ahead of the training loop.

    Args:
        files: a TFRecord file or a list of them (uncompressed).
        feature_spec: {feature key: kind}, kinds "image" (one encoded image, bytes_list),
            "label" (one class id, int64_list, or one class name, bytes_list), "float"
            (float_list) / "int" (int64_list, up to 2**24 in magnitude): numeric
            features, concatenated in key order when there are several. One "image"
            key, or numeric keys, make x. A feature whose list is not the one its kind
            reads is an error naming the feature, both kinds and the record; nothing is
            cast. (Its old name `features=` still works, with a DeprecationWarning;
            `features=` holding an array is SMOTE's feature space, as on every
            generator.)
        image_size, color_mode, interpolation, rescale: for "image" features.
        decoder: "opencv" (default) or "nvimgcodec", for "image" features: as for
            ImageFolderGenerator (JPEG records decoded by nvImageCodec, the GPU's where
            CUDA is present).
        label_mode: "int" (default, as Keras) when there is a "label" feature, else None.
        **common: see kg.Generator.
    """

    prefetch_auto = 2

    def __init__(self, files: StrPath | Iterable[StrPath],
                 feature_spec: Mapping[str, FeatureKind] | None = None, *,
                 image_size: ImageSize = (256, 256), color_mode: ColorMode = "rgb",
                 interpolation: Interpolation = "bilinear", rescale: float | None = None,
                 decoder: Decoder = "opencv",
                 label_mode: LabelMode | Literal["auto"] | None = "auto",
                 class_names: Sequence[str] | None = None, verbose: int = 1,
                 **common: Any) -> None:
        _checks.labels_come_from(self, common, "the feature of kind 'label' in "
                                 "`feature_spec`")
        if isinstance(common.get("features"), Mapping):  # the old name of feature_spec
            if feature_spec is not None:
                raise TypeError("TFRecordGenerator got two feature specs: `feature_spec` and "
                                "a dict `features`. Pass the {feature key: kind} dict as "
                                "`feature_spec` only; `features=` is SMOTE's feature space "
                                "(an array, one row per record).")
            warnings.warn("TFRecordGenerator(features={key: kind}) is deprecated: the spec "
                          "is now `feature_spec=` (or the second positional argument); "
                          "`features=` is SMOTE's feature space, as on every generator.",
                          DeprecationWarning, stacklevel=2)
            feature_spec = common.pop("features")
        _checks.one_of("decoder", decoder, DECODERS)  # numeric records never use it
        self.records = Records(files, feature_spec, verbose)
        if label_mode == "auto":
            label_mode = "int" if self.records.label_key is not None else None
        super().__init__(source=self.records.source(image_size, color_mode, interpolation,
                                                    rescale, class_names, verbose, decoder),
                         label_mode=label_mode, **common)

    # what users read, kept on the generator (the records and the source hold them)
    @property
    def paths(self) -> list[str]:
        """The TFRecord files."""
        return self.records.paths

    @property
    def feature_spec(self) -> dict[str, FeatureKind]:
        return self.records.feature_spec

    @property
    def index(self) -> list[tuple[int, int, int, int]]:
        """(file number, data offset, length, record number in the file) per record."""
        return self.records.index

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
    def image_size(self) -> tuple[int, int] | None:
        """(height, width) of "image" features (None for numeric ones)."""
        return None if self.loader is None else self.loader.image_size

    @property
    def color_mode(self) -> ColorMode | None:
        return None if self.loader is None else self.loader.color_mode

    @property
    def interpolation(self) -> Interpolation | None:
        return None if self.loader is None else self.loader.interpolation

    @property
    def features(self) -> dict[str, FeatureKind]:
        """Deprecated: the {feature key: kind} dict is `feature_spec`."""
        warnings.warn("TFRecordGenerator.features is deprecated: use `feature_spec`.",
                      DeprecationWarning, stacklevel=2)
        return self.feature_spec


class Records:
    """The records of TFRecord files read through an index of their offsets, each
    record's CRC32C checked when it is read, and their features by `feature_spec`."""

    def __init__(self, files: StrPath | Iterable[StrPath],
                 feature_spec: Mapping[str, FeatureKind] | None, verbose: int = 1) -> None:
        self.paths = [os.fspath(f) for f in ([files] if isinstance(files, (str, os.PathLike))
                                             else files)]
        if not self.paths:
            _checks.fail("files", "a TFRecord file or a non-empty list of them", files)
        for path in self.paths:
            if not os.path.exists(path):
                raise FileNotFoundError(f"TFRecord file not found: {path}")
        self.feature_spec = _check_spec(feature_spec)
        spec = self.feature_spec
        self.image_key = next((k for k, v in spec.items() if v == "image"), None)
        self.label_key = next((k for k, v in spec.items() if v == "label"), None)
        self.numeric_keys = [k for k, v in spec.items() if v in ("float", "int")]
        self._example = _import_example()
        self._local = threading.local()
        self.index = index_records(self.paths, verbose)
        if not self.index:
            raise ValueError(f"No records in {', '.join(self.paths)}.")
        self.labels: list[Any] | None = None
        self.numeric: np.ndarray | None = None
        if self.label_key is not None or self.numeric_keys:
            self.labels, self.numeric = self._scan(verbose)
        else:  # images only: the first record's kind is checked now, each one when read
            self._read(self._record(0), self.image_key, 0)

    def source(self, image_size: ImageSize, color_mode: ColorMode,
               interpolation: Interpolation, rescale: float | None,
               class_names: Sequence[str] | None, verbose: int,
               decoder: Decoder = "opencv") -> ImageSource | ArraySource:
        """The records as a source: of "image" features, decoded by an ImageLoader, or of
        numeric ones, in memory."""
        if self.image_key is None:  # the image options apply to "image" features only
            return ArraySource(self.numeric, self.labels, class_names=class_names,
                               describe=self.describe)
        loader = ImageLoader([self.describe(i) for i in range(len(self.index))],
                             image_size, color_mode, interpolation, verbose=verbose,
                             read=self.image_bytes, decoder=decoder)
        return _RecordImages(loader, self.labels, class_names=class_names,
                             rescale=check_rescale(rescale), describe=self.describe)

    def _scan(self, verbose: int) -> tuple[list[Any] | None, np.ndarray | None]:
        """Labels (and numeric features) of every record, read once."""
        labels: list[Any] = []
        numeric: list[np.ndarray] = []
        for k in progress(range(len(self.index)), "Reading labels", len(self.index),
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
        return _value(self._feature(example, key, k), self.feature_spec[key], key,
                      lambda: self.describe(k))

    def _feature(self, example: Any, key: str, k: int) -> Any:
        features = example.features.feature
        if key not in features:
            where = self.describe(k)
            raise ValueError(f"{where[0].upper()}{where[1:]} has no feature {key!r}. Its "
                             f"features: {sorted(features)}.")
        return features[key]

    def _record(self, k: int) -> Any:
        """Record `k` parsed, once the CRC32C of its data matched the one stored."""
        number, offset, length, record = self.index[k]
        handles = getattr(self._local, "files", None)
        if handles is None:
            handles = self._local.files = {}  # one open file per thread and TFRecord
        f = handles.get(number)
        if f is None:
            f = handles[number] = _checks.open_regular(self.paths[number], "the TFRecord file")
        f.seek(offset)
        data, footer = f.read(length), f.read(4)
        if len(footer) < 4:
            raise ValueError(f"{self.paths[number]} is truncated: "
                             f"{self.describe(k)} ends early (the file changed after "
                             f"it was indexed).")
        if masked_crc(data) != struct.unpack("<I", footer)[0]:
            raise ValueError(
                f"{self.paths[number]} is corrupt: the data of record {record} (byte "
                f"{offset - 12}) fails its CRC32C check ({length} bytes). Rewrite the file, "
                f"or restore an intact copy.")
        try:
            example = self._example.FromString(data)
        except Exception as error:
            # protobuf comes with TensorFlow (and has no type hints)
            decode_error = importlib.import_module("google.protobuf.message").DecodeError
            if not isinstance(error, decode_error):
                raise
            raise ValueError(self._not_an_example(k, f"it does not parse as one: {error}")) \
                from error
        if data and not example.HasField("features"):  # only fields Example lacks
            raise ValueError(self._not_an_example(k, "it parses, but holds no `features`"))
        return example

    def _not_an_example(self, k: int, why: str) -> str:
        where = self.describe(k)
        return (f"{where[0].upper()}{where[1:]} is not a tf.train.Example ({why}; "
                f"{self.index[k][2]} bytes). TFRecordGenerator reads files of serialized "
                f"tf.train.Example records (writer.write(example.SerializeToString())); "
                f"rewrite the file so, or leave it out of `files`.")

    def describe(self, index: int) -> str:
        number, offset, _, record = self.index[index]
        return f"record {record} (byte {offset - 12}) of {self.paths[number]}"

    def image_bytes(self, index: int) -> np.ndarray:
        """The encoded image of record `index`."""
        data = self._read(self._record(index), self.image_key, index)
        return np.frombuffer(data, dtype=np.uint8)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_local", None)
        state.pop("_example", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()
        self._example = _import_example()


class _RecordImages(ImageSource):
    """The images of TFRecord records: SMOTE searches `features=` only, as before
    records had thumbnails (decoding every record's image to find neighbours)."""

    @property
    def features(self) -> None:  # type: ignore[override]
        return None


def _check_spec(feature_spec: Any) -> dict[str, FeatureKind]:
    """`feature_spec` checked: {key: kind}, one "image" key or numeric keys for x, at
    most one "label" key."""
    if not isinstance(feature_spec, Mapping) or not feature_spec:
        _checks.fail("feature_spec", "a dict {feature key: kind}", feature_spec, TypeError)
    for key, kind in feature_spec.items():
        _checks.one_of(f"feature_spec[{key!r}]", kind, KINDS)
    spec = dict(feature_spec)
    kinds = list(spec.values())
    if kinds.count("image") > 1 or kinds.count("label") > 1:
        raise ValueError(f"`feature_spec` may name one 'image' and one 'label' key. "
                         f"Received: feature_spec={spec}.")
    if ("image" not in kinds) == (not any(k in ("float", "int") for k in kinds)):
        raise ValueError("`feature_spec` must name either one 'image' key or numeric "
                         "('float' / 'int') keys for x. Received: "
                         f"feature_spec={spec}.")
    return spec
