"""`ImageOptions`: how every image-reading generator decodes, resizes, caches and treats a
bad file, checked once and carried whole.

The public constructors keep Keras's keyword names (``image_size=``, ``color_mode=``,
``crop_to_aspect_ratio=``...) and build one `ImageOptions` from them (`ImageOptions.take`);
the builders, sources and loaders below them take the object, never the keywords again,
so adding an option is one field here, its check, and the stage that uses it.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, MutableMapping
from typing import Any, Literal, Optional

from kerasgen import _checks
from kerasgen.loading import images

DECODERS = ("opencv", "nvimgcodec")
ON_ERROR = ("raise", "skip")


def check_rescale(rescale: Any) -> float | None:
    """`rescale=` checked: None or a finite, non-zero real number (NaN, inf or 0 would
    make every batch NaN, inf or zeros)."""
    if rescale is None:
        return None
    if isinstance(rescale, bool) or not isinstance(rescale, numbers.Real):
        _checks.fail("rescale", "None or a number (1/255, say)", rescale, TypeError)
    if not math.isfinite(rescale) or rescale == 0:
        _checks.fail("rescale", "a finite, non-zero number (1/255, say), or None",
                     rescale, ValueError, "Every pixel is multiplied by it, so every batch "
                     "would be NaN, inf or zeros.")
    return float(rescale)


@dataclasses.dataclass(frozen=True)
class ImageOptions:
    """The image options of a generator, each checked when the object is made.

    image_size: (height, width) every image is resized to; None keeps each image's size
        (only where a generator allows it, `StreamGenerator`).
    color_mode: "rgb", "grayscale" or "rgba".
    interpolation: the resize method, as Keras names it.
    crop_to_aspect_ratio, pad_to_aspect_ratio: resize without distortion (one at most).
    rescale: None, or the factor every pixel is multiplied by (float batches only).
    cache: "auto", "memory", a file path, or None (see ImageFolderGenerator).
    on_error: "raise", or "skip": a bad image is replaced and reported in `gen.skipped`.
    decode_threads: the decode pool's threads; None: sized to the cores.
    decoder: "opencv" or "nvimgcodec".
    max_pixels: the most pixels an image header may declare; None: no limit.
    bit_depth: None (8, or 16 for dtype="uint16"), 8 or 16.
    verbose: 0 hides progress bars.
    """

    image_size: Optional[tuple[int, int]] = (256, 256)
    color_mode: str = "rgb"
    interpolation: str = "bilinear"
    crop_to_aspect_ratio: bool = False
    pad_to_aspect_ratio: bool = False
    rescale: Optional[float] = None
    cache: Any = "auto"
    on_error: Literal["raise", "skip"] = "raise"
    decode_threads: Optional[int] = None
    decoder: str = "opencv"
    max_pixels: Optional[int] = images.MAX_PIXELS
    bit_depth: Optional[int] = None
    verbose: int = 1

    def __post_init__(self) -> None:
        fix = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        if self.image_size is not None:
            fix("image_size", _checks.image_size(self.image_size))
        fix("color_mode", images.check_color_mode(self.color_mode))
        fix("interpolation", images.check_interpolation(self.interpolation))
        images.aspect_mode(self.crop_to_aspect_ratio, self.pad_to_aspect_ratio)
        fix("crop_to_aspect_ratio", bool(self.crop_to_aspect_ratio))
        fix("pad_to_aspect_ratio", bool(self.pad_to_aspect_ratio))
        fix("rescale", check_rescale(self.rescale))
        fix("on_error", _checks.one_of("on_error", self.on_error, ON_ERROR))
        if self.decode_threads is not None:
            fix("decode_threads", _checks.positive_int("decode_threads",
                                                       self.decode_threads))
        fix("decoder", _checks.one_of("decoder", self.decoder, DECODERS))
        fix("max_pixels", images.check_max_pixels(self.max_pixels))
        if self.bit_depth is not None:
            fix("bit_depth", images.check_bit_depth(self.bit_depth))
        fix("verbose", int(self.verbose))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The keyword names of the options, as the public constructors spell them."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> ImageOptions:
        """The options among `arguments` (a constructor's `locals()`, say: its keywords
        keep Keras's names), the others at their defaults."""
        return cls(**{name: arguments[name] for name in cls.names() if name in arguments})

    @classmethod
    def take(cls, keywords: MutableMapping[str, Any],
             defaults: Mapping[str, Any] | None = None) -> ImageOptions:
        """The options named in `keywords`, removed from it (the rest stays for the
        generator), over `defaults` (a generator's own defaults, cache=None say)."""
        given = {name: keywords.pop(name) for name in cls.names() if name in keywords}
        return cls(**{**dict(defaults or {}), **given})

    @classmethod
    def from_loader_keywords(cls, image_size: Any, color_mode: Any = "rgb",
                             interpolation: Any = "bilinear", *, cache: Any = None,
                             aspect: Literal["crop", "pad"] | None = None,
                             bit_depth: int | None = 8, **rest: Any) -> ImageOptions:
        """The options of the keywords `ImageLoader` and `image_source` took before they
        took one `ImageOptions` (`aspect` for the two aspect flags; no cache and 8 bits
        by default), so that their callers keep working."""
        if aspect not in (None, "crop", "pad"):
            _checks.fail("aspect", "None, 'crop' or 'pad'", aspect)
        return cls(image_size=image_size, color_mode=color_mode,
                   interpolation=interpolation, cache=cache, bit_depth=bit_depth,
                   crop_to_aspect_ratio=aspect == "crop", pad_to_aspect_ratio=aspect == "pad",
                   **rest)

    def for_dtype(self, dtype: str | None) -> ImageOptions:
        """These options with `bit_depth` resolved for batches of `dtype` (None is 16
        for "uint16", else 8), checked against it."""
        return self.replace(bit_depth=self.depth(dtype))

    def replace(self, **changes: Any) -> ImageOptions:
        """A copy with `changes`, checked as a new object is."""
        return dataclasses.replace(self, **changes)

    def with_rescale(self, rescale: float | None) -> ImageOptions:
        """These options with `rescale` as a generator's is now (`gen.rescale` may be
        set after construction): itself when unchanged."""
        return self if self.rescale == rescale else self.replace(rescale=rescale)

    @property
    def aspect(self) -> Literal["crop", "pad"] | None:
        """None, "crop" or "pad" (what `images.resize` takes)."""
        return images.aspect_mode(self.crop_to_aspect_ratio, self.pad_to_aspect_ratio)

    def depth(self, dtype: str | None) -> int:
        """The bit depth images load at for batches of `dtype`."""
        return images.check_bit_depth(self.bit_depth, dtype)

    def loader_kwargs(self, dtype: str | None = None) -> dict[str, Any]:
        """The options as the keywords `ImageLoader` took before it took the object
        (`from_loader_keywords` reads them back)."""
        return {"image_size": self.image_size, "color_mode": self.color_mode,
                "interpolation": self.interpolation, "cache": self.cache,
                "on_error": self.on_error, "decode_threads": self.decode_threads,
                "aspect": self.aspect, "max_pixels": self.max_pixels,
                "decoder": self.decoder, "verbose": self.verbose,
                "bit_depth": self.depth(dtype)}
