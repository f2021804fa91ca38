"""Image loading: encoded images -> resized uint8 arrays, on a thread pool, with caches.

`ImageLoader` is the loader stage of every generator whose samples are encoded images
(image folders, CSV lists, SQL queries of paths): it decodes and resizes (OpenCV releases
the GIL, so its pool threads decode in parallel), keeps decoded samples in a cache when
asked, and applies the bad-file policy (raise, or skip to a stand-in with a report). It
knows nothing of labels, epochs or batches' order: the generator hands it sample indices
and a place to write them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Literal, TypeVar

import numpy as np
import numpy.typing as npt

from kerasgen import _checks, _jpeg
from kerasgen.pipeline import batching
from kerasgen import _images as images
from kerasgen.pipeline import cache as cache_mod
from kerasgen import _nvdecode
from kerasgen.sources import _remote
from kerasgen import _stats as stats_mod
from kerasgen._progress import progress
from kerasgen._typing import Cache, ColorMode, Decoder, ImageSize, Interpolation, OnError, StrPath
from kerasgen import _redact

_T = TypeVar("_T")
DECODERS = ("opencv", "nvimgcodec")
# index -> (the samples that may stand in for it, in order; what they are called)
Substitutes = Callable[[int], "tuple[np.ndarray, str]"]


class ImageLoader:
    """Loads encoded images as (height, width, channels) uint8 arrays.

    Args:
        file_paths: one image path per sample (or, with `read`, one name per sample, used
            in errors and in `skipped`).
        image_size, color_mode, interpolation: the output (see ImageFolderGenerator).
        aspect: None, "crop" or "pad": keep the aspect ratio (see `images.resize`).
        cache: "auto", None, "memory" or a file path (see ImageFolderGenerator).
        on_error: "raise" or "skip": a file that cannot be read or decoded (corrupt,
            gone, not a regular file, larger than `max_pixels`, refused by OpenCV, or
            its mask so) is replaced by the first good sample of `stand_ins(index)` ->
            (candidate indices, what they are called in an error), and listed in
            `skipped`.
        max_pixels: the most pixels an image (or mask) header may declare; larger ones
            are refused before decoding. None: no limit.
        root: a real folder path, or None: every file (and mask) must still lie in it
            when it is opened (see `images.read_file`).
        decode_threads: threads of the pool; None: `default_threads()`.
        mask_paths: one segmentation mask per sample, or None.
        store: the `sources._remote.Store` that reads paths that are URLs (s3://, https://...);
            each batch's objects are fetched at once on its I/O threads (`prefetch`).
        verbose: 0 hides progress bars.
        read: `read(index) -> encoded bytes` for samples that are not files (records of
            a TFRecord file, say); None reads `file_paths[index]`.
        decoder: "opencv" (default), or "nvimgcodec": the JPEGs of a batch decoded with
            NVIDIA's nvImageCodec in one call per decode thread (on the GPU where CUDA is
            present, else its CPU backend), then resized here as OpenCV's are; other
            formats, masks and "grayscale"/"rgba" use OpenCV (see `_nvdecode`).
        processes: None (no worker processes: this process decodes), or the number of
            worker processes that share the machine's cores (each decodes on its share
            of them) and a memory cache, then in shared memory, filled and read by all
            of them (see `for_processes`).

    Batches (`decode`) are written into the caller's buffer pool and timed into its
    stats when it passes them; a bad file's stand-ins are the caller's `substitutes`.
    """

    def __init__(self, file_paths: Iterable[str], image_size: ImageSize,
                 color_mode: ColorMode, interpolation: Interpolation, *, cache: Cache = None,
                 on_error: OnError = "raise", decode_threads: int | None = None,
                 mask_paths: Iterable[str] | None = None, verbose: int = 1,
                 skipped: Iterable[str] = (),
                 read: Callable[[int], bytes | np.ndarray] | None = None,
                 aspect: Literal["crop", "pad"] | None = None,
                 max_pixels: int | None = images.MAX_PIXELS, root: StrPath | None = None,
                 processes: int | None = None,
                 decoder: Decoder = "opencv", store: _remote.Store | None = None,
                 bit_depth: int = 8) -> None:
        self.file_paths = list(file_paths)
        self.bit_depth = images.check_bit_depth(bit_depth)
        self.pixel_dtype = images.pixel_dtype(self.bit_depth)
        self.store = store
        self.remote = store is not None and read is None and _remote.any_url(
            self.file_paths)
        self.decoder = _checks.one_of("decoder", decoder, DECODERS)
        self.nv = None if decoder == "opencv" else _nvdecode.NvDecoder()
        if self.nv is not None and self.bit_depth == 16:
            raise ValueError("decoder='nvimgcodec' decodes 8-bit images. Received: "
                             "bit_depth=16. Use decoder='opencv' for 16-bit images.")
        if self.nv is not None and not _nvdecode.available():
            raise ImportError(f"decoder='nvimgcodec' needs NVIDIA's nvImageCodec: "
                              f"{_nvdecode.PIP}.")
        self.mask_paths = None if mask_paths is None else list(mask_paths)
        self.image_size = _checks.image_size(image_size)
        self.color_mode = images.check_color_mode(color_mode)
        self.interpolation = images.check_interpolation(interpolation)
        self.aspect = aspect
        self.max_pixels = images.check_max_pixels(max_pixels)
        self.root = root
        self.on_error = _checks.one_of("on_error", on_error, ("raise", "skip"))
        self.decode_threads = (None if decode_threads is None
                               else _checks.positive_int("decode_threads", decode_threads))
        self.verbose = verbose
        self.read = read
        self.processes = (None if processes is None
                          else _checks.positive_int("processes", processes))
        self.skipped = list(skipped)  # files skipped so far (listed ones, bad ones)
        self._warned = False  # of a bad file met while loading
        self.buffers = batching.BufferPool()  # batch arrays, reused when Keras let go
        self._lock = threading.Lock()
        self._executor: tuple[int, ThreadPoolExecutor] | None = None
        self._width: int | None = None  # decode threads used per batch (None: all)
        self._ahead_streak = 0
        self.cache_spec = cache
        self.cache = self._make_cache(cache)
        if processes is not None and isinstance(self.cache, cache_mod.MemoryCache) and (
                not isinstance(self.cache, cache_mod.FileCache)):
            self.cache = cache_mod.SharedMemoryCache(
                self.cache.num_samples, self.cache.sample_shape, self.cache.capacity)

    # the caches hold bytes: a 16-bit sample is kept as (h, w, 2 * channels) uint8
    def _cached(self, index: int) -> np.ndarray | None:
        assert self.cache is not None
        found = self.cache.get(index)
        return found if found is None or self.bit_depth == 8 else found.view(np.uint16)

    def _keep(self, index: int, sample: np.ndarray) -> None:
        assert self.cache is not None
        self.cache.put(index, sample if self.bit_depth == 8 else sample.view(np.uint8))

    @property
    def _cache_shape(self) -> tuple[int, int, int]:
        height, width, channels = self.sample_shape
        return height, width, channels * np.dtype(self.pixel_dtype).itemsize

    def for_processes(self, processes: int | None) -> ImageLoader:
        """This loader as `processes` worker processes share it: the cores split between
        them, a memory cache in shared memory (the loader itself with one process)."""
        if processes == self.processes:
            return self
        return ImageLoader(self.file_paths, self.image_size, self.color_mode,
                           self.interpolation, cache=self.cache_spec, on_error=self.on_error,
                           decode_threads=self.decode_threads, mask_paths=self.mask_paths,
                           verbose=self.verbose, skipped=self.skipped, read=self.read,
                           aspect=self.aspect, max_pixels=self.max_pixels, root=self.root,
                           processes=processes, decoder=self.decoder, store=self.store,
                           bit_depth=self.bit_depth)

    @property
    def sample_shape(self) -> tuple[int, int, int]:
        """(height, width, channels) of one loaded sample."""
        return self.image_size + (images.COLOR_MODES[self.color_mode],)

    def _make_cache(self, cache):
        if isinstance(cache, str) and cache.strip().lower() in ("none", "memory", "auto"):
            word = cache.strip().lower()  # "None", "Memory ": the options, not file names
            cache = None if word == "none" else word
        if isinstance(cache, str) and not cache.strip():
            _checks.fail("cache", "'auto', None, 'memory' or a file path", cache)
        if cache is None:
            return None
        if cache == "memory":
            return cache_mod.MemoryCache(len(self.file_paths), self._cache_shape)
        if cache == "auto":  # as many samples as fit in the budget, in this process
            row = int(np.prod(self._cache_shape))
            return cache_mod.MemoryCache(len(self.file_paths), self._cache_shape,
                                         capacity=cache_mod.auto_budget() // row)
        if isinstance(cache, (str, os.PathLike)):
            how = f"{images.resize_key(self.interpolation, self.aspect)} " \
                  f"pixels{images.PIXEL_RULES}"
            if self.decoder != "opencv":  # another decoder: other pixels, another cache
                how = f"{how} {self.decoder}"
            key = cache_mod.cache_key(self.file_paths, self._cache_shape, self.color_mode,
                                      how, None if self.store is None else self.store.version)
            return cache_mod.FileCache(cache, len(self.file_paths), self._cache_shape, key)
        _checks.fail("cache", "'auto', None, 'memory' or a file path", cache, TypeError)

    # ----------------------------------------------------------------- one sample
    def load_into(self, index: int, out: np.ndarray,
                  substitutes: Substitutes | None = None) -> int:
        """Loads sample `index` into `out`; returns the index whose image it holds
        (another sample's when the file was skipped: the first good one of
        `substitutes(index)`)."""
        if self.cache is not None:
            cached = self._cached(index)
            if cached is not None:
                out[...] = cached
                return index
        try:
            self._decode_into(index, out)
        except (ValueError, FileNotFoundError) as error:
            if self.on_error == "raise":
                raise _bad_file(error, self.file_paths[index]) from None
            self._record_skip(index, error)
            if substitutes is None:
                raise
            return self._load_stand_in(index, out, substitutes)[0]  # never cached
        if self.cache is not None:
            self._keep(index, out)
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
        except (ValueError, FileNotFoundError) as error:
            if self.on_error == "raise":
                raise _bad_file(error, self.mask_paths[loaded]) from None
            self._record_skip(loaded, error)
            if substitutes is None:
                raise
            return self._load_stand_in(index, out, substitutes, with_mask=True,
                                       mask_out=mask_out, exclude=loaded)

    def _decoded(self, index, target_size, color_mode=None, depth=None):
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

    def _decode_into(self, index, out):
        images.resize(self._decoded(index, self.image_size), self.image_size,
                      self.color_mode, self.interpolation, out, self.aspect)

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

    def _load_stand_in(self, index, out, substitutes, with_mask=False, mask_out=None,
                       exclude=None):
        """(index, mask or None) of the first good stand-in for `index`, loaded."""
        candidates, group = substitutes(index)
        for j in candidates:
            j = int(j)
            if j == exclude:
                continue
            try:
                self._decode_into(j, out)
                return j, self.load_mask(j, mask_out) if with_mask else None
            except (ValueError, FileNotFoundError) as error:
                self._record_skip(j, error)
        raise ValueError(f"No image of {group} could be decoded to stand in for "
                         f"{self.file_paths[index]}; `gen.skipped` lists the bad files.")

    def _record_skip(self, index, error):
        path = self.file_paths[index]
        with self._lock:
            if path in self.skipped:
                return
            self.skipped.append(path)
            first, self._warned = not self._warned, True  # listed skips had their own
        if first:
            _redact.warn(f"Skipping an undecodable image, replaced by another sample of "
                         f"its class: {error} `gen.skipped` lists every skipped file; "
                         "`gen.validate()` finds them all up front.", stacklevel=2)

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
            self.in_threads(len(indices), lambda a, b: self._load_chunk(
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
                  ) -> list[np.ndarray | None]:
        """Loads samples `indices` into the uint8 rows of `pixels`, in this thread: with
        decoder="nvimgcodec" the JPEGs among them in one call (RGB), the rest one by one.
        Returns the mask of each image loaded (a stand-in's for a skipped sample): the
        rows of `masks` when given, else new arrays of the mask files' own dtype; None
        each without masks."""
        done: set[int] = set()
        if self.nv is not None and self.color_mode == "rgb":
            done = self._decode_jpegs(indices, pixels)
        found: list[np.ndarray | None] = []
        for k, index in enumerate(indices):  # a mask is the loaded image's (a stand-in's)
            index = int(index)
            loaded = index if k in done else self.load_into(index, pixels[k], substitutes)
            found.append(self._with_mask(index, loaded, pixels[k],
                                         None if masks is None else masks[k],
                                         substitutes)[1])
        return found

    def _decode_jpegs(self, indices: np.ndarray, pixels: np.ndarray) -> set[int]:
        """Copies the cached samples among `indices` into `pixels`, and decodes the
        JPEGs among the others with nvImageCodec, in one call, resized into `pixels`
        (and cached); returns the rows it filled. A file it
        cannot read or decode is left to `load_with_mask`, which names it or skips it."""
        rows, datas = [], []
        done: set[int] = set()
        for k, index in enumerate(indices):
            index = int(index)
            cached = None if self.cache is None else self._cached(index)
            if cached is not None:  # read once, here
                pixels[k] = cached
                done.add(k)
                continue
            try:
                data = (self.read_file(self.file_paths[index]) if self.read is None
                        else np.frombuffer(self.read(index), np.uint8))
                jpeg = _jpeg.info(data)
                if jpeg is None or jpeg.components == 4 or jpeg.precision != 8:
                    continue  # not a JPEG, CMYK (nvImageCodec's differ by 1) or 12-bit:
                              # OpenCV's
                images.check_pixels(jpeg.size, self.max_pixels, self.file_paths[index])
                if not _jpeg.intact(data, self.file_paths[index]):
                    continue  # a warning nvImageCodec would print: OpenCV decides
            except (ValueError, FileNotFoundError):
                continue
            rows.append(k)
            datas.append(data)
        if not rows or self.nv is None:
            return done
        for k, image in zip(rows, self.nv.decode(datas)):
            if image is None:
                continue
            images.resize(image, self.image_size, self.color_mode, self.interpolation,
                          pixels[k], self.aspect)
            if self.cache is not None:
                self._keep(int(indices[k]), pixels[k])
            done.add(k)
        return done

    # ----------------------------------------------------------------- the pool
    def in_threads(self, n: int, work: Callable[[int, int], _T]) -> list[_T]:
        """Runs work(a, b) over contiguous chunks of range(n) on the pool (in this thread
        when the pool has one thread); returns the results in chunk order."""
        threads = min(self._width or self.threads(), n)
        if threads <= 1:
            return [work(0, n)]
        bounds = np.linspace(0, n, threads + 1).astype(int)
        futures = [self.pool().submit(work, a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        return [future.result() for future in futures]

    def pace(self, waited: bool) -> None:
        """Sizes decoding to what training leaves free, from the work-ahead's news of
        each batch: while the caller finds its batches ready (8 in a row), one decode
        thread fewer is used per batch, down to one, leaving the cores to the model;
        the first time it has to wait, all of them again (so it never starves)."""
        if self.decode_threads is not None:
            return
        if waited:
            self._width, self._ahead_streak = None, 0
            return
        self._ahead_streak += 1
        if self._ahead_streak >= 8:
            self._ahead_streak = 0
            self._width = max(1, (self._width or self.threads()) - 1)

    def threads(self) -> int:
        """Decode threads of this process's pool: `decode_threads`, else the cores this
        process may use, split between worker processes."""
        if self.decode_threads is not None:
            return self.decode_threads
        return max(1, usable_cores() // (self.processes or 1))

    def pool(self) -> ThreadPoolExecutor:
        """This process's pool; a forked worker process makes its own (a pool inherited
        through fork has no threads and would never run a task)."""
        executor = self._executor
        if executor is None or executor[0] != os.getpid():
            with self._lock:
                executor = self._executor
                if executor is None or executor[0] != os.getpid():
                    executor = (os.getpid(), ThreadPoolExecutor(
                        self.threads(), thread_name_prefix="kerasgen-decode"))
                    self._executor = executor
        return executor[1]

    # ----------------------------------------------------------------- checks
    def validate(self) -> list[str]:
        """Decodes every file (and mask) once, in parallel, with progress; returns the
        bad paths: files that cannot be read or decoded, or are larger than
        `max_pixels` (a bad mask is listed by its own path)."""
        def check(index):
            try:
                self._decoded(index, self.image_size)
            except (ValueError, FileNotFoundError):
                return self.file_paths[index]
            if self.mask_paths is not None:
                try:
                    self.load_mask(index)
                except (ValueError, FileNotFoundError):
                    return self.mask_paths[index]
            return None

        results = self.pool().map(check, range(len(self.file_paths)))
        return [p for p in progress(results, "Validating images", len(self.file_paths),
                                    self.verbose) if p is not None]

    def thumbnails(self, indices: npt.ArrayLike, table: dict[int, np.ndarray | None],
                   size: tuple[int, int] = (8, 8)) -> None:
        """Decodes the samples of `indices` missing from `table` as small float32 RGB
        thumbnails (in parallel, with progress for slow cases) and adds them. A bad file
        is an error naming it, or with on_error="skip" a skipped file (warned of, in
        `skipped`) whose entry is None."""
        todo = [int(i) for i in np.unique(indices) if int(i) not in table]

        def thumb(i):
            try:
                # at the loader's own depth: a thumbnail of a 16-bit file at
                # bit_depth=16 is no 8-bit reduction to warn of
                return i, images.resize(self._decoded(i, size, "rgb"), size, "rgb")
            except (ValueError, FileNotFoundError) as error:
                if self.on_error == "raise":
                    raise _bad_file(error, self.file_paths[i]) from None
                self._record_skip(i, error)
                return i, None

        for i, image in progress(self.pool().map(thumb, todo), "Making thumbnails",
                                 len(todo), self.verbose):
            table[i] = None if image is None else image.astype(np.float32)

    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(_executor=None, _lock=None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()


def _bad_file(error: Exception, path: str) -> Exception:
    """`error` (a file that cannot be read or decoded) marked as a bad file, with the
    ways out in a note; `Generator.__getitem__` re-raises it without kerasgen's frames."""
    if not getattr(error, "kerasgen_bad_file", None):
        error.kerasgen_bad_file = path  # type: ignore[attr-defined]
        if hasattr(error, "add_note"):
            error.add_note(
                "kerasgen: to train past bad files, pass on_error='skip' (each is replaced "
                "by another image of its class, with a warning; gen.skipped lists them); "
                "to find them all first, run gen.validate() or `kerasgen inspect` on the "
                "folder or CSV file.")
    return error


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
