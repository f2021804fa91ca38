"""A batch's JPEGs decoded with nvImageCodec in one call (decoder="nvimgcodec"), resized
into the batch as OpenCV's decodes are; what it cannot decode is left to OpenCV."""

from __future__ import annotations

from typing import Any

import numpy as np

from kerasgen.loading import images
from kerasgen.loading import jpeg as _jpeg
from kerasgen.loading.bad_files import BAD


def decode_jpegs(loader: Any, indices: np.ndarray, pixels: np.ndarray) -> set[int]:
    """Copies the cached samples among `indices` into `pixels`, and decodes the JPEGs
    among the others with the `loader`'s nvImageCodec decoder, in one call, resized into
    `pixels` (and cached); returns the rows it filled. A file it cannot read or decode is
    left to `loader.load_with_mask`, which names it or skips it."""
    rows, datas = [], []
    done: set[int] = set()
    for k, index in enumerate(indices):
        index = int(index)
        cached = None if loader.cache is None else loader.cached(index)
        if cached is not None:  # read once, here
            pixels[k] = cached
            done.add(k)
            continue
        try:
            data = loader.encoded(index)
            jpeg = _jpeg.info(data)
            if jpeg is None or jpeg.components == 4 or jpeg.precision != 8:
                continue  # not a JPEG, CMYK (nvImageCodec's differ by 1) or 12-bit:
                          # OpenCV's
            images.check_pixels(jpeg.size, loader.max_pixels, loader.file_paths[index])
            if not _jpeg.intact(data, loader.file_paths[index]):
                continue  # a warning nvImageCodec would print: OpenCV decides
        except BAD:
            continue
        rows.append(k)
        datas.append(data)
    if not rows or loader.nv is None:
        return done
    for k, image in zip(rows, loader.nv.decode(datas)):
        if image is None:
            continue
        loader.resize(image, pixels[k])
        if loader.cache is not None:
            loader.keep(int(indices[k]), pixels[k])
        done.add(k)
    return done
