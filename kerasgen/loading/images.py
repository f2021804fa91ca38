"""Image decoding with OpenCV (which releases the GIL): headers, sizes, bit depths,
orientation, masks; the resize is `loading.resize`'s (its names re-exported here)."""

import errno
import io
import numbers
import os
import stat
from typing import Literal

import cv2
import numpy as np

from kerasgen import _checks
from kerasgen.loading import jpeg as _jpeg
from kerasgen._checks import file_kind
from kerasgen import _redact
from kerasgen.loading.resize import COLOR_MODES as COLOR_MODES
from kerasgen.loading.resize import INTERPOLATIONS as INTERPOLATIONS
from kerasgen.loading.resize import aspect_mode as aspect_mode
from kerasgen.loading.resize import check_interpolation as check_interpolation
from kerasgen.loading.resize import crop_box, pad_box, resize
from kerasgen.loading.resize import resize_key as resize_key
from kerasgen.storage import paths as _paths

# Pillow's decompression-bomb limit (PIL.Image.MAX_IMAGE_PIXELS: a 24-bit 1 GiB image):
# the default `max_pixels` of the image generators.
MAX_PIXELS = 89_478_485
IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png", ".tif", ".tiff", ".webp")


def is_image_file(name):
    return name.lower().endswith(IMAGE_EXTENSIONS)


def check_color_mode(color_mode):
    return _checks.one_of("color_mode", color_mode, tuple(COLOR_MODES))


def check_max_pixels(max_pixels):
    """None (no limit) or a positive int: the most pixels an image's header may declare."""
    if max_pixels is not None and (isinstance(max_pixels, bool) or not isinstance(
            max_pixels, numbers.Integral) or max_pixels <= 0):
        _checks.fail("max_pixels", "None or a positive integer (default 89_478_485, "
                     "Pillow's decompression-bomb limit)", max_pixels)
    return None if max_pixels is None else int(max_pixels)


_REDUCED = {
    "rgb": {2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4,
            8: cv2.IMREAD_REDUCED_COLOR_8},
    "grayscale": {2: cv2.IMREAD_REDUCED_GRAYSCALE_2, 4: cv2.IMREAD_REDUCED_GRAYSCALE_4,
                  8: cv2.IMREAD_REDUCED_GRAYSCALE_8},
}
# OpenCV >= 4.11 decodes straight to RGB (libjpeg-turbo does the channel order for free)
_IMREAD_RGB = getattr(cv2, "IMREAD_COLOR_RGB", cv2.IMREAD_COLOR)


def jpeg_size(data):
    """(height, width) from a JPEG's frame header, or None when `data` is no JPEG."""
    jpeg = _jpeg.info(data)
    return None if jpeg is None else jpeg.size


def check_intact(data, name):
    """Raises ValueError naming `name` when `data` is a JPEG whose data libjpeg reports
    damaged (a scan cut short), which OpenCV decodes without an error."""
    if _jpeg.info(data) is not None:
        _jpeg.intact(data, name)


_PNG_HEAD = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR"  # the signature, then IHDR (13 bytes)


def png_size(data):
    """(height, width) from a PNG's IHDR chunk, which the format requires first, or None
    when `data` is no PNG. (Read here, at fixed offsets, because it is 30 times cheaper
    than Pillow's plugin, which would cost twice the decode of a 32x32 PNG.)"""
    head = data[:24].tobytes() if isinstance(data, np.ndarray) else bytes(data[:24])
    if len(head) < 24 or head[:16] != _PNG_HEAD:
        return None
    return int.from_bytes(head[20:24], "big"), int.from_bytes(head[16:20], "big")


