"""The ready-made generators: in-memory arrays, image folders and CSV lists."""

from __future__ import annotations

import inspect
import numbers
import os
import reprlib
import time
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from kerasgen import _checks
from kerasgen import _batching as batching
from kerasgen import _images as images
from kerasgen import _seeding as seeding
from kerasgen import _sources as sources
from kerasgen import _labels as labels_mod
from kerasgen import loader as loader_mod
from kerasgen._typing import (Arrays, BatchArrays, Cache, ColorMode, FolderLabels,
                              ImageSize, Interpolation, LabelMode, OnError, StrPath, Subset)
from kerasgen.base import Generator

if TYPE_CHECKING:
    import pandas as pd

_Folder = TypeVar("_Folder", bound="ImageFolderGenerator")


def _as_arrays(value, name):
    """An ndarray, or a dict of ndarrays, with the number of samples they hold."""
    if isinstance(value, dict):
        if not value:
            _checks.fail(name, "a non-empty dict of arrays", value)
        arrays = {k: np.asarray(v) for k, v in value.items()}
        lengths = {k: len(v) for k, v in arrays.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"Every array of `{name}` must hold the same number of "
                             f"samples. Received lengths {lengths}.")
        return arrays, next(iter(lengths.values()))
    array = np.asarray(value)
    if array.ndim == 0:
        _checks.fail(name, "an array with one row per sample", value, TypeError)
    return array, len(array)


def _check_convertible(array, name, dtype, chunk=4096):
    """Refuses, naming the first row at fault, an object or string array whose batches
    could not be converted to `dtype` (ragged rows, arrays as elements, text). The rows
    are converted as batches are, a chunk at a time; numeric arrays always convert."""
    if array.dtype.kind not in "OUS":
        return
    out = np.empty((min(chunk, len(array)),) + array.shape[1:], dtype)
    for start in range(0, len(array), chunk):
        rows = array[start:start + chunk]
        try:
            out[:len(rows)] = rows
        except (ValueError, TypeError, OverflowError) as error:
            for i in range(start, start + len(rows)):
                try:
                    out[0] = array[i]
                except (ValueError, TypeError, OverflowError) as row_error:
                    raise ValueError(_unconvertible(array, name, dtype, i, row_error)) \
                        from row_error
            raise ValueError(f"`{name}` cannot be converted to dtype={dtype!r}: {error}. "
                             f"Received: {name} of dtype {array.dtype}.") from error


def _unconvertible(array, name, dtype, row, error):
    """The message for `array`, whose `row` cannot be converted to `dtype`."""
    value = array[row]
    if isinstance(value, np.generic):
        value = value.item()  # 'a', not np.str_('a')
    if array.dtype == object and array.ndim == 1 and np.ndim(value) > 0:
        first = np.shape(array[0])
        for i, other in enumerate(array):
            if np.shape(other) != first:
                return (f"`{name}` must have one shape per row to be batched. Received: a "
                        f"ragged object array, row 0 of shape {first}, row {i} of shape "
                        f"{np.shape(other)}. Pad the rows to one length first "
                        "(keras.utils.pad_sequences, say), or pass an `augment` that "
                        "returns one shape.")
        return (f"`{name}` must be a numeric array, not an object array of arrays. "
                f"Received: {len(array)} rows of shape {first} in an object array. Stack "
                f"them into one array first: np.stack(list({name})).")
    if array.dtype.kind in "US" or isinstance(value, (str, bytes)) or (
            np.ndim(value) and any(isinstance(v, (str, bytes))
                                   for v in np.asarray(value, dtype=object).ravel())):
        return (f"`{name}` holds text that cannot be converted to dtype={dtype!r}. Received: "
                f"row {row} = {reprlib.repr(value)} ({name} of dtype {array.dtype}). "
                "Encode it as numbers first, or pass dtype=None to keep it as it is (for a "
                "model that takes strings, with a TextVectorization layer, say).")
    return (f"`{name}` cannot be converted to dtype={dtype!r}: row {row} = "
            f"{reprlib.repr(value)} ({error}). Received: {name} of dtype {array.dtype}.")


