"""The ready-made generators: in-memory arrays, image folders and CSV lists."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from kerasgen import _checks
from kerasgen.storage import paths as _paths
from kerasgen.storage import remote as _remote
from kerasgen.loading import images
from kerasgen.sources import _listing as listing
from kerasgen.sources import _arrays as arrays
from kerasgen.loading.options import ImageOptions
from kerasgen._typing import (Arrays, Cache, ColorMode, Decoder, FolderLabels,
                              ImageSize, Interpolation, LabelMode, OnError, StrPath, Subset)
from kerasgen.sources._image import ImageSource
from kerasgen.adapter.iterator_names import IteratorNames
from kerasgen.builders import array_checks
from kerasgen.builders.common import Splits as Splits, check_common, one_subset as one_subset
from kerasgen.builders.folder_labels import given_labels, list_labels, value_labels
from kerasgen.builders.image_files import ImageFileGenerator, check_pairing
from kerasgen.builders.image_files import image_source as image_source, paired_source
from kerasgen.builders.tables import (ListedFile, csv_labels, listed_files, rows, split_rows,
    table_columns)
from kerasgen.storage.remote_cache import RemoteCache
from kerasgen.base import Generator

if TYPE_CHECKING:
    import pandas as pd

class ArrayGenerator(Generator, IteratorNames):
    """Batches of in-memory arrays, for any rank of x (tabular, images, sequences).

    Args:
        x: an array (n, ...) or a dict of arrays (multi-input models).
        y: None, an array (n, ...) or a dict of arrays (multi-output models).
        sample_weight: optional (n,) weights, returned as the batch's third element.
        label_mode: "raw" (default: y as given), "int", "categorical", "binary",
            "multi_label", "input" (no y: the target is x itself, augmented) or None
            (x only).
        sparse: False (default): the rows of a scipy.sparse x are made dense in each
            batch. True: each batch's x (for a dict x, each scipy.sparse entry) is its
            rows as a scipy.sparse CSR matrix, which Keras feeds to a model built with
            `keras.Input(shape=(d,), sparse=True)` as a tf.SparseTensor (TensorFlow
            backend) or a jax.experimental.sparse BCOO (JAX); the torch and numpy
            backends take no sparse inputs. `dtype` applies to the stored
            values, SMOTE's synthetic rows are blended sparsely, a `batch_augment`
            callable receives the CSR batch; per-sample `augment` and
            label_mode="input" are refused. See docs/array-generator.md.
        **common: batch_size, shuffle, seed, num_classes, class_names, dtype ("float32"
            by default; None keeps x's own dtype), augment, sampler, drop_remainder,
            workers, use_multiprocessing, max_queue_size (see `kg.Generator`).
    """

    def __init__(self, x: Arrays, y: Arrays | None = None, *,
                 sample_weight: npt.ArrayLike | None = None,
                 label_mode: LabelMode | None = "raw", sparse: bool = False,
                 **common: Any) -> None:
        _checks.labels_come_from(self, common, "`y` (one target per sample)")
        source = _array_source(x, y, label_mode, common, self._row_names())
        if sparse is not False:
            array_checks.check_sparse(source.x, sparse, label_mode, common)
            source.sparse = True
        self.sparse = bool(sparse)
        super().__init__(source=source, label_mode=label_mode,
                         sample_weight=sample_weight, **common)
        if self.sample_weight is not None and (y is None or label_mode is None):
            given = "y=None" if y is None else "label_mode=None"
            raise ValueError(
                "`sample_weight` needs labels (`y`): a batch without targets is x alone, "
                "as Keras reads it, so the weights would be dropped. Received: "
                f"sample_weight of shape {self.sample_weight.shape} with {given}. Pass "
                "`y` (and a label_mode other than None), or leave sample_weight out.")
        if self.augment is None and self.dtype is not None:  # batches convert x as it is
            for name, array in (self.x.items() if isinstance(self.x, dict)
                                else [(None, self.x)]):
                named = "x" if name is None else f"x[{name!r}]"
                array_checks.check_convertible(array, named, self.dtype)
                array_checks.check_fits(array, named, self.dtype, self.rescale)

    def _row_names(self) -> Callable[[int], str] | None:
        """How errors name row i (None: "sample i"); a builder over a table says."""
        return None

    @property
    def x(self) -> Any:
        """The samples' arrays (an array, or a dict of them)."""
        return self.source.x

    def to_tf_dataset(self, epochs: int | None = None, num_parallel_calls: int | None = None,
                      prefetch: int | None = None) -> Any:
        if self.sparse:
            raise ValueError(
                "to_tf_dataset() makes dense tensors only, and this generator's batches "
                "hold sparse rows (sparse=True). Pass the generator to `model.fit(gen)` "
                "itself (Keras feeds its CSR batches to a keras.Input(sparse=True) model "
                "as tf.SparseTensor), or build it with sparse=False for dense batches. "
                "Received: sparse=True.")
        return super().to_tf_dataset(epochs, num_parallel_calls, prefetch)

    @property
    def masks(self) -> np.ndarray | None:
        """The segmentation masks (label_mode="mask"), or None."""
        return self.source.masks


def _array_source(x: Any, y: Any, label_mode: str | None, common: dict[str, Any],
                  describe: Callable[[int], str] | None = None) -> arrays.ArraySource:
    """The ArraySource of (x, y), checked: one target per sample, and masks for
    label_mode="mask" (whose class count then sets `num_classes` when not given)."""
    x, num_samples = arrays.as_arrays(x, "x")
    if y is not None:
        if label_mode == "multi_label" and isinstance(y, (list, tuple)):
            y, num_targets = list(y), len(y)  # one list of labels per sample
        else:
            y, num_targets = arrays.as_arrays(y, "y")
        if num_targets != num_samples:
            raise ValueError(
                "`x` and `y` must hold the same number of samples. Received: "
                f"len(x)={num_samples}, len(y)={num_targets}."
            )
    elif label_mode not in ("raw", "input", None):
        raise ValueError(f"label_mode={label_mode!r} needs `y`. Received: y=None.")
    masks = None
    if label_mode == "mask":
        if isinstance(y, dict) or y.ndim not in (3, 4):
            raise ValueError("label_mode='mask' needs `y` as masks of class ids, shaped "
                             "(n, h, w) or (n, h, w, 1).")
        masks, y = y, None
        if common.get("num_classes") is None and common.get("class_names") is None:
            common["num_classes"] = int(masks.max()) + 1
    return arrays.ArraySource(x, y, masks=masks, describe=describe)


class ImageFolderGenerator(ImageFileGenerator, IteratorNames):
    """Images in a folder with one subfolder per class (searched recursively).

    Takes the arguments of Keras's `image_dataset_from_directory` with Keras's meaning
    (`labels`, `label_mode="int"`, `crop_to_aspect_ratio`, `pad_to_aspect_ratio`, every
    `interpolation`); `kg.image_dataset_from_directory` is Keras's function itself.

    Args:
        directory: the folder: a local path, or a URL that fsspec reads (s3://, gs://,
            https://, ...; see `storage_options`), listed once.
        labels: "inferred" (default): the class of an image is its subfolder. None: no
            labels; every image under `directory` is loaded (batches are `(x,)`). A list
            or tuple of labels, one per image file in Keras's order (os.walk's folders
            sorted by path, files sorted by name; see `file_paths`): integer class ids
            0..n-1 (or below `num_classes`), class names (sorted to class ids), or real
            values (floats, or rows of numbers: regression targets, given as float32,
            as Keras passes them on; label_mode "int" or "raw", then "raw").
        label_mode: "int" (default, as Keras), "categorical", "binary", "raw" (class
            ids), "mask" (with `mask_dir`), "image" (with `target_dir`), "input" (an
            autoencoder: each image, once
            augmented, is its own target; every image under `directory` is read, as
            with labels=None) or None. With labels="inferred" and
            label_mode=None the class subfolders are still listed (and `class_names`
            set) when there are some; a folder without subfolders is read flat.
        class_names: the classes to use, in class-id order; default: the sorted
            subfolder names. Only with labels="inferred".
        image_size: (height, width) every image is resized to.
        color_mode: "rgb", "rgba" or "grayscale".
        validation_split: the fraction held out by a seeded, stratified split.
            Generators built with the same seed never overlap and together hold every
            file. For both at once use `ImageFolderGenerator.split(...)`.
        subset: "training" or "validation", the side of `validation_split` to read.
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
        target_dir: image-to-image (with label_mode="image"): a folder of target images
            mirroring `directory`, matched by name as `mask_dir` is (denoising,
            super-resolution, colourisation). y is the target images, converted and
            rescaled as x is. `augment` transforms both with the same draws: every
            transform of an albumentations pipeline applies to the target too (it is an
            additional target of type "image"); what only the inputs get (noise, blur)
            goes in a callable `batch_augment=fn(x, y, rng) -> (x, y)`. A callable
            augment is called as fn(image, rng, target=target) -> (image, target).
        target_image_size: the targets' (height, width) (default: image_size). An
            albumentations `augment` needs it equal to image_size (it transforms images
            of one size).
        target_color_mode: the targets' colour mode (default: color_mode).
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
        bit_depth: 8, or 16 to keep the 16 bits of 16-bit PNG and TIFF files (8-bit
            images scale to 16 bits: 255 -> 65535); batches then hold 0..65535 in
            dtype="uint16" or "float32" (rescale=1/65535 makes them 0..1). Default:
            16 for dtype="uint16", else 8, where a 16-bit file is reduced to 8 bits as
            Keras's loaders reduce it, with a warning (once).
        decode_threads: threads decoding each batch (default: every core, shared by worker
            threads; cores // workers with worker processes).
        decoder: "opencv" (default), or "nvimgcodec": each decode thread decodes its share
            of a batch's JPEGs in one call to NVIDIA's nvImageCodec (pip install
            "kerasgen3[nvimgcodec]"), on the GPU where CUDA is present, else on its CPU
            backend; other formats and "grayscale"/"rgba" use OpenCV, as do masks (their
            images are decoded by nvImageCodec). Pixels are OpenCV's full-size decode,
            resized as OpenCV's are (within resize error of the default, which decodes
            large JPEGs at reduced size); `augment` runs after, on the CPU, in the decode
            threads (the batch's first sample in the calling thread); the cache,
            `on_error` and samplers work alike.
        verbose: 0 hides progress bars (shown, with tqdm installed, for slow steps).
        storage_options: options for fsspec's filesystem when paths are URLs
            (credentials, `client_kwargs={"endpoint_url": ...}`, ...); see
            docs/remote.md.
        remote_cache: a folder (or `kg.RemoteCache(folder, max_bytes=...)`) keeping
            local copies of the remote objects read, checked and shared by processes and
            runs; None (default): objects are fetched each time the image cache lacks
            them.
        **common: see `kg.Generator`.
    """

    def __init__(self, directory: StrPath, *,
                 labels: FolderLabels = "inferred",
                 label_mode: Literal["int", "categorical", "binary", "raw", "mask", "input",
                                     "image"] | None = "int",
                 class_names: Sequence[str] | None = None, color_mode: ColorMode = "rgb",
                 image_size: ImageSize = (256, 256), validation_split: float | None = None,
                 subset: Subset | None = None,
                 interpolation: Interpolation = "bilinear", follow_links: bool = False,
                 crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
                 rescale: float | None = None, cache: Cache = "auto",
                 on_error: OnError = "raise", decode_threads: int | None = None,
                 decoder: Decoder = "opencv",
                 verbose: int = 1, mask_dir: StrPath | None = None,
                 target_dir: StrPath | None = None, target_image_size: ImageSize | None = None,
                 target_color_mode: ColorMode | None = None, seed: int | None = None,
                 max_pixels: int | None = images.MAX_PIXELS, bit_depth: int | None = None,
                 storage_options: Mapping[str, Any] | None = None,
                 remote_cache: StrPath | RemoteCache | None = None, **common: Any) -> None:
        check_common(self, common)  # before listing a folder that may not exist
        # the image options, checked once, before listing (which applies on_error)
        options = ImageOptions.of(locals()).for_dtype(common.get("dtype"))
        store = _remote.Store(storage_options, _remote.check_cache(remote_cache))
        one_subset(self, subset)
        if label_mode == "multi_label":
            raise ValueError("label_mode='multi_label' does not apply to a folder of "
                             "classes; use a CSVGenerator with several label columns.")
        if (mask_dir is None) != (label_mode != "mask"):
            raise ValueError("`mask_dir` and label_mode='mask' go together. Received: "
                             f"mask_dir={mask_dir!r}, label_mode={label_mode!r}.")
        pairing = check_pairing(target_dir, target_image_size, target_color_mode, label_mode,
                                 image_size, color_mode, common)
        given = given_labels(labels, class_names, mask_dir)
        if target_dir is not None and given is not None:
            raise ValueError("`target_dir` pairs each image with its target image; it takes "
                             "no `labels` list.")
        if labels is None:
            label_mode = None  # as Keras: no labels, no label mode
        if label_mode == "input" and given is not None:
            raise ValueError("label_mode='input' makes each image its own target, so it "
                             "takes no `labels` list. Leave labels out.")
        values = None  # real-valued labels (a regression), float32
        listing_started = time.perf_counter()
        targets = None  # the target images of label_mode="image"
        if mask_dir is not None or target_dir is not None:  # every image, no classes
            found = listing.list_image_folder(directory, classes_required=False, flat=True,
                                              follow_links=follow_links, on_error=on_error,
                                              store=store)
            paths, class_ids, names = found.paths, None, class_names
            masks = None if mask_dir is None else listing.paired_masks(
                paths, directory, mask_dir, store, follow_links=follow_links)
            targets = None if target_dir is None else listing.paired_masks(
                paths, directory, target_dir, store, "target image", "target_dir",
                follow_links)
        elif labels is None or given is not None or label_mode == "input":
            # Keras: every image, in its order (an autoencoder's too: its own target)
            found = listing.list_image_folder(directory, flat=True,
                                              follow_links=follow_links, on_error=on_error,
                                              store=store)
            paths = listing.keras_order(found.paths)
            class_ids, names, masks = None, None, None
            if given is not None:
                values = value_labels(given, paths, directory, label_mode)
                if values is not None:  # regression targets, as Keras passes them on
                    label_mode = "raw" if label_mode is not None else None
                else:
                    class_ids, names = list_labels(given, paths, directory,
                                                    common.get("num_classes"))
                if label_mode is None:
                    class_ids, values = None, None
        else:
            found = listing.list_image_folder(
                directory, class_names, classes_required=label_mode is not None,
                follow_links=follow_links, on_error=on_error, store=store)
            paths, class_ids, names = found.paths, found.class_ids, found.class_names
            masks = None
        files_found = len(paths)  # before the split (Keras prints it)
        keep = listing.validation_subset(class_ids, len(paths), validation_split, subset,
                                         seed, class_names=names, stacklevel=4)
        if keep is not None:
            paths = [paths[i] for i in keep]
            class_ids = None if class_ids is None else class_ids[keep]
            values = None if values is None else values[keep]
            masks = None if masks is None else [masks[i] for i in keep]
            targets = None if targets is None else [targets[i] for i in keep]
        self.directory = os.fspath(directory)
        self.target_dir = None if target_dir is None else os.fspath(target_dir)
        self.validation_split, self.subset = validation_split, subset
        self.crop_to_aspect_ratio = options.crop_to_aspect_ratio
        self.pad_to_aspect_ratio = options.pad_to_aspect_ratio
        root = None if follow_links else _folder_roots(directory, mask_dir)
        if targets is not None:
            source: ImageSource = paired_source(
                paths, targets, common, pairing, options, files_found=files_found,
                listing_s=time.perf_counter() - listing_started,
                target_root=None if follow_links else _folder_roots(None, target_dir),
                skipped=found.skipped, root=root, store=store)
        else:
            source = image_source(
                paths, class_ids if values is None else values, names, common, options,
                files_found=files_found, listing_s=time.perf_counter() - listing_started,
                mask_paths=masks, skipped=found.skipped, root=root, store=store)
        super().__init__(source=source, label_mode=label_mode, seed=seed, **common)


def _folder_roots(directory, paired_dir):
    """The folders a folder generator's files are read from when it follows no link
    out (`directory`, and `mask_dir` or `target_dir`), each checked again as a file is
    opened; URLs are read through the store, not checked here."""
    argument = "`target_dir`" if directory is None else "`mask_dir`"
    return tuple(_paths.Root.of(folder, label, "follow_links=True") for folder, label in (
        (directory, "`directory`"), (paired_dir, argument)) if folder is not None)


class CSVGenerator(ImageFileGenerator, IteratorNames):
    """Images listed in a CSV file (or a pandas DataFrame): a path column and labels.

    Args:
        csv: path to a CSV file with a header line (or a URL that fsspec reads: s3://,
            gs://, https://...), a list or glob pattern of them, or a pandas DataFrame.
        x_col: the column of image paths, relative to `directory`; a cell may be a URL,
            and names in a remote CSV file (or under a URL `directory`) are URLs too.
        y_col: a label column; a list of 0/1 columns for label_mode="multi_label"; a list
            of numeric columns for label_mode="raw" (multi-target regression).
        directory: the folder paths are relative to (default: the CSV file's folder, or
            the working directory for a DataFrame). When `directory` is given, paths that
            leave it through '..', an absolute path or a symbolic link are refused unless
            allow_outside=True, when the generator is built and again each time a file
            is opened (a file replaced by a link out of `directory` later is a bad file,
            see `on_error`); without `directory`, paths are taken as written.
        label_mode: "int" (default, as Keras), "categorical", "binary", "multi_label",
            "raw", "mask", "input" (each image, augmented, its own target; no `y_col`),
            "image" (with `target_col`) or None.
        label_delimiter: separates several labels in one cell for "multi_label" ("a|b").
            Under a single-label mode a cell holding it is an error (a forgotten
            "multi_label"); None: no delimiter, one label per cell.
        validation_split: a seeded, stratified split of the rows, as for
            ImageFolderGenerator; classes are inferred from every row first, so both
            subsets share one class-id mapping.
        subset: "training" or "validation".
        encoding: the CSV file's text encoding ("utf-8" by default; "latin-1"...).
        on_missing: "raise" (default) when listed files (images or masks) do not exist,
            or "skip" to drop those rows with a warning (`gen.skipped` lists them).
        mask_col: segmentation (with label_mode="mask"): the column of mask paths,
            resolved like `x_col`; see ImageFolderGenerator's `mask_dir`.
        target_col: image-to-image (with label_mode="image"): the column of target
            image paths, resolved like `x_col`; see ImageFolderGenerator's `target_dir`
            (and its `target_image_size` and `target_color_mode`).
        **common: see `kg.Generator`.

    `image_size`, `color_mode`, `class_names`, `interpolation`, `crop_to_aspect_ratio`,
    `pad_to_aspect_ratio`, `rescale`, `cache`, `on_error`, `decode_threads`, `decoder`,
    `verbose`, `max_pixels`, `bit_depth`, `storage_options` and `remote_cache` are as
    for ImageFolderGenerator.
    """

    def __init__(self, csv: StrPath | pd.DataFrame, *, x_col: str = "filename",
                 y_col: str | Sequence[str] = "label", directory: StrPath | None = None,
                 image_size: ImageSize = (256, 256), color_mode: ColorMode = "rgb",
                 class_names: Sequence[str] | None = None,
                 label_mode: LabelMode | None = "int", label_delimiter: str | None = "|",
                 on_missing: Literal["raise", "skip"] = "raise", allow_outside: bool = False,
                 interpolation: Interpolation = "bilinear",
                 crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
                 rescale: float | None = None,
                 cache: Cache = "auto", on_error: OnError = "raise",
                 decode_threads: int | None = None, decoder: Decoder = "opencv",
                 verbose: int = 1,
                 mask_col: str | None = None, target_col: str | None = None,
                 target_image_size: ImageSize | None = None,
                 target_color_mode: ColorMode | None = None,
                 validation_split: float | None = None, subset: Subset | None = None,
                 seed: int | None = None, encoding: str = "utf-8",
                 num_classes: int | None = None, max_pixels: int | None = images.MAX_PIXELS,
                 bit_depth: int | None = None,
                 storage_options: Mapping[str, Any] | None = None,
                 remote_cache: StrPath | RemoteCache | None = None,
                 **common: Any) -> None:
        _checks.labels_come_from(self, common, "the `y_col` column (y_col=...)")
        check_common(self, common)  # before reading a table that may be large
        options = ImageOptions.of(locals()).for_dtype(common.get("dtype"))
        one_subset(self, subset)
        store = _remote.Store(storage_options, _remote.check_cache(remote_cache))
        if (mask_col is None) != (label_mode != "mask"):
            raise ValueError("`mask_col` and label_mode='mask' go together. Received: "
                             f"mask_col={mask_col!r}, label_mode={label_mode!r}.")
        _checks.one_of("on_missing", on_missing, ("raise", "skip"))
        pairing = check_pairing(target_col, target_image_size, target_color_mode, label_mode,
                                 image_size, color_mode, common, "target_col")
        listing_started = time.perf_counter()
        table = listing.Table.read(csv, encoding, store)
        paired_col = mask_col if target_col is None else target_col  # resolved alike
        y_cols = table_columns(table, x_col, y_col, paired_col, label_mode)
        paths, masks, skipped = listed_files(table, x_col, paired_col, directory,
                                              allow_outside, on_missing, store)
        labels, names = None, class_names
        if y_cols is not None:
            labels = csv_labels(table, y_cols, label_mode, label_delimiter, class_names,
                                 num_classes)
            if len(y_cols) > 1 and label_mode == "multi_label" and names is None:
                names = y_cols
        keep, names, num_classes = split_rows(
            labels, len(paths), label_mode, names, num_classes, validation_split, subset,
            seed, lambda i: f"{paths[i]} ({table.describe(i)})", files=paths)
        if keep is not None:
            table.subset(keep)
            paths, masks, labels = (rows(v, keep) for v in (paths, masks, labels))
        self.table = table
        self.directory = directory
        self.validation_split, self.subset = validation_split, subset
        self.crop_to_aspect_ratio = options.crop_to_aspect_ratio
        self.pad_to_aspect_ratio = options.pad_to_aspect_ratio
        root = (_paths.Root.of(directory) if directory is not None and not allow_outside
                else None)  # checked again as each file (mask, target) is opened
        listing_s = time.perf_counter() - listing_started
        if target_col is not None:
            source: ImageSource = paired_source(
                paths, masks, common, pairing, options, files_found=None,
                listing_s=listing_s, describe=ListedFile(paths, table), target_root=root,
                skipped=skipped, root=root, store=store)
        else:
            source = image_source(paths, labels, names, common, options,
                                  describe=ListedFile(paths, table), listing_s=listing_s,
                                  mask_paths=masks, skipped=skipped, root=root, store=store)
        super().__init__(source=source, label_mode=label_mode, num_classes=num_classes,
                         seed=seed, **common)
