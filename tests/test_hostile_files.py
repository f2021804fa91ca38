"""Hostile files (issue 14): images whose header declares a huge size, decoder errors
OpenCV raises, FIFOs and other non-regular files named like images, symbolic links out
of an image folder, and CSV files replaced by links out of `directory` after the
generator was built."""

import json
import os
import struct
import subprocess
import sys
import warnings
import zlib

import cv2
import numpy as np
import pytest

import kerasgen as kg
from kerasgen import cli
from kerasgen.loading import images
from kerasgen.loading import nvdecode as _nvdecode

from .conftest import write_image

pytestmark = pytest.mark.timeout(60)  # a FIFO read blocks forever: fail, never hang


def forged_png(path, width, height):
    """A few bytes: a PNG whose IHDR header declares width x height (valid CRCs), with an
    empty image stream."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))
    return str(path)


def forged_jpeg(path, width, height):
    """A real 8x8 JPEG whose frame header (SOF0) is patched to declare width x height."""
    data = bytearray(cv2.imencode(".jpg", np.full((8, 8, 3), 99, np.uint8))[1].tobytes())
    i = data.index(b"\xff\xc0")
    data[i + 5:i + 9] = struct.pack(">HH", height, width)
    with open(path, "wb") as f:
        f.write(bytes(data))
    return str(path)


@pytest.fixture
def huge_folder(tmp_path):
    """Class a: a0, a1 and huge.png (a 60000x60000 header); class b: b0, b1."""
    root = tmp_path / "data"
    for name in ("a", "b"):
        for i in range(2):
            write_image(str(root / name / f"{name}{i}.png"), value=40 * i + 100 * (name == "b"))
    huge = forged_png(root / "a" / "huge.png", 60000, 60000)
    return root, huge


# ----------------------------------------------------------------- 1. oversized images


def test_a_huge_header_is_refused_before_decoding_and_named(huge_folder):
    root, huge = huge_folder
    gen = kg.ImageFolderGenerator(root, image_size=8, batch_size=5, shuffle=False)
    assert gen.max_pixels == 89_478_485  # Pillow's Image.MAX_IMAGE_PIXELS
    with pytest.raises(ValueError, match=r"huge\.png: it is a 60000x60000 image "
                                         r"\(3,600,000,000 pixels\), more than "
                                         r"max_pixels=89,478,485"):
        gen[0]
    assert gen.validate() == [huge]


def test_a_huge_header_is_skipped_with_on_error_skip(huge_folder):
    root, huge = huge_folder
    gen = kg.ImageFolderGenerator(root, image_size=8, batch_size=5, shuffle=False,
                                  on_error="skip", cache=None, seed=0)
    with pytest.warns(UserWarning, match=r"Skipping an undecodable image.*huge\.png"):
        x, y = gen[0]
    assert x.shape == (5, 8, 8, 3) and gen.skipped == [huge]
    k = gen.file_paths.index(huge)
    assert y[k] == 0  # still a sample of class a, shown by another image of class a
    assert any(np.array_equal(x[k], x[j]) for j in range(5)
               if j != k and gen.labels[j] == 0)


def test_without_a_limit_opencv_refusing_the_header_is_a_named_error(huge_folder):
    """max_pixels=None leaves OpenCV's own limit (2**30 pixels): its cv2.error is a bad
    file like any other, for on_error, validate() and kg.inspect()."""
    root, huge = huge_folder
    gen = kg.ImageFolderGenerator(root, image_size=8, batch_size=5, shuffle=False,
                                  max_pixels=None, cache=None)
    with pytest.raises(ValueError, match=r"Cannot decode image file .*huge\.png: OpenCV "
                                         r"refused it"):
        gen[0]
    assert gen.validate() == [huge]
    skipping = kg.ImageFolderGenerator(root, image_size=8, batch_size=5, max_pixels=None,
                                       on_error="skip", seed=0)
    with pytest.warns(UserWarning, match="Skipping an undecodable image"):
        assert skipping[0][0].shape == (5, 8, 8, 3)
    assert skipping.skipped == [huge]
    report = kg.inspect(root, verbose=0, max_pixels=None)
    assert [c["path"] for c in report["corrupt"]] == [huge]
    assert "OpenCV refused it" in report["corrupt"][0]["error"]


def test_a_forged_jpeg_frame_header_is_refused(tmp_path):
    root = tmp_path / "data"
    write_image(str(root / "a" / "ok.jpg"))
    huge = forged_jpeg(root / "a" / "huge.jpg", 30000, 20000)
    gen = kg.ImageFolderGenerator(root, image_size=8, batch_size=2, shuffle=False)
    with pytest.raises(ValueError, match=r"huge\.jpg: it is a 30000x20000 image"):
        gen[0]
    assert gen.validate() == [huge]


@pytest.mark.parametrize("ext", [".png", ".jpg", ".bmp", ".tif", ".webp", ".gif"])
def test_max_pixels_reads_the_header_of_every_format(tmp_path, ext):
    """A tiny limit on a normal 16x12 image: 192 pixels pass, 191 refuse it."""
    root = tmp_path / "data"
    path = root / "a" / f"img{ext}"
    if ext == ".gif":  # OpenCV may not write GIFs
        from PIL import Image

        os.makedirs(path.parent)
        Image.fromarray(np.full((12, 16, 3), 90, np.uint8)).save(path)
    else:
        write_image(str(path), height=12, width=16)
    assert images.header_size(np.fromfile(path, np.uint8)) == (12, 16)
    at_limit = kg.ImageFolderGenerator(root, image_size=4, max_pixels=192, cache=None)
    assert at_limit[0][0].shape == (1, 4, 4, 3) and at_limit.validate() == []
    below = kg.ImageFolderGenerator(root, image_size=4, max_pixels=191, cache=None)
    with pytest.raises(ValueError, match=rf"img\{ext}: it is a 16x12 image \(192 pixels\), "
                                         r"more than max_pixels=191"):
        below[0]
    assert below.validate() == [str(path)]


def test_max_pixels_applies_to_csv_lists_and_masks(tmp_path):
    """CSVGenerator takes max_pixels; a mask over it (or undecodable) is a bad sample:
    an error naming the mask, or with on_error="skip" a stand-in with its own mask."""
    root = tmp_path / "seg"
    rows = ["filename,mask"]
    os.makedirs(root / "mask")
    for i in range(3):
        write_image(str(root / "img" / f"{i}.png"), value=50 * (i + 1))
        if i == 1:
            forged_png(root / "mask" / "1.png", 50000, 50000)
        else:
            assert cv2.imwrite(str(root / "mask" / f"{i}.png"),
                               np.full((12, 16), i + 1, np.uint8))
        rows.append(f"img/{i}.png,mask/{i}.png")
    (root / "seg.csv").write_text("\n".join(rows) + "\n")
    common = dict(mask_col="mask", label_mode="mask", image_size=8, batch_size=3,
                  shuffle=False, cache=None)
    strict = kg.CSVGenerator(root / "seg.csv", **common)
    with pytest.raises(ValueError, match=r"mask file .*1\.png: it is a 50000x50000 image"):
        strict[0]
    assert strict.validate() == [str(root / "mask" / "1.png")]
    tolerant = kg.CSVGenerator(root / "seg.csv", on_error="skip", seed=0, **common)
    with pytest.warns(UserWarning, match="Skipping an undecodable image"):
        x, y = tolerant[0]
    assert tolerant.skipped == [str(root / "img" / "1.png")]
    stand_in = int(y[1, 0, 0]) - 1  # masks hold the sample number + 1
    assert stand_in in (0, 2)
    np.testing.assert_array_equal(x[1], x[stand_in])
    np.testing.assert_array_equal(y[1], y[stand_in])
    small = kg.CSVGenerator(root / "seg.csv", max_pixels=100, **common)  # 16x12 = 192
    with pytest.raises(ValueError, match=r"img.0\.png: it is a 16x12 image"):
        small[0]


@pytest.mark.parametrize("bad", [0, -5, True, 2.5, "many"])
def test_max_pixels_must_be_none_or_a_positive_integer(image_folder, bad):
    with pytest.raises(ValueError, match=r"`max_pixels` must be None or a positive integer "
                                         rf".*Received: max_pixels={bad!r}"):
        kg.ImageFolderGenerator(image_folder, max_pixels=bad)
    with pytest.raises(ValueError, match=r"`max_pixels` must be None or a positive integer"):
        kg.inspect(image_folder, max_pixels=bad, verbose=0)


def test_inspect_reports_a_huge_header_instead_of_crashing(huge_folder):
    root, huge = huge_folder
    report = kg.inspect(root, verbose=0)
    assert report["files"] == 5 and report["classes"] == {"a": 3, "b": 2}
    assert [c["path"] for c in report["corrupt"]] == [huge]
    assert "60000x60000" in report["corrupt"][0]["error"]
    assert report["size"]["height"]["max"] == 12  # the good files are still summarised


def test_the_command_line_reports_a_huge_header_without_a_traceback(huge_folder, capsys):
    root, huge = huge_folder
    process = subprocess.run([sys.executable, "-m", "kerasgen", "inspect", str(root)],
                             capture_output=True, text=True, timeout=60)
    assert process.returncode == 1, process.stderr  # a bad file found: exit status 1
    assert "Traceback" not in process.stderr
    assert "corrupt files: 1" in process.stdout and "60000x60000" in process.stdout
    assert cli.main(["inspect", str(root), "--json", "--max-pixels", "none"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert "OpenCV refused it" in report["corrupt"][0]["error"]
    assert cli.main(["inspect", str(root), "--json", "--max-pixels", "100"]) == 1
    assert len(json.loads(capsys.readouterr().out)["corrupt"]) == 5  # 16x12 > 100
    with pytest.raises(SystemExit):
        cli.main(["inspect", str(root), "--max-pixels", "0"])
    assert "--max-pixels" in capsys.readouterr().err


# ----------------------------------------------------------------- 2. regular files only


def test_a_fifo_named_like_an_image_is_named_or_skipped_never_read(image_folder):
    fifo = image_folder / "cat" / "x.png"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"Cannot read 1 entry named like an image but not "
                                         r"a regular file: .*x\.png \(a FIFO.*pass "
                                         r"on_error='skip'"):
        kg.ImageFolderGenerator(image_folder, image_size=8, batch_size=16)
    with pytest.warns(UserWarning, match=r"Leaving out 1 entry named like an image but not "
                                         r"a regular file: .*x\.png \(a FIFO"):
        gen = kg.ImageFolderGenerator(image_folder, image_size=8, batch_size=16,
                                      on_error="skip")
    assert str(fifo) not in gen.file_paths and len(gen.file_paths) == 12
    assert gen.skipped == [str(fifo)]  # in the skip report
    assert gen[0][0].shape == (12, 8, 8, 3)  # returns: nothing waits on the FIFO
    with pytest.warns(UserWarning, match="Leaving out 1 entry"):
        report = kg.inspect(image_folder, verbose=0)
    assert report["files"] == 12 and any("x.png (a FIFO" in w for w in report["warnings"])


def test_a_broken_link_named_like_an_image_is_named_or_skipped(image_folder):
    os.symlink(image_folder / "nowhere.png", image_folder / "dog" / "gone.png")
    with pytest.raises(ValueError, match=r"gone\.png \(a broken symbolic link\)"):
        kg.ImageFolderGenerator(image_folder, image_size=8)
    with pytest.warns(UserWarning, match=r"gone\.png \(a broken symbolic link\)"):
        gen = kg.ImageFolderGenerator(image_folder, image_size=8, on_error="skip")
    assert len(gen.file_paths) == 12 and gen.skipped == [str(image_folder / "dog" / "gone.png")]


def test_a_bad_file_found_while_loading_still_warns_after_listed_skips(image_folder):
    os.symlink(image_folder / "nowhere.png", image_folder / "dog" / "gone.png")
    with pytest.warns(UserWarning, match="Leaving out 1 entry"):
        gen = kg.ImageFolderGenerator(image_folder, image_size=8, batch_size=16,
                                      on_error="skip", shuffle=False, cache=None)
    (image_folder / "cat" / "cat_0.png").write_bytes(b"garbage")
    with pytest.warns(UserWarning, match="Skipping an undecodable image"):
        gen[0]
    assert sorted(os.path.basename(p) for p in gen.skipped) == ["cat_0.png", "gone.png"]


def test_a_file_replaced_by_a_fifo_after_listing_is_a_bad_file(image_folder):
    gen = kg.ImageFolderGenerator(image_folder, image_size=8, batch_size=16,
                                  shuffle=False, cache=None)
    skipping = kg.ImageFolderGenerator(image_folder, image_size=8, batch_size=16,
                                       on_error="skip", seed=0)
    victim = gen.file_paths[2]
    os.remove(victim)
    os.mkfifo(victim)
    with pytest.raises(ValueError, match=rf"{os.path.basename(victim)}: it is a FIFO "
                                         r"\(named pipe\), not a regular file"):
        gen[0]
    assert gen.validate() == [victim]
    with pytest.warns(UserWarning, match="it is a FIFO"):
        assert skipping[0][0].shape[0] == 12
    assert skipping.skipped == [victim]


# ----------------------------------------------------------------- 3. follow_links


@pytest.fixture
def linked_folder(tmp_path):
    """root/a: a0, a1; root/b: b0; outside the root: out/o.png and a folder pool/ (p0,
    p1)."""
    root = tmp_path / "root"
    for name, count in (("a", 2), ("b", 1)):
        for i in range(count):
            write_image(str(root / name / f"{name}{i}.png"), height=4, width=4, seed=i)
    write_image(str(tmp_path / "out" / "o.png"), height=4, width=4, value=7)
    for i in range(2):
        write_image(str(tmp_path / "pool" / f"p{i}.png"), height=4, width=4, value=9)
    return root, tmp_path


def listing(root, follow_links):
    gen = kg.ImageFolderGenerator(root, follow_links=follow_links, image_size=4,
                                  shuffle=False)
    return [(os.path.relpath(p, root), gen.class_names[c])
            for p, c in zip(gen.file_paths, gen.labels)]


def keras_listing(root, follow_links):
    """What Keras's image_dataset_from_directory lists (its own index_directory)."""
    from keras.src.utils import dataset_utils

    paths, labels, names = dataset_utils.index_directory(
        str(root), "inferred", formats=(".png",), shuffle=False, follow_links=follow_links,
        verbose=False)
    return sorted((os.path.relpath(p, root), names[c]) for p, c in zip(paths, labels))