class ArrayGenerator(Generator):
    """Batches of in-memory arrays, for any rank of x (tabular, images, sequences).

    Args:
        x: an array (n, ...) or a dict of arrays (multi-input models).
        y: None, an array (n, ...) or a dict of arrays (multi-output models).
        sample_weight: optional (n,) weights, returned as the batch's third element.
        label_mode: "raw" (default: y as given), "int", "categorical", "binary",
            "multi_label" or None (x only).
        **common: batch_size, shuffle, seed, num_classes, class_names, dtype ("float32"
            by default; None keeps x's own dtype), augment, sampler, drop_remainder,
            workers, use_multiprocessing, max_queue_size (see `kg.Generator`).
    """

    def __init__(self, x: Arrays, y: Arrays | None = None, *,
                 sample_weight: npt.ArrayLike | None = None,
                 label_mode: LabelMode | None = "raw", **common: Any) -> None:
        _checks.labels_come_from(self, common, "`y` (one target per sample)")
        self.x, num_samples = _as_arrays(x, "x")
        if y is not None:
            if label_mode == "multi_label" and isinstance(y, (list, tuple)):
                y, num_targets = list(y), len(y)  # one list of labels per sample
            else:
                y, num_targets = _as_arrays(y, "y")
            if num_targets != num_samples:
                raise ValueError(
                    "`x` and `y` must hold the same number of samples. Received: "
                    f"len(x)={num_samples}, len(y)={num_targets}."
                )
        elif label_mode not in ("raw", None):
            raise ValueError(f"label_mode={label_mode!r} needs `y`. Received: y=None.")
        self.masks = None
        if label_mode == "mask":
            if isinstance(y, dict) or y.ndim not in (3, 4):
                raise ValueError("label_mode='mask' needs `y` as masks of class ids, shaped "
                                 "(n, h, w) or (n, h, w, 1).")
            self.masks, y = y, None
            if common.get("num_classes") is None and common.get("class_names") is None:
                common["num_classes"] = int(self.masks.max()) + 1
        super().__init__(num_samples, labels=y, label_mode=label_mode,
                         sample_weight=sample_weight, **common)
        if self.augment is None and self.dtype is not None:  # batches convert x as it is
            for name, array in (self.x.items() if isinstance(self.x, dict)
                                else [(None, self.x)]):
                _check_convertible(array, "x" if name is None else f"x[{name!r}]",
                                   self.dtype)

    def load_sample(self, index: int) -> BatchArrays | tuple[BatchArrays, np.ndarray]:
        if isinstance(self.x, dict):
            x = {k: v[index] for k, v in self.x.items()}
        else:
            x = self.x[index]
        return x if self.masks is None else (x, self.masks[index])

    @property
    def sampler_features(self) -> Any:
        """`features=` when given, else x (None when x is a dict of arrays)."""
        if self._features is not None or isinstance(self.x, dict):
            return self._features
        return self.x

    def load_batch(self, indices: np.ndarray, positions: np.ndarray,
                   partners: np.ndarray | None = None, lams: np.ndarray | None = None,
                   ) -> tuple[BatchArrays, np.ndarray | None]:
        if self.augment is not None:
            return super().load_batch(indices, positions, partners, lams)
        with self._stage("read"):
            if isinstance(self.x, dict):
                x = {k: self._take(v, indices, partners, lams) for k, v in self.x.items()}
            else:
                x = self._take(self.x, indices, partners, lams)
            masks = None if self.masks is None else np.take(self.masks, indices, axis=0)
        with self._stage("assemble"):
            return self.finish_x(x), masks

    def _take(self, array, indices, partners, lams):
        rows = None
        if array.dtype != object:
            rows = self._buffers.empty((len(indices),) + array.shape[1:], array.dtype)
        rows = np.take(array, indices, axis=0, out=rows)
        if partners is None:
            return rows
        synthetic = partners >= 0
        return batching.blend_rows(rows, np.take(array, partners[synthetic], axis=0),
                                   lams[synthetic], synthetic)


