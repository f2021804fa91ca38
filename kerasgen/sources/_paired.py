"""The source of image-to-image generators: each input image paired with a target image.

`PairedSource` is an `ImageSource` whose samples carry a second image, its target (the
clean image of a noisy one, the high-resolution image of a small one, the colour image
of a grey one), loaded by a second `ImageLoader` at its own size and colour mode. A
batch decodes both of a pair (a bad file of either, with on_error="skip", replaces the
pair by another), lets augmentation transform them with the same draws (albumentations'
additional target of type "image"), and returns (inputs, targets) of one dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kerasgen.arrays import batching
from kerasgen.sources._image import ImageSource
from kerasgen.loading import scan
from kerasgen.loading.image_loader import ImageLoader
from kerasgen.sources._batch_request import BatchRequest, default_assemble


class TargetImage:
    """The target image of one sample, as augmentation gets it (`image`, uint8)."""

    __slots__ = ("image",)

    def __init__(self, image: np.ndarray) -> None:
        self.image = image


class PairedSource(ImageSource):
    """Input images (`loader`) paired with target images (`target_loader`, one file per
    sample, in the same order).

    Args:
        loader, rescale, describe, files_found, listing_s: as for `ImageSource` (no
            labels: each sample's target is its image).
        target_loader: the `ImageLoader` of the target images. Its skipped files are
            the input loader's list (`gen.skipped` names both kinds).
    """

    def __init__(self, loader: ImageLoader, target_loader: ImageLoader, *,
                 rescale: float | None = None, describe: Any = None,
                 files_found: int | None = None, listing_s: float = 0.0) -> None:
        super().__init__(loader, None, rescale=rescale, describe=describe,
                         files_found=files_found, listing_s=listing_s)
        self.target_loader = target_loader
        target_loader.skipped = loader.skipped  # one list of the files skipped

    def for_processes(self, processes: int) -> PairedSource:
        loader = self.loader.for_processes(processes)
        if loader is self.loader:
            return self
        return PairedSource(loader, self.target_loader.for_processes(processes),
                            rescale=self.rescale, describe=self._describe,
                            files_found=self.files_found, listing_s=self.listing_s)

    def prefetch(self, indices: np.ndarray) -> None:
        self.loader.prefetch(indices)
        self.target_loader.prefetch(indices)

    def validate(self) -> list[str]:
        """Decodes every input and target file once; returns the bad paths."""
        return scan.validate(self.loader) + scan.validate(self.target_loader)

    def _load_pair(self, index: int, out: np.ndarray, target: np.ndarray,
                   request: BatchRequest) -> None:
        """Loads pair `index` into `out` and `target`; when a file of it is bad (and
        on_error="skip"), the first of `request.substitutes(index)` whose two files
        are good instead."""
        try:
            self.loader.load_into(index, out)
            self.target_loader.load_into(index, target)
            return
        except (ValueError, FileNotFoundError):
            if self.loader.on_error == "raise":
                raise
        candidates, group = request.substitutes(index)
        for other in candidates:
            try:
                self.loader.load_into(int(other), out)
                self.target_loader.load_into(int(other), target)
                return
            except (ValueError, FileNotFoundError):
                continue
        raise ValueError(f"No pair of good files in {group} to stand in for "
                         f"{self.describe(index)}, whose files are bad.")

    def load_batch(self, request: BatchRequest) -> tuple[Any, Any]:
        """(inputs, targets) of `request`, each pair decoded, augmented with the same
        draws on the loader's threads, and converted to the batch's dtype (`rescale`
        applies to both)."""
        if request.partners is not None:
            raise ValueError("Synthetic samples (SMOTE) cannot blend image pairs.")
        indices = request.indices
        self.prefetch(indices)
        shape, target_shape = self.loader.sample_shape, self.target_loader.sample_shape

        def chunk(a: int, b: int) -> list[tuple[Any, Any]]:
            done = []
            for k in range(a, b):
                x = np.empty(shape, self.loader.pixel_dtype)
                y = np.empty(target_shape, self.target_loader.pixel_dtype)
                with request.stage("decode"):
                    self._load_pair(int(indices[k]), x, y, request)
                if request.augment is not None:
                    with request.stage("augment"):
                        x, held = request.augmented(x, request.positions[k],
                                                    TargetImage(y))
                        y = held.image
                done.append((x, y))
            return done

        pairs = [pair for part in self.loader.decode_pool.in_threads(len(indices), chunk)
                 for pair in part]
        with request.stage("assemble"):
            assemble = default_assemble(request, self.describe)
            x = assemble([np.asarray(x) for x, _ in pairs], indices)
            y = assemble([np.asarray(y) for _, y in pairs], indices)
            return (batching.convert(x, request.dtype, request.rescale, request.buffers),
                    batching.convert(y, request.dtype, request.rescale, request.buffers))
