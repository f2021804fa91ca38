"""`ImageLoader`: encoded images -> resized arrays, on a thread pool, with caches.

`ImageLoader` is the loader stage of every generator whose samples are encoded images
(image folders, CSV lists, SQL queries of paths, records of a TFRecord or tar file): it
decodes and resizes as its `ImageOptions` say (OpenCV releases the GIL, so the threads of
its `DecodePool` decode in parallel), keeps decoded samples in the cache the options
choose (`cache_choice`), and applies the bad-file policy (`BadFiles`: raise, or skip to a
stand-in with a report). It knows nothing of labels, epochs or batches' order: the
generator hands it sample indices and a place to write them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import numpy.typing as npt

from kerasgen import _checks
from kerasgen.loading import images
from kerasgen.loading import nvdecode as _nvdecode
from kerasgen import _stats as stats_mod
from kerasgen._typing import StrPath
from kerasgen.loading import cache_choice
from kerasgen.loading.bad_files import BAD, BadFiles, Substitutes, bad_file, stand_in
from kerasgen.loading.decode_pool import DecodePool
from kerasgen.loading.nv_batch import decode_jpegs
from kerasgen.loading.options import DECODERS as DECODERS, ImageOptions
from kerasgen.arrays import batching
from kerasgen.storage import remote as _remote

class ImageLoader:
    """Loads encoded images as (height, width, channels) uint8 arrays (uint16 at
    bit_depth=16).

    Args:
        file_paths: one image path per sample (or, with `read`, one name per sample, used
            in errors and in `skipped`).
        options: the `ImageOptions` (bit_depth None is 8: builders resolve it for their
            dtype). With on_error="skip", a file that cannot be read or decoded
            (corrupt, gone, not a regular file, larger than `max_pixels`, refused by
            OpenCV, or its mask so) is replaced by the first good sample of
            `substitutes(index)` -> (candidate indices, what they are called in an
            error), and listed in `skipped`. The older form `ImageLoader(paths,
            image_size, color_mode, interpolation, cache=None, aspect=None, ...)` builds
            the options (`ImageOptions.from_loader_keywords`).
        mask_paths: one segmentation mask per sample, or None.
        skipped: files skipped before loading (by the listing).
        read: `read(index) -> encoded bytes` for samples that are not files (records of
            a TFRecord file, say); None reads `file_paths[index]`.
        root: a real folder path, or None: every file (and mask) must still lie in it
            when it is opened (see `images.read_file`).
        processes: None (no worker processes: this process decodes), or the number of
            worker processes that share the machine's cores (each decodes on its share
            of them) and a memory cache, then in shared memory, filled and read by all
            of them (see `for_processes`).
        store: the `storage.remote.Store` that reads paths that are URLs (s3://,
            https://...); each batch's objects are fetched at once on its I/O threads
            (`prefetch`).

    Batches (`decode`) are written into the caller's buffer pool and timed into its
    stats when it passes them; a bad file's stand-ins are the caller's `substitutes`.
    """

    def __init__(self, file_paths: Iterable[str], options: ImageOptions | Any = None,
                 *legacy: Any, mask_paths: Iterable[str] | None = None,
                 skipped: Iterable[str] = (),
                 read: Callable[[int], bytes | np.ndarray] | None = None,
                 root: StrPath | None = None, processes: int | None = None,
                 store: _remote.Store | None = None, **legacy_keywords: Any) -> None:
        if not isinstance(options, ImageOptions):
            options = ImageOptions.from_loader_keywords(options, *legacy, **legacy_keywords)
        elif legacy or legacy_keywords:
            raise TypeError("ImageLoader takes its image options as one ImageOptions. "
                            f"Received also: {sorted(legacy_keywords) or legacy}.")
        if options.image_size is None:  # a size of their own: not an ImageLoader's
            _checks.image_size(options.image_size)
        if options.bit_depth is None:
            options = options.replace(bit_depth=options.depth(None))
        self.options = options  # carried whole: for_processes passes it on
        self.file_paths = list(file_paths)
        self.pixel_dtype = images.pixel_dtype(self.bit_depth)
        self.store = store
        self.remote = store is not None and read is None and _remote.any_url(
            self.file_paths)
        self.nv = None if self.decoder == "opencv" else _nvdecode.NvDecoder()
        if self.nv is not None and self.bit_depth == 16:
            raise ValueError("decoder='nvimgcodec' decodes 8-bit images. Received: "
                             "bit_depth=16. Use decoder='opencv' for 16-bit images.")
        if self.nv is not None and not _nvdecode.available():
            raise ImportError(f"decoder='nvimgcodec' needs NVIDIA's nvImageCodec: "
                              f"{_nvdecode.PIP}.")
        self.mask_paths = None if mask_paths is None else list(mask_paths)
        self.root = root
        self.read = read
        self.processes = (None if processes is None
                          else _checks.positive_int("processes", processes))
        self.bad = BadFiles(self.on_error, skipped)
        self.decode_pool = DecodePool(self.decode_threads, self.processes)
        self.buffers = batching.BufferPool()  # batch arrays, reused when Keras let go
        height, width, channels = self.sample_shape  # the caches hold bytes
        # a pipeline.cache cache, or anything with its get(index) and put(index, row)
        self.cache: Any = cache_choice.choose(
            options.cache, self.file_paths,
            (height, width, channels * np.dtype(self.pixel_dtype).itemsize),
            color_mode=self.color_mode, interpolation=self.interpolation,
            aspect=self.aspect, decoder=self.decoder,
            version=None if store is None else store.version, processes=processes)

    # the options, as the loader's readers name them
    image_size = property(lambda self: self.options.image_size)
    color_mode = property(lambda self: self.options.color_mode)
    interpolation = property(lambda self: self.options.interpolation)
    aspect = property(lambda self: self.options.aspect)
    max_pixels = property(lambda self: self.options.max_pixels)
    on_error = property(lambda self: self.options.on_error)
    decode_threads = property(lambda self: self.options.decode_threads)
    decoder = property(lambda self: self.options.decoder)
    verbose = property(lambda self: self.options.verbose)
    bit_depth = property(lambda self: self.options.bit_depth)

    @property
    def skipped(self) -> list[str]:
        """Every file skipped so far (listed ones, bad ones)."""
        return self.bad.skipped

    @skipped.setter
    def skipped(self, files: list[str]) -> None:  # one list for two loaders (pairs)
        self.bad.skipped = files

    # the caches hold bytes: a 16-bit sample is kept as (h, w, 2 * channels) uint8
    def cached(self, index: int) -> np.ndarray | None:
        """Sample `index` from the cache (which there is), or None."""
        assert self.cache is not None
        found = self.cache.get(index)
        return found if found is None or self.bit_depth == 8 else found.view(np.uint16)

    def keep(self, index: int, sample: np.ndarray) -> None:
        """Puts `sample` (of `index`) in the cache (which there is)."""
        assert self.cache is not None
        self.cache.put(index, sample if self.bit_depth == 8 else sample.view(np.uint8))

    def for_processes(self, processes: int | None) -> ImageLoader:
        """This loader as `processes` worker processes share it: the cores split between
        them, a memory cache in shared memory (the loader itself with one process)."""
        if processes == self.processes:
            return self
        return ImageLoader(self.file_paths, self.options, mask_paths=self.mask_paths,
                           skipped=self.skipped, read=self.read, root=self.root,
                           processes=processes, store=self.store)

    @property
    def sample_shape(self) -> tuple[int, int, int]:
        """(height, width, channels) of one loaded sample."""
        return self.image_size + (images.COLOR_MODES[self.color_mode],)

    # ----------------------------------------------------------------- one sample
    def load_into(self, index: int, out: np.ndarray,
                  substitutes: Substitutes | None = None) -> int:
        """Loads sample `index` into `out`; returns the index whose image it holds
        (another sample's when the file was skipped: the first good one of
        `substitutes(index)`)."""
        if self.cache is not None:
            cached = self.cached(index)
            if cached is not None:
                out[...] = cached
                return index
        try:
            self.decode_into(index, out)
        except BAD as error:
            if self.bad.raising:
                raise bad_file(error, self.file_paths[index]) from None
            self.bad.record(self.file_paths[index], error)
            if substitutes is None:
                raise
            return stand_in(self, index, out, substitutes)[0]  # never cached
        if self.cache is not None:
            self.keep(index, out)
        return index

    def load_with_mask(self, index: int, out: np.ndarray, mask_out: np.ndarray | None = None,
                       substitutes: Substitutes | None = None,
                       ) -> tuple[int, np.ndarray | None]:
        """`load_into`, and the mask of the image it loaded (into `mask_out`, or a new
        array; None without masks): (index loaded, mask). A mask that cannot be read is
        a bad sample, as a bad image: an error, or with on_error="skip" a stand-in whose
        image and mask are both good."""
        return self._with_mask(index, self.load_into(index, out, substitutes), out,
                               mask_out, substitutes)

    def _with_mask(self, index, loaded, out, mask_out, substitutes):
        """(loaded, its mask) once sample `index`'s image `loaded` is in `out` (see
        `load_with_mask`)."""
        if self.mask_paths is None:
            return loaded, None
        try:
            return loaded, self.load_mask(loaded, mask_out)
        except BAD as error:
            if self.bad.raising:
                raise bad_file(error, self.mask_paths[loaded]) from None
            self.bad.record(self.file_paths[loaded], error)
            if substitutes is None:
                raise
            return stand_in(self, index, out, substitutes, with_mask=True,
                            mask_out=mask_out, exclude=loaded)

    def decoded(self, index, target_size, color_mode=None, depth=None):
        """Sample `index` decoded (at reduced size where `target_size` allows), at the
        loader's bit depth unless `depth` says."""
        color_mode = color_mode or self.color_mode
        depth = self.bit_depth if depth is None else depth
        if self.read is None:
            path = self.file_paths[index]
            return images.decode_bytes(self.read_file(path), color_mode, target_size,
                                       f"image file {path}", self.max_pixels, depth)
        return images.decode_bytes(self.read(index), color_mode, target_size,
                                   self.file_paths[index], self.max_pixels, depth)

    def read_file(self, path: str, what: str = "image file") -> np.ndarray:
        """The bytes of the file or object `path` (a URL through `store`)."""
        if self.store is not None and _remote.is_url(path):
            return self.store.read(path, what)
        return images.read_file(path, self.root, what)

    def encoded(self, index: int) -> np.ndarray:
        """The encoded bytes of sample `index` (its file's, or `read`'s)."""
        if self.read is None:
            return self.read_file(self.file_paths[index])
        return np.frombuffer(self.read(index), np.uint8)

    def prefetch(self, indices: npt.ArrayLike) -> None:
        """Starts fetching the remote objects of samples `indices` (and their masks)
        that the cache does not hold, all at once, on the store's I/O threads."""
        if not self.remote or self.store is None:
            return
        urls = []
        for index in np.asarray(indices).ravel():
            index = int(index)
            if self.cache is not None and self.cache.get(index) is not None:
                continue
            urls.append(self.file_paths[index])
            if self.mask_paths is not None:
                urls.append(self.mask_paths[index])
        self.store.prefetch([u for u in urls if _remote.is_url(u)])

    def decode_into(self, index: int, out: np.ndarray) -> None:
        """Decodes sample `index` into `out` (no cache, no policy)."""
        self.resize(self.decoded(index, self.image_size), out)

    def resize(self, image: np.ndarray, out: np.ndarray) -> np.ndarray:
        """`image` resized into `out` as the options say."""
        return images.resize(image, self.image_size, self.color_mode, self.interpolation,
                             out, self.aspect)

    def load(self, index: int) -> np.ndarray:
        """Sample `index` as a new array."""
        out = np.empty(self.sample_shape, dtype=self.pixel_dtype)
        self.load_into(int(index), out)
        return out

    def load_mask(self, index: int, out: np.ndarray | None = None) -> np.ndarray:
        """The segmentation mask of sample `index` (of the image actually loaded)."""
        assert self.mask_paths is not None, "a loader without masks loads none"
        path = self.mask_paths[index]
        return images.load_mask(path, self.image_size, out=out, aspect=self.aspect,
                                max_pixels=self.max_pixels, root=self.root,
                                data=self.read_file(path, "mask file"))

    # ----------------------------------------------------------------- batches
    def decode(self, indices: np.ndarray, dtype: npt.DTypeLike, rescale: float | None = None,
               *, buffers: batching.BufferPool | None = None,
               stage: Callable[[str], AbstractContextManager[object]] | None = None,
               substitutes: Substitutes | None = None,
               ) -> tuple[np.ndarray, np.ndarray | None]:
        """Decodes `indices` (and their masks) on the pool into a new batch of `dtype`
        (each thread converts its share), from `buffers` (default: the loader's own),
        timed as stage "decode" of `stage`; returns (batch, masks or None)."""
        buffers = self.buffers if buffers is None else buffers
        shape = (len(indices),) + self.sample_shape
        out = buffers.empty(shape, dtype)
        masks = None if self.mask_paths is None else np.empty(shape[:3], np.uint16)
        self.prefetch(indices)
        with (stats_mod.stage(None, "decode") if stage is None else stage("decode")):
            self.decode_pool.in_threads(len(indices), lambda a, b: self._load_chunk(
                indices[a:b], out[a:b], None if masks is None else masks[a:b], rescale,
                buffers, substitutes))
        return out, masks

    def _load_chunk(self, indices, out, masks, rescale, buffers, substitutes):
        pixels = (buffers.empty(out.shape, self.pixel_dtype) if out.dtype != self.pixel_dtype
                  else out)
        self.load_rows(indices, pixels, masks, substitutes)
        if pixels is not out:
            batching.convert_into(out, pixels, rescale)

    def load_rows(self, indices: np.ndarray, pixels: np.ndarray,
                  masks: np.ndarray | None = None, substitutes: Substitutes | None = None,
                  loaded: list[int] | None = None) -> list[np.ndarray | None]:
        """Loads samples `indices` into the uint8 rows of `pixels`, in this thread: with
        decoder="nvimgcodec" the JPEGs among them in one call (RGB), the rest one by one.
        Returns the mask of each image loaded (a stand-in's for a skipped sample): the
        rows of `masks` when given, else new arrays of the mask files' own dtype; None
        each without masks. `loaded` gets the index whose image each row holds."""
        done: set[int] = set()
        if self.nv is not None and self.color_mode == "rgb":
            done = decode_jpegs(self, indices, pixels)
        found: list[np.ndarray | None] = []
        for k, index in enumerate(indices):  # a mask is the loaded image's (a stand-in's)
            index = int(index)
            held, mask = self._with_mask(
                index, index if k in done else self.load_into(index, pixels[k], substitutes),
                pixels[k], None if masks is None else masks[k], substitutes)
            found.append(mask)
            if loaded is not None:
                loaded.append(held)
        return found

    # ----------------------------------------------------------------- the pool
    def pace(self, waited: bool) -> None:
        """The work-ahead's news of each batch (see `DecodePool.pace`)."""
        self.decode_pool.pace(waited)

    def threads(self) -> int:
        """Decode threads of this process's pool (see `DecodePool.threads`)."""
        return self.decode_pool.threads()

    @property
    def _width(self) -> int | None:
        """Decode threads used per batch now (None: all; see `DecodePool.pace`)."""
        return self.decode_pool.width
