"""The ready-made generators: in-memory arrays, image folders and CSV lists."""

from __future__ import annotations

import inspect
import numbers
import os
import reprlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Self

import numpy as np
import numpy.typing as npt

from kerasgen.pipeline import batching
from kerasgen import _checks
from kerasgen.pipeline import feeding as _feeding
from kerasgen.sources import _paths, _remote
from kerasgen import _images as images
from kerasgen.sources import _listing as listing
from kerasgen.sources import _core as sources
from kerasgen import _labels as labels_mod
from kerasgen.loading.image_loader import ImageLoader
from kerasgen.loading.options import ImageOptions
from kerasgen._typing import (Arrays, Cache, ColorMode, Decoder, FolderLabels,
                              ImageSize, Interpolation, LabelMode, OnError, StrPath, Subset)
from kerasgen.sources._image import ImageSource
from kerasgen.sources._paired import PairedSource
from kerasgen._iterator_names import IteratorNames
from kerasgen.sources._remote_cache import RemoteCache
from kerasgen.base import Generator
from kerasgen import _redact

if TYPE_CHECKING:
    import pandas as pd

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


def _check_fits(array, name, dtype, rescale=None, chunk=1 << 20):
    """Refuses, naming the first row at fault, a numeric array with values that batches
    of `dtype` cannot hold: out of range (wrapped around, or inf in float16), NaN, inf
    or not whole into an integer dtype. One vectorised pass, `chunk` values at a time;
    none at all when x's dtype always fits (uint8 into float32, say)."""
    if batching.fits_always(array.dtype, dtype, rescale):
        return
    rows = max(1, chunk // max(1, int(np.prod(array.shape[1:], dtype=np.int64))))
    for start in range(0, len(array), rows):
        part = array[start:start + rows]
        flat = batching.misfit(part, dtype, rescale)
        if flat is None:
            continue
        row, value = start + flat // max(1, part[0].size), part.flat[flat]
        raise ValueError(
            f"`{name}` must hold values that dtype={dtype!r} can hold "
            f"({batching.holds(dtype)}). Received: {name}[{row}] holds {value.item()!r} "
            f"({name} of dtype {array.dtype}), which batches would turn into "
            f"{batching.became(value, dtype, rescale)!r}. Scale, round or clip {name} "
            "first, or pass a dtype that holds it (dtype='float32', or dtype=None to "
            f"keep {name}'s own).")


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


class Splits:
    """`split()` and one answer to `subset="both"`, for every generator that takes a
    seeded `validation_split` (the folder, CSV, detection and SQL generators)."""

    @classmethod
    @_redact.passed_over
    def split(cls, *args: Any, validation_split: float, seed: int,
              **kwargs: Any) -> tuple[Self, Self]:
        """The (training, validation) pair of one seeded, stratified split, as Keras's
        `subset="both"` returns it: `cls(*args, validation_split=..., subset=...,
        seed=..., **kwargs)` twice. The validation generator keeps the source order
        (shuffle=False) and gets none of the training-only `augment`, `batch_augment`,
        `sampler` and `drop_remainder`, so its metrics count the data as it is; where the
        training augmentation changes the images' size (a random crop, as
        `kg.augment.typical` makes), it takes the centre of each image at that size
        (`kg.augment.center_crop`), so the model sees one shape at a like scale.
        """
        if "subset" in kwargs:
            raise TypeError(f"{cls.__name__}.split() makes both subsets; it takes no "
                            f"`subset`. Received: subset={kwargs['subset']!r}.")
        make: Any = cls  # a generator class (this is its mixin)
        train = make(*args, validation_split=validation_split, subset="training",
                     seed=seed, **kwargs)
        from kerasgen import augment as augment_mod

        for name in _TRAINING_ONLY:  # what draws goes; a preprocessing step stays
            given = kwargs.pop(name, None)
            kept = augment_mod.deterministic_part(given) if name in (
                "augment", "batch_augment") else None
            if kept is not None:
                kwargs[name] = kept
        kwargs["shuffle"] = False
        trained, plain = train.sample_shape, sources.sample_shape_of(train.source)
        if trained is not None and plain is not None and trained != plain and len(
                trained) == len(plain) and trained[2:] == plain[2:] and (
                kwargs.get("augment") is None):
            kwargs["augment"] = augment_mod.center_crop(trained[:2])
        validation = make(*args, validation_split=validation_split, subset="validation",
                          seed=seed, **kwargs)
        return train, validation


def one_subset(gen: Any, subset: Any) -> None:
    """`subset="both"` asks one generator for two: refused, naming `split()`."""
    if isinstance(subset, str) and subset == "both":
        name = type(gen).__name__
        raise ValueError(
            "`subset` must be 'training' or 'validation' for one generator. Received: "
            f"subset='both'. For the (training, validation) pair use kg.{name}.split(..., "
            "validation_split=..., seed=...)"
            + (" or kg.image_dataset_from_directory(..., subset='both')."
               if name == "ImageFolderGenerator" else "."))


class ArrayGenerator(Generator, IteratorNames):
    """Batches of in-memory arrays, for any rank of x (tabular, images, sequences).

    Args:
        x: an array (n, ...) or a dict of arrays (multi-input models).
        y: None, an array (n, ...) or a dict of arrays (multi-output models).
        sample_weight: optional (n,) weights, returned as the batch's third element.
        label_mode: "raw" (default: y as given), "int", "categorical", "binary",
            "multi_label", "input" (no y: the target is x itself, augmented) or None
            (x only).
        **common: batch_size, shuffle, seed, num_classes, class_names, dtype ("float32"
            by default; None keeps x's own dtype), augment, sampler, drop_remainder,
            workers, use_multiprocessing, max_queue_size (see `kg.Generator`).
    """

    def __init__(self, x: Arrays, y: Arrays | None = None, *,
                 sample_weight: npt.ArrayLike | None = None,
                 label_mode: LabelMode | None = "raw", **common: Any) -> None:
        _checks.labels_come_from(self, common, "`y` (one target per sample)")
        source = _array_source(x, y, label_mode, common, self._row_names())
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
                _check_convertible(array, named, self.dtype)
                _check_fits(array, named, self.dtype, self.rescale)

    def _row_names(self) -> Callable[[int], str] | None:
        """How errors name row i (None: "sample i"); a builder over a table says."""
        return None

    @property
    def x(self) -> Any:
        """The samples' arrays (an array, or a dict of them)."""
        return self.source.x

    @property
    def masks(self) -> np.ndarray | None:
        """The segmentation masks (label_mode="mask"), or None."""
        return self.source.masks


def _array_source(x: Any, y: Any, label_mode: str | None, common: dict[str, Any],
                  describe: Callable[[int], str] | None = None) -> sources.ArraySource:
    """The ArraySource of (x, y), checked: one target per sample, and masks for
    label_mode="mask" (whose class count then sets `num_classes` when not given)."""
    x, num_samples = sources.as_arrays(x, "x")
    if y is not None:
        if label_mode == "multi_label" and isinstance(y, (list, tuple)):
            y, num_targets = list(y), len(y)  # one list of labels per sample
        else:
            y, num_targets = sources.as_arrays(y, "y")
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
    return sources.ArraySource(x, y, masks=masks, describe=describe)


class _ImageFileGenerator(Splits, Generator):
    """Shared by the generators whose samples are image files: their source is an
    `ImageSource` (an `ImageLoader`: decode, resize, cache, bad-file policy, thread
    pool), whose options users read here."""

    prefetch_auto = 4
    ahead_threads = 2  # two batches made at once: no core idles at a batch's end

    @property
    def loader(self) -> ImageLoader:
        """The source's `ImageLoader`."""
        return self.source.loader

    @property
    def image_options(self) -> ImageOptions:
        """The image options, checked once (`kerasgen.loader.ImageOptions`, frozen):
        the keywords the generator was given, `bit_depth` resolved for its dtype and
        `rescale` as `gen.rescale` is now."""
        options = self.source.options
        return options if options.rescale == self.rescale else options.replace(
            rescale=self.rescale)

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
        return self.loader.options.image_size  # type: ignore[return-value]

    @property
    def color_mode(self) -> ColorMode:
        return self.loader.options.color_mode  # type: ignore[return-value]

    @property
    def interpolation(self) -> Interpolation:
        return self.loader.options.interpolation  # type: ignore[return-value]

    @property
    def on_error(self) -> OnError:
        return self.loader.options.on_error

    @property
    def max_pixels(self) -> int | None:
        return self.loader.options.max_pixels

    @property
    def decode_threads(self) -> int | None:
        return self.loader.options.decode_threads

    @property
    def decoder(self) -> Decoder:
        return self.loader.options.decoder  # type: ignore[return-value]

    @property
    def bit_depth(self) -> int:
        """8 or 16: the bits each pixel loads at."""
        return self.loader.bit_depth

    @property
    def verbose(self) -> int:
        return self.loader.options.verbose

    @property
    def cache(self) -> Cache:
        """The `cache=` given ("auto", "memory", a path or None)."""
        return self.loader.options.cache

    @property
    def skipped(self) -> list[str]:
        """Every file skipped so far (missing rows, undecodable files); a URL's password
        and query values masked (`gen.file_paths` holds the URLs as given)."""
        return _redact.redact_all(self.loader.skipped)

    def validate(self) -> list[str]:
        """Decodes every file once (in parallel, with progress); returns the bad paths
        (URLs with their secrets masked, as in `skipped`)."""
        return _redact.redact_all(self.source.validate())


def image_source(paths: list[str], labels: Any, class_names: Any, common: dict[str, Any],
                 options: ImageOptions | None = None, *, describe: Any = None,
                 files_found: int | None = None, listing_s: float = 0.0,
                 mask_paths: list[str] | None = None, skipped: Sequence[str] = (),
                 read: Any = None, root: Any = None, store: Any = None,
                 **legacy: Any) -> ImageSource:
    """The ImageSource of image files `paths` (or of records `read` reads), with an
    ImageLoader of `options`, shared by the worker processes `common` asks for.
    `mask_paths`, `skipped`, `read`, `root` and `store` are the loader's (see
    `ImageLoader`). Without `options`, the image options may still come as the loader's
    older keywords (image_size=..., aspect=..., rescale=...;
    `ImageOptions.from_loader_keywords`)."""
    if options is None:
        options = ImageOptions.from_loader_keywords(**legacy)
    elif legacy:
        raise TypeError("image_source() takes its image options as one ImageOptions. "
                        f"Received also: {sorted(legacy)}.")
    loader = ImageLoader(paths, options, mask_paths=mask_paths, skipped=skipped, read=read,
                         root=root, processes=_processes(common), store=store)
    return ImageSource(loader, labels, class_names=class_names, describe=describe,
                       files_found=files_found, listing_s=listing_s)


def _processes(common: dict[str, Any]) -> int | None:
    """The worker processes `common` asks for (None: none), as _feeding decides."""
    return _feeding.worker_processes(common.get("workers", 1),
                                     common.get("use_multiprocessing", False))


def _check_pairing(target_dir: Any, target_image_size: Any, target_color_mode: Any,
                   label_mode: Any, image_size: Any, color_mode: Any,
                   common: dict[str, Any], argument: str = "target_dir",
                   ) -> tuple[tuple[int, int], str]:
    """(target size, target colour mode) of paired target images, checked: target_dir
    and label_mode="image" go together; an albumentations augment transforms images of
    one size."""
    if (target_dir is None) != (label_mode != "image"):
        raise ValueError(f"`{argument}` and label_mode='image' go together. Received: "
                         f"{argument}={target_dir!r}, label_mode={label_mode!r}.")
    if target_dir is None:
        if target_image_size is not None or target_color_mode is not None:
            raise ValueError("`target_image_size` and `target_color_mode` are the target "
                             f"images' ({argument}=...), which were not given.")
        return (0, 0), "rgb"  # unused: there are no target images
    inputs = _checks.image_size(image_size)
    size = inputs if target_image_size is None else _checks.image_size(
        target_image_size, "target_image_size")
    mode = images.check_color_mode(color_mode if target_color_mode is None
                                   else target_color_mode)
    augment = common.get("augment")
    if type(augment).__module__.split(".")[0] == "albumentations" and size != inputs:
        raise ValueError(
            "An albumentations `augment` transforms the input and its target image "
            f"together, so they must be one size. Received: image_size={tuple(inputs)}, "
            f"target_image_size={tuple(size)}. Load both at one size (resize the inputs "
            "in the model), or augment with a callable fn(image, rng, target=target) -> "
            "(image, target).")
    return size, mode


def paired_source(paths: list[str], targets: list[str], common: dict[str, Any],
                  pairing: tuple[tuple[int, int], str], options: ImageOptions, *,
                  files_found: int | None, listing_s: float, describe: Any = None,
                  target_root: Any = None, skipped: Sequence[str] = (), root: Any = None,
                  store: Any = None) -> PairedSource:
    """The PairedSource of images `paths` and their target images `targets`: two
    ImageLoaders of `options`, the targets' at `pairing`'s size and colour mode, each
    target read only inside `target_root` (see `images.read_file`)."""
    processes = _processes(common)
    loader = ImageLoader(paths, options, skipped=skipped, root=root, processes=processes,
                         store=store)
    size, mode = pairing
    target_loader = ImageLoader(targets, options.replace(image_size=size, color_mode=mode),
                                root=target_root, processes=processes, store=store)
    return PairedSource(loader, target_loader, describe=describe, files_found=files_found,
                        listing_s=listing_s)


class ImageFolderGenerator(_ImageFileGenerator, IteratorNames):
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
        _check_common(self, common)  # before listing a folder that may not exist
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
        pairing = _check_pairing(target_dir, target_image_size, target_color_mode, label_mode,
                                 image_size, color_mode, common)
        given = _given_labels(labels, class_names, mask_dir)
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
                values = _value_labels(given, paths, directory, label_mode)
                if values is not None:  # regression targets, as Keras passes them on
                    label_mode = "raw" if label_mode is not None else None
                else:
                    class_ids, names = _list_labels(given, paths, directory,
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


_TRAINING_ONLY = ("augment", "batch_augment", "sampler", "drop_remainder")


def _folder_roots(directory, paired_dir):
    """The folders a folder generator's files are read from when it follows no link
    out (`directory`, and `mask_dir` or `target_dir`), each checked again as a file is
    opened; URLs are read through the store, not checked here."""
    argument = "`target_dir`" if directory is None else "`mask_dir`"
    return tuple(_paths.Root.of(folder, label, "follow_links=True") for folder, label in (
        (directory, "`directory`"), (paired_dir, argument)) if folder is not None)


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


def _check_count(labels, paths, directory):
    if len(labels) != len(paths):
        raise ValueError(
            f"`labels` must hold one label per image file. Received: {len(labels)} labels "
            f"for the {len(paths)} image files found in {directory} (in the order of "
            "gen.file_paths: os.walk's folders sorted by path, files sorted by name)."
        )


def _is_row(value):
    return isinstance(value, (list, tuple, np.ndarray))


def _value_labels(labels, paths, directory, label_mode):
    """The float32 targets of a list of labels holding real numbers (floats, or rows of
    numbers: Keras passes such labels on unchanged, as float32), or None for class ids
    or names."""
    if not any(isinstance(v, (float, np.floating)) or _is_row(v) for v in labels):
        return None
    _check_count(labels, paths, directory)
    for i, value in enumerate(labels):
        items = np.ravel(np.asarray(value, dtype=object)) if _is_row(value) else [value]
        if not all(isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))
                   for x in items):
            raise ValueError(
                "`labels` holding real values (a regression) must hold numbers only, or "
                f"rows of numbers. Received: {value!r} for {paths[i]}.")
    if label_mode not in ("int", "raw", None):
        raise ValueError(
            f"label_mode={label_mode!r} encodes classes, and `labels` holds real values "
            "(a regression). Use label_mode='int' (as Keras, which passes them on as "
            "float32) or 'raw', or give integer class ids or class names.")
    try:
        return np.asarray(labels, dtype="float32")
    except ValueError:
        raise ValueError("`labels` rows of real values must all have one length. "
                         f"Received rows of lengths "
                         f"{sorted({len(v) if _is_row(v) else 1 for v in labels})}.") from None


