"""`image_dataset_from_directory`: Keras's function, signature and defaults, returning
kerasgen `ImageFolderGenerator`s instead of tf.data datasets.

Read against Keras 3.15.1 (`keras/src/utils/image_dataset_utils.py`). The returned
generators are `keras.utils.PyDataset`s with Keras's `class_names` and `file_paths`, so
`model.fit(train_ds, validation_data=val_ds)` runs unchanged. What differs, and why, is in
docs/migrating.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

import numpy as np

from kerasgen import _checks
from kerasgen._typing import (ColorMode, FolderLabels, ImageSize, Interpolation, StrPath,
                              Subset)
from kerasgen.generators import ImageFolderGenerator

LABEL_MODES = ("int", "categorical", "binary", None)


@overload
def image_dataset_from_directory(
    directory: StrPath,
    labels: FolderLabels = ...,
    label_mode: Literal["int", "categorical", "binary"] | None = ...,
    class_names: Sequence[str] | None = ...,
    color_mode: ColorMode = ...,
    batch_size: int = ...,
    image_size: ImageSize = ...,
    shuffle: bool = ...,
    seed: int | None = ...,
    validation_split: float | None = ...,
    subset: Subset | None = ...,
    interpolation: Interpolation = ...,
    follow_links: bool = ...,
    crop_to_aspect_ratio: bool = ...,
    pad_to_aspect_ratio: bool = ...,
    data_format: Literal["channels_first", "channels_last"] | None = ...,
    format: Literal["tf", "grain"] = ...,
    verbose: bool = ...,
) -> ImageFolderGenerator: ...


@overload
def image_dataset_from_directory(
    directory: StrPath,
    labels: FolderLabels = ...,
    label_mode: Literal["int", "categorical", "binary"] | None = ...,
    class_names: Sequence[str] | None = ...,
    color_mode: ColorMode = ...,
    batch_size: int = ...,
    image_size: ImageSize = ...,
    shuffle: bool = ...,
    seed: int | None = ...,
    validation_split: float | None = ...,
    *,
    subset: Literal["both"],
    interpolation: Interpolation = ...,
    follow_links: bool = ...,
    crop_to_aspect_ratio: bool = ...,
    pad_to_aspect_ratio: bool = ...,
    data_format: Literal["channels_first", "channels_last"] | None = ...,
    format: Literal["tf", "grain"] = ...,
    verbose: bool = ...,
) -> tuple[ImageFolderGenerator, ImageFolderGenerator]: ...


def image_dataset_from_directory(
    directory: StrPath,
    labels: FolderLabels = "inferred",
    label_mode: Literal["int", "categorical", "binary"] | None = "int",
    class_names: Sequence[str] | None = None,
    color_mode: ColorMode = "rgb",
    batch_size: int = 32,
    image_size: ImageSize = (256, 256),
    shuffle: bool = True,
    seed: int | None = None,
    validation_split: float | None = None,
    subset: Subset | Literal["both"] | None = None,
    interpolation: Interpolation = "bilinear",
    follow_links: bool = False,
    crop_to_aspect_ratio: bool = False,
    pad_to_aspect_ratio: bool = False,
    data_format: Literal["channels_first", "channels_last"] | None = None,
    format: Literal["tf", "grain"] = "tf",
    verbose: bool = True,
) -> ImageFolderGenerator | tuple[ImageFolderGenerator, ImageFolderGenerator]:
    """Keras's `keras.utils.image_dataset_from_directory`, returning kerasgen generators.

    Same arguments, defaults and meaning as Keras's (see its documentation); the result
    is an `ImageFolderGenerator` (a `keras.utils.PyDataset`), or the pair
    `(training, validation)` for `subset="both"`. Batches are `(images, labels)`, or
    `(images,)` without labels; images are float32 in 0..255, as Keras's.

    Where kerasgen differs:
        - The validation split is kerasgen's: seeded and stratified by class (each class
          gives round(validation_split * its count) files), not the last files of one
          shuffled list; its sizes can differ from Keras's by a file per class. Keras
          needs `seed` only when shuffling; so does this function (seed 0 then splits).
        - `shuffle=True` draws a new order every epoch from (seed, epoch), over the whole
          subset (Keras shuffles once, then within a buffer of 8 batches).
        - `batch_size=None` (unbatched samples) is refused: a PyDataset yields batches.
        - `data_format="channels_first"` transposes each batch to (n, channels, h, w).
        - `format` ("tf" or "grain") is checked and has no other effect: the generator
          is a PyDataset, which every Keras backend reads.
        - `verbose` prints Keras's "Found ..." and "Using ..." lines and shows kerasgen's
          progress bars of slow steps.
        - `interpolation` maps each of Keras's methods to OpenCV's closest (see
          docs/image-folder-generator.md).
    """
    if label_mode not in LABEL_MODES:
        _checks.fail("label_mode", "one of 'int', 'categorical', 'binary' or None",
                     label_mode)
    if labels is None or label_mode is None:
        labels, label_mode = None, None
    if format not in ("tf", "grain"):
        _checks.fail("format", "'tf' or 'grain' (kerasgen returns a PyDataset either way)",
                     format)
    if batch_size is None:
        _checks.fail("batch_size", "a positive integer", batch_size,
                     hint="kerasgen generators always yield batches (Keras's "
                          "batch_size=None yields single samples)")
    data_format = _data_format(data_format)
    if subset not in ("training", "validation", "both", None):
        _checks.fail("subset", "'training', 'validation', 'both' or None", subset)
    if (validation_split or subset) and not (validation_split and subset):
        raise ValueError("If `subset` is set, `validation_split` must be set, and "
                         f"inversely. Received: validation_split={validation_split!r}, "
                         f"subset={subset!r}.")
    if validation_split and seed is None:
        if shuffle:
            raise ValueError(
                "`seed` must be given with `validation_split` and shuffle=True, so that "
                "the training and validation subsets do not overlap. Received: seed=None."
            )
        seed = 0  # no shuffling: Keras's split is deterministic; so is this one
    options = dict(
        labels=labels, label_mode=label_mode, class_names=class_names,
        color_mode=color_mode, batch_size=batch_size, image_size=image_size,
        shuffle=shuffle, seed=seed, interpolation=interpolation, follow_links=follow_links,
        crop_to_aspect_ratio=crop_to_aspect_ratio, pad_to_aspect_ratio=pad_to_aspect_ratio,
        verbose=1 if verbose else 0,
        batch_augment=channels_first if data_format == "channels_first" else None)
    if subset == "both":
        options.pop("seed")
        train, validation = ImageFolderGenerator.split(
            directory, validation_split=validation_split, seed=seed, **options)
        if verbose:
            _found(train, train.num_samples + validation.num_samples)
            print(f"Using {train.num_samples} files for training.")
            print(f"Using {validation.num_samples} files for validation.")
        return train, validation
    gen = ImageFolderGenerator(directory, validation_split=validation_split or None,
                               subset=subset, **options)
    if verbose:
        _found(gen, gen._files_found)
        if subset is not None:
            print(f"Using {gen.num_samples} files for {subset}.")
    return gen


def _found(gen, total):
    if gen.label_mode is None:
        print(f"Found {total} files.")
    else:
        print(f"Found {total} files belonging to {len(gen.class_names)} classes.")


def _data_format(data_format):
    if data_format is None:
        import keras

        return keras.config.image_data_format()
    value = str(data_format).lower()
    if value not in ("channels_first", "channels_last"):
        _checks.fail("data_format", "'channels_first', 'channels_last' or None",
                     data_format)
    return value


def channels_first(x: np.ndarray, y: np.ndarray | None,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """A batch_augment step: (n, h, w, c) images -> (n, c, h, w)."""
    return np.ascontiguousarray(np.moveaxis(x, -1, 1)), y