DEPTHS = (8, 16)  # bit_depth: the loaded samples' uint8 or uint16 pixels
# The rules that make pixels from a file (`_decode_bytes`), in file caches' keys: a cache
# filled under older rules (16-bit TIFFs rounded by OpenCV, rgba at 16 bits cut to 8) is
# rebuilt, never read. 2: every sample format brought to the batch's depth by `to_depth`;
# 3: RGBA PNG and WebP turned as their EXIF says, RGBA TIFFs' colours as stored.
PIXEL_RULES = 3
_warned_deep = False  # a 16-bit image reduced to 8 bits was warned of (once per process)


def check_bit_depth(bit_depth, dtype=None):
    """`bit_depth=` resolved and checked: None is 16 for dtype="uint16" batches, else 8."""
    if bit_depth is None:
        return 16 if dtype == "uint16" else 8
    if isinstance(bit_depth, bool) or bit_depth not in DEPTHS:
        _checks.fail("bit_depth", "None, 8 or 16", bit_depth)
    return int(bit_depth)


def pixel_dtype(depth):
    """The dtype of samples loaded at `depth` bits."""
    return np.uint16 if depth == 16 else np.uint8


def sample_format(data):
    """(bits per sample, "uint", "int" or "float") that an encoded image's header
    declares: a PNG's IHDR (1 to 16 bits, unsigned) or a TIFF's first IFD (BitsPerSample,
    SampleFormat); (8, "uint") for BMP, GIF and WebP, which hold nothing else. None for a
    JPEG and for formats whose header is not read here (PNM, JPEG 2000, HDR...): those
    are decoded at any depth and judged by the array OpenCV returns (`check_pixels_of`).
    Read in place, from the header only."""
    head = data[:64].tobytes() if isinstance(data, np.ndarray) else bytes(data[:64])
    if head[:8] == _PNG_HEAD[:8]:
        return (head[24], "uint") if len(head) > 24 else None
    if head[:2] == b"BM" or head[:4] == b"GIF8" or (head[:4] == b"RIFF"
                                                    and head[8:12] == b"WEBP"):
        return 8, "uint"
    if head[:4] not in (b"II*\x00", b"MM\x00*"):
        return None
    tags = _tiff_tags(data, {258: 1, 339: 1})  # BitsPerSample, SampleFormat: defaults
    if tags is None:
        return None  # OpenCV decides what it is
    return tags[258], _TIFF_KINDS.get(tags[339], f"SampleFormat={tags[339]}")


def _tiff_tags(data, tags):
    """`tags` ({tag: default}) with the first value each has in the TIFF `data`'s first
    IFD (SHORTs), or None for a header that cannot be read. Read in place."""
    head = bytes(data[:4])
    if head not in (b"II*\x00", b"MM\x00*"):
        return None
    order: Literal["little", "big"] = "little" if head[:2] == b"II" else "big"
    raw = memoryview(data)  # the IFD read in place: no copy of the whole file
    tags = dict(tags)
    try:
        at = int.from_bytes(raw[4:8], order)
        count = int.from_bytes(raw[at:at + 2], order)
        for k in range(count):
            entry = raw[at + 2 + 12 * k:at + 14 + 12 * k]
            tag = int.from_bytes(entry[:2], order)
            if tag not in tags:
                continue
            n, value = int.from_bytes(entry[4:8], order), entry[8:12]
            if n * 2 > 4:  # the values (SHORTs) are elsewhere: the first of them
                value = raw[int.from_bytes(value, order):][:2]
            tags[tag] = int.from_bytes(value[:2], order)
    except (IndexError, ValueError):
        return None
    return tags