def _list_labels(labels, paths, directory, num_classes):
    """(class ids, class names) of a list of labels given one per file of `paths`."""
    _check_count(labels, paths, directory)
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


class CSVGenerator(_ImageFileGenerator, IteratorNames):
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
        _check_common(self, common)  # before reading a table that may be large
        options = ImageOptions.of(locals()).for_dtype(common.get("dtype"))
        one_subset(self, subset)
        store = _remote.Store(storage_options, _remote.check_cache(remote_cache))
        if (mask_col is None) != (label_mode != "mask"):
            raise ValueError("`mask_col` and label_mode='mask' go together. Received: "
                             f"mask_col={mask_col!r}, label_mode={label_mode!r}.")
        _checks.one_of("on_missing", on_missing, ("raise", "skip"))
        pairing = _check_pairing(target_col, target_image_size, target_color_mode, label_mode,
                                 image_size, color_mode, common, "target_col")
        listing_started = time.perf_counter()
        table = listing.Table.read(csv, encoding, store)
        paired_col = mask_col if target_col is None else target_col  # resolved alike
        y_cols = _table_columns(table, x_col, y_col, paired_col, label_mode)
        paths, masks, skipped = _listed_files(table, x_col, paired_col, directory,
                                              allow_outside, on_missing, store)
        labels, names = None, class_names
        if y_cols is not None:
            labels = _csv_labels(table, y_cols, label_mode, label_delimiter, class_names,
                                 num_classes)
            if len(y_cols) > 1 and label_mode == "multi_label" and names is None:
                names = y_cols
        keep, names, num_classes = _split(
            labels, len(paths), label_mode, names, num_classes, validation_split, subset,
            seed, lambda i: f"{paths[i]} ({table.describe(i)})", files=paths)
        if keep is not None:
            table.subset(keep)
            paths, masks, labels = (_rows(v, keep) for v in (paths, masks, labels))
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
                listing_s=listing_s, describe=_ListedFile(paths, table), target_root=root,
                skipped=skipped, root=root, store=store)
        else:
            source = image_source(paths, labels, names, common, options,
                                  describe=_ListedFile(paths, table), listing_s=listing_s,
                                  mask_paths=masks, skipped=skipped, root=root, store=store)
        super().__init__(source=source, label_mode=label_mode, num_classes=num_classes,
                         seed=seed, **common)


