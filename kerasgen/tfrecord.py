"""TFRecordGenerator: tf.train.Example records with random access through an index."""

import os
import struct
import threading

import numpy as np

from kerasgen import _checks, images
from kerasgen.base import Generator
from kerasgen.loader import ImageLoader
from kerasgen.progress import progress

KINDS = ("image", "label", "float", "int")


def _import_example():
    try:
        from tensorflow.core.example.example_pb2 import Example
    except ImportError as error:
        raise ImportError('TFRecordGenerator needs TensorFlow: pip install '
                          '"kerasgen3[tensorflow]" (or pip install tensorflow-cpu)'
                          ) from error
    return Example


def index_records(paths, verbose=1):
    """[(file number, data offset, length)] of every record, reading only the headers."""
    index = []
    for number, path in enumerate(progress(paths, "Indexing TFRecord files", len(paths),
                                           verbose)):
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            offset = 0
            while offset < size:
                header = f.read(12)
                if len(header) < 12:
                    raise ValueError(f"{path} is truncated: an incomplete record header at "
                                     f"byte {offset}.")
                (length,) = struct.unpack("<Q", header[:8])
                data_offset = offset + 12
                offset = data_offset + length + 4
                if offset > size:
                    raise ValueError(f"{path} is truncated: the record at byte "
                                     f"{data_offset - 12} claims {length} bytes.")
                index.append((number, data_offset, length))
                f.seek(offset)
    return index


def _value(feature, kind):
    which = feature.WhichOneof("kind")
    values = getattr(feature, which).value if which else []
    if kind == "image":
        return values[0] if values else b""
    if kind == "label":
        value = values[0] if len(values) else None
        return value.decode() if isinstance(value, bytes) else value
    return np.asarray(list(values), dtype="float32" if kind == "float" else "int64")


class TFRecordGenerator(Generator):
    """tf.train.Example records from TFRecord files, with random access: an index of
    record offsets is built once (with a progress bar), so shuffling, samplers and
    workers work as for the other generators. Needs TensorFlow (for the Example format).
    Images are decoded by the same `ImageLoader` as image files: a batch on a thread
    pool, the next batches ahead of the training loop.

    Args:
        files: a TFRecord file or a list of them (uncompressed).
        features: {feature key: kind}, kinds "image" (encoded image bytes, decoded and
            resized like ImageFolderGenerator's), "label" (an int class id or a bytes
            class name), "float" / "int" (numeric features, concatenated in key order
            when there are several). One "image" key, or numeric keys, make x.
        image_size, color_mode, interpolation, rescale: for "image" features.
        label_mode: "int" (default, as Keras) when there is a "label" feature, else None.
        **common: see kg.Generator.
    """

    prefetch_auto = 2

    def __init__(self, files, features, *, image_size=(256, 256), color_mode="rgb",
                 interpolation="bilinear", rescale=None, label_mode="auto", class_names=None,
                 verbose=1, **common):
        self.paths = [os.fspath(f) for f in ([files] if isinstance(files, (str, os.PathLike))
                                             else files)]
        if not self.paths:
            _checks.fail("files", "a TFRecord file or a non-empty list of them", files)
        for path in self.paths:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"TFRecord file not found: {path}")
        if not isinstance(features, dict) or not features:
            _checks.fail("features", "a dict {feature key: kind}", features, TypeError)
        for key, kind in features.items():
            _checks.one_of(f"features[{key!r}]", kind, KINDS)
        self.features = dict(features)
        kinds = list(self.features.values())
        self.image_key = next((k for k, v in self.features.items() if v == "image"), None)
        self.label_key = next((k for k, v in self.features.items() if v == "label"), None)
        self.numeric_keys = [k for k, v in self.features.items() if v in ("float", "int")]
        if kinds.count("image") > 1 or kinds.count("label") > 1:
            raise ValueError("`features` may name one 'image' and one 'label' key.")
        if (self.image_key is None) == (not self.numeric_keys):
            raise ValueError("`features` must name either one 'image' key or numeric "
                             "('float' / 'int') keys for x. Received: "
                             f"features={self.features}.")
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
            if self.label_key is not None:
                labels.append(_value(self._feature(example, self.label_key, k), "label"))
            if self.numeric_keys:
                numeric.append(np.concatenate([
                    _value(self._feature(example, key, k), self.features[key])
                    for key in self.numeric_keys]).astype("float32"))
        if numeric and len({len(v) for v in numeric}) > 1:
            raise ValueError("Numeric features must have the same length in every record.")
        return (labels if self.label_key is not None else None,
                np.stack(numeric) if numeric else None)

    def _feature(self, example, key, k):
        features = example.features.feature
        if key not in features:
            raise ValueError(f"Record {k} ({self.describe_sample(k)}) has no feature "
                             f"{key!r}. Its features: {sorted(features)}.")
        return features[key]

    def _record(self, k):
        number, offset, length = self.index[k]
        handles = getattr(self._local, "files", None)
        if handles is None:
            handles = self._local.files = {}  # one open file per thread and TFRecord
        f = handles.get(number)
        if f is None:
            f = handles[number] = open(self.paths[number], "rb")
        f.seek(offset)
        return self._example.FromString(f.read(length))

    @property
    def sampler_features(self):
        return self._features if self._features is not None else self._numeric

    def describe_sample(self, index):
        number, offset, _ = self.index[index]
        return f"record at byte {offset - 12} of {self.paths[number]}"

    def _image_bytes(self, index):
        data = _value(self._feature(self._record(index), self.image_key, index), "image")
        return np.frombuffer(data, dtype=np.uint8)

    def load_sample(self, index):
        if self.image_key is None:
            return self._numeric[index]
        return self.loader.load(index)

    def load_batch(self, indices, positions, partners=None, lams=None):
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