def _straight_alpha_tiff(data, flag, name):
    """An 8-bit TIFF whose alpha is unassociated (ExtraSamples=2, as Pillow and most
    tools write RGBA), decoded as `flag` asks (BGRA, RGB or BGR, grey), its colours as
    stored: OpenCV reads such a file through libtiff's RGBA interface, which multiplies
    every colour by its alpha (a pixel (30, 177, 239) at alpha 68 came out (8, 47, 64)).
    Pillow reads it as stored, turned as its orientation says, as OpenCV would."""
    from PIL import Image, ImageOps

    try:
        with Image.open(io.BytesIO(data)) as image:
            rgba = np.asarray(ImageOps.exif_transpose(image).convert("RGBA"))
    except Exception as error:  # noqa: BLE001 - Pillow's errors name no file
        raise ValueError(f"Cannot decode {name}: {error}") from None
    if flag == cv2.IMREAD_UNCHANGED:
        return np.ascontiguousarray(rgba[..., [2, 1, 0, 3]])
    if flag == _IMREAD_RGB and _IMREAD_RGB != cv2.IMREAD_COLOR:
        return np.ascontiguousarray(rgba[..., :3])
    bgr = np.ascontiguousarray(rgba[..., 2::-1])
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY) if flag == cv2.IMREAD_GRAYSCALE else bgr


_TIFF_KINDS = {1: "uint", 2: "int", 3: "float", 4: "uint"}  # 4: "undefined" bytes
_U8, _U16 = np.dtype(np.uint8), np.dtype(np.uint16)
_KINDS = {"uint": "unsigned integer", "int": "signed integer", "float": "floating-point"}


def check_sample_format(found, name):
    """Refuses an image whose samples (`sample_format`'s (bits, kind)) a batch cannot
    hold unchanged: signed or floating-point samples, or more than 16 bits."""
    bits, kind = found
    if kind == "uint" and bits <= 16:
        return
    what = f"{bits}-bit {_KINDS.get(kind, kind)}"
    _refuse_samples(name, what, f"its header declares BitsPerSample={bits}, "
                    f"SampleFormat={ {'uint': 1, 'int': 2, 'float': 3}.get(kind, kind)}")


def check_pixels_of(image, name):
    """Refuses a decoded image of another type than uint8 or uint16 (a format whose header
    `sample_format` does not read, decoded at any depth: int16, float32...)."""
    if image.dtype != _U8 and image.dtype != _U16:
        kind = {"u": "uint", "i": "int", "f": "float"}.get(image.dtype.kind, image.dtype.kind)
        _refuse_samples(name, f"{image.dtype.itemsize * 8}-bit {_KINDS.get(kind, kind)}",
                        f"OpenCV decodes it as {image.dtype}")


def _refuse_samples(name, what, how):
    raise ValueError(
        f"Cannot decode {name}: it holds {what} samples ({how}), which an image batch "
        "cannot hold unchanged: batches hold unsigned pixels, 0 to 255 (bit_depth=8) or "
        "0 to 65535 (bit_depth=16), and kerasgen does not guess how to map negative "
        "values, fractions or a wider range onto them. Convert the file to 8- or 16-bit "
        "unsigned samples (mapping its range as your data means), or load it in a "
        "kg.Generator subclass whose load_sample reads it with "
        "cv2.imread(path, cv2.IMREAD_UNCHANGED) and scales it.")


def _warn_reduced(name):
    global _warned_deep
    if _warned_deep:
        return
    _warned_deep = True
    _redact.warn(f"{name} has 16 bits per sample; it is reduced to 8 bits, as Keras's "
                 "loaders reduce it. Pass bit_depth=16 (or dtype='uint16') to keep its "
                 "16 bits: batches then hold 0..65535 (rescale=1/65535 makes them "
                 "0..1). Warned once.", stacklevel=4)


def to_depth(image, depth):
    """A decoded uint8 or uint16 image at `depth` bits, exactly: 8-bit values scale by
    257 to 16 bits (255 -> 65535), 16-bit ones keep their high byte at 8 (Keras's
    reduction). Other types never get here (`check_pixels_of` refuses them)."""
    dtype = image.dtype
    if dtype == (_U8 if depth == 8 else _U16):
        return image
    if dtype == _U16:  # to 8 bits
        return (image >> 8).astype(np.uint8)
    if dtype == _U8:  # to 16 bits
        return image.astype(np.uint16) * np.uint16(257)
    raise ValueError(f"`image` must be uint8 or uint16. Received: dtype {dtype}.")


