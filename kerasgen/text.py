"""`text_dataset_from_directory`: Keras's function, signature and defaults, made by
kerasgen: a plain `kg.Generator` over a `sources.TextSource`, returned as what Keras
returns (a tf.data dataset of tf.string batches, a grain dataset) or as itself.

Read against Keras 3.15.1 (`keras/src/utils/text_dataset_utils.py`). What differs, and
why, is in docs/text.md.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, overload

import numpy as np

from kerasgen import _checks, _redact
from kerasgen._typing import DatasetFormat, FolderLabels, StrPath, Subset
from kerasgen.base import Generator
from kerasgen.builders import keras_functions
from kerasgen.builders.common import validation_options
from kerasgen.builders.folder_labels import given_labels, list_labels, value_labels
from kerasgen.sources import _listing as listing
from kerasgen.sources._text import TextSource
from kerasgen.storage import paths as _paths
from kerasgen.storage import remote as _remote

__all__ = ["text_dataset_from_directory"]

LABEL_MODES = ("int", "categorical", "binary", None)
FORMATS = ("tf", "grain", "kerasgen")
TEXT_FILES = listing.FileKind("text files", "a text file", (".txt",))


@overload
def text_dataset_from_directory(
    directory: StrPath,
    labels: FolderLabels = ...,
    label_mode: Literal["int", "categorical", "binary"] | None = ...,
    class_names: Sequence[str] | None = ...,
    batch_size: int | None = ...,
    max_length: int | None = ...,
    shuffle: bool = ...,
    seed: int | None = ...,
    validation_split: float | None = ...,
    subset: Subset | None = ...,
    follow_links: bool = ...,
    *,
    format: Literal["kerasgen"],
    verbose: bool = ...,
    **options: Any,
) -> Generator: ...


@overload
def text_dataset_from_directory(
    directory: StrPath,
    labels: FolderLabels = ...,
    label_mode: Literal["int", "categorical", "binary"] | None = ...,
    class_names: Sequence[str] | None = ...,
    batch_size: int | None = ...,
    max_length: int | None = ...,
    shuffle: bool = ...,
    seed: int | None = ...,
    validation_split: float | None = ...,
    *,
    subset: Literal["both"],
    follow_links: bool = ...,
    format: Literal["kerasgen"],
    verbose: bool = ...,
    **options: Any,
) -> tuple[Generator, Generator]: ...


@overload
def text_dataset_from_directory(
    directory: StrPath,
    labels: FolderLabels = ...,
    label_mode: Literal["int", "categorical", "binary"] | None = ...,
    class_names: Sequence[str] | None = ...,
    batch_size: int | None = ...,
    max_length: int | None = ...,
    shuffle: bool = ...,
    seed: int | None = ...,
    validation_split: float | None = ...,
    subset: Subset | Literal["both"] | None = ...,
    follow_links: bool = ...,
    format: DatasetFormat = ...,
    verbose: bool = ...,
    **options: Any,
) -> Any: ...  # a tf.data.Dataset or grain.IterDataset (a pair of them for "both")


@_redact.errors
@_redact.passed_over
def text_dataset_from_directory(
    directory: StrPath,
    labels: FolderLabels = "inferred",
    label_mode: Literal["int", "categorical", "binary"] | None = "int",
    class_names: Sequence[str] | None = None,
    batch_size: int | None = 32,
    max_length: int | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    validation_split: float | None = None,
    subset: Subset | Literal["both"] | None = None,
    follow_links: bool = False,
    format: DatasetFormat = "tf",
    verbose: bool = True,
    **options: Any,
) -> Any:
    """Keras's `keras.utils.text_dataset_from_directory`, made by kerasgen.

    Same arguments, defaults and meaning as Keras's (see its documentation): the `.txt`
    files of `directory`, one subfolder per class, and what Keras returns:

    - `format="tf"` (default): a `tf.data.Dataset` of `(texts, labels)` batches, texts a
      tf.string tensor of shape (batch_size,) holding each file's bytes (cut to
      `max_length` bytes); `texts` alone without labels (`labels=None` or
      `label_mode=None`); single samples with `batch_size=None`; the pair `(training,
      validation)` for `subset="both"`. A pass over it is one epoch of the kerasgen
      generator behind it, reshuffled from (seed, epoch).
    - `format="grain"`: a `grain.IterDataset` (pip install grain), texts as Python
      `str` (UTF-8, universal newlines, cut to `max_length` characters), batched as
      Keras batches them: a tf.string tensor on the TensorFlow backend, a tuple of `str`
      on the others.
    - `format="kerasgen"`: the `kg.Generator` itself (a PyDataset): batches of texts are
      numpy object arrays of `str` (read as format="grain" reads them). `model.fit`
      takes them once `batch_augment=kg.augment.map_batch(...)` turns them into numbers.

    Labels are int32 ("int"), float32 (n, 1) ("binary") or float32 one-hot
    ("categorical"), as Keras's. Each dataset has Keras's `class_names`, and
    `generator`: the `kg.Generator` making its batches (`file_paths`, `get_state()`,
    `epoch`).

    `**options` are `kg.Generator`'s own arguments beyond Keras's signature
    (`batch_augment`, `sampler`, `num_classes`, `drop_remainder`, `stats`, `workers`,
    `use_multiprocessing`...), and `storage_options` (fsspec's, for a URL `directory`:
    s3://, gs://, https://...). With `subset="both"` the validation dataset gets none of
    the training-only `augment`, `batch_augment`, `sampler` and `drop_remainder`, but
    keeps a `map_batch` (a preprocessing).

    Where kerasgen differs: docs/text.md.
    """
    _check_keras_arguments(labels, class_names, label_mode, format, validation_split,
                           subset, shuffle, seed)
    if max_length is not None:
        _checks.positive_int("max_length", max_length)
    keras_functions.check_unbatched(batch_size, format, options, "texts")
    _check_options(options)
    if labels is None or label_mode is None:
        labels, label_mode = None, None
    if validation_split and seed is None and not shuffle:
        seed = 0  # no shuffling: Keras's split is deterministic; so is this one
    store = _remote.Store(options.pop("storage_options", None))
    found = _listed(directory, labels, class_names, label_mode, follow_links, store,
                    options.get("num_classes"))
    if verbose:
        keras_functions.found(len(found.paths), None if found.label_mode is None
                              else found.class_names)
    if found.label_mode == "binary" and len(found.class_names) != 2:
        _checks.fail("class_names", "exactly 2 classes with label_mode='binary'",
                     found.class_names, hint="Use label_mode='int' or 'categorical' for "
                     f"{len(found.class_names)} classes")
    unbatched = batch_size is None
    made = dict(max_length=max_length, decode=format != "tf", store=store,
                root=None if follow_links or _remote.is_url(os.fspath(directory)) else (
                    _paths.Root.of(directory, "`directory`", "follow_links=True"),),
                batch_size=(1 if format == "grain" else 32) if unbatched else batch_size)
    if subset == "both":  # _check_keras_arguments: both need a split and a seed
        train = _split(found, validation_split, "training", seed)
        validation = _split(found, validation_split, "validation", seed)
        if verbose:
            print(f"Using {len(train.paths)} files for training.")
            print(f"Using {len(validation.paths)} files for validation.")
        return (_returned(_generator(train, shuffle, seed, made, options), format, unbatched),
                _returned(_generator(validation, False, seed, made, validation_options(options)),
                          format, unbatched))
    if subset is not None:
        found = _split(found, validation_split, subset, seed)
        if verbose:
            print(f"Using {len(found.paths)} files for {subset}.")
    return _returned(_generator(found, shuffle, seed, made, options), format, unbatched)


class _Found(NamedTuple):
    """The text files of a folder: their paths, one label each (class ids or real
    values) or None, the class names, and the label mode they are read with."""

    paths: list
    labels: Any
    class_names: Any
    label_mode: str | None


def _listed(directory, labels, class_names, label_mode, follow_links, store, num_classes):
    """The text files of `directory` in Keras's order, and their labels."""
    if isinstance(labels, str) and labels == "inferred":
        folder = listing.list_image_folder(directory, class_names, classes_required=True,
                                           follow_links=follow_links, store=store,
                                           kind=TEXT_FILES)
        return _Found(folder.paths, folder.class_ids, folder.class_names, label_mode)
    if labels is None and class_names is not None:
        raise ValueError(
            "`class_names` goes with labels='inferred' and a label_mode only: without "
            f"labels there are no classes. Received: class_names={class_names!r} with "
            "labels=None or label_mode=None.")
    given = given_labels(labels, class_names, None)
    folder = listing.list_image_folder(directory, flat=True, follow_links=follow_links,
                                       store=store, kind=TEXT_FILES)
    paths = listing.keras_order(folder.paths)  # os.walk's folders by path, files by name
    if given is None:
        return _Found(paths, None, None, None)
    if len(given) != len(paths):
        raise ValueError(
            f"`labels` must hold one label per text file. Received: {len(given)} labels "
            f"for the {len(paths)} text files found in {directory} (in Keras's order: "
            "os.walk's folders sorted by path, files sorted by name).")
    values = value_labels(given, paths, directory, label_mode)
    if values is not None:  # real values (a regression), as Keras passes them on
        return _Found(paths, values, None, "raw")
    ids, names = list_labels(given, paths, directory, num_classes)
    return _Found(paths, ids, names, label_mode)


def _split(found, validation_split, subset, seed):
    """`subset` of `found`: kerasgen's seeded, stratified validation split."""
    ids = found.labels if found.label_mode not in (None, "raw") else None
    keep = listing.validation_subset(ids, len(found.paths), validation_split, subset, seed,
                                     class_names=found.class_names, stacklevel=4)
    return found._replace(paths=[found.paths[i] for i in keep],
                          labels=None if found.labels is None else found.labels[keep])


def _generator(found, shuffle, seed, made, options):
    """The kg.Generator of the texts `found`."""
    source = TextSource(found.paths, found.labels, class_names=found.class_names,
                        max_length=made["max_length"], decode=made["decode"],
                        root=made["root"], store=made["store"])
    options = {"dtype": None, **options}
    return Generator(source=source, label_mode=found.label_mode, shuffle=shuffle, seed=seed,
                     batch_size=made["batch_size"], **options)


def _check_keras_arguments(labels, class_names, label_mode, format, validation_split,
                           subset, shuffle, seed):
    """Keras's own checks of these arguments, in Keras's order (`labels` first; the
    split's as `dataset_utils.check_validation_split_arg`), with kerasgen's messages."""
    if not (labels is None or isinstance(labels, (str, list, tuple, np.ndarray))) or (
            isinstance(labels, str) and labels != "inferred"):
        _checks.fail("labels", "'inferred' (labels from the subfolder names), None (no "
                     "labels) or a list/tuple of labels, one per text file", labels)
    if not (labels is None or isinstance(labels, str)) and class_names:
        raise ValueError(
            "`class_names` goes with labels='inferred' only: with a list of labels the "
            "classes are the sorted distinct labels. Received: labels=<a list of "
            f"{len(labels)}> and class_names={class_names!r}")
    if label_mode not in LABEL_MODES:
        _checks.fail("label_mode", "one of 'int', 'categorical', 'binary' or None",
                     label_mode)
    if format not in FORMATS:
        _checks.fail("format", "'tf' (a tf.data.Dataset), 'grain' (a grain.IterDataset) "
                     "or 'kerasgen' (the kg.Generator)", format)
    keras_functions.check_split(validation_split, subset, shuffle, seed)


def _check_options(options):
    """Options beyond Keras's signature must be kg.Generator's own arguments."""
    keras_functions.check_options("text_dataset_from_directory", options, _OPTIONS,
                                  "kg.Generator's")


def _generator_options():
    """The keyword arguments of kg.Generator a folder of texts takes beyond Keras's."""
    return keras_functions.generator_options(
        text_dataset_from_directory, (Generator.__init__,),
        # the folder gives the samples; weights come per class
        leave_out=("source", "mask_format", "features", "sample_weight")
    ) | {"storage_options"}


def _returned(gen, format, unbatched):
    """What Keras returns for `format`, made from `gen`, with Keras's attributes."""
    dataset = keras_functions.dataset_of(gen, format, unbatched)
    if format == "kerasgen":
        return dataset
    if format == "grain" and not unbatched:
        dataset = dataset.map(keras_string_batch)
        dataset.generator = gen
    dataset.class_names = gen.class_names if gen.label_mode is not None else None
    return dataset


def keras_string_batch(batch: Any) -> Any:
    """A batch as Keras's grain format gives it (`grain_utils.make_string_batch`): its
    texts a tf.string tensor on the TensorFlow backend, else a tuple of `str`; labels as
    they are."""
    if isinstance(batch, tuple):
        return (_strings(batch[0]),) + batch[1:]
    return _strings(batch)


def _strings(texts: np.ndarray) -> Any:
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.constant(texts, dtype=tf.string)
    return tuple(texts.tolist())


_OPTIONS = _generator_options()
