"""Every pixel a batch holds is the file's own value, brought to the batch's bit depth by
one exact rule, or the file is refused naming it and its sample format.

The files are written here byte by byte (PNG: IHDR, PLTE, tRNS and one IDAT of raw rows,
no codec) or by OpenCV's TIFF writer from arrays we keep; the expected batch is computed
from those arrays with numpy, never by decoding. The rules (docs/image-folder-generator.md,
"Bit depth and sample formats"): samples of fewer than 8 bits scale to 8 exactly (1 bit:
0 or 255; a palette gives its 8-bit colours); at bit_depth=16 an 8-bit value v becomes
257 v (255 -> 65535); at 8 bits a 16-bit value keeps its high byte (v >> 8, Keras's
reduction, warned of once); grey repeats into rgb/rgba, alpha is dropped for rgb and
grayscale and is the depth's maximum where the file has none. Signed, floating-point and
32-bit samples are refused.
"""

import os
import struct
import zlib

import cv2
import numpy as np
import pytest

import kerasgen as kg
from kerasgen.loading import images as _images

H, W = 5, 8
MODES = ("grayscale", "rgb", "rgba")
DEPTHS = (None, 8, 16)


def png(pixels, color_type, bits, palette=None, trns=None):
    """A PNG of `pixels` ((h, w) or (h, w, c) integers) written byte by byte."""
    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body)))

    rows = []
    for row in pixels.reshape(pixels.shape[0], -1):
        if bits == 16:
            raw = row.astype(">u2").tobytes()
        elif bits == 8:
            raw = row.astype(np.uint8).tobytes()
        else:  # 1, 2 or 4 bits a sample, the first in the high bits, rows padded
            low = np.unpackbits(row.astype(np.uint8)[:, None], axis=1)[:, 8 - bits:]
            raw = np.packbits(low.ravel()).tobytes()
        rows.append(b"\x00" + raw)  # filter type 0: the bytes as they are
    header = struct.pack(">IIBBBBB", pixels.shape[1], pixels.shape[0], bits, color_type,
                         0, 0, 0)
    body = chunk(b"IHDR", header)
    if palette is not None:
        body += chunk(b"PLTE", np.asarray(palette, np.uint8).tobytes())
    if trns is not None:
        body += chunk(b"tRNS", bytes(trns))
    return (b"\x89PNG\r\n\x1a\n" + body + chunk(b"IDAT", zlib.compress(b"".join(rows)))
            + chunk(b"IEND", b""))


def tiff(pixels):
    """A TIFF of `pixels` (RGB order) by OpenCV's writer (libtiff)."""
    bgr = pixels[..., ::-1] if pixels.ndim == 3 else pixels
    ok, data = cv2.imencode(".tif", np.ascontiguousarray(bgr))
    assert ok
    return data.tobytes()


def sources():
    """{file name: (bytes, kind, values (h, w, c) at 8 or 16 bits, bits)}: kind is what
    the file holds (G grey, GA grey and alpha, RGB, RGBA)."""
    rng = np.random.default_rng(7)

    def draw(bits, *shape):
        return rng.integers(0, 2 ** bits, (H, W) + shape).astype(
            np.uint16 if bits == 16 else np.uint8)

    g8, g16, la8, la16 = draw(8), draw(16), draw(8, 2), draw(16, 2)
    rgb8, rgb16, rgba8, rgba16 = draw(8, 3), draw(16, 3), draw(8, 4), draw(16, 4)
    ones = draw(1)
    palette = rng.integers(0, 256, (16, 3)).astype(np.uint8)
    alphas = rng.integers(0, 256, 16).astype(np.uint8)
    index = draw(4)
    return {
        "g8.png": (png(g8, 0, 8), "G", g8[..., None], 8),
        "g16.png": (png(g16, 0, 16), "G", g16[..., None], 16),
        "la8.png": (png(la8, 4, 8), "GA", la8, 8),
        "la16.png": (png(la16, 4, 16), "GA", la16, 16),
        "rgb8.png": (png(rgb8, 2, 8), "RGB", rgb8, 8),
        "rgb16.png": (png(rgb16, 2, 16), "RGB", rgb16, 16),
        "rgba8.png": (png(rgba8, 6, 8), "RGBA", rgba8, 8),
        "rgba16.png": (png(rgba16, 6, 16), "RGBA", rgba16, 16),
        "one_bit.png": (png(ones, 0, 1), "G", (ones * 255)[..., None], 8),
        "palette.png": (png(index, 3, 4, palette=palette), "RGB", palette[index], 8),
        "palette_alpha.png": (png(index, 3, 4, palette=palette, trns=alphas), "RGBA",
                              np.dstack([palette[index], alphas[index]]), 8),
        "g16.tif": (tiff(g16), "G", g16[..., None], 16),
        "rgb16.tif": (tiff(rgb16), "RGB", rgb16, 16),
    }