class _ImageFileGenerator(Generator):
    """Shared by the generators whose samples are image files: an `ImageLoader` (decode,
    resize, cache, bad-file policy, thread pool) under the generator's order, SMOTE
    blending, augmentation and batch assembly."""

    prefetch_auto = 4
    ahead_threads = 2  # two batches made at once: no core idles at a batch's end

    def _set_images(self, file_paths, image_size, color_mode, interpolation, rescale,
                    cache="auto", on_error="raise", decode_threads=None, verbose=1,
                    mask_paths=None, skipped=(), aspect=None, max_pixels=images.MAX_PIXELS,
                    root=None):
        if rescale is not None and (isinstance(rescale, bool)
                                    or not isinstance(rescale, numbers.Real)):
            _checks.fail("rescale", "None or a number (1/255, say)", rescale, TypeError)
        self.rescale = rescale
        self.cache = cache
        self.loader = loader_mod.ImageLoader(
            file_paths, image_size, color_mode, interpolation, cache=cache,
            on_error=on_error, decode_threads=decode_threads, mask_paths=mask_paths,
            verbose=verbose, skipped=skipped, aspect=aspect, max_pixels=max_pixels,
            root=root)

    def _wire_loader(self):
        """After Generator.__init__: the loader learns what it needs of the generator, and
        the order the files it reads (states record them: see EpochOrder.files_name)."""
        self.loader.wire(self, self._stand_ins)
        self._order.file_paths = self.loader.file_paths

    def _pace(self, waited):
        self.loader.pace(waited)

    # what users read, kept on the generator (the loader holds them)
    @property
    def file_paths(self) -> list[str]:
        """One image path per sample, in sample order."""
        return self.loader.file_paths

    @property
    def mask_paths(self) -> list[str] | None:
        """One mask path per sample (label_mode="mask"), or None."""
        return self.loader.mask_paths

    @property
    def image_size(self) -> tuple[int, int]:
        return self.loader.image_size

    @property
    def color_mode(self) -> ColorMode:
        return self.loader.color_mode

    @property
    def interpolation(self) -> Interpolation:
        return self.loader.interpolation

    @property
    def on_error(self) -> OnError:
        return self.loader.on_error

    @property
    def max_pixels(self) -> int | None:
        return self.loader.max_pixels

    @property
    def decode_threads(self) -> int | None:
        return self.loader.decode_threads

    @property
    def verbose(self) -> int:
        return self.loader.verbose

    @property
    def skipped(self) -> list[str]:
        """Every file skipped so far (missing rows, undecodable files)."""
        return self.loader.skipped

    def _check_image_options(self):
        if self.on_error == "skip" and self._targets.class_ids is None and (
                self.label_mode not in (None, "mask")):
            raise ValueError(
                "on_error='skip' replaces a bad image by another of its class, but with "
                f"label_mode={self.label_mode!r} samples have no single class, so the "
                "stand-in's image would not match the targets. Use on_error='raise' and "
                "gen.validate() to find the bad files first."
            )
        if self.rescale is not None and self.dtype not in ("float32", "float16"):
            raise ValueError(
                f"`rescale` applies to float batches only. Received: rescale={self.rescale} "
                f"with dtype={self.dtype!r}. Use dtype='float32', or drop rescale and let "
                "the model rescale (a keras.layers.Rescaling layer)."
            )

    def _stand_ins(self, index):
        """Replacements for undecodable sample `index`, in order: the other samples of its
        class, permuted by (seed, index) alone, so every worker picks the same one."""
        labels = self._targets.class_ids
        if labels is not None:
            candidates = np.flatnonzero(labels == labels[index])
        else:
            candidates = np.arange(len(self.file_paths))
        candidates = candidates[candidates != index]
        group = (f"class {self.class_names[labels[index]]!r}" if labels is not None
                 and self.class_names else "the dataset")
        return seeding.rng(self.seed, seeding.SKIP, index).permutation(candidates), group

    def describe_sample(self, index: int) -> str:
        return self.file_paths[index]

    def load_sample(self, index: int) -> np.ndarray:
        return self.loader.load(index)

    def load_batch(self, indices: np.ndarray, positions: np.ndarray,
                   partners: np.ndarray | None = None, lams: np.ndarray | None = None,
                   ) -> tuple[BatchArrays, np.ndarray | None]:
        if partners is None:
            if self.augment is not None:
                return self._load_augmented(indices, positions)
            return self.loader.decode(indices, self.dtype or np.uint8, self.rescale)
        # SMOTE: decode the partners after the batch's own rows, blend, then augment
        n, synthetic = len(indices), np.flatnonzero(partners >= 0)
        out, masks = self.loader.decode(np.concatenate([indices, partners[synthetic]]),
                                        np.uint8)
        rows = np.zeros(n, bool)
        rows[synthetic] = True
        out = batching.blend_rows(out[:n], out[n:], lams[synthetic], rows)
        masks = None if masks is None else masks[:n]  # a synthetic sample keeps x_i's mask
        if self.augment is not None:
            with self._stage("augment"):
                pairs = [pair for part in self.loader.in_threads(n, lambda a, b: [
                    self.augment_sample(out[k], positions[k],
                                        None if masks is None else masks[k])
                    for k in range(a, b)]) for pair in part]
            with self._stage("assemble"):
                out = self.assemble([x for x, _ in pairs], indices)
                if masks is not None:
                    masks = self.assemble([m for _, m in pairs], indices)
        return self.finish_x(out), masks

    def _load_augmented(self, indices, positions):
        """Decodes, augments and converts each sample in the pool's threads, straight into
        the batch (sample 0 first, here, to learn the augmented shape)."""
        loader = self.loader

        def one(k):
            pixels = np.empty(loader.sample_shape, np.uint8)
            mask = None
            with self._stage("decode"):
                mask = loader.load_with_mask(int(indices[k]), pixels)[1]
            with self._stage("augment"):
                return self.augment_sample(pixels, positions[k], mask)

        def put(k, sample, batch, rescale):
            sample = np.asarray(sample)
            if sample.shape != batch.shape[1:]:  # the error names the sample
                batching.write(batch, k, sample, lambda: self.describe_sample(int(indices[k])))
            batching.convert_into(batch[k], sample, rescale)

        x0, m0 = one(0)
        x0 = np.asarray(x0)
        out = np.empty((len(indices),) + x0.shape, self.dtype or x0.dtype)
        masks = None if m0 is None else np.empty((len(indices),) + np.shape(m0), np.int32)

        def chunk(a, b):
            for k in range(a, b):
                x, m = (x0, m0) if k == 0 else one(k)
                with self._stage("assemble"):
                    put(k, x, out, self.rescale)
                    if masks is not None:
                        put(k, m, masks, None)

        loader.in_threads(len(indices), chunk)
        return out, masks

    @property
    def sampler_features(self) -> Any:
        """`features=` when given, else 8x8 RGB thumbnails, made once per needed sample."""
        if self._features is not None:
            return self._features
        if getattr(self, "_thumbnails", None) is None:
            self._thumbnails = _Thumbnails(self.loader)
        return self._thumbnails

    def validate(self) -> list[str]:
        """Decodes every file once (in parallel, with progress); returns the bad paths."""
        return self.loader.validate()