def _count(n: int, noun: str) -> str:
    """'1 file', '3 files'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


class _ListedFile:
    """Names sample i of a table of files: its path and its row."""

    def __init__(self, paths: list[str], table: listing.Table) -> None:
        self.paths, self.table = paths, table

    def __call__(self, index: int) -> str:
        return f"{self.paths[index]} ({self.table.describe(index)})"


def _table_columns(table, x_col, y_col, mask_col, label_mode):
    """The label columns (None without labels), each column named checked; `mask_col`
    is the column of masks or (label_mode="image") of target images."""
    table.column(x_col, "x_col")
    if mask_col is not None:
        table.column(mask_col, "target_col" if label_mode == "image" else "mask_col")
    if label_mode in (None, "mask", "input", "image"):
        return None
    y_cols = list(y_col) if isinstance(y_col, (list, tuple)) else [y_col]
    for name in y_cols:
        table.column(name, "y_col")
    if len(y_cols) > 1 and label_mode not in ("multi_label", "raw"):
        raise ValueError(
            f"Several `y_col` columns need label_mode='multi_label' (0/1 columns) "
            f"or 'raw' (numeric targets). Received: label_mode={label_mode!r}, "
            f"y_col={y_col!r}."
        )
    return y_cols


def _listed_files(table, x_col, mask_col, directory, allow_outside, on_missing, store):
    """(image paths, mask paths or None, skipped paths) of the table's rows; rows whose
    files do not exist are an error, or (on_missing="skip") dropped with a warning."""
    paths = listing.resolve_paths(table.columns[x_col], table, directory,
                                  allow_outside, table.describe)
    masks = None if mask_col is None else listing.resolve_paths(
        table.columns[mask_col], table, directory, allow_outside, table.describe)
    found = listing.exists(paths + (masks or []), store)
    missing = [i for i in range(len(paths))
               if not found[i] or (masks is not None and not found[len(paths) + i])]
    if not missing:
        return paths, masks, []
    listed = ", ".join(f"{paths[i]} ({table.describe(i)})" for i in missing[:5])
    if on_missing == "raise":
        raise FileNotFoundError(
            f"{_count(len(missing), 'file')} listed in {table.name()} "
            f"do{'es' if len(missing) == 1 else ''} not exist: {listed}"
            f"{' ...' if len(missing) > 5 else ''}. Fix the paths (or `directory`), "
            "or pass on_missing='skip' to drop those rows."
        )
    skipped = [paths[i] for i in missing]
    more = " ..." if len(missing) > 5 else ""
    _redact.warn(f"Skipping {_count(len(missing), 'row')} of {table.name()} whose "
                 f"file{'s do' if len(missing) > 1 else ' does'} not exist: {listed}{more}. "
                 "`gen.skipped` lists them all.", stacklevel=4)
    gone = set(missing)
    keep = [i for i in range(len(paths)) if i not in gone]
    table.subset(keep)
    paths = [paths[i] for i in keep]
    masks = None if masks is None else [masks[i] for i in keep]
    if not paths:
        raise ValueError(f"No row of {table.name()} names an existing file.")
    return paths, masks, skipped


def _csv_labels(table, y_cols, label_mode, delimiter, class_names=None, num_classes=None):
    """The label columns as the values `labels.encode` expects for `label_mode`."""
    if len(y_cols) > 1 or label_mode == "raw":
        columns = [[listing.parse_number(v) for v in table.columns[c]] for c in y_cols]
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
           subset, seed, describe, files=None):
    """(rows kept or None, class_names, num_classes) for a `validation_split` of a table:
    the folder's seeded, stratified split (`listing.validation_subset`), with the classes
    inferred from every row before splitting, so that the training and validation
    subsets share one class-id mapping even when one of them lacks a class."""
    if validation_split is None and subset is None:
        return None, class_names, num_classes
    targets = labels_mod.encode(labels, label_mode, class_names, num_classes, describe)
    keep = listing.validation_subset(targets.class_ids, num_rows, validation_split, subset,
                                     seed, files=files, describe=describe,
                                     class_names=targets.class_names)
    return keep, targets.class_names, targets.num_classes


def _rows(values, keep):
    """The rows `keep` of a list or array (None stays None)."""
    if values is None or isinstance(values, np.ndarray):
        return None if values is None else values[keep]
    return [values[i] for i in keep]
