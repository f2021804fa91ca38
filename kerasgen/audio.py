"""Audio folders: `AudioFolderGenerator` (a PyDataset of padded float32 waveform batches,
for every backend) and `audio_dataset_from_directory` (Keras's function: its signature,
defaults and return type, a tf.data.Dataset).

Files are decoded through soundfile (pip install "kerasgen3[audio]"): WAV as Keras reads
it, and FLAC, Ogg, MP3, AIFF... beside it. Read against Keras 3.15.1
(`keras/src/utils/audio_dataset_utils.py`); what differs is in docs/audio.md.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Sequence
from typing import Any, Literal


from kerasgen import _checks, _redact
from kerasgen._typing import FolderLabels, StrPath, Subset
from kerasgen.adapter.iterator_names import IteratorNames
from kerasgen.base import Generator
from kerasgen.builders import keras_functions
from kerasgen.builders.common import Splits, check_common, one_subset
from kerasgen.builders.folder_labels import given_labels, list_labels, value_labels
from kerasgen.sources import _audio
from kerasgen.sources import _listing as listing
from kerasgen.storage import paths as _paths
from kerasgen.storage import remote as _remote

__all__ = ["AudioFolderGenerator", "audio_dataset_from_directory"]

LABEL_MODES = ("int", "categorical", "binary", "raw", None)  # the generator's
KERAS_LABEL_MODES = ("int", "categorical", "binary", None)  # the function's, as Keras's
FORMATS = ("tf", "kerasgen")


def check_sampling_rate(sampling_rate: Any) -> int | None:
    """Keras's checks of `sampling_rate` (an int above 0), in Keras's order; scipy
    (which resamples) must be there."""
    if sampling_rate is None:
        return None
    if isinstance(sampling_rate, bool) or not isinstance(sampling_rate, numbers.Integral):
        _checks.fail("sampling_rate", "an integer (samples per second)", sampling_rate)
    if sampling_rate <= 0:
        _checks.fail("sampling_rate", "higher than 0 (samples per second)", sampling_rate)
    _audio.resample_poly()
    return int(sampling_rate)


def _length(value: Any) -> int | None:
    if value is None:
        return None
    return _checks.positive_int("output_sequence_length", value)


class AudioFolderGenerator(Splits, Generator, IteratorNames):
    """Audio files in a folder with one subfolder per class (searched recursively).

    Batches are float32 waveforms (n, frames, channels), in [-1, 1] as Keras decodes
    WAV, each padded with zeros at its end to the batch's longest (Keras's
    `padded_batch`), or cut or padded to `output_sequence_length`. Files are decoded
    through soundfile (pip install "kerasgen3[audio]"): .wav, .flac, .ogg, .opus,
    .mp3, .aiff, .au, .caf, .w64. A file soundfile cannot read is a ValueError naming it.

    Args:
        directory: the folder (a local path, or a URL fsspec reads, listed once).
        labels: "inferred" (default): a file's class is its subfolder. None: no labels;
            every audio file under `directory`. A list or tuple of labels, one per file in
            Keras's order (os.walk's folders sorted by path, files sorted by name; see
            `file_paths`): class ids, class names, or real values (label_mode "int" or
            "raw", then "raw").
        label_mode: "int" (default, as Keras), "categorical", "binary", "raw" (class
            ids) or None.
        class_names: the classes in class-id order; default: the sorted subfolders.
        sampling_rate: resample every file to this rate (samples per second) with
            scipy.signal.resample_poly; None (default): each file at its own rate.
        output_sequence_length: cut or pad every waveform to this many frames (after
            resampling and `augment`); None: each batch padded to its longest.
        validation_split: the fraction held out by a seeded, stratified split, as
            `kg.ImageFolderGenerator`'s (`AudioFolderGenerator.split(...)` for both).
        subset: "training" or "validation", the side of `validation_split` to read.
        follow_links: as `kg.ImageFolderGenerator`'s.
        **common: batch_size, shuffle, seed, augment (a callable fn(waveform, rng) ->
            waveform, each waveform (frames, channels) with draws from (seed, epoch,
            position)), sampler, dtype, workers, ... (see `kg.Generator`).
    """

    prefetch_auto = 2  # batches decoded ahead while the model trains (prefetch="auto")
    ahead_threads = 2

    def __init__(self, directory: StrPath, *, labels: FolderLabels = "inferred",
                 label_mode: Literal["int", "categorical", "binary", "raw"] | None = "int",
                 class_names: Sequence[str] | None = None, sampling_rate: int | None = None,
                 output_sequence_length: int | None = None,
                 validation_split: float | None = None, subset: Subset | None = None,
                 follow_links: bool = False, seed: int | None = None,
                 **common: Any) -> None:
        check_common(self, common)  # before listing a folder that may not exist
        one_subset(self, subset)
        _checks.one_of("label_mode", label_mode, LABEL_MODES)
        sampling_rate = check_sampling_rate(sampling_rate)
        output_sequence_length = _length(output_sequence_length)
        _audio.import_soundfile()
        given = given_labels(labels, class_names, what="audio file")
        if labels is None:
            label_mode = None  # as Keras: no labels, no label mode
        directory = os.fspath(directory) if isinstance(directory, os.PathLike) else directory
        store = _remote.Store()
        values = None  # real-valued labels (a regression), float32
        if labels is None or given is not None:  # Keras: every file, in its order
            found = listing.list_image_folder(directory, flat=True, follow_links=follow_links,
                                              store=store, kind=_audio.AUDIO)
            paths = listing.keras_order(found.paths)
            class_ids, names = None, None
            if given is not None:
                values, class_ids, names = self._given(given, paths, directory,
                                                       label_mode, common)
                if values is not None:
                    label_mode = "raw" if label_mode is not None else None
                if label_mode is None:
                    class_ids, values = None, None
        else:
            found = listing.list_image_folder(
                directory, class_names, classes_required=label_mode is not None,
                follow_links=follow_links, store=store, kind=_audio.AUDIO)
            paths, class_ids, names = found.paths, found.class_ids, found.class_names
        files_found = len(paths)  # before the split (Keras prints it)
        keep = listing.validation_subset(class_ids, len(paths), validation_split, subset,
                                         seed, class_names=names, stacklevel=4)
        if keep is not None:
            paths = [paths[i] for i in keep]
            class_ids = None if class_ids is None else class_ids[keep]
            values = None if values is None else values[keep]
        self.directory = os.fspath(directory)
        self.validation_split, self.subset = validation_split, subset
        self.follow_links = bool(follow_links)
        root = None if follow_links else (
            _paths.Root.of(directory, "`directory`", "follow_links=True"),)
        source = _audio.AudioSource(
            paths, class_ids if values is None else values, class_names=names,
            sampling_rate=sampling_rate, output_sequence_length=output_sequence_length,
            root=root, store=store, files_found=files_found)
        super().__init__(source=source, label_mode=label_mode, seed=seed, **common)

    @staticmethod
    def _given(given: list[Any], paths: list[str], directory: Any, label_mode: Any,
               common: dict[str, Any]) -> tuple[Any, Any, Any]:
        """(real values, class ids, class names) of a list of labels, one per file."""
        if len(given) != len(paths):
            raise ValueError(
                f"`labels` must hold one label per audio file. Received: {len(given)} "
                f"labels for the {len(paths)} audio files found in {directory} (in the "
                "order of gen.file_paths: os.walk's folders sorted by path, files sorted "
                "by name).")
        values = value_labels(given, paths, directory, label_mode)
        if values is not None:  # regression targets, as Keras passes them on
            return values, None, None
        ids, names = list_labels(given, paths, directory, common.get("num_classes"))
        return None, ids, names

    @property
    def file_paths(self) -> list[str]:
        """One audio file per sample, in sample order."""
        return self.source.file_paths

    @property
    def sampling_rate(self) -> int | None:
        """The rate every file is resampled to, or None (each file's own)."""
        return self.source.sampling_rate

    @property
    def output_sequence_length(self) -> int | None:
        """The frames every waveform is cut or padded to, or None."""
        return self.source.output_sequence_length


@_redact.errors
@_redact.passed_over
def audio_dataset_from_directory(
    directory: StrPath,
    labels: FolderLabels = "inferred",
    label_mode: Literal["int", "categorical", "binary"] | None = "int",
    class_names: Sequence[str] | None = None,
    batch_size: int | None = 32,
    sampling_rate: int | None = None,
    output_sequence_length: int | None = None,
    ragged: bool = False,
    shuffle: bool = True,
    seed: int | None = None,
    validation_split: float | None = None,
    subset: Subset | Literal["both"] | None = None,
    follow_links: bool = False,
    verbose: bool = True,
    *,
    format: Literal["tf", "kerasgen"] = "tf",
    **options: Any,
) -> Any:
    """Keras's `keras.utils.audio_dataset_from_directory`, made by kerasgen.

    Same arguments, defaults and meaning as Keras's, and what Keras returns:

    - `format="tf"` (default): a `tf.data.Dataset` of `(audio, labels)` batches (audio
      alone without labels), audio float32 (batch, frames, channels), each batch padded
      to its longest file (or every file cut or padded to `output_sequence_length`);
      with `ragged=True`, `tf.RaggedTensor` batches as Keras's; single samples with
      `batch_size=None`; the pair (training, validation) for `subset="both"`. A pass over
      it is one epoch of the kerasgen generator behind it (`dataset.generator`),
      reshuffled from (seed, epoch).
    - `format="kerasgen"`: the `kg.AudioFolderGenerator` itself (a PyDataset, for any
      backend, without TensorFlow).

    Each dataset has Keras's `class_names`, and `file_paths`. `**options` are the
    generator's own arguments (`augment`, `sampler`, `dtype`, `workers`, ...).

    Where kerasgen differs (docs/audio.md): files are read by soundfile, so FLAC, Ogg,
    MP3, AIFF... are listed beside WAV; `sampling_rate` resamples with
    scipy.signal.resample_poly (no tensorflow-io), before `output_sequence_length`
    cuts; the validation split is kerasgen's seeded, stratified one; the files of one
    batch must share their number of channels.
    """
    _check_keras_arguments(labels, label_mode, class_names, ragged, output_sequence_length,
                           sampling_rate, validation_split, subset, shuffle, seed, format)
    keras_functions.check_unbatched(batch_size, format, options, "waveforms",
                                    grain=False)
    if format == "kerasgen" and ragged:
        _checks.fail("ragged", "False with format='kerasgen' (a generator's batches are "
                     "arrays, padded)", ragged, hint="Use format='tf' for ragged batches")
    if labels is None or label_mode is None:
        labels, label_mode = None, None
    if validation_split and seed is None and not shuffle:
        seed = 0  # no shuffling: Keras's split is deterministic; so is this one
    unbatched = batch_size is None
    # ragged or unbatched samples are each their own length: batches of one, unpadded
    single = ragged or (unbatched and output_sequence_length is None)
    options.update(labels=labels, label_mode=label_mode, class_names=class_names,
                   batch_size=1 if single else (32 if unbatched else batch_size),
                   sampling_rate=sampling_rate,
                   output_sequence_length=output_sequence_length, shuffle=shuffle,
                   follow_links=follow_links)
    form = (format, batch_size, ragged, output_sequence_length)
    if subset == "both":
        assert validation_split is not None and seed is not None
        train, validation = AudioFolderGenerator.split(
            directory, validation_split=validation_split, seed=seed, **options)
        _check_binary(train)
        if verbose:
            keras_functions.found(train.source.files_found, keras_functions.classes_of(train))
            print(f"Using {train.num_samples} files for training.")
            print(f"Using {validation.num_samples} files for validation.")
        return _returned(train, *form), _returned(validation, *form)
    gen = AudioFolderGenerator(directory, validation_split=validation_split or None,
                               subset=subset, seed=seed, **options)
    _check_binary(gen)
    if verbose:
        keras_functions.found(gen.source.files_found, keras_functions.classes_of(gen))
        if subset is not None:
            print(f"Using {gen.num_samples} files for {subset}.")
    return _returned(gen, *form)


def _check_keras_arguments(labels, label_mode, class_names, ragged, output_sequence_length,
                           sampling_rate, validation_split, subset, shuffle, seed, format):
    """Keras's own checks of these arguments (and `dataset_utils.
    check_validation_split_arg`'s), in Keras's order, with kerasgen's messages."""
    given_labels(labels, class_names, what="audio file")
    if label_mode not in KERAS_LABEL_MODES:
        _checks.fail("label_mode", "one of 'int', 'categorical', 'binary' or None",
                     label_mode)
    if ragged and output_sequence_length is not None:
        raise ValueError("`ragged` and `output_sequence_length` cannot both be set: ragged "
                         "batches keep each file's length. Received: ragged=True, "
                         f"output_sequence_length={output_sequence_length!r}.")
    check_sampling_rate(sampling_rate)
    _length(output_sequence_length)
    keras_functions.check_split(validation_split, subset, shuffle, seed)
    if format not in FORMATS:
        _checks.fail("format", "'tf' (a tf.data.Dataset) or 'kerasgen' (the "
                     "kg.AudioFolderGenerator)", format)


def _check_binary(gen):
    """Keras's check: label_mode="binary" needs exactly two classes (the generator
    refuses more than two; Keras refuses one too)."""
    names = gen.class_names
    if gen.label_mode == "binary" and names is not None and len(names) != 2:
        raise ValueError("label_mode='binary' needs exactly two classes, as Keras's. "
                         f"Received: class_names={list(names)}.")


def _returned(gen, format, batch_size, ragged, length):
    """What Keras returns for `format`, made from `gen`, with Keras's attributes."""
    if format == "kerasgen":
        return gen
    from kerasgen.adapter import tfdata as _tfdata

    dataset = _tfdata.pass_dataset(gen, unbatch=batch_size is None or ragged)
    dataset = _keras_form(dataset, batch_size, ragged, length)
    dataset.class_names = gen.class_names
    dataset.file_paths = list(gen.file_paths)
    dataset.generator = gen
    return dataset


def _keras_form(dataset, batch_size, ragged, length):
    """`dataset` (kerasgen's batches, or single samples) with Keras's element spec:
    audio of static shape (batch, `length` or None, None), its length and channels
    unknown as decode_wav leaves them; with `ragged`, each sample a tf.RaggedTensor
    (tf.RaggedTensor.from_tensor, as Keras), batched by tf.data."""
    import tensorflow as tf

    shape = [length, None] if batch_size is None or ragged else [None, length, None]

    def relax(*parts):
        x = tf.raw_ops.PlaceholderWithDefault(input=parts[0], shape=shape)  # no copy
        if ragged:
            x = tf.RaggedTensor.from_tensor(x)
        return x if len(parts) == 1 else (x,) + parts[1:]

    dataset = dataset.map(relax)
    if ragged and batch_size is not None:
        dataset = dataset.batch(batch_size)
    return dataset