@pytest.mark.parametrize("follow_links", [False, True])
def test_a_link_to_a_file_inside_the_root_is_read_as_keras_reads_it(linked_folder,
                                                                     follow_links):
    root, _ = linked_folder
    os.symlink(root / "a" / "a0.png", root / "b" / "copy.png")
    found = listing(root, follow_links)
    assert ("b/copy.png", "b") in found and len(found) == 4
    assert sorted(found) == keras_listing(root, follow_links)


def test_a_link_to_a_file_outside_the_root_is_refused_unless_following_links(
        linked_folder):
    root, tmp = linked_folder
    os.symlink(tmp / "out" / "o.png", root / "a" / "o.png")
    with pytest.raises(ValueError, match=r"The path 'a/o\.png' in the folder .*root leaves "
                                         r"`directory` \(.*root\): it is a symbolic link to "
                                         r".*out/o\.png\. Nothing outside `directory` is "
                                         r"read unless follow_links=True"):
        listing(root, False)
    found = listing(root, True)
    assert ("a/o.png", "a") in found and sorted(found) == keras_listing(root, True)


def test_a_class_folder_linked_outside_the_root_is_refused_unless_following_links(
        linked_folder):
    root, tmp = linked_folder
    os.symlink(tmp / "pool", root / "c")
    with pytest.raises(ValueError, match=r"The path 'c' in the folder .*root leaves "
                                         r"`directory` .*: it is a symbolic link to .*pool"):
        listing(root, False)
    with pytest.raises(ValueError, match="'c' in the folder .* leaves `directory`"):
        kg.inspect(root, verbose=0)
    found = listing(root, True)
    assert [f for f in found if f[1] == "c"] == [("c/p0.png", "c"), ("c/p1.png", "c")]
    assert sorted(found) == keras_listing(root, True)


