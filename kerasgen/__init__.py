"""kerasgen: keras.utils.PyDataset generators for Keras 3.

Arrays, image folders, CSV lists and custom datasets, with per-epoch shuffling that is
reproducible from one seed, label modes and batches that are identical with any number
of workers.

`import kerasgen` is cheap: each name below is imported on first use (PEP 562), so the
command line (`kerasgen --help`, `inspect`, `preview`) never starts Keras or TensorFlow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Imported now, not lazily: `rebalance` is also the name of its module, which the import
# system would bind in its place if kerasgen.rebalance were first imported by name.
# It needs only NumPy.
from kerasgen.rebalance import class_weights, rebalance

if TYPE_CHECKING:  # what type checkers and IDEs see of the lazy names below (PEP 484)
    from kerasgen import augment, callbacks, gpu, samplers, viz
    from kerasgen import sources
    from kerasgen.arrayrecord import ArrayRecordGenerator
    from kerasgen.arrays.malloc import leave_malloc, tune_malloc
    from kerasgen.audio import AudioFolderGenerator, audio_dataset_from_directory
    from kerasgen.storage.remote_cache import RemoteCache
    from kerasgen.base import Generator
    from kerasgen.detection import DetectionGenerator
    from kerasgen.generators import ArrayGenerator, CSVGenerator, ImageFolderGenerator
    from kerasgen.image_dataset import image_dataset_from_directory
    from kerasgen.inspection import inspect
    from kerasgen.pipeline.ray_engine import RayEngine
    from kerasgen.sql import SQLFeatureGenerator, SQLGenerator, SQLImageGenerator
    from kerasgen.stream import StreamGenerator
    from kerasgen.table import TableGenerator
    from kerasgen.text import text_dataset_from_directory
    from kerasgen.tfrecord import TFRecordGenerator
    from kerasgen.timeseries import TimeseriesGenerator, timeseries_dataset_from_array
    from kerasgen.webdataset import WebDatasetGenerator

__version__ = "0.1.0"

__all__ = [
    "ArrayGenerator",
    "ArrayRecordGenerator",
    "AudioFolderGenerator",
    "CSVGenerator",
    "DetectionGenerator",
    "Generator",
    "ImageFolderGenerator",
    "RayEngine",
    "RemoteCache",
    "SQLFeatureGenerator",
    "SQLGenerator",
    "SQLImageGenerator",
    "StreamGenerator",
    "TFRecordGenerator",
    "TableGenerator",
    "TimeseriesGenerator",
    "WebDatasetGenerator",
    "audio_dataset_from_directory",
    "augment",
    "callbacks",
    "class_weights",
    "gpu",
    "image_dataset_from_directory",
    "inspect",
    "leave_malloc",
    "rebalance",
    "samplers",
    "sources",
    "text_dataset_from_directory",
    "timeseries_dataset_from_array",
    "tune_malloc",
    "viz",
]

# name -> the module defining it (None: the name is a submodule of kerasgen)
_WHERE = {
    "ArrayGenerator": "kerasgen.generators",
    "ArrayRecordGenerator": "kerasgen.arrayrecord",
    "AudioFolderGenerator": "kerasgen.audio",
    "CSVGenerator": "kerasgen.generators",
    "DetectionGenerator": "kerasgen.detection",
    "Generator": "kerasgen.base",
    "ImageFolderGenerator": "kerasgen.generators",
    "RayEngine": "kerasgen.pipeline.ray_engine",
    "RemoteCache": "kerasgen.storage.remote_cache",
    "SQLFeatureGenerator": "kerasgen.sql",
    "SQLGenerator": "kerasgen.sql",
    "SQLImageGenerator": "kerasgen.sql",
    "StreamGenerator": "kerasgen.stream",
    "TableGenerator": "kerasgen.table",
    "TFRecordGenerator": "kerasgen.tfrecord",
    "TimeseriesGenerator": "kerasgen.timeseries",
    "WebDatasetGenerator": "kerasgen.webdataset",
    "audio_dataset_from_directory": "kerasgen.audio",
    "augment": None,
    "callbacks": None,
    "gpu": None,
    "image_dataset_from_directory": "kerasgen.image_dataset",
    "inspect": "kerasgen.inspection",
    "leave_malloc": "kerasgen.arrays.malloc",
    "samplers": None,
    "sources": None,
    "text_dataset_from_directory": "kerasgen.text",
    "timeseries_dataset_from_array": "kerasgen.timeseries",
    "tune_malloc": "kerasgen.arrays.malloc",
    "viz": None,
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'kerasgen' has no attribute {name!r}")
    where = _WHERE[name]
    if where is None:
        value = importlib.import_module(f"kerasgen.{name}")
    else:
        value = getattr(importlib.import_module(where), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__ + ["__version__"])