class ImageFolderGenerator(_ImageFileGenerator):
    """Images in a folder with one subfolder per class (searched recursively).

    Takes the arguments of Keras's `image_dataset_from_directory` with Keras's meaning
    (`labels`, `label_mode="int"`, `crop_to_aspect_ratio`, `pad_to_aspect_ratio`, every
    `interpolation`); `kg.image_dataset_from_directory` is Keras's function itself.

    Args:
        directory: the folder.
        labels: "inferred" (default): the class of an image is its subfolder. None: no
            labels; every image under `directory` is loaded (batches are `(x,)`). A list
            or tuple of labels, one per image file in Keras's order (os.walk's folders
            sorted by path, files sorted by name; see `file_paths`): integer class ids
            0..n-1 (or below `num_classes`), or class names (sorted to class ids).
        label_mode: "int" (default, as Keras), "categorical", "binary", "raw" (class
            ids), "mask" (with `mask_dir`) or None. With labels="inferred" and
            label_mode=None the class subfolders are still listed (and `class_names`
            set) when there are some; a folder without subfolders is read flat.
        class_names: the classes to use, in class-id order; default: the sorted
            subfolder names. Only with labels="inferred".
        image_size: (height, width) every image is resized to.
        color_mode: "rgb", "rgba" or "grayscale".
        validation_split, subset: a seeded, stratified split; subset "training" or
            "validation". Generators built with the same seed never overlap and together
            hold every file. For both at once use `ImageFolderGenerator.split(...)`.
        interpolation: "bilinear" (default, as Keras and tf.data), "area" (better
            downscaling, about twice the cost), "bicubic", "nearest", "lanczos", and
            Keras's "lanczos3", "lanczos5", "gaussian", "mitchellcubic" (OpenCV's closest
            method; see docs/image-folder-generator.md).
        crop_to_aspect_ratio: resize without distortion: cut the largest centred window
            with the aspect ratio of `image_size` first (Keras's smart_resize).
        pad_to_aspect_ratio: resize without distortion: fit the whole image and pad it,
            centred, with black (tf.image.resize_with_pad). Not with crop_to_aspect_ratio.
        rescale: factor applied when converting to a float dtype (1/255, say).
        follow_links: False (default): as Keras, links to files and class folders that
            are links are read, links to folders inside a class folder are not entered;
            a link leading outside `directory` is an error naming it (Keras would read
            it). True: every link is followed, each real folder listed once. Only
            regular files are read (a FIFO named x.png is left out, with a warning).
        mask_dir: segmentation (with label_mode="mask"): a folder of masks mirroring
            `directory`: the mask of images/a/b.jpg is masks/a/b.<any image extension>.
            Masks load single-channel, resize with nearest neighbour, and get exactly the
            geometric transform of their image; y is (n, h, w) class ids, or one-hot with
            mask_format="one_hot".
        cache: decoded, resized uint8 samples kept for later epochs (augmentation runs
            after the cache). "auto" (default): in RAM, as many samples as fit in 1 GiB
            (or a tenth of the machine's memory, if less), shared memory with worker
            processes. "memory": every sample in RAM. A file path: memory-mapped, shared by worker
            processes and reused by later runs while the files, their sizes and times,
            image_size and color_mode are unchanged; rebuilt otherwise. None: decode
            every epoch.
        on_error: "raise" (default): an undecodable file is an error naming it. "skip":
            it is replaced by another sample of its class (chosen from the seed), with one
            warning; `gen.skipped` lists every skipped file. `gen.validate()` scans all
            files up front. Every decoder error counts (corrupt, truncated, empty, gone,
            not a regular file, larger than `max_pixels`, refused by OpenCV, a bad mask).
        max_pixels: the most pixels an image may have, read from its header before it is
            decoded; larger images are bad files (see `on_error`). Default 89_478_485,
            Pillow's decompression-bomb limit (`PIL.Image.MAX_IMAGE_PIXELS`); None: no
            limit (OpenCV's own, 2**30 pixels, remains).
        decode_threads: threads decoding each batch (default: every core, shared by worker
            threads; cores // workers with worker processes).
        verbose: 0 hides progress bars (shown, with tqdm installed, for slow steps).
        **common: see `kg.Generator`.
    """

    def __init__(self, directory: StrPath, *,
                 labels: FolderLabels = "inferred",
                 label_mode: Literal["int", "categorical", "binary", "raw", "mask"]
                 | None = "int",
                 class_names: Sequence[str] | None = None, color_mode: ColorMode = "rgb",
                 image_size: ImageSize = (256, 256), validation_split: float | None = None,
                 subset: Subset | None = None,
                 interpolation: Interpolation = "bilinear", follow_links: bool = False,
                 crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
                 rescale: float | None = None, cache: Cache = "auto",
                 on_error: OnError = "raise", decode_threads: int | None = None,
                 verbose: int = 1, mask_dir: StrPath | None = None, seed: int | None = None,
                 max_pixels: int | None = images.MAX_PIXELS, **common: Any) -> None:
        _check_common(self, common)  # before listing a folder that may not exist
        if subset == "both":
            raise ValueError(
                "`subset` must be 'training' or 'validation' for one generator. Received: "
                "subset='both'. For the (training, validation) pair use "
                "kg.ImageFolderGenerator.split(directory, validation_split=..., seed=..., "
                "...) or kg.image_dataset_from_directory(..., subset='both')."
            )
        if label_mode == "multi_label":
            raise ValueError("label_mode='multi_label' does not apply to a folder of "
                             "classes; use a CSVGenerator with several label columns.")
        if (mask_dir is None) != (label_mode != "mask"):
            raise ValueError("`mask_dir` and label_mode='mask' go together. Received: "
                             f"mask_dir={mask_dir!r}, label_mode={label_mode!r}.")
        given = _given_labels(labels, class_names, mask_dir)
        if labels is None:
            label_mode = None  # as Keras: no labels, no label mode
        aspect = images.aspect_mode(crop_to_aspect_ratio, pad_to_aspect_ratio)
        listing_started = time.perf_counter()
        if mask_dir is not None:  # segmentation: every image under directory, no classes
            paths = sources.list_image_folder(directory, classes_required=False,
                                              flat=True, follow_links=follow_links)[0]
            class_ids, names = None, class_names
            masks = sources.paired_masks(paths, directory, mask_dir)
        elif labels is None or given is not None:  # Keras: every image, in its order
            paths = sources.keras_order(sources.list_image_folder(
                directory, flat=True, follow_links=follow_links)[0])
            class_ids, names, masks = None, None, None
            if given is not None:
                class_ids, names = _list_labels(given, paths, directory,
                                                common.get("num_classes"))
                if label_mode is None:
                    class_ids = None
        else:
            paths, class_ids, names = sources.list_image_folder(
                directory, class_names, classes_required=label_mode is not None,
                follow_links=follow_links)
            masks = None
        self._files_found = len(paths)  # before the split (Keras prints it)
        keep = sources.validation_subset(class_ids, len(paths), validation_split, subset,
                                         seed)
        if keep is not None:
            paths = [paths[i] for i in keep]
            class_ids = None if class_ids is None else class_ids[keep]
            masks = None if masks is None else [masks[i] for i in keep]
        self.directory = os.fspath(directory)
        self.validation_split, self.subset = validation_split, subset
        self.crop_to_aspect_ratio = bool(crop_to_aspect_ratio)
        self.pad_to_aspect_ratio = bool(pad_to_aspect_ratio)
        self._set_images(paths, image_size, color_mode, interpolation, rescale, cache,
                         on_error, decode_threads, verbose, masks, aspect=aspect,
                         max_pixels=max_pixels)
        listing_s = time.perf_counter() - listing_started
        super().__init__(len(paths), labels=class_ids, label_mode=label_mode,
                         class_names=names, seed=seed, **common)
        self._check_image_options()
        self._wire_loader()
        if self._stats is not None:
            self._stats.add("list", listing_s)

    @classmethod
    def split(cls: type[_Folder], directory: StrPath, *, validation_split: float, seed: int,
              **kwargs: Any) -> tuple[_Folder, _Folder]:
        """The (training, validation) pair of one seeded, stratified split, as Keras's
        `subset="both"` returns it. Both take `kwargs`, except that the validation
        generator keeps the folder order (shuffle=False) and gets none of the
        training-only `augment`, `batch_augment`, `sampler` and `drop_remainder`.
        """
        if "subset" in kwargs:
            raise TypeError("ImageFolderGenerator.split() makes both subsets; it takes no "
                            f"`subset`. Received: subset={kwargs['subset']!r}.")
        train = cls(directory, validation_split=validation_split, subset="training",
                    seed=seed, **kwargs)
        for name in _TRAINING_ONLY:
            kwargs.pop(name, None)
        kwargs["shuffle"] = False
        validation = cls(directory, validation_split=validation_split,
                         subset="validation", seed=seed, **kwargs)
        return train, validation