def test_a_class_folder_linked_inside_the_root_is_read_with_either_setting(linked_folder):
    root, _ = linked_folder
    os.makedirs(root / ".store")  # hidden: not a class of its own
    os.rename(root / "b", root / ".store" / "b")
    os.symlink(root / ".store" / "b", root / "b")
    for follow_links in (False, True):
        found = listing(root, follow_links)
        assert ("b/b0.png", "b") in found and len(found) == 3
        assert sorted(found) == keras_listing(root, follow_links)


@pytest.mark.parametrize("inside", [True, False])
def test_a_linked_subfolder_is_entered_only_when_following_links(linked_folder, inside):
    root, tmp = linked_folder
    target = root / "b" if inside else tmp / "pool"
    os.symlink(target, root / "a" / "more")
    if inside:  # the files of b are listed once, under b; the link is skipped
        with pytest.warns(UserWarning, match="a folder already listed"):
            assert listing(root, True) == listing(root, False)
    else:
        assert ("a/more/p0.png", "a") in listing(root, True)
    not_followed = listing(root, False)  # no error: the link is not followed at all
    assert not any(path.startswith("a/more") for path, _ in not_followed)
    assert sorted(not_followed) == keras_listing(root, False)


def test_a_flat_folder_refuses_a_link_outside_it(linked_folder):
    root, tmp = linked_folder
    os.symlink(tmp / "out" / "o.png", root / "o.png")
    with pytest.raises(ValueError, match=r"'o\.png' in the folder .* symbolic link to "
                                         r".*out/o\.png"):
        kg.ImageFolderGenerator(root, labels=None, image_size=4)
    gen = kg.ImageFolderGenerator(root, labels=None, image_size=4, follow_links=True)
    assert str(root / "o.png") in gen.file_paths


