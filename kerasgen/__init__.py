"""kerasgen: keras.utils.PyDataset generators for Keras 3.

Arrays, image folders, CSV lists and custom datasets, with per-epoch shuffling that is
reproducible from one seed, label modes and batches that are identical with any number
of workers.
"""

from kerasgen import augment, callbacks, gpu, samplers, viz
from kerasgen.base import Generator
from kerasgen.generators import ArrayGenerator, CSVGenerator, ImageFolderGenerator
from kerasgen.image_dataset import image_dataset_from_directory
from kerasgen.inspection import inspect
from kerasgen.rebalance import class_weights, rebalance
from kerasgen.sql import SQLGenerator
from kerasgen.tfrecord import TFRecordGenerator

__version__ = "0.1.0"

__all__ = [
    "ArrayGenerator",
    "CSVGenerator",
    "Generator",
    "ImageFolderGenerator",
    "SQLGenerator",
    "TFRecordGenerator",
    "augment",
    "callbacks",
    "class_weights",
    "gpu",
    "image_dataset_from_directory",
    "inspect",
    "rebalance",
    "samplers",
    "viz",
]