def luma(rgb):
    """ITU-R BT.601 luma of RGB values, in float (the codecs round it their own way)."""
    return rgb[..., :3].astype(np.float64) @ np.array([0.299, 0.587, 0.114])


def expected(kind, values, bits, color_mode, depth):
    """The batch's pixels (int64) of a file holding `values` at `bits` bits, by the
    documented rules; grayscale from colour is luma in float (compared within the
    codecs' rounding)."""
    v = values.astype(np.int64)
    if depth == 16 and bits == 8:
        v = v * 257
    if depth == 8 and bits == 16:
        v = v >> 8
    top = 65535 if depth == 16 else 255
    grey = kind in ("G", "GA")
    rgb = np.repeat(v[..., :1], 3, -1) if grey else v[..., :3]
    alpha = v[..., -1:] if kind in ("GA", "RGBA") else np.full(v.shape[:2] + (1,), top)
    if color_mode == "grayscale":
        if grey:
            return v[..., :1]
        if bits == 16 and depth == 8:
            return (luma(values) / 256)[..., None]  # luma at 16 bits, then its high byte
        return luma(values)[..., None]  # at the file's depth (then x257 at 16 bits)
    if color_mode == "rgb":
        return rgb
    return np.concatenate([rgb, alpha], -1)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("exact") / "files"
    os.makedirs(root / "c")
    table = sources()
    for name, (data, *_) in table.items():
        (root / "c" / name).write_bytes(data)
    return root, table


def check_batch(gen, table, color_mode, depth):
    x = gen[0]
    assert x.dtype == (np.uint16 if depth == 16 else np.uint8)
    for k, path in enumerate(gen.file_paths):
        _, kind, values, bits = table[os.path.basename(path)]
        want = expected(kind, values, bits, color_mode, depth)
        got = x[k].astype(np.int64)
        assert got.shape == want.shape, path
        if color_mode == "grayscale" and kind in ("RGB", "RGBA"):
            # luma: each codec rounds it its own way, at the file's depth: within 4 of
            # 65535 for a 16-bit file at 16 bits (its low byte kept), else within 1 of 255
            if bits == 8 and depth == 16:  # an 8-bit grey, then x257
                assert (got % 257 == 0).all(), path
                got = got // 257
            tolerance = 4 if bits == 16 and depth == 16 else 1
            assert np.abs(got - want).max() <= tolerance, (path, got[..., 0], want[..., 0])
        else:
            np.testing.assert_array_equal(got, want, err_msg=path)


@pytest.mark.parametrize("cache", [None, "memory", "file"])
@pytest.mark.parametrize("bit_depth", DEPTHS)
@pytest.mark.parametrize("color_mode", MODES)
def test_every_sample_format_in_every_color_mode_and_depth(folder, tmp_path, monkeypatch,
                                                           color_mode, bit_depth, cache):
    root, table = folder
    depth = 16 if bit_depth == 16 else 8
    gen = kg.ImageFolderGenerator(
        root, labels=None, image_size=(H, W), color_mode=color_mode, bit_depth=bit_depth,
        dtype="uint16" if depth == 16 else "uint8", shuffle=False, batch_size=len(table),
        verbose=0, cache=str(tmp_path / "pixels.cache") if cache == "file" else cache)
    if depth == 16:
        check_batch(gen, table, color_mode, depth)
    else:  # the 16-bit files are reduced, with one warning
        monkeypatch.setattr(_images, "_warned_deep", False)
        with pytest.warns(UserWarning, match=r"16 bits per sample; it is reduced to 8 bits"):
            check_batch(gen, table, color_mode, depth)
    check_batch(gen, table, color_mode, depth)  # from the cache, where there is one


def test_sixteen_bits_survive_every_color_mode_conversion(tmp_path):
    """The reported case: color_mode="rgba" at bit_depth=16 decoded a 16-bit image
    without alpha again at 8 bits (its low byte lost: 43991 came out 43947)."""
    rng = np.random.default_rng(3)
    grey = rng.integers(0, 65536, (H, W)).astype(np.uint16)
    rgb = rng.integers(0, 65536, (H, W, 3)).astype(np.uint16)
    os.makedirs(tmp_path / "c")
    (tmp_path / "c" / "0.png").write_bytes(png(grey, 0, 16))
    (tmp_path / "c" / "1.tif").write_bytes(tiff(rgb))
    x = kg.ImageFolderGenerator(tmp_path, labels=None, image_size=(H, W), color_mode="rgba",
                                bit_depth=16, dtype="uint16", shuffle=False, batch_size=2,
                                verbose=0)[0]
    full = np.full((H, W, 1), 65535)
    np.testing.assert_array_equal(x[0], np.concatenate([np.dstack([grey] * 3), full], -1))
    np.testing.assert_array_equal(x[1], np.concatenate([rgb, full], -1))