def reduction(source_size, target_size):
    """The largest JPEG scale 1/r (r in 2, 4, 8) that keeps the image at least as large
    as the target on both sides, whichever way EXIF orientation turns it; 1 for none."""
    side = max(target_size)
    for r in (8, 4, 2):
        if min(source_size) >= r * side:
            return r
    return 1


def decode(path, color_mode="rgb", target_size=None, max_pixels=MAX_PIXELS, root=None):
    """Decodes `path` to a uint8 (h, w, channels) array in `color_mode`.

    EXIF orientation is applied (as Keras does); 16-bit images are reduced to 8 bits;
    GIFs give their first frame. With `target_size`, a JPEG at least twice as large on
    both sides is decoded at 1/2, 1/4 or 1/8 scale (much faster, within ordinary resize
    error of a full decode). An image whose header declares more than `max_pixels` pixels
    is refused before decoding (None: no limit). `root`: see `read_file`. Raises
    ValueError naming the file when it cannot be read or decoded, FileNotFoundError when
    it is gone.
    """
    return decode_bytes(read_file(path, root), color_mode, target_size,
                        f"image file {path}", max_pixels)


def read_file(path, root=None, what="image file", max_bytes=None):
    """The bytes of the regular file `path`, as uint8; errors name the file.

    The file is opened without blocking and must be a regular file: a FIFO, socket or
    device named like an image is refused, not read (reading a FIFO would wait forever).
    `root`: None, a real folder path (`directory`), a `storage.paths.Root` or several:
    when given, the real path of the file must lie in one of them before it is opened
    for reading (`storage.paths.open_within`; `opened` where the system cannot name an
    open file's path), so that a file replaced by a symbolic link leading out after the generator
    listed it is refused (ValueError), not read. `max_bytes`: read at most that many (a header).
    """
    target = path
    flags = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_BINARY", 0))
    within = _paths.roots(root)
    try:
        if within and _paths.FD_PATHS is not None:  # checked on the file itself
            fd = _paths.open_within(path, within, what, flags)
        else:
            if within:
                target = _paths.opened(path, within, what)
                flags |= getattr(os, "O_NOFOLLOW", 0)  # it must not become a link meanwhile
            fd = os.open(target, flags)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what.capitalize()} not found: {path}") from None
    except OSError as error:
        if within and error.errno == errno.ELOOP:
            raise _paths.became_link(path, within, what) from None
        raise ValueError(f"Cannot read {what} {path}: {error}") from error
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"Cannot read {what} {path}: it is {file_kind(info.st_mode)}, "
                             "not a regular file; only regular files are read.")
        size = info.st_size if max_bytes is None else min(info.st_size, max_bytes)
        data = np.empty(size, dtype=np.uint8)
        # numpy's stubs give an array the buffer protocol only from Python 3.12
        view, got = memoryview(data), 0  # type: ignore[arg-type]
        with io.FileIO(fd, "rb", closefd=False) as f:
            while got < len(data):
                n = f.readinto(view[got:])
                if not n:  # shorter than it was a moment ago
                    break
                got += n
        return data[:got]
    except OSError as error:
        raise ValueError(f"Cannot read {what} {path}: {error}") from error
    finally:
        os.close(fd)


