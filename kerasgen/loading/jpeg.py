"""JPEG decoding that reports damage: libjpeg-turbo through simplejpeg, strictly.

OpenCV and nvImageCodec decode a JPEG whose entropy-coded data ends early (a cut file
with its end marker put back, a scan cut short) to a mostly grey image, with libjpeg's
"Corrupt JPEG data: premature end of data segment" printed on stderr and no error.
simplejpeg calls the same libjpeg-turbo with warnings raised (`strict=True`), bit for bit
OpenCV's pixels (tests/test_images.py), at the same cost, so the default decoder decodes
the common JPEGs through it and damage is an error naming the file.

What simplejpeg does not do as OpenCV does is left to OpenCV: EXIF orientation other
than 1 (OpenCV turns the image, as Keras does), CMYK/YCCK and 12-bit or lossless JPEGs,
and RGBA output. A warning that is not damage (libjpeg's "extraneous bytes before
marker", common in camera files) is not an error either: such a file is decoded again
by OpenCV, as before.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import simplejpeg

# libjpeg's warnings that mean pixels were not in the file: JWRN_HIT_MARKER ("premature
# end of data segment"), JWRN_JPEG_EOF ("Premature end of JPEG file"), JWRN_HUFF_BAD_CODE
# and JWRN_MUST_RESYNC (entropy-coded data that is not what the frame says)
_DAMAGE = ("premature end", "bad huffman code", "must resync", "found marker")
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_HUFFMAN_8BIT = frozenset({0xC0, 0xC1, 0xC2})  # baseline, extended, progressive
_COLORSPACE = {"rgb": "RGB", "grayscale": "GRAY"}


class Info(NamedTuple):
    """What a JPEG's markers before its first scan say."""

    size: tuple[int, int]  # (height, width)
    sof: int  # the frame marker (0xC0 baseline, 0xC2 progressive, ...)
    precision: int
    components: int
    orientation: int | None  # EXIF Orientation, None without one


def info(data: np.ndarray) -> Info | None:
    """The frame header (and EXIF orientation) of the JPEG `data`, or None when `data` is
    no JPEG or has no frame header before its first scan."""
    if len(data) < 4 or data[0] != 0xFF or data[1] != 0xD8:
        return None
    i, n, orientation, frame = 2, len(data), None, None
    while i + 9 < n:
        if data[i] != 0xFF:
            break
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        length = int(data[i + 2]) << 8 | int(data[i + 3])
        if marker == 0xE1 and orientation is None:  # EXIF: before or after the frame
            orientation = _exif_orientation(data[i + 4:i + 2 + length])
        if marker in _SOF_MARKERS and frame is None:
            frame = ((int(data[i + 5]) << 8 | int(data[i + 6]),
                      int(data[i + 7]) << 8 | int(data[i + 8])),
                     int(marker), int(data[i + 4]), int(data[i + 9]))
        if marker == 0xD9 or marker == 0xDA:  # end of image / start of scan
            break
        i += 2 + length
    return None if frame is None else Info(*frame, orientation)


def _exif_orientation(segment: np.ndarray) -> int | None:
    """The Orientation tag (0x0112) of IFD0 in an APP1 segment's body; None when the
    segment is no EXIF or has no such tag; 0 when the EXIF is malformed (then OpenCV
    decides what it means)."""
    body = segment.tobytes()
    if not body.startswith(b"Exif\x00\x00") or len(body) < 14:
        return None
    tiff = body[6:]
    order = {b"II": "little", b"MM": "big"}.get(tiff[:2])
    if order is None:
        return 0
    ifd = int.from_bytes(tiff[4:8], order)  # type: ignore[arg-type]
    if ifd + 2 > len(tiff):
        return 0
    count = int.from_bytes(tiff[ifd:ifd + 2], order)  # type: ignore[arg-type]
    for k in range(count):
        entry = tiff[ifd + 2 + 12 * k:ifd + 14 + 12 * k]
        if len(entry) < 12:
            return 0
        if int.from_bytes(entry[:2], order) == 0x0112:  # type: ignore[arg-type]
            return int.from_bytes(entry[8:10], order)  # type: ignore[arg-type]
    return None


def decodable(jpeg: Info, color_mode: str) -> bool:
    """Whether simplejpeg decodes `jpeg` in `color_mode` as OpenCV would."""
    return (color_mode in _COLORSPACE and jpeg.sof in _HUFFMAN_8BIT and jpeg.precision == 8
            and jpeg.components in (1, 3) and jpeg.orientation in (None, 1))


def decode(data: np.ndarray, jpeg: Info, color_mode: str, reduction: int,
           name: str) -> np.ndarray | None:
    """`data` decoded at scale 1/`reduction` to uint8 (h, w, channels) RGB or grayscale,
    as OpenCV's imdecode (IMREAD_REDUCED_* for reduction 2, 4, 8) decodes it; None where
    OpenCV should decode it instead (a warning that is not damage, a scale libjpeg chose
    otherwise). Raises ValueError naming `name` when libjpeg reports damaged data."""
    height, width = jpeg.size
    expected = (-(-height // reduction), -(-width // reduction))
    try:
        image = simplejpeg.decode_jpeg(
            data, colorspace=_COLORSPACE[color_mode], min_height=expected[0],
            min_width=expected[1], min_factor=reduction, strict=True)
    except ValueError as error:
        raise_if_damaged(error, name)
        return None
    return image if image.shape[:2] == expected else None


def intact(data: np.ndarray, name: str) -> bool:
    """Whether libjpeg reads the JPEG `data` without a warning (decoded at 1/8 scale,
    the cheapest libjpeg-turbo offers: the entropy-coded data is read whole); raises
    ValueError naming `name` when it reports damaged data. For pixels another decoder
    makes, which would not say so."""
    try:
        simplejpeg.decode_jpeg(data, colorspace="GRAY", min_factor=8, strict=True)
    except ValueError as error:
        raise_if_damaged(error, name)
        return False
    return True


def raise_if_damaged(error: ValueError, name: str) -> None:
    """Raises ValueError naming `name` when simplejpeg's `error` is libjpeg's report of
    damaged data; returns for any other warning."""
    reason = str(error).strip()
    if any(word in reason.lower() for word in _DAMAGE):
        raise ValueError(f"Cannot decode {name}: it is corrupt or truncated (libjpeg: "
                         f"{reason!r}).") from None
