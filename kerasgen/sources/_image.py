"""The source of every generator whose samples are encoded images: image folders, CSV
lists, SQL queries of paths, TFRecord image features.

`ImageSource` composes, once, what an image sample needs: the files (or records), their
labels and class names, and an `ImageLoader` (decode, resize, cache, bad-file policy,
thread pool, pacing), with `rescale` applied when batches convert to floats. Its
`load_batch` decodes a batch on the loader's pool, blends SMOTE's synthetic rows and
augments each sample in the pool's threads, straight into the batch.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kerasgen.loading import scan
from kerasgen.loading.image_loader import ImageLoader
from kerasgen.loading.options import ImageOptions
from kerasgen.loading.options import check_rescale
from kerasgen.arrays import batching
from kerasgen.sources._batch_request import BatchRequest, default_assemble


class ImageSource:
    """Samples that are encoded images, loaded by `loader`.

    Args:
        loader: the `ImageLoader` of the samples (one file path, or record name, each).
        labels: one label per sample (class ids of `class_names`, class names, ...), or
            None.
        class_names: the classes in class-id order, or None.
        rescale: the factor applied when batches convert to a float dtype; None (the
            default): the loader's options' `rescale`.
        describe: names sample i in errors (default: its file path).
        files_found: the files listed before a validation split (Keras prints it).
        listing_s: seconds spent listing the files (the stats' "list" stage).
    """

    def __init__(self, loader: ImageLoader, labels: Any = None, *,
                 class_names: Sequence[str] | None = None, rescale: float | None = None,
                 describe: Callable[[int], str] | None = None,
                 files_found: int | None = None, listing_s: float = 0.0) -> None:
        self.loader = loader
        self.labels = labels
        self.class_names = None if class_names is None else list(class_names)
        self.rescale = check_rescale(loader.options.rescale if rescale is None
                                     else rescale)
        self._describe = describe
        self.files_found = len(loader.file_paths) if files_found is None else files_found
        self.listing_s = listing_s
        self._thumbnails: Thumbnails | None = None

    def __len__(self) -> int:
        return len(self.loader.file_paths)

    @property
    def file_paths(self) -> list[str]:
        """One image path (or record name) per sample."""
        return self.loader.file_paths

    @property
    def options(self) -> ImageOptions:
        """The image options of the samples (the loader's, with this source's
        `rescale`)."""
        options = self.loader.options
        return options if options.rescale == self.rescale else options.replace(
            rescale=self.rescale)

    def describe(self, index: int) -> str:
        if self._describe is None:
            return self.loader.file_paths[index]
        return self._describe(index)

    def load(self, index: int) -> Any:
        """Sample `index` as a new uint8 array (uint16 at bit_depth=16; (image, mask)
        with masks)."""
        if self.loader.mask_paths is None:
            return self.loader.load(index)
        out = np.empty(self.loader.sample_shape, self.loader.pixel_dtype)
        return out, self.loader.load_with_mask(int(index), out)[1]

    @property
    def features(self) -> Thumbnails:
        """8x8 RGB thumbnails, made once per needed sample: SMOTE's default space."""
        if self._thumbnails is None:
            self._thumbnails = Thumbnails(self.loader)
        return self._thumbnails

    def for_processes(self, processes: int) -> ImageSource:
        """This source with its loader shared by `processes` worker processes (itself
        when its loader already is)."""
        loader = self.loader.for_processes(processes)
        if loader is self.loader:
            return self
        shared = copy.copy(self)  # the same kind of source (TFRecord images: see tfrecord)
        shared.__init__(loader, self.labels, class_names=self.class_names,  # type: ignore[misc]
                        rescale=self.rescale, describe=self._describe,
                        files_found=self.files_found, listing_s=self.listing_s)
        return shared

    def pace(self, waited: bool) -> None:
        """The work-ahead's news of each batch (see `ImageLoader.pace`)."""
        self.loader.pace(waited)

    def check(self, dtype: str | None) -> None:
        """Refuses a `rescale` with a batch dtype it cannot apply to, or that would make
        pixels beyond the dtype's range (inf)."""
        if self.rescale is not None and dtype not in ("float32", "float16"):
            raise ValueError(
                f"`rescale` applies to float batches only. Received: rescale={self.rescale} "
                f"with dtype={dtype!r}. Use dtype='float32', or drop rescale and let "
                "the model rescale (a keras.layers.Rescaling layer)."
            )
        pixels = self.loader.pixel_dtype
        if dtype is not None and not batching.fits_always(pixels, dtype, self.rescale):
            top = np.iinfo(pixels).max
            if self.rescale is None:  # the dtype is at fault, not a rescale
                raise ValueError(
                    f"`dtype` must hold the pixels (0 to {top} at bit_depth="
                    f"{self.loader.bit_depth}). Received: dtype={dtype!r} "
                    f"({batching.holds(dtype)}), which would make {top} into "
                    f"{batching.became(pixels(top), dtype)!r}. Use dtype='uint16' or "
                    "'float32' (or a float dtype with rescale=1/65535), or bit_depth=8.")
            raise ValueError(
                f"`rescale` must keep pixels (0 to {top}, bit_depth="
                f"{self.loader.bit_depth}) within dtype={dtype!r} "
                f"({batching.holds(dtype)}). Received: rescale={self.rescale}, which "
                f"makes {top} into {batching.became(pixels(top), dtype, self.rescale)!r}. "
                "Use a smaller rescale, or dtype='float32'.")

    @property
    def remote(self) -> bool:
        """Whether some files are URLs, read through the loader's store."""
        return self.loader.remote

    def forget(self) -> None:
        """Drops the objects fetched ahead and not read."""
        if self.loader.store is not None:
            self.loader.store.forget()

    def prefetch(self, indices: np.ndarray) -> None:
        """Starts fetching the remote objects of samples `indices` (see
        `ImageLoader.prefetch`)."""
        self.loader.prefetch(indices)

    def validate(self) -> list[str]:
        """Decodes every file once (in parallel, with progress); returns the bad paths."""
        return scan.validate(self.loader)

    # ----------------------------------------------------------------- batches
    def load_batch(self, request: BatchRequest) -> tuple[Any, Any]:
        """(x, masks or None) of `request`; a bad file (on_error="skip") is replaced by
        the first good sample of `request.substitutes(index)`."""
        substitutes = request.substitutes
        partners = request.partners
        self.loader.prefetch(request.indices if partners is None else np.concatenate(
            [request.indices, partners[partners >= 0]]))
        if request.partners is None:
            if request.augment is not None:
                return self._load_augmented(request, substitutes)
            return self.loader.decode(request.indices,
                                      request.dtype or self.loader.pixel_dtype,
                                      request.rescale, buffers=request.buffers,
                                      stage=request.stage, substitutes=substitutes)
        return self._load_synthetic(request, substitutes)

    def _load_synthetic(self, request, substitutes):
        """SMOTE: decode the partners after the batch's own rows, blend, then augment."""
        indices, partners, lams = request.indices, request.partners, request.lams
        n, synthetic = len(indices), np.flatnonzero(partners >= 0)
        out, masks = self.loader.decode(np.concatenate([indices, partners[synthetic]]),
                                        self.loader.pixel_dtype, buffers=request.buffers,
                                        stage=request.stage, substitutes=substitutes)
        rows = np.zeros(n, bool)
        rows[synthetic] = True
        out = batching.blend_rows(out[:n], out[n:], lams[synthetic], rows)
        masks = None if masks is None else masks[:n]  # a synthetic sample keeps x_i's mask
        if request.augment is not None:
            with request.stage("augment"):
                pairs = [pair for part in self.loader.decode_pool.in_threads(n, lambda a, b: [
                    request.augmented(out[k], request.positions[k],
                                    None if masks is None else masks[k])
                    for k in range(a, b)]) for pair in part]
            with request.stage("assemble"):
                assemble = default_assemble(request, self.describe)
                out = assemble([x for x, _ in pairs], request.indices)
                if masks is not None:
                    masks = assemble([m for _, m in pairs], request.indices)
        return batching.convert(out, request.dtype, request.rescale, request.buffers), masks

    def _load_augmented(self, request, substitutes):
        """Decodes each thread's share of the batch (as `ImageLoader.load_rows` does),
        then augments and converts each sample there, straight into the batch (sample 0
        first, here, to learn the augmented shape). With dtype=None the augmented
        samples are stacked once all are made, in the type that holds them all
        (`batching.stack`), never in sample 0's."""
        loader, indices, stage = self.loader, request.indices, request.stage

        def decoded(a: int, b: int) -> tuple[np.ndarray, Any]:
            # the masks in their files' own dtype, as augment gets them
            pixels = np.empty((b - a,) + loader.sample_shape, loader.pixel_dtype)
            with stage("decode"):
                masks = loader.load_rows(indices[a:b], pixels, None, substitutes)
            return pixels, masks

        def augmented(pixels, masks, k, row):
            with stage("augment"):
                return request.augmented(pixels[row], request.positions[k], masks[row])

        def put(k, sample, batch, rescale):
            sample = np.asarray(sample)
            if sample.shape != batch.shape[1:]:  # the error names the sample
                batching.write(batch, k, sample, lambda: self.describe(int(indices[k])))
            batching.convert_into(batch[k], sample, rescale)

        def put_mask(k, mask, masks):
            mask = np.asarray(mask)
            flat = batching.misfit(mask, np.int32)
            if flat is not None:  # a mask interpolated, not moved: 0.5 is no class id
                value = mask.flat[flat]
                raise ValueError(
                    "`augment` must return masks of class ids (whole numbers from 0 to "
                    f"{np.iinfo(np.int32).max}). Received: {value.item()!r} ({mask.dtype}) "
                    f"in the mask it returned for {self.describe(int(indices[k]))}, which "
                    f"the batch would hold as {batching.became(value, np.int32)!r}. Move "
                    "masks with nearest-neighbour interpolation (as albumentations does), "
                    "or round them.")
            put(k, mask, masks, None)

        if request.dtype is None:  # the samples' own type: stacked once all are made
            def made(a, b):
                pixels, raw_masks = decoded(a, b)
                return [augmented(pixels, raw_masks, k, k - a) for k in range(a, b)]

            pairs = [pair for part in loader.decode_pool.in_threads(len(indices), made)
                     for pair in part]
            with stage("assemble"):
                x = default_assemble(request, self.describe)([x for x, _ in pairs], indices)
                if pairs[0][1] is None:
                    return x, None
                stacked = np.empty((len(indices),) + np.shape(pairs[0][1]), np.int32)
                for k, (_, mask) in enumerate(pairs):
                    put_mask(k, mask, stacked)
            return x, stacked

        x0, m0 = augmented(*decoded(0, 1), 0, 0)
        x0 = np.asarray(x0)  # an array: BatchMaker checked what augment returned
        out = np.empty((len(indices),) + x0.shape, request.dtype)
        masks = None if m0 is None else np.empty((len(indices),) + np.shape(m0), np.int32)

        def write(k, x, m):
            with stage("assemble"):
                put(k, x, out, request.rescale)
                if masks is not None:
                    put_mask(k, m, masks)

        def chunk(a, b):
            pixels, raw_masks = decoded(a, b)
            for k in range(a, b):
                write(k, *augmented(pixels, raw_masks, k, k - a))

        write(0, x0, m0)
        if len(indices) > 1:
            loader.decode_pool.in_threads(len(indices) - 1, lambda a, b: chunk(a + 1, b + 1))
        return out, masks

class Thumbnails:
    """Lazily decoded 8x8 RGB thumbnails, the default SMOTE feature space for images.
    Indexing with an array decodes the samples not seen yet and keeps them. A file
    skipped as bad (on_error="skip") has a row of zeros, and is in `bad`."""

    size = (8, 8)

    def __init__(self, loader: ImageLoader) -> None:
        self.loader = loader
        self.table: dict[int, np.ndarray | None] = {}

    def __getitem__(self, indices: Any) -> np.ndarray:
        indices = np.atleast_1d(np.asarray(indices))
        scan.thumbnails(self.loader, indices, self.table, self.size)
        blank = np.zeros(self.size + (3,), np.float32)  # RGB, as loader.thumbnails
        rows = (self.table[int(i)] for i in indices)
        return np.stack([blank if row is None else row for row in rows])

    @property
    def bad(self) -> set[int]:
        """The samples whose thumbnail could not be made (skipped bad files)."""
        return {i for i, row in self.table.items() if row is None}

    def __len__(self) -> int:
        return len(self.loader.file_paths)