def header_size(data):
    """(height, width) that an encoded image's header declares, read without decoding
    it, or None when the format is not one Pillow knows or the header is unreadable
    (OpenCV then decides). JPEGs and PNGs are read by `jpeg_size` and `png_size`, the
    others by Pillow's format plugins, which read the header only.

    The plugins are called as `PIL.Image.open` calls them, but not through it: `open`
    also applies Pillow's own process-wide decompression-bomb limit (a warning above
    `Image.MAX_IMAGE_PIXELS`, an error above twice that), which would overrule the
    generator's `max_pixels`.
    """
    size = jpeg_size(data) or png_size(data)
    if size is not None:
        return size
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("kerasgen reads image headers with Pillow, which is missing: "
                          "pip install pillow") from None
    head = bytes(data[:16])
    stream = io.BytesIO(data)
    Image.preinit()  # the common formats first (BMP, GIF, JPEG, PPM, PNG), then all
    tried = set()
    for more_plugins in (None, Image.init):
        if more_plugins is not None:
            more_plugins()
        for fmt in list(Image.ID):
            if fmt in tried:
                continue
            tried.add(fmt)
            factory, accept = Image.OPEN.get(fmt, (None, None))
            if factory is None or accept is None:  # formats with no signature to check
                continue                           # (TGA, SPIDER...): OpenCV reads none
            try:
                match = accept(head)
                if not match or isinstance(match, str):  # a str: Pillow's "not quite"
                    continue
                stream.seek(0)
                width, height = factory(stream, "").size
                return int(height), int(width)
            except Exception:  # noqa: BLE001 - not this format, or a broken header:
                continue       # the decoder decides what the file is
    return None


def check_pixels(size, max_pixels, name):
    """Refuses an image whose (height, width) holds more than `max_pixels` pixels."""
    height, width = size
    if max_pixels is not None and max(1, height) * max(1, width) > max_pixels:
        raise ValueError(
            f"Cannot decode {name}: it is a {width}x{height} image ({height * width:,} "
            f"pixels), more than max_pixels={max_pixels:,} (a guard against "
            "decompression bombs, as Pillow's). Pass a larger `max_pixels`, or "
            "max_pixels=None, if the image is meant to be that large."
        )


def imdecode(data, flag, name):
    """cv2.imdecode whose errors (cv2.error: a header OpenCV refuses, a size above its
    own limit) are ValueErrors naming the file."""
    try:
        return cv2.imdecode(data, flag)
    except cv2.error as error:
        reason = getattr(error, "err", "") or str(error).strip()
        raise ValueError(f"Cannot decode {name}: OpenCV refused it ({reason}).") from None


# EXIF orientation (1..8) -> the numpy steps that show the image upright, as OpenCV's
# IMREAD_COLOR and Keras's loader apply it: 2 mirrored, 3 turned 180, 4 flipped, 5
# transposed, 6 turned 90 clockwise, 7 transversed, 8 turned 90 anticlockwise
_ORIENT = {2: lambda a: a[:, ::-1], 3: lambda a: a[::-1, ::-1], 4: lambda a: a[::-1],
           5: lambda a: a.swapaxes(0, 1), 6: lambda a: np.rot90(a, -1),
           7: lambda a: a[::-1, ::-1].swapaxes(0, 1), 8: lambda a: np.rot90(a, 1)}


def oriented(image, data):
    """`image` (decoded from `data` by OpenCV's IMREAD_UNCHANGED, which ignores the
    EXIF orientation of a PNG or WebP file, as its other reads do not) turned as that
    orientation says, so an RGBA image comes out as its RGB read does. Other formats
    (OpenCV turns a TIFF itself; a JPEG has no alpha) and files without EXIF are left
    as they are."""
    if not _has_exif(data):
        return image
    try:
        from PIL import Image

        orientation = Image.open(io.BytesIO(data)).getexif().get(0x0112, 1)
    except Exception:  # noqa: BLE001 - a header Pillow cannot read: as OpenCV read it
        return image
    turn = _ORIENT.get(orientation)
    return image if turn is None else np.ascontiguousarray(turn(image))


def _has_exif(data):
    """Whether the PNG or WebP `data` holds EXIF: a PNG's eXIf chunk (its chunk headers
    walked up to the image data, a few reads), a WebP's flag in its VP8X header. Other
    formats: False."""
    head = bytes(data[:32])
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return head[12:16] == b"VP8X" and bool(head[20] & 0x08)  # its EXIF flag
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return False
    at, size = 8, len(data)
    while at + 8 <= size:
        kind = bytes(data[at + 4:at + 8])
        if kind in (b"eXIf", b"IDAT", b"IEND"):
            return kind == b"eXIf"
        at += 12 + int.from_bytes(bytes(data[at:at + 4]), "big")
    return False