# ----------------------------------------------------------------- 4. CSV paths at open time


@pytest.fixture
def csv_root(tmp_path):
    """root/img/0..2.png listed by root/list.csv; root/../secret.png outside it."""
    root = tmp_path / "root"
    for i in range(3):
        write_image(str(root / "img" / f"{i}.png"), value=60 * (i + 1))
    secret = write_image(str(tmp_path / "secret.png"), value=255)
    (root / "list.csv").write_text("filename,label\n" + "".join(
        f"img/{i}.png,{'aab'[i]}\n" for i in range(3)))
    return root, tmp_path / "secret.png", secret


def replace_by_link(path, target):
    os.remove(path)
    os.symlink(target, path)


def test_a_csv_file_replaced_by_a_link_outside_directory_is_refused_when_read(csv_root):
    root, secret_path, _ = csv_root
    gen = kg.CSVGenerator(root / "list.csv", directory=root, image_size=8, batch_size=3,
                          shuffle=False, cache=None)
    assert gen[0][0].shape == (3, 8, 8, 3)
    replace_by_link(root / "img" / "1.png", secret_path)
    with pytest.raises(ValueError, match=r"Cannot read image file .*img.1\.png: it now "
                                         r"leads to .*secret\.png, outside `directory`"):
        gen[0]
    assert gen.validate() == [str(root / "img" / "1.png")]