_TRAINING_ONLY = ("augment", "batch_augment", "sampler", "drop_remainder")


def _check_common(gen, common):
    """The TypeError of `Generator.__init__` for unknown keyword arguments, raised before
    the subclass does any work."""
    known = inspect.signature(Generator.__init__).parameters
    unknown = {k: v for k, v in common.items() if k not in known}
    if unknown:
        _checks.unknown_arguments(gen, unknown)


def _given_labels(labels, class_names, mask_dir):
    """The list of labels given as `labels=` (None for "inferred" or None), checked as
    Keras checks it."""
    if isinstance(labels, str) and labels == "inferred" or labels is None:
        return None
    if isinstance(labels, np.ndarray) and labels.ndim == 1:
        labels = labels.tolist()
    if not isinstance(labels, (list, tuple)):
        raise ValueError(
            "`labels` must be 'inferred' (labels from the subfolder names), None (no "
            "labels) or a list/tuple of labels, one per image file. Received: "
            f"labels={labels!r}"
        )
    if class_names is not None:
        raise ValueError(
            "`class_names` goes with labels='inferred' only: with a list of labels the "
            "classes are the sorted distinct labels. Received: labels=<a list of "
            f"{len(labels)}> and class_names={class_names!r}"
        )
    if mask_dir is not None:
        raise ValueError("`mask_dir` reads one mask per image; it takes no `labels` list.")
    return list(labels)