def decode_bytes(data, color_mode="rgb", target_size=None, name="image",
                 max_pixels=MAX_PIXELS, depth=8):
    """`decode` for encoded bytes (a uint8 array or bytes); `name` is used in errors.
    `depth` 16 keeps a 16-bit PNG, TIFF or PGM's 16 bits (8-bit images scale to them: a
    uint16 array); at 8, such an image is reduced to its high byte with a warning
    (once). Signed, floating-point and 32-bit samples are refused (`to_depth`,
    `check_sample_format`, `check_pixels_of`: docs/image-folder-generator.md)."""
    data = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes) else data
    image = _decode_bytes(data, color_mode, target_size, name, max_pixels, depth)
    return image if depth == 8 else to_depth(image, 16)


def _decode_bytes(data, color_mode, target_size, name, max_pixels, depth):
    if data.size == 0:
        raise ValueError(f"Cannot decode {name}: the file is empty (0 bytes).")
    jpeg = _jpeg.info(data)
    size = (jpeg.size if jpeg is not None
            else None if max_pixels is None else header_size(data))
    if size is not None:
        check_pixels(size, max_pixels, name)
    r = 1
    if target_size is not None and color_mode in _REDUCED and jpeg is not None:
        r = reduction(jpeg.size, target_size)
    if jpeg is not None and _jpeg.decodable(jpeg, color_mode):
        decoded = _jpeg.decode(data, jpeg, color_mode, r, name)  # raises for damage
        if decoded is not None:
            return decoded if decoded.ndim == 3 else decoded[:, :, None]
    elif jpeg is not None:  # OpenCV's (EXIF-rotated, RGBA, CMYK...): checked first
        _jpeg.intact(data, name)
    flag = _REDUCED[color_mode][r] if r > 1 else {
        "grayscale": cv2.IMREAD_GRAYSCALE, "rgb": _IMREAD_RGB,
        "rgba": cv2.IMREAD_UNCHANGED}[color_mode]
    found = None if jpeg is not None else sample_format(data)
    if found is not None:  # signed, floating-point or 32-bit samples: refused here
        check_sample_format(found, name)
    # Decoded at the file's own depth, then brought to `depth` by one exact rule
    # (`to_depth`), never by OpenCV's conversions (which round a TIFF's 16 bits, and
    # turn signed or float samples into 8 bits): 16-bit files, and formats whose header
    # says nothing here, any depth, in BGR (converted below: COLOR_RGB may not mix with
    # ANYDEPTH); 8-bit ones (JPEG, BMP, GIF, WebP, PNG and TIFF up to 8 bits) as before.
    deep = jpeg is None and (found is None or found[0] > 8)
    if deep:
        flag = {"grayscale": cv2.IMREAD_GRAYSCALE | cv2.IMREAD_ANYDEPTH,
                "rgb": cv2.IMREAD_COLOR | cv2.IMREAD_ANYDEPTH,
                "rgba": cv2.IMREAD_UNCHANGED}[color_mode]
    image = imdecode(data, flag, name)
    if image is not None and color_mode == "rgba" and (image.ndim == 2 or image.shape[2] != 4):
        # no alpha: decoded again with EXIF applied, at its own depth (alpha is then
        # the depth's maximum, 255 or 65535)
        image = imdecode(data, cv2.IMREAD_COLOR | (cv2.IMREAD_ANYDEPTH if deep else 0), name)
    elif image is not None and flag == cv2.IMREAD_UNCHANGED:
        image = oriented(image, data)  # OpenCV's unchanged read leaves EXIF's turn out
    if image is not None and found == (8, "uint") and (_tiff_tags(data, {338: 0}) or {}).get(
            338) == 2:  # unassociated alpha, which OpenCV would multiply into the colours
        image = _straight_alpha_tiff(data, flag, name)
    if image is None:
        raise ValueError(
            f"Cannot decode {name}: it is corrupt, truncated or not an image format "
            "OpenCV reads."
        )
    if size is None:  # a format whose header was not read: the decoded size counts
        check_pixels(image.shape[:2], max_pixels, name)
    if deep:  # (without ANYDEPTH, OpenCV returns uint8)
        check_pixels_of(image, name)
        if depth == 8 and image.dtype == _U16:
            _warn_reduced(name)
    image = to_depth(image, depth)
    if color_mode == "grayscale":
        return image if image.ndim == 3 else image[:, :, None]
    if color_mode == "rgb":
        rgb = flag == _IMREAD_RGB and _IMREAD_RGB != cv2.IMREAD_COLOR
        return image if rgb else cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    if image.shape[2] == 4:
        return cv2.cvtColor(image, cv2.COLOR_BGRA2RGBA)
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGBA)