def test_a_csv_file_replaced_by_a_link_outside_is_skipped_with_on_error_skip(csv_root):
    root, secret_path, secret = csv_root
    gen = kg.CSVGenerator(root / "list.csv", directory=root, image_size=8, batch_size=3,
                          shuffle=False, cache=None, on_error="skip", dtype="uint8",
                          seed=0)
    replace_by_link(root / "img" / "1.png", secret_path)
    with pytest.warns(UserWarning, match="outside `directory`"):
        x, _ = gen[0]
    assert gen.skipped == [str(root / "img" / "1.png")]
    assert not (x == secret[0, 0, 0]).all(axis=(1, 2, 3)).any()  # the secret never shows


def test_a_csv_link_out_is_read_with_allow_outside_or_without_directory(csv_root):
    root, secret_path, _ = csv_root
    common = dict(image_size=8, batch_size=3, shuffle=False, cache=None, dtype="uint8")
    allowed = kg.CSVGenerator(root / "list.csv", directory=root, allow_outside=True,
                              **common)
    as_written = kg.CSVGenerator(root / "list.csv", **common)  # paths taken as written
    replace_by_link(root / "img" / "1.png", secret_path)
    for gen in (allowed, as_written):
        assert (gen[0][0][1] == 255).all()


def test_a_csv_link_staying_inside_directory_is_read(csv_root):
    root, _, _ = csv_root
    gen = kg.CSVGenerator(root / "list.csv", directory=root, image_size=8, batch_size=3,
                          shuffle=False, cache=None, dtype="uint8")
    replace_by_link(root / "img" / "1.png", root / "img" / "2.png")
    x = gen[0][0]
    np.testing.assert_array_equal(x[1], x[2])


