"""The type aliases of the public API's hints (PEP 484), in one place.

It imports only NumPy and the standard library, so any module may use it. The string
options are `Literal`s holding exactly the values the code accepts (tests/test_typing.py
compares each with the tuple the code checks against); `interpolation` is also accepted
in any case at run time ("Bilinear"), as Keras accepts it, and typed by its lowercase
names.
"""

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union

import numpy as np
import numpy.typing as npt

# A file or folder path.
StrPath = Union[str, os.PathLike[str]]

# (height, width), or one int for a square.
ImageSize = Union[int, tuple[int, int], Sequence[int]]

# kerasgen.loading.images.COLOR_MODES
ColorMode = Literal["rgb", "rgba", "grayscale"]

# kerasgen.loading.images.INTERPOLATIONS: Keras's names of tf.image.resize's methods, and "area"
Interpolation = Literal["bilinear", "area", "bicubic", "nearest", "lanczos", "lanczos3",
                        "lanczos5", "gaussian", "mitchellcubic"]

# kerasgen.labels.targets.LABEL_MODES, less None (written `LabelMode | None` where it is taken)
LabelMode = Literal["int", "categorical", "binary", "multi_label", "raw", "mask", "input",
                    "boxes", "image"]

# kerasgen.arrays.batching.DTYPES, less None (None keeps the samples' own dtype)
DType = Literal["float32", "float16", "uint8", "uint16"]

# kerasgen.loader.DECODERS: who decodes a batch's JPEGs
Decoder = Literal["opencv", "nvimgcodec"]

# What a bad image file does: an error naming it, or a stand-in of its class.
OnError = Literal["raise", "skip"]

# The decoded-image cache: "auto", "memory", a file path, or None (decode every epoch).
Cache = Union[Literal["auto", "memory"], StrPath, None]

# `labels` of an image folder: "inferred" (from the subfolders), None, or one label per
# file (class ids, class names, or real values: regression targets)
FolderLabels = Union[Literal["inferred"], Sequence[int], Sequence[str], Sequence[float],
                     Sequence[Sequence[float]], np.ndarray, None]

# `subset` of one generator of a validation split
Subset = Literal["training", "validation"]
# what kg.image_dataset_from_directory returns
DatasetFormat = Literal["tf", "grain", "kerasgen"]

# An array, or a dict of them (multi-input or multi-output models).
Arrays = Union[npt.ArrayLike, dict[str, npt.ArrayLike]]

# What a batch's x or y is: an array, or a dict of them.
BatchArrays = Union[np.ndarray, dict[str, np.ndarray]]

# `sampling_strategy`, as imbalanced-learn takes it (kerasgen.samplers.OVER_STRATEGIES and
# UNDER_STRATEGIES hold the strings each kind accepts).
StrategyName = Literal["auto", "minority", "majority", "not minority", "not majority", "all"]
SamplingStrategy = Union[float, StrategyName, Mapping[Any, int],
                         Callable[[np.ndarray], Mapping[Any, int]]]

# A per-sample augmentation: an albumentations transform, or fn(image, rng) -> image
# (fn(image, rng, mask=mask) -> (image, mask) in mask mode).
Augment = Callable[..., Any]

# batch_augment: a Keras preprocessing layer or fn(x, y, rng) -> (x, y), or a list or
# tuple of them (a Keras layer is callable; kerasgen.augment.BatchAugment reads a list or a
# tuple as steps, anything else as one step).
BatchAugmentSteps = Union[Callable[..., Any], list[Callable[..., Any]],
                          tuple[Callable[..., Any], ...]]