def load(path, image_size, color_mode="rgb", interpolation="bilinear", out=None,
         aspect=None, max_pixels=MAX_PIXELS):
    """Decodes and resizes `path` to (height, width, channels) uint8, into `out` if given."""
    return resize(decode(path, color_mode, image_size, max_pixels), image_size, color_mode,
                  interpolation, out, aspect)


def load_mask(path, image_size, out=None, aspect=None, max_pixels=MAX_PIXELS, root=None,
              data=None):
    """A segmentation mask of class ids, resized with nearest neighbour to (h, w) (after
    the crop or inside the padding of `aspect`, as its image; padding is class 0).

    Masks are single-channel images (8- or 16-bit PNG, say); a 3-channel mask is
    accepted when its channels are equal. EXIF orientation is applied as for images.
    `max_pixels` and `root` as for `decode`; `data`: the file's bytes, already read.
    """
    if data is None:
        data = read_file(path, root, "mask file")
    name = f"mask file {path}"
    size = None
    if data.size and max_pixels is not None:
        size = header_size(data)
        if size is not None:
            check_pixels(size, max_pixels, name)
    mask = (imdecode(data, cv2.IMREAD_ANYDEPTH | cv2.IMREAD_ANYCOLOR, name) if data.size
            else None)
    if mask is not None and size is None:
        check_pixels(mask.shape[:2], max_pixels, name)
    if mask is None:
        raise ValueError(f"Cannot decode mask file {path}: it is empty, corrupt or not an "
                         "image format OpenCV reads.")
    if mask.dtype != np.uint8 and mask.dtype != np.uint16:  # -1 or 0.5 is no class id
        raise ValueError(
            f"Cannot decode mask file {path}: it holds {mask.dtype} samples, and a mask "
            "holds class ids as 8- or 16-bit unsigned integers (0 to 65535); negative "
            "values, fractions or larger ids would change in the batch. Save it as an "
            "8- or 16-bit PNG of class ids.")
    if mask.ndim == 3:
        if not (mask == mask[:, :, :1]).all():
            raise ValueError(f"Mask {path} has {mask.shape[2]} different channels; a mask "
                             "must hold one class id per pixel (a single-channel image).")
        mask = mask[:, :, 0]
    height, width = image_size
    if aspect == "crop":
        top, left, crop_height, crop_width = crop_box(mask.shape, image_size)
        mask = mask[top:top + crop_height, left:left + crop_width]
    elif aspect == "pad":
        top, left, fit_height, fit_width = pad_box(mask.shape, image_size)
        padded = np.zeros((height, width), mask.dtype)
        padded[top:top + fit_height, left:left + fit_width] = cv2.resize(
            mask, (fit_width, fit_height), interpolation=cv2.INTER_NEAREST)
        mask = padded
    if mask.shape != (height, width):
        mask = cv2.resize(mask, (width, height), interpolation=cv2.INTER_NEAREST)
    if out is None:
        return mask
    out[...] = mask
    return out