def test_a_csv_mask_replaced_by_a_link_outside_directory_is_refused(tmp_path):
    root = tmp_path / "root"
    os.makedirs(root / "mask")
    for i in range(2):
        write_image(str(root / "img" / f"{i}.png"))
        assert cv2.imwrite(str(root / "mask" / f"{i}.png"), np.full((12, 16), i, np.uint8))
    assert cv2.imwrite(str(tmp_path / "other.png"), np.full((12, 16), 5, np.uint8))
    (root / "seg.csv").write_text("filename,mask\nimg/0.png,mask/0.png\nimg/1.png,"
                                  "mask/1.png\n")
    gen = kg.CSVGenerator(root / "seg.csv", directory=root, mask_col="mask",
                          label_mode="mask", image_size=8, batch_size=2, shuffle=False,
                          cache=None)
    replace_by_link(root / "mask" / "1.png", tmp_path / "other.png")
    with pytest.raises(ValueError, match=r"Cannot read mask file .*mask.1\.png: it now "
                                         r"leads to .*other\.png, outside `directory`"):
        gen[0]


def test_a_csv_link_out_is_still_refused_when_built(csv_root):
    root, secret_path, _ = csv_root
    replace_by_link(root / "img" / "1.png", secret_path)
    with pytest.raises(ValueError, match=r"'img/1\.png' in line 3 of .*list\.csv leaves "
                                         r"`directory` .*: a symbolic link on its way leads "
                                         r"to .*secret\.png"):
        kg.CSVGenerator(root / "list.csv", directory=root, image_size=8)


def test_headers_above_pillows_own_limit_are_read_without_its_warning(tmp_path):
    """Pillow's Image.open warns above Image.MAX_IMAGE_PIXELS and refuses twice that;
    kerasgen reads the header with Pillow's plugins but its own `max_pixels` decides."""
    for side in (10000, 20000):  # 1e8 pixels: Pillow warns; 4e8: Pillow raises
        data = np.fromfile(forged_png(tmp_path / f"{side}.png", side, side), np.uint8)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert images.header_size(data) == (side, side)
    assert images.header_size(np.frombuffer(b"not an image at all", np.uint8)) is None