def _list_labels(labels, paths, directory, num_classes):
    """(class ids, class names) of a list of labels given one per file of `paths`."""
    if len(labels) != len(paths):
        raise ValueError(
            f"`labels` must hold one label per image file. Received: {len(labels)} labels "
            f"for the {len(paths)} image files found in {directory} (in the order of "
            "gen.file_paths: os.walk's folders sorted by path, files sorted by name)."
        )
    numbers_given = [isinstance(v, numbers.Integral) and not isinstance(v, bool)
                     for v in labels]
    if all(numbers_given):
        ids = np.asarray(labels, dtype="int64")
        distinct = sorted(set(ids.tolist()))
        if num_classes is not None:
            return ids, [str(c) for c in range(_checks.positive_int("num_classes",
                                                                     num_classes))]
        missing = sorted(set(range(len(distinct))) - set(distinct))
        if missing:
            raise ValueError(
                "Integer `labels` must be class ids 0..n-1, each used. Received: labels "
                f"{distinct[:10]}{' ...' if len(distinct) > 10 else ''}; no file has "
                f"class {missing[:10]}. Renumber them, pass num_classes= (classes may then "
                "have no file), or pass the labels as class names (strings)."
            )
        return ids, [str(c) for c in distinct]
    if all(isinstance(v, str) for v in labels):
        names = sorted(set(labels))
        index = {name: k for k, name in enumerate(names)}
        return np.asarray([index[v] for v in labels], dtype="int64"), names
    first_is_name = isinstance(labels[0], str)
    bad = next(i for i, v in enumerate(labels)
               if isinstance(v, str) != first_is_name or not (first_is_name or numbers_given[i]))
    raise ValueError(
        "`labels` must be all integer class ids or all class names (strings). Received: "
        f"{labels[bad]!r} for {paths[bad]}."
    )


