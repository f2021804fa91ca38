"""TFRecordGenerator: tf.train.Example records with random access through an index."""

from __future__ import annotations

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
    google_crc32c = None

from kerasgen import _checks
from kerasgen import _images as images
from kerasgen.base import Generator
from kerasgen.loader import ImageLoader
from kerasgen._progress import progress
from kerasgen._typing import (BatchArrays, ColorMode, ImageSize, Interpolation, LabelMode,
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
FLOAT32_EXACT = 2 ** 24  # larger integers are rounded in float32 batches


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
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            offset = record = 0
            while offset < size:
                header = f.read(12)
                if len(header) < 12:
                    raise ValueError(f"{path} is truncated: an incomplete header of record "
                                     f"{record} at byte {offset}.")
                (length,), (stored,) = struct.unpack("<Q", header[:8]), \
                    struct.unpack("<I", header[8:])
                if masked_crc(header[:8]) != stored:
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
        label_mode: "int" (default, as Keras) when there is a "label" feature, else None.
        **common: see kg.Generator.
    """

    prefetch_auto = 2

    def __init__(self, files: StrPath | Iterable[StrPath],
                 feature_spec: Mapping[str, FeatureKind] | None = None, *,
                 image_size: ImageSize = (256, 256), color_mode: ColorMode = "rgb",
                 interpolation: Interpolation = "bilinear", rescale: float | None = None,
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
        self.paths = [os.fspath(f) for f in ([files] if isinstance(files, (str, os.PathLike))
                                             else files)]
        if not self.paths:
            _checks.fail("files", "a TFRecord file or a non-empty list of them", files)
        for path in self.paths:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"TFRecord file not found: {path}")
        if not isinstance(feature_spec, Mapping) or not feature_spec:
            _checks.fail("feature_spec", "a dict {feature key: kind}", feature_spec, TypeError)
        for key, kind in feature_spec.items():
            _checks.one_of(f"feature_spec[{key!r}]", kind, KINDS)
        self.feature_spec = dict(feature_spec)
        spec = self.feature_spec
        kinds = list(spec.values())
        self.image_key = next((k for k, v in spec.items() if v == "image"), None)
        self.label_key = next((k for k, v in spec.items() if v == "label"), None)
        self.numeric_keys = [k for k, v in spec.items() if v in ("float", "int")]
        if kinds.count("image") > 1 or kinds.count("label") > 1:
            raise ValueError(f"`feature_spec` may name one 'image' and one 'label' key. "
                             f"Received: feature_spec={spec}.")
        if (self.image_key is None) == (not self.numeric_keys):
            raise ValueError("`feature_spec` must name either one 'image' key or numeric "
                             "('float' / 'int') keys for x. Received: "
                             f"feature_spec={spec}.")
        self.image_size = _checks.image_size(image_size)
        self.color_mode = images.check_color_mode(color_mode)
        self.interpolation = images.check_interpolation(interpolation)
        self.rescale = rescale
        self._example = _import_example()
        self._local = threading.local()
        self.index = index_records(self.paths, verbose)
        if not self.index:
            raise ValueError(f"No records in {', '.join(self.paths)}.")
        labels, self._numeric = None, None
        if self.label_key is not None or self.numeric_keys:
            labels, self._numeric = self._scan(verbose)
        else:  # images only: the first record's kind is checked now, each one when read
            self._read(self._record(0), self.image_key, 0)
        if label_mode == "auto":
            label_mode = "int" if self.label_key is not None else None
        self.loader = None
        if self.image_key is not None:
            self.loader = ImageLoader(
                [self.describe_sample(i) for i in range(len(self.index))], self.image_size,
                self.color_mode, self.interpolation, verbose=verbose, read=self._image_bytes)
        super().__init__(len(self.index), labels=labels, label_mode=label_mode,
                         class_names=class_names, **common)
        if self.loader is not None:
            self.loader.wire(self)
        if rescale is not None and self.dtype not in ("float32", "float16"):
            raise ValueError(f"`rescale` applies to float batches only. Received: "
                             f"rescale={rescale} with dtype={self.dtype!r}.")

    def _scan(self, verbose):
        """Labels (and numeric features) of every record, read once."""
        labels, numeric = [], []
        for k in progress(range(len(self.index)), "Reading labels", len(self.index),
                          verbose):
            example = self._record(k)
            if self.image_key is not None:  # the kind only: images are decoded later
                self._read(example, self.image_key, k)
            if self.label_key is not None:
                labels.append(self._read(example, self.label_key, k))
            if self.numeric_keys:
                row = np.concatenate([self._read(example, key, k)
                                      for key in self.numeric_keys]).astype("float32")
                if numeric and len(row) != len(numeric[0]):
                    sizes = {key: len(self._read(example, key, k))
                             for key in self.numeric_keys}
                    raise ValueError(
                        f"Numeric features must have the same length in every record: "
                        f"{self.describe_sample(0)} has {len(numeric[0])} values, "
                        f"{self.describe_sample(k)} has {len(row)} ({sizes}).")
                numeric.append(row)
        return (labels if self.label_key is not None else None,
                np.stack(numeric) if numeric else None)

    def _read(self, example, key, k):
        return _value(self._feature(example, key, k), self.feature_spec[key], key,
                      lambda: self.describe_sample(k))

    def _feature(self, example, key, k):
        features = example.features.feature
        if key not in features:
            where = self.describe_sample(k)
            raise ValueError(f"{where[0].upper()}{where[1:]} has no feature {key!r}. Its "
                             f"features: {sorted(features)}.")
        return features[key]

    def _record(self, k):
        """Record `k` parsed, once the CRC32C of its data matched the one stored."""
        number, offset, length, record = self.index[k]
        handles = getattr(self._local, "files", None)
        if handles is None:
            handles = self._local.files = {}  # one open file per thread and TFRecord
        f = handles.get(number)
        if f is None:
            f = handles[number] = open(self.paths[number], "rb")
        f.seek(offset)
        data, footer = f.read(length), f.read(4)
        if len(footer) < 4:
            raise ValueError(f"{self.paths[number]} is truncated: "
                             f"{self.describe_sample(k)} ends early (the file changed after "
                             f"it was indexed).")
        if masked_crc(data) != struct.unpack("<I", footer)[0]:
            raise ValueError(
                f"{self.paths[number]} is corrupt: the data of record {record} (byte "
                f"{offset - 12}) fails its CRC32C check ({length} bytes). Rewrite the file, "
                f"or restore an intact copy.")
        return self._example.FromString(data)

    @property
    def features(self) -> dict[str, FeatureKind]:
        """Deprecated: the {feature key: kind} dict is `feature_spec`."""
        warnings.warn("TFRecordGenerator.features is deprecated: use `feature_spec`.",
                      DeprecationWarning, stacklevel=2)
        return self.feature_spec

    @property
    def sampler_features(self) -> Any:
        """`features=` when given, else the numeric features (None for images)."""
        return self._features if self._features is not None else self._numeric

    def describe_sample(self, index: int) -> str:
        number, offset, _, record = self.index[index]
        return f"record {record} (byte {offset - 12}) of {self.paths[number]}"

    def _image_bytes(self, index):
        data = self._read(self._record(index), self.image_key, index)
        return np.frombuffer(data, dtype=np.uint8)

    def load_sample(self, index: int) -> np.ndarray:
        if self.image_key is None:
            return self._numeric[index]
        return self.loader.load(index)

    def load_batch(self, indices: np.ndarray, positions: np.ndarray,
                   partners: np.ndarray | None = None, lams: np.ndarray | None = None,
                   ) -> tuple[BatchArrays, np.ndarray | None]:
        if self.loader is None or partners is not None or self.augment is not None:
            return super().load_batch(indices, positions, partners, lams)
        return self.loader.decode(indices, self.dtype or np.uint8, self.rescale)

    def _pace(self, waited):
        if self.loader is not None:
            self.loader.pace(waited)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_local", None)
        state.pop("_example", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._local = threading.local()
        self._example = _import_example()