def test_a_bad_file_met_during_fit_names_it_and_the_ways_out(image_folder):
    """No kerasgen frame between Keras and the message: the data is at fault."""
    import traceback

    import keras

    bad = image_folder / "dog" / "dog_1.jpg"
    bad.write_bytes(b"not a jpeg")
    gen = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4,
                                  label_mode="int", seed=0)
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(ValueError) as caught:
        model.fit(gen, epochs=1, verbose=0)
    text = "".join(traceback.format_exception(caught.value))
    assert str(bad) in text
    for way_out in ("on_error='skip'", "gen.validate()", "kerasgen inspect"):
        assert way_out in text, way_out
    frames = [f.filename for f in traceback.extract_tb(caught.value.__traceback__)]
    # kerasgen's frames by the package's own folder, whatever the checkout is named (a
    # clone called `kerasgen` holds Keras's traceback_utils.py under ".../kerasgen/")
    package = os.path.dirname(os.path.abspath(kg.__file__)) + os.sep
    inside = [os.path.basename(f) for f in frames if os.path.abspath(f).startswith(package)]
    # gen[i] re-raising it (and the hook that carries batch errors through Keras's
    # iterator), none of the loader, the decoder or the work-ahead
    assert set(inside) <= {"base.py", "_keras_compat.py"} and len(inside) <= 2, frames


@pytest.mark.parametrize("follow_links", [False, True])
def test_a_link_looping_to_itself_is_named_or_in_the_skip_report(image_folder, follow_links):
    for name in ("loop.jpg", "sub"):
        os.symlink(name, image_folder / "cat" / name)
    loop = str(image_folder / "cat" / "loop.jpg")
    with pytest.raises(ValueError, match=r"Cannot read 1 entry .*cat/loop\.jpg \(a symbolic "
                                         r"link that leads back to itself"), pytest.warns(
            UserWarning, match="cat/sub' is a symbolic link that leads back"):
        kg.ImageFolderGenerator(image_folder, image_size=(8, 8), verbose=0,
                                follow_links=follow_links)
    with pytest.warns(UserWarning, match=r"Leaving out 1 entry .*cat/loop\.jpg \(a symbolic "
                                         r"link that leads back to itself"), pytest.warns(
            UserWarning, match="cat/sub' is a symbolic link that leads back"):  # warned only
        gen = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), verbose=0,
                                      follow_links=follow_links, on_error="skip")
    assert not {os.path.basename(p) for p in gen.file_paths} & {"loop.jpg", "sub"}
    assert gen.skipped == [loop]