class CSVGenerator(_ImageFileGenerator):
    """Images listed in a CSV file (or a pandas DataFrame): a path column and labels.

    Args:
        csv: path to a CSV file with a header line, or a pandas DataFrame.
        x_col: the column of image paths, relative to `directory`.
        y_col: a label column; a list of 0/1 columns for label_mode="multi_label"; a list
            of numeric columns for label_mode="raw" (multi-target regression).
        directory: the folder paths are relative to (default: the CSV file's folder, or
            the working directory for a DataFrame). When `directory` is given, paths that
            leave it through '..', an absolute path or a symbolic link are refused unless
            allow_outside=True, when the generator is built and again each time a file
            is opened (a file replaced by a link out of `directory` later is a bad file,
            see `on_error`); without `directory`, paths are taken as written.
        label_mode: "int" (default, as Keras), "categorical", "binary", "multi_label",
            "raw", "mask" or None.
        label_delimiter: separates several labels in one cell for "multi_label" ("a|b").
            Under a single-label mode a cell holding it is an error (a forgotten
            "multi_label"); None: no delimiter, one label per cell.
        validation_split, subset: a seeded, stratified split of the rows, as for
            ImageFolderGenerator; classes are inferred from every row first, so both
            subsets share one class-id mapping.
        encoding: the CSV file's text encoding ("utf-8" by default; "latin-1"...).
        on_missing: "raise" (default) when listed files (images or masks) do not exist,
            or "skip" to drop those rows with a warning (`gen.skipped` lists them).
        mask_col: segmentation (with label_mode="mask"): the column of mask paths,
            resolved like `x_col`; see ImageFolderGenerator's `mask_dir`.
        image_size, color_mode, class_names, interpolation, rescale, cache, on_error,
            decode_threads, verbose, max_pixels: as for ImageFolderGenerator.
        **common: see `kg.Generator`.
    """

    def __init__(self, csv: StrPath | pd.DataFrame, *, x_col: str = "filename",
                 y_col: str | Sequence[str] = "label", directory: StrPath | None = None,
                 image_size: ImageSize = (256, 256), color_mode: ColorMode = "rgb",
                 class_names: Sequence[str] | None = None,
                 label_mode: LabelMode | None = "int", label_delimiter: str | None = "|",
                 on_missing: Literal["raise", "skip"] = "raise", allow_outside: bool = False,
                 interpolation: Interpolation = "bilinear", rescale: float | None = None,
                 cache: Cache = "auto", on_error: OnError = "raise",
                 decode_threads: int | None = None, verbose: int = 1,
                 mask_col: str | None = None, validation_split: float | None = None,
                 subset: Subset | None = None,
                 seed: int | None = None, encoding: str = "utf-8",
                 num_classes: int | None = None, max_pixels: int | None = images.MAX_PIXELS,
                 **common: Any) -> None:
        _checks.labels_come_from(self, common, "the `y_col` column (y_col=...)")
        if (mask_col is None) != (label_mode != "mask"):
            raise ValueError("`mask_col` and label_mode='mask' go together. Received: "
                             f"mask_col={mask_col!r}, label_mode={label_mode!r}.")
        _checks.one_of("on_missing", on_missing, ("raise", "skip"))
        listing_started = time.perf_counter()
        table = sources.Table(csv, encoding)
        table.column(x_col, "x_col")
        if mask_col is not None:
            table.column(mask_col, "mask_col")
        y_cols = None
        if label_mode not in (None, "mask"):
            y_cols = list(y_col) if isinstance(y_col, (list, tuple)) else [y_col]
            for name in y_cols:
                table.column(name, "y_col")
            if len(y_cols) > 1 and label_mode not in ("multi_label", "raw"):
                raise ValueError(
                    f"Several `y_col` columns need label_mode='multi_label' (0/1 columns) "
                    f"or 'raw' (numeric targets). Received: label_mode={label_mode!r}, "
                    f"y_col={y_col!r}."
                )
        paths = sources.resolve_paths(table.columns[x_col], table, directory,
                                      allow_outside, table.describe)
        masks = None if mask_col is None else sources.resolve_paths(
            table.columns[mask_col], table, directory, allow_outside, table.describe)
        missing = [i for i, p in enumerate(paths) if not os.path.isfile(p)
                   or (masks is not None and not os.path.isfile(masks[i]))]
        skipped = []
        if missing:
            listed = ", ".join(f"{paths[i]} ({table.describe(i)})" for i in missing[:5])
            if on_missing == "raise":
                raise FileNotFoundError(
                    f"{len(missing)} files listed in {table.name()} do not exist: {listed}"
                    f"{' ...' if len(missing) > 5 else ''}. Fix the paths (or `directory`), "
                    "or pass on_missing='skip' to drop those rows."
                )
            skipped = [paths[i] for i in missing]
            warnings.warn(f"Skipping {len(missing)} rows of {table.name()} whose files do "
                          f"not exist: {listed}{' ...' if len(missing) > 5 else ''}. "
                          "`gen.skipped` lists them all.", stacklevel=2)
            gone = set(missing)
            keep = [i for i in range(len(paths)) if i not in gone]
            table.subset(keep)
            paths = [paths[i] for i in keep]
            masks = None if masks is None else [masks[i] for i in keep]
            if not paths:
                raise ValueError(f"No row of {table.name()} names an existing file.")
        labels, names = None, class_names
        if y_cols is not None:
            labels = _csv_labels(table, y_cols, label_mode, label_delimiter, class_names,
                                 num_classes)
            if len(y_cols) > 1 and label_mode == "multi_label" and names is None:
                names = y_cols
        keep, names, num_classes = _split(
            labels, len(paths), label_mode, names, num_classes, validation_split, subset,
            seed, lambda i: f"{paths[i]} ({table.describe(i)})")
        if keep is not None:
            table.subset(keep)
            paths, masks, labels = (_rows(v, keep) for v in (paths, masks, labels))
        self.table = table
        self.directory = directory
        self.validation_split, self.subset = validation_split, subset
        root = (os.path.realpath(directory) if directory is not None and not allow_outside
                else None)  # checked again as each file is opened
        self._set_images(paths, image_size, color_mode, interpolation, rescale, cache,
                         on_error, decode_threads, verbose, masks, skipped,
                         max_pixels=max_pixels, root=root)
        listing_s = time.perf_counter() - listing_started
        super().__init__(len(paths), labels=labels, label_mode=label_mode,
                         class_names=names, num_classes=num_classes, seed=seed, **common)
        self._check_image_options()
        self._wire_loader()
        if self._stats is not None:
            self._stats.add("list", listing_s)

    def describe_sample(self, index: int) -> str:
        return f"{self.file_paths[index]} ({self.table.describe(index)})"


