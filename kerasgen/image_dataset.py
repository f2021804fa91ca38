"""`image_dataset_from_directory`: Keras's function, signature and defaults, returning
kerasgen `ImageFolderGenerator`s instead of tf.data datasets.

Read against Keras 3.15.1 (`keras/src/utils/image_dataset_utils.py`). The returned
generators are `keras.utils.PyDataset`s with Keras's `class_names` and `file_paths`, so
`model.fit(train_ds, validation_data=val_ds)` runs unchanged. What differs, and why, is in
docs/migrating.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, overload

import numpy as np

from kerasgen import _checks, _redact
from kerasgen._typing import (ColorMode, DatasetFormat, FolderLabels, ImageSize,
                              Interpolation, StrPath, Subset)
from kerasgen.builders import keras_functions
from kerasgen.generators import ImageFolderGenerator

LABEL_MODES = ("int", "categorical", "binary", None)
FORMATS = ("tf", "grain", "kerasgen")


@overload
def image_dataset_from_directory(
    directory: StrPath,
    labels: FolderLabels = ...,
    label_mode: Literal["int", "categorical", "binary"] | None = ...,
    class_names: Sequence[str] | None = ...,
    color_mode: ColorMode = ...,
    batch_size: int | None = ...,
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
    *,
    format: Literal["kerasgen"],
    verbose: bool = ...,
    **options: Any,
) -> ImageFolderGenerator: ...


@overload
def image_dataset_from_directory(
    directory: StrPath,
    labels: FolderLabels = ...,
    label_mode: Literal["int", "categorical", "binary"] | None = ...,
    class_names: Sequence[str] | None = ...,
    color_mode: ColorMode = ...,
    batch_size: int | None = ...,
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
    format: Literal["kerasgen"],
    verbose: bool = ...,
    **options: Any,
) -> tuple[ImageFolderGenerator, ImageFolderGenerator]: ...


@overload
def image_dataset_from_directory(
    directory: StrPath,
    labels: FolderLabels = ...,
    label_mode: Literal["int", "categorical", "binary"] | None = ...,
    class_names: Sequence[str] | None = ...,
    color_mode: ColorMode = ...,
    batch_size: int | None = ...,
    image_size: ImageSize = ...,
    shuffle: bool = ...,
    seed: int | None = ...,
    validation_split: float | None = ...,
    subset: Subset | Literal["both"] | None = ...,
    interpolation: Interpolation = ...,
    follow_links: bool = ...,
    crop_to_aspect_ratio: bool = ...,
    pad_to_aspect_ratio: bool = ...,
    data_format: Literal["channels_first", "channels_last"] | None = ...,
    format: DatasetFormat = ...,
    verbose: bool = ...,
    **options: Any,
) -> Any: ...  # a tf.data.Dataset or grain.IterDataset (a pair of them for "both")


@_redact.errors
@_redact.passed_over
def image_dataset_from_directory(
    directory: StrPath,
    labels: FolderLabels = "inferred",
    label_mode: Literal["int", "categorical", "binary"] | None = "int",
    class_names: Sequence[str] | None = None,
    color_mode: ColorMode = "rgb",
    batch_size: int | None = 32,
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
    format: DatasetFormat = "tf",
    verbose: bool = True,
    **options: Any,
) -> Any:
    """Keras's `keras.utils.image_dataset_from_directory`, made by kerasgen.

    Same arguments, defaults and meaning as Keras's (see its documentation), and what
    Keras returns:

    - `format="tf"` (default): a `tf.data.Dataset` of `(images, labels)` batches, or
      `images` alone without labels (`labels=None` or `label_mode=None`), single samples
      with `batch_size=None`; the pair `(training, validation)` for `subset="both"`.
      Every tf.data method works on it (`take`, `map`, `prefetch`, `cache`, `unbatch`,
      `as_numpy_iterator`...). A pass over it is one epoch, and each pass is a new
      epoch of the kerasgen generator behind it, reshuffled from (seed, epoch).
    - `format="grain"`: a `grain.IterDataset` (needs `pip install grain`), as Keras
      returns with grain installed; as Keras's, each pass gives the same order.
    - `format="kerasgen"`: the `kg.ImageFolderGenerator` itself (a PyDataset).

    Each dataset has Keras's `class_names` and `file_paths`, and `generator`: the
    `kg.ImageFolderGenerator` making its batches (`get_state()`, `stats()`, `epoch`).
    Images are float32 in 0..255, as Keras's.

    `**options` are the generator's own arguments, beyond Keras's signature: `augment`,
    `batch_augment`, `sampler`, `cache`, `dtype`, `rescale`, `decode_threads`,
    `on_error`, `max_pixels`, `drop_remainder`, `stats`, `workers`,
    `use_multiprocessing` ... (see `kg.ImageFolderGenerator` and `kg.Generator`). With
    `subset="both"` the validation dataset gets none of the training-only `augment`,
    `batch_augment`, `sampler` and `drop_remainder`.

    Where kerasgen differs (docs/migrating.md):
        - The validation split is kerasgen's: seeded and stratified by class (each class
          gives round(validation_split * its count) files), not the last files of one
          shuffled list; its sizes can differ from Keras's by a file per class. Keras
          needs `seed` only when shuffling; so does this function (seed 0 then splits).
        - `shuffle=True` draws a new order every epoch from (seed, epoch), over the whole
          subset (Keras shuffles within a buffer of 8 batches, unseeded across passes).
        - `verbose` prints Keras's "Found ..." and "Using ..." lines and shows kerasgen's
          progress bars of slow steps.
        - `interpolation` maps each of Keras's methods to OpenCV's closest (see
          docs/image-folder-generator.md).
    """
    _check_keras_arguments(label_mode, format, validation_split, subset, shuffle, seed)
    keras_functions.check_unbatched(batch_size, format, options, "images")
    _check_options(options)
    if labels is None or label_mode is None:
        labels, label_mode = None, None
    unbatched = batch_size is None
    if validation_split and seed is None and not shuffle:
        seed = 0  # no shuffling: Keras's split is deterministic; so is this one
    data_format = _data_format(data_format)
    if data_format == "channels_first":
        given = options.get("batch_augment")
        steps = [] if given is None else list(given) if isinstance(given, (list, tuple)) \
            else [given]
        options["batch_augment"] = steps + [channels_first]
    options.update(
        labels=labels, label_mode=label_mode, class_names=class_names,
        color_mode=color_mode, batch_size=_unbatched_batch(format) if unbatched else batch_size,
        image_size=image_size, shuffle=shuffle, interpolation=interpolation,
        follow_links=follow_links, crop_to_aspect_ratio=crop_to_aspect_ratio,
        pad_to_aspect_ratio=pad_to_aspect_ratio, verbose=1 if verbose else 0)
    if subset == "both":  # _check_keras_arguments: both need a split and a seed
        assert validation_split is not None and seed is not None
        train, validation = ImageFolderGenerator.split(
            directory, validation_split=validation_split, seed=seed, **options)
        if verbose:
            keras_functions.found(train.num_samples + validation.num_samples,
                                  keras_functions.classes_of(train))
            print(f"Using {train.num_samples} files for training.")
            print(f"Using {validation.num_samples} files for validation.")
        return _returned(train, format, unbatched), _returned(validation, format, unbatched)
    gen = ImageFolderGenerator(directory, validation_split=validation_split or None,
                               subset=subset, seed=seed, **options)
    if verbose:
        keras_functions.found(gen.source.files_found, keras_functions.classes_of(gen))
        if subset is not None:
            print(f"Using {gen.num_samples} files for {subset}.")
    return _returned(gen, format, unbatched)


def _unbatched_batch(format):
    """The generator's batch size behind batch_size=None: batches of 32 unbatched by
    tf.data, single samples for grain (any size gives the same samples in the same order:
    augmentation draws are keyed by the sample's position in the epoch)."""
    return 1 if format == "grain" else 32


def _check_keras_arguments(label_mode, format, validation_split, subset, shuffle, seed):
    """Keras's own checks of these arguments (`dataset_utils.check_validation_split_arg`
    for the split), in Keras's order, with kerasgen's messages."""
    if label_mode not in LABEL_MODES:
        _checks.fail("label_mode", "one of 'int', 'categorical', 'binary' or None",
                     label_mode)
    if format not in FORMATS:
        _checks.fail("format", "'tf' (a tf.data.Dataset), 'grain' (a grain.IterDataset) "
                     "or 'kerasgen' (the kg.ImageFolderGenerator)", format)
    keras_functions.check_split(validation_split, subset, shuffle, seed)


def _check_options(options):
    """Options beyond Keras's signature must be the generator's own arguments."""
    keras_functions.check_options("image_dataset_from_directory", options, _OPTIONS,
                                  "kg.ImageFolderGenerator's")


def _returned(gen, format, unbatched):
    """What Keras returns for `format`, made from `gen`, with Keras's attributes."""
    dataset = keras_functions.dataset_of(gen, format, unbatched)
    if format != "kerasgen":
        dataset.class_names = gen.class_names
        dataset.file_paths = list(gen.file_paths)
    return dataset


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


channels_first.deterministic = True  # type: ignore[attr-defined]  # a layout: validation's too


def _generator_options():
    from kerasgen.base import Generator

    return keras_functions.generator_options(
        image_dataset_from_directory, (ImageFolderGenerator.__init__, Generator.__init__))


_OPTIONS = _generator_options()