def damaged_jpeg(path):
    """A JPEG whose scan holds a quarter of its data, its end-of-image marker put back:
    OpenCV and nvImageCodec decode it to a mostly grey image, libjpeg only warns."""
    good = cv2.imencode(".jpg", np.random.default_rng(0).integers(
        0, 256, (48, 64, 3), dtype=np.uint8))[1].tobytes()
    path.write_bytes(good[: len(good) // 4] + b"\xff\xd9")
    return str(path)


DECODERS = ["opencv"] + (["nvimgcodec"] if _nvdecode.available() else [])


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("image_size", [(48, 64), (12, 16)])  # full and reduced decode
def test_a_jpeg_whose_scan_ends_early_is_corrupt_not_grey(image_folder, decoder, image_size):
    bad = damaged_jpeg(image_folder / "dog" / "short.jpg")
    common = dict(image_size=image_size, batch_size=32, shuffle=False, cache=None,
                  decoder=decoder, verbose=0)
    gen = kg.ImageFolderGenerator(image_folder, **common)
    with pytest.raises(ValueError, match=rf"Cannot decode image file {bad}: it is corrupt or "
                                         r"truncated \(libjpeg: 'Corrupt JPEG data: "
                                         r"premature end of data segment'\)"):
        gen[0]
    assert gen.validate() == [bad]
    skipping = kg.ImageFolderGenerator(image_folder, on_error="skip", **common)
    with pytest.warns(UserWarning, match="Skipping an undecodable image"):
        skipping[0]
    assert skipping.skipped == [bad]
    report = kg.inspect(image_folder, verbose=0)
    assert bad in str(report)


def test_a_camera_jpegs_harmless_warning_still_decodes(tmp_path):
    """libjpeg's "extraneous bytes before marker" (common in camera files) is no damage:
    decoded as OpenCV decodes it."""
    image = np.random.default_rng(1).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    good = cv2.imencode(".jpg", image)[1].tobytes()
    path = tmp_path / "c" / "a" / "extra.jpg"
    path.parent.mkdir(parents=True)
    path.write_bytes(good[:-2] + b"\x00\x00\xff\xd9")  # two stray bytes before EOI
    decoded = images.decode(str(path))
    expected = cv2.cvtColor(cv2.imdecode(np.fromfile(path, np.uint8), cv2.IMREAD_COLOR),
                            cv2.COLOR_BGR2RGB)
    np.testing.assert_array_equal(decoded, expected)


def exif_jpeg(pixels, orientation, after_frame=False):
    """JPEG bytes of `pixels` with an EXIF Orientation tag, its APP1 segment before the
    frame header (as cameras write it) or after it (as some tools do)."""
    from PIL import Image
    import io

    buffer = io.BytesIO()
    exif = Image.Image().getexif()
    exif[0x0112] = orientation
    Image.fromarray(pixels).save(buffer, "JPEG", exif=exif.tobytes(), quality=95)
    data = buffer.getvalue()
    if after_frame:  # move the APP1 segment behind the SOF0 segment
        a = data.index(b"\xff\xe1")
        app1 = data[a:a + 2 + int.from_bytes(data[a + 2:a + 4], "big")]
        rest = data[:a] + data[a + len(app1):]
        sof = rest.index(b"\xff\xc0")
        end = sof + 2 + int.from_bytes(rest[sof + 2:sof + 4], "big")
        data = rest[:end] + app1 + rest[end:]
    return data


@pytest.mark.parametrize("after_frame", [False, True])
@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_exif_rotated_jpegs_decode_as_opencv_wherever_the_exif_is(orientation, after_frame):
    pixels = np.random.default_rng(orientation).integers(0, 256, (24, 40, 3), dtype=np.uint8)
    data = np.frombuffer(exif_jpeg(pixels, orientation, after_frame), np.uint8)
    expected = cv2.cvtColor(cv2.imdecode(data, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    np.testing.assert_array_equal(images.decode_bytes(data, "rgb"), expected)


@pytest.mark.parametrize("case", ["exif", "rgba"])
def test_a_damaged_jpeg_that_opencv_decodes_is_still_corrupt(tmp_path, case):
    """JPEGs that go to OpenCV (EXIF-rotated, color_mode="rgba") are checked by
    libjpeg-turbo first: a scan cut short is a bad file there too."""
    pixels = np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    good = (exif_jpeg(pixels, 6) if case == "exif"
            else cv2.imencode(".jpg", pixels)[1].tobytes())
    data = np.frombuffer(good[: len(good) * 2 // 5] + b"\xff\xd9", np.uint8)
    assert cv2.imdecode(data, cv2.IMREAD_COLOR) is not None  # OpenCV alone: grey, no error
    with pytest.raises(ValueError, match=r"Cannot decode x\.jpg: it is corrupt or truncated "
                                         r"\(libjpeg: 'Corrupt JPEG data: premature end"):
        images.decode_bytes(data, "rgba" if case == "rgba" else "rgb", name="x.jpg")