def _csv_labels(table, y_cols, label_mode, delimiter, class_names=None, num_classes=None):
    """The label columns as the values `labels.encode` expects for `label_mode`."""
    if len(y_cols) > 1 or label_mode == "raw":
        columns = [[sources.parse_number(v) for v in table.columns[c]] for c in y_cols]
        rows = list(zip(*columns))
        for i, row in enumerate(rows):
            for name, value in zip(y_cols, row):
                if not isinstance(value, numbers.Real) or isinstance(value, bool):
                    raise ValueError(
                        f"Column {name!r} must hold numbers for label_mode="
                        f"{label_mode!r}. Received: {value!r} at {table.describe(i)}."
                    )
        matrix = np.asarray(rows, dtype="float32" if label_mode == "raw" else "float64")
        return matrix[:, 0] if label_mode == "raw" and len(y_cols) == 1 else matrix
    return labels_mod.column_labels(table.columns[y_cols[0]], label_mode, delimiter,
                                    y_cols[0], table.describe, class_names, num_classes)


def _split(labels, num_rows, label_mode, class_names, num_classes, validation_split,
           subset, seed, describe):
    """(rows kept or None, class_names, num_classes) for a `validation_split` of a table:
    the folder's seeded, stratified split (`sources.validation_subset`), with the classes
    inferred from every row before splitting, so that the training and validation
    subsets share one class-id mapping even when one of them lacks a class."""
    if validation_split is None and subset is None:
        return None, class_names, num_classes
    targets = labels_mod.encode(labels, label_mode, class_names, num_classes, describe)
    keep = sources.validation_subset(targets.class_ids, num_rows, validation_split, subset,
                                     seed)
    return keep, targets.class_names, targets.num_classes


def _rows(values, keep):
    """The rows `keep` of a list or array (None stays None)."""
    if values is None or isinstance(values, np.ndarray):
        return None if values is None else values[keep]
    return [values[i] for i in keep]


class _Thumbnails:
    """Lazily decoded 8x8 RGB thumbnails, the default SMOTE feature space for images.
    Indexing with an array decodes the samples not seen yet and keeps them."""

    def __init__(self, loader):
        self.loader = loader
        self.table = {}

    def __getitem__(self, indices):
        indices = np.atleast_1d(np.asarray(indices))
        self.loader.thumbnails(indices, self.table)
        return np.stack([self.table[int(i)] for i in indices])