def refused_files():
    """Files whose samples no batch holds unchanged: (name, bytes, sample format)."""
    rng = np.random.default_rng(5)
    signed = rng.integers(-32768, 32768, (H, W)).astype(np.int16)
    signed[0, 0] = -1234
    floats = (rng.random((H, W)) * 1000).astype(np.float32)
    return [
        ("signed.tif", tiff(signed), r"16-bit signed integer samples \(its header declares "
                                     r"BitsPerSample=16, SampleFormat=2\)"),
        ("signed_rgb.tif", tiff(np.dstack([signed] * 3)), r"16-bit signed integer"),
        ("float.tif", tiff(floats), r"32-bit floating-point samples \(its header declares "
                                    r"BitsPerSample=32, SampleFormat=3\)"),
        ("wide.tif", tiff(floats.astype(np.int32)), r"32-bit signed integer samples"),
        ("float.pfm", b"Pf\n2 1\n-1.0\n" + np.float32([0.5, 2]).tobytes(),
         r"32-bit floating-point samples \(OpenCV decodes it as float32\)"),
    ]


@pytest.mark.parametrize("bit_depth", DEPTHS)
@pytest.mark.parametrize("color_mode", MODES)
@pytest.mark.parametrize("name, data, what", refused_files(),
                         ids=[name for name, *_ in refused_files()])
def test_samples_a_batch_cannot_hold_are_refused_naming_the_file_and_format(
        tmp_path, color_mode, bit_depth, name, data, what):
    """A signed 16-bit TIFF's negative values became 0, a float TIFF was "corrupt"."""
    (tmp_path / name).write_bytes(data)
    (tmp_path / "list.csv").write_text(f"filename,label\n{name},a\n")
    gen = kg.CSVGenerator(tmp_path / "list.csv", image_size=(H, W), color_mode=color_mode,
                          bit_depth=bit_depth, verbose=0, cache=None)
    with pytest.raises(ValueError, match=rf"Cannot decode image file .*{name}: it holds "
                                         rf"{what}.*Convert the file to 8- or 16-bit "
                                         r"unsigned samples.*load_sample"):
        gen[0]
    assert gen.validate() == [gen.file_paths[0]]


def test_a_sixteen_bit_pgm_keeps_its_sixteen_bits(tmp_path):
    """A format whose header kerasgen does not read (PNM) is decoded at its own depth:
    a 16-bit PGM lost its low byte at bit_depth=16 (1000 came out 771)."""
    grey = np.random.default_rng(2).integers(0, 65536, (H, W)).astype(np.uint16)
    grey[0, 0] = 1000
    (tmp_path / "scan.pgm").write_bytes(b"P5\n%d %d\n65535\n" % (W, H)
                                        + grey.astype(">u2").tobytes())
    (tmp_path / "list.csv").write_text("filename,label\nscan.pgm,a\n")
    x = kg.CSVGenerator(tmp_path / "list.csv", image_size=(H, W), color_mode="grayscale",
                        bit_depth=16, dtype="uint16", verbose=0)[0][0]
    np.testing.assert_array_equal(x[0, ..., 0], grey)


@pytest.mark.parametrize("mask, what", [
    (np.array([[0, -1], [1, 2]], np.int16), "int16"),
    (np.array([[0, 0.5], [1, 2]], np.float32), "float32"),
])
def test_masks_that_hold_no_class_ids_are_refused_naming_the_file(tmp_path, mask, what):
    os.makedirs(tmp_path / "images")
    os.makedirs(tmp_path / "masks")
    cv2.imwrite(str(tmp_path / "images" / "a.png"), np.zeros((2, 2, 3), np.uint8))
    (tmp_path / "masks" / "a.tif").write_bytes(tiff(mask))
    gen = kg.ImageFolderGenerator(tmp_path / "images", mask_dir=tmp_path / "masks",
                                  label_mode="mask", num_classes=3, image_size=(2, 2),
                                  verbose=0)
    with pytest.raises(ValueError, match=rf"Cannot decode mask file .*a\.tif: it holds "
                                         rf"{what} samples, and a mask holds class ids as "
                                         r"8- or 16-bit unsigned integers"):
        gen[0]


