"""What the generators whose samples are image files share: their base class
(`ImageFileGenerator`: the options users read, `skipped`, `validate`), and the sources
they build (`image_source`, `paired_source`, with `check_pairing` of target images)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kerasgen import _checks
from kerasgen.loading import images
from kerasgen import _redact
from kerasgen.builders.common import Splits, worker_processes
from kerasgen._typing import Cache, ColorMode, Decoder, Interpolation, OnError
from kerasgen.base import Generator
from kerasgen.loading.image_loader import ImageLoader
from kerasgen.loading.options import ImageOptions
from kerasgen.sources._image import ImageSource
from kerasgen.sources._paired import PairedSource


class ImageFileGenerator(Splits, Generator):
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
        return self.source.options.with_rescale(self.rescale)

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
                 options: ImageOptions, *, describe: Any = None,
                 files_found: int | None = None, listing_s: float = 0.0,
                 mask_paths: list[str] | None = None, skipped: Sequence[str] = (),
                 read: Any = None, root: Any = None, store: Any = None) -> ImageSource:
    """The ImageSource of image files `paths` (or of records `read` reads), with an
    ImageLoader of `options`, shared by the worker processes `common` asks for.
    `mask_paths`, `skipped`, `read`, `root` and `store` are the loader's (see
    `ImageLoader`)."""
    loader = ImageLoader(paths, options, mask_paths=mask_paths, skipped=skipped, read=read,
                         root=root, processes=worker_processes(common), store=store)
    return ImageSource(loader, labels, class_names=class_names, describe=describe,
                       files_found=files_found, listing_s=listing_s)


def check_pairing(target_dir: Any, target_image_size: Any, target_color_mode: Any,
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
    processes = worker_processes(common)
    loader = ImageLoader(paths, options, skipped=skipped, root=root, processes=processes,
                         store=store)
    size, mode = pairing
    target_loader = ImageLoader(targets, options.replace(image_size=size, color_mode=mode),
                                root=target_root, processes=processes, store=store)
    return PairedSource(loader, target_loader, describe=describe, files_found=files_found,
                        listing_s=listing_s)