def test_nvimgcodec_leaves_every_other_format_to_the_same_rules(folder, monkeypatch):
    """decoder="nvimgcodec" decodes RGB JPEGs; the PNGs and TIFFs beside them go through
    the same rules as with OpenCV (its CPU backend here, as in CI)."""
    pytest.importorskip("nvidia.nvimgcodec", reason="in the test extra")
    root, table = folder
    photo = np.random.default_rng(1).integers(0, 256, (H, W, 3)).astype(np.uint8)
    mixed = root.parent / "mixed"
    os.makedirs(mixed / "c", exist_ok=True)
    for name, (data, *_) in table.items():
        (mixed / "c" / name).write_bytes(data)
    cv2.imwrite(str(mixed / "c" / "photo.jpg"), photo)
    common = dict(labels=None, image_size=(H, W), dtype="uint8", shuffle=False,
                  batch_size=len(table) + 1, verbose=0, cache=None)
    monkeypatch.setattr(_images, "_warned_deep", False)
    with pytest.warns(UserWarning, match="16 bits per sample"):
        nv = kg.ImageFolderGenerator(mixed, decoder="nvimgcodec", **common)
        x = nv[0]
    cv = kg.ImageFolderGenerator(mixed, **common)[0]
    np.testing.assert_array_equal(x, cv)  # the JPEG: OpenCV's pixels, bit for bit
    for k, path in enumerate(nv.file_paths):
        if path.endswith(".jpg"):
            continue
        _, kind, values, bits = table[os.path.basename(path)]
        np.testing.assert_array_equal(x[k], expected(kind, values, bits, "rgb", 8),
                                      err_msg=path)


def test_a_file_cache_made_under_other_pixel_rules_is_rebuilt_not_read(folder, tmp_path,
                                                                       monkeypatch):
    """A cache filled by a kerasgen whose decoding differed (16-bit TIFFs rounded, rgba
    at 16 bits cut to 8) held those pixels; the rules are part of its key."""
    root, table = folder
    path = str(tmp_path / "pixels.cache")
    common = dict(labels=None, image_size=(H, W), color_mode="rgba", dtype="uint16",
                  shuffle=False, batch_size=len(table), verbose=0, cache=path)
    monkeypatch.setattr(_images, "PIXEL_RULES", _images.PIXEL_RULES - 1)  # an older kerasgen
    old = kg.ImageFolderGenerator(root, **common)
    old[0]
    monkeypatch.undo()
    with pytest.warns(UserWarning, match=r"was made for other files or settings; rebuilding"):
        gen = kg.ImageFolderGenerator(root, **common)
    check_batch(gen, table, "rgba", 16)


@pytest.mark.parametrize("fmt", ["PNG", "WEBP", "TIFF"])
@pytest.mark.parametrize("orientation", range(1, 9))
def test_rgba_turns_as_exif_says_as_rgb_does(tmp_path, fmt, orientation):
    """OpenCV's unchanged read (color_mode="rgba") ignores a PNG's or WebP's EXIF
    orientation, which its other reads apply: RGBA came out unturned beside turned RGB.
    And it multiplies an RGBA TIFF's colours by their (unassociated) alpha, in every
    colour mode. Both now equal the written pixels, turned as the orientation says."""
    from PIL import Image

    pixels = np.random.default_rng(orientation).integers(0, 256, (3, 5, 4), dtype=np.uint8)
    pixels[..., 3] = np.arange(1, 16, dtype=np.uint8).reshape(3, 5) * 16  # WebP drops a
    # colour under alpha 0
    exif = Image.Exif()
    exif[0x0112] = orientation
    path = tmp_path / "c" / f"turned.{fmt.lower()}"
    path.parent.mkdir()
    Image.fromarray(pixels, "RGBA").save(path, fmt, exif=exif,
                                         **({"lossless": True} if fmt == "WEBP" else {}))
    turn = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
            4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
            6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
            8: Image.Transpose.ROTATE_90}.get(orientation)  # EXIF's meaning, as
    upright = Image.fromarray(pixels, "RGBA")  # ImageOps.exif_transpose maps it
    expected = np.asarray(upright if turn is None else upright.transpose(turn))
    height, width = expected.shape[:2]
    got = {mode: kg.ImageFolderGenerator(tmp_path, image_size=(height, width),
                                         color_mode=mode, dtype="uint8", cache=None,
                                         shuffle=False, batch_size=1)[0][0][0]
           for mode in ("rgb", "rgba")}
    np.testing.assert_array_equal(got["rgba"], expected)
    np.testing.assert_array_equal(got["rgb"], expected[..., :3])
