"""Image loading: reduced JPEG decode, threads, caches, corrupt files, unusual formats."""

import os
import pickle
import re
import shutil
import subprocess
import sys
import warnings

import cv2
import numpy as np
import pytest

import kerasgen as kg
from kerasgen.loading import images
from kerasgen.loading import jpeg as _jpeg

from .conftest import plant_old_temp_links, write_image


def smooth_photo(height, width, seed=0):
    """A smooth colour image (gradients + blobs), like photo content at low frequency."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    return cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)


def test_jpeg_header_and_reduction_choice(tmp_path):
    path = tmp_path / "a.jpg"
    cv2.imwrite(str(path), smooth_photo(375, 500))
    assert images.jpeg_size(np.fromfile(path, np.uint8)) == (375, 500)
    assert images.jpeg_size(np.frombuffer(b"\x89PNG\r\n\x1a\n....", np.uint8)) is None
    assert images.reduction((375, 500), (224, 224)) == 1
    assert images.reduction((375, 500), (160, 160)) == 2
    assert images.reduction((768, 1024), (96, 96)) == 8  # 768 / 8 = 96: still the target
    assert images.reduction((768, 1024), (97, 60)) == 4  # the shorter side decides


def test_reduced_decode_stays_within_resize_error(tmp_path):
    path = tmp_path / "big.jpg"
    cv2.imwrite(str(path), smooth_photo(768, 1024), [cv2.IMWRITE_JPEG_QUALITY, 95])
    for size in [(128, 128), (64, 96)]:
        fast = images.load(str(path), size)
        full = cv2.resize(cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB),
                          size[::-1], interpolation=cv2.INTER_AREA)
        assert fast.shape == size + (3,)
        assert np.abs(fast.astype(int) - full).mean() < 2.0


def test_threads_give_identical_batches(image_folder):
    common = dict(image_size=(9, 7), batch_size=12, seed=4)
    one = kg.ImageFolderGenerator(image_folder, decode_threads=1, **common)
    four = kg.ImageFolderGenerator(image_folder, decode_threads=4, **common)
    np.testing.assert_array_equal(one[0][0], four[0][0])
    clone = pickle.loads(pickle.dumps(four))  # the thread pool is not pickled
    np.testing.assert_array_equal(clone[0][0], one[0][0])


def test_decode_pool_is_remade_in_a_forked_worker(image_folder):
    """Keras forks its worker processes after TensorFlow loaded batches in the parent."""
    import multiprocessing

    gen = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), batch_size=4,
                                  decode_threads=2, seed=0)
    expected = gen[1][0]
    queue = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(
        target=lambda: queue.put(gen[1][0]))
    child.start()
    child.join(30)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive, "a forked worker hung on the inherited thread pool"
    np.testing.assert_array_equal(queue.get(timeout=5), expected)


@pytest.mark.parametrize("cache", ["auto", "memory", "file"])
def test_cache_serves_later_epochs_and_augmentation_runs_after_it(image_folder, tmp_path,
                                                                  cache):
    spec = str(tmp_path / "cache.bin") if cache == "file" else cache
    calls = []

    def mark(x, rng):
        calls.append(1)
        return x

    gen = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), batch_size=12,
                                  shuffle=False, cache=spec, dtype="uint8", augment=mark)
    first = gen[0][0]
    for path in gen.file_paths:  # cached epochs no longer read the files
        os.rename(path, path + ".moved")
    gen.on_epoch_end()
    np.testing.assert_array_equal(gen[0][0], first)
    assert len(calls) == 24  # augmented in both epochs


def test_auto_cache_is_the_default_and_keeps_what_fits_in_its_budget(image_folder,
                                                                     monkeypatch):
    from kerasgen.loading import cache as cache_mod

    row = 6 * 6 * 3
    monkeypatch.setattr(cache_mod, "auto_budget", lambda: 5 * row + 7)  # 5 samples fit
    gen = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), batch_size=12,
                                  shuffle=False, dtype="uint8")
    uncached = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), batch_size=12,
                                       shuffle=False, cache=None)
    assert gen.cache == "auto"
    first = gen[0][0]
    uncached[0]
    for path in gen.file_paths[5:]:  # samples 5.. are not cached: they read again
        os.rename(path, path + ".moved")
    gen.on_epoch_end()
    with pytest.raises(FileNotFoundError, match="Image file not found"):
        gen[0]
    for path in gen.file_paths[5:]:
        os.rename(path + ".moved", path)
    for path in gen.file_paths[:5]:
        os.rename(path, path + ".moved")
    np.testing.assert_array_equal(gen[0][0], first)  # 0..4 from the cache, 5.. decoded
    uncached.on_epoch_end()
    with pytest.raises(FileNotFoundError):
        uncached[0]


@pytest.mark.parametrize("cache", ["auto", "memory"])
def test_the_memory_cache_is_shared_with_worker_processes(image_folder, cache):
    gen = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), batch_size=3, seed=2,
                                  cache=cache, workers=2, use_multiprocessing=True)
    first = [gen[i][0].copy() for i in range(len(gen))]
    order = gen.epoch_plan()
    gen.on_epoch_end()  # the workers of epoch 0 end; those of epoch 1 are new processes
    for path in gen.file_paths:
        os.rename(path, path + ".moved")
    again = [gen[i][0] for i in range(len(gen))]  # every image from the shared cache
    by_sample = dict(zip(order, np.concatenate(first)))
    for k, index in enumerate(gen.epoch_plan()):
        np.testing.assert_array_equal(np.concatenate(again)[k], by_sample[index])
    gen.on_epoch_end()


def test_file_cache_is_reused_across_runs_and_rebuilt_on_change(image_folder, tmp_path):
    spec = str(tmp_path / "cache.bin")
    common = dict(image_size=(6, 6), batch_size=12, shuffle=False, cache=spec)
    first = kg.ImageFolderGenerator(image_folder, **common)[0][0]
    victim = sorted(image_folder.rglob("*.png"))[0]
    original = victim.read_bytes()
    cv2.imwrite(str(victim), np.full((30, 30, 3), 255, np.uint8))  # new size and content
    with pytest.warns(UserWarning, match="rebuilding"):
        rebuilt = kg.ImageFolderGenerator(image_folder, **common)[0][0]
    assert not np.array_equal(rebuilt, first)
    victim.write_bytes(original)
    with pytest.warns(UserWarning, match="rebuilding"):
        again = kg.ImageFolderGenerator(image_folder, **common)
    np.testing.assert_array_equal(again[0][0], first)
    reused = kg.ImageFolderGenerator(image_folder, **common)
    for path in reused.file_paths:
        os.rename(path, path + ".moved")
    np.testing.assert_array_equal(reused[0][0], first)  # served from the file, unchanged
    with pytest.raises(FileNotFoundError, match="`cache` must be a path in an existing folder"):
        write_image(str(tmp_path / "solo" / "a.png"))
        kg.ImageFolderGenerator(tmp_path / "solo", cache=str(tmp_path / "no" / "c.bin"),
                                label_mode=None)



def cache_bytes(gen, shape=(6, 6, 3)):
    n = len(gen.file_paths)  # the key, n flags, n uint32 checksums (4-byte aligned), then
    sums = -(-(64 + n) // 4) * 4  # the samples (64-byte aligned)
    return -(-(sums + 4 * n) // 64) * 64 + n * int(np.prod(shape))


def checksum_warnings(record):
    return [w for w in record if "checksum does not match" in str(w.message)]


def test_file_cache_rows_changed_on_disk_are_decoded_again_with_one_warning(image_folder,
                                                                           tmp_path):
    """Zeroed pixel bytes in a cache file used to be served as an image."""
    from kerasgen.loading import cache as cache_mod
    spec = str(tmp_path / "cache.bin")
    common = dict(image_size=(6, 6), batch_size=4, shuffle=False, dtype="uint8")
    expected = np.concatenate([b[0] for b in kg.ImageFolderGenerator(
        image_folder, cache=None, **common)])
    filled = kg.ImageFolderGenerator(image_folder, cache=spec, **common)
    for i in range(len(filled)):
        filled[i]
    n, row = len(filled.file_paths), 6 * 6 * 3
    _, data_at, size = cache_mod.layout(n, (6, 6, 3))
    assert size == os.path.getsize(spec) == cache_bytes(filled)
    with open(spec, "r+b") as f:  # zero samples 1 and 9, flip one byte of sample 5
        for index in (1, 9):
            f.seek(data_at + index * row)
            f.write(bytes(row))
        f.seek(data_at + 5 * row + 7)
        byte = f.read(1)[0]
        f.seek(data_at + 5 * row + 7)
        f.write(bytes([byte ^ 1]))
    gen = kg.ImageFolderGenerator(image_folder, cache=spec, **common)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = np.concatenate([gen[i][0] for i in range(len(gen))])
        got_again = np.concatenate([gen[i][0] for i in range(len(gen))])
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got_again, expected)
    assert len(checksum_warnings(record)) == 1, [str(w.message) for w in record]
    assert f"The cache file {spec} holds a sample whose checksum" in str(
        checksum_warnings(record)[0].message)
    with open(spec, "rb") as f:  # the bad rows were written again
        f.seek(data_at)
        rows = np.frombuffer(f.read(n * row), np.uint8).reshape(expected.shape)
    np.testing.assert_array_equal(rows, expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a later run finds every row good
        again = kg.ImageFolderGenerator(image_folder, cache=spec, **common)
        for path in again.file_paths:
            os.rename(path, path + ".moved")
        np.testing.assert_array_equal(
            np.concatenate([again[i][0] for i in range(len(again))]), expected)


@pytest.mark.parametrize("checksum", ["crc32c", "crc32"])
def test_forged_filled_flags_in_a_file_cache_are_not_served(image_folder, tmp_path,
                                                            monkeypatch, checksum):
    """A flag set without the row written (or the checksum beside it) is a cache miss,
    with either checksum (CRC32C where google-crc32c is installed, else zlib's)."""
    from kerasgen.loading import cache as cache_mod
    if checksum == "crc32c" and cache_mod.CHECKSUM != "crc32c":
        pytest.skip("google-crc32c (with its C code) is not installed")
    monkeypatch.setattr(cache_mod, "CHECKSUM", checksum)
    monkeypatch.setattr(cache_mod, "_checksum", getattr(cache_mod, checksum))
    spec = str(tmp_path / "cache.bin")
    common = dict(image_size=(6, 6), batch_size=12, shuffle=False, dtype="uint8")
    expected = kg.ImageFolderGenerator(image_folder, cache=None, **common)[0][0]
    gen = kg.ImageFolderGenerator(image_folder, cache=spec, **common)  # nothing filled
    with open(spec, "r+b") as f:
        f.seek(64)
        f.write(b"\x01" * len(gen.file_paths))  # every row "filled" with zeros
    with pytest.warns(UserWarning, match=re.escape(f"The cache file {spec} holds a sample "
                                                   "whose checksum does not match")) as record:
        np.testing.assert_array_equal(gen[0][0], expected)
    assert len(checksum_warnings(record)) == 1
    reused = kg.ImageFolderGenerator(image_folder, cache=spec, **common)
    for path in reused.file_paths:  # now genuinely filled: served from the file
        os.rename(path, path + ".moved")
    np.testing.assert_array_equal(reused[0][0], expected)


@pytest.mark.parametrize("how", ["fallocate", "unsupported"])
def test_a_disk_too_full_for_the_file_cache_is_an_error_before_training(
        image_folder, tmp_path, monkeypatch, how):
    """Writing through a memory map to a full disk would kill the process with SIGBUS:
    the space is reserved up front, and a lack of it is an error naming the cache."""
    import errno

    def no_room(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    real_statvfs = os.statvfs

    def tiny_disk(target):
        found = real_statvfs(target)
        return os.statvfs_result((found.f_bsize, 1024, 10, 1, 1) + tuple(found)[5:])

    if how == "fallocate":
        monkeypatch.setattr(os, "posix_fallocate", no_room)
    else:  # a file system without fallocate: its free space is checked instead
        monkeypatch.setattr(os, "posix_fallocate", unsupported)
        monkeypatch.setattr(os, "statvfs", tiny_disk)
    spec = tmp_path / "cache" / "cache.bin"
    spec.parent.mkdir()
    size = cache_bytes(kg.ImageFolderGenerator(image_folder, cache=None))
    with pytest.raises(OSError, match=rf"Cannot reserve {size} bytes for the image cache "
                                      rf"{re.escape(str(spec))} \(No space left on device\)\. "
                                      "Free that much space"):
        kg.ImageFolderGenerator(image_folder, image_size=(6, 6), cache=str(spec))
    assert os.listdir(spec.parent) == []  # neither the cache nor a temporary file
    monkeypatch.undo()
    gen = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), cache=str(spec))
    assert os.path.getsize(spec) == size and gen[0][0].shape[1:] == (6, 6, 3)
    assert os.listdir(spec.parent) == ["cache.bin"]


def test_a_file_cache_truncated_by_another_program_is_refused_not_a_crash(image_folder,
                                                                         tmp_path):
    spec = str(tmp_path / "cache.bin")
    common = dict(image_size=(6, 6), batch_size=12, shuffle=False, cache=spec)
    gen = kg.ImageFolderGenerator(image_folder, **common)
    first = gen[0][0]  # mapped and filled
    fresh = kg.ImageFolderGenerator(image_folder, **common)  # reuses it, not mapped yet
    size = os.path.getsize(spec)
    os.truncate(spec, 100)  # reading the mapped pages past 100 bytes would be SIGBUS
    with pytest.raises(RuntimeError, match=re.escape(
            f"The cache file {spec} was truncated to 100 bytes while in use (its layout "
            f"needs {size})")):
        gen[0]
    with pytest.raises(RuntimeError, match=re.escape(
            f"{spec} has 100 bytes, not the {size} its layout needs")):
        fresh[0]
    with pytest.warns(UserWarning, match=re.escape(
            f"The cache {spec} has 100 bytes, not the {size} it was made with")):
        rebuilt = kg.ImageFolderGenerator(image_folder, **common)
    np.testing.assert_array_equal(rebuilt[0][0], first)
    assert os.path.getsize(spec) == size


def test_file_cache_writes_no_file_through_a_planted_symlink(image_folder, tmp_path):
    """The cache used to be written as <path>.tmp-<pid>, following a symlink put there."""
    spec = tmp_path / "cache.bin"
    victim, planted = plant_old_temp_links(spec, tmp_path)
    gen = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), batch_size=12,
                                  shuffle=False, cache=str(spec))
    expected = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), batch_size=12,
                                       shuffle=False, cache=None)[0][0]
    np.testing.assert_array_equal(gen[0][0], expected)
    assert victim.read_text() == "precious"
    assert set(os.listdir(tmp_path)) == planted | {"cache.bin"}  # no temporary file left
    assert not spec.is_symlink() and spec.stat().st_size == cache_bytes(gen)
    reused = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), batch_size=12,
                                     shuffle=False, cache=str(spec))
    for path in reused.file_paths:
        os.rename(path, path + ".moved")
    np.testing.assert_array_equal(reused[0][0], expected)  # from the file written


@pytest.fixture
def bad_folder(image_folder):
    (image_folder / "dog" / "zero.png").write_bytes(b"")
    good = (image_folder / "dog" / "dog_0.png").read_bytes()
    (image_folder / "dog" / "truncated.png").write_bytes(good[: len(good) // 2])
    (image_folder / "cat" / "text.jpg").write_bytes(b"hello, not a jpeg")
    return image_folder


def test_on_error_raise_names_the_file(bad_folder):
    gen = kg.ImageFolderGenerator(bad_folder, image_size=(6, 6), batch_size=32,
                                  shuffle=False)
    with pytest.raises(ValueError, match="text.jpg"):
        gen[0]
    one = kg.ImageFolderGenerator(bad_folder, image_size=(6, 6), batch_size=1,
                                  shuffle=False)
    with pytest.raises(ValueError, match=r"zero.png: the file is empty \(0 bytes\)"):
        one[one.file_paths.index(str(bad_folder / "dog" / "zero.png"))]


def test_on_error_skip_replaces_within_the_class(bad_folder):
    common = dict(image_size=(6, 6), batch_size=32, shuffle=False, on_error="skip",
                  label_mode="int", seed=3)
    gen = kg.ImageFolderGenerator(bad_folder, **common)
    with pytest.warns(UserWarning, match="Skipping an undecodable image") as caught:
        x, y = gen[0]
    assert len(caught) == 1  # one warning, however many files
    assert sorted(os.path.basename(p) for p in gen.skipped) == ["text.jpg", "truncated.png",
                                                                "zero.png"]
    assert x.shape[0] == gen.num_samples  # shapes and class counts hold
    np.testing.assert_array_equal(np.bincount(y), [5, 5, 5])
    for name in ("zero.png", "truncated.png"):
        k = gen.file_paths.index(str(bad_folder / "dog" / name))
        dogs = [i for i, p in enumerate(gen.file_paths)
                if gen.labels[i] == 1 and p not in gen.skipped]
        assert any(np.array_equal(x[k], x[d]) for d in dogs)
    again = kg.ImageFolderGenerator(bad_folder, decode_threads=3, **common)
    with pytest.warns(UserWarning):
        np.testing.assert_array_equal(again[0][0], x)  # the same stand-ins, any threads
    assert sorted(gen.validate()) == sorted(gen.skipped)


def test_a_class_with_no_decodable_image_is_an_error(tmp_path):
    (tmp_path / "d" / "a").mkdir(parents=True)
    (tmp_path / "d" / "a" / "x.png").write_bytes(b"bad")
    (tmp_path / "d" / "a" / "y.png").write_bytes(b"")
    write_image(str(tmp_path / "d" / "b" / "ok.png"))
    gen = kg.ImageFolderGenerator(tmp_path / "d", on_error="skip", batch_size=4)
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="No image of class 'a'"):
        gen[0]
    with pytest.raises(ValueError, match="`on_error` must be one of"):
        kg.ImageFolderGenerator(tmp_path / "d", on_error="ignore")


def test_exif_orientation_cmyk_and_palette(tmp_path):
    from PIL import Image
    root = tmp_path / "f" / "a"
    root.mkdir(parents=True)
    pixels = np.zeros((20, 40, 3), np.uint8)
    pixels[:, :20] = (255, 0, 0)  # left half red
    img = Image.fromarray(pixels)
    exif = img.getexif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise when displayed
    img.save(root / "rotated.jpg", exif=exif.tobytes(), quality=95)
    img.convert("CMYK").save(root / "cmyk.jpg", quality=95)
    img.convert("P").save(root / "palette.png")
    gen = kg.ImageFolderGenerator(tmp_path / "f", image_size=(40, 40), shuffle=False,
                                  batch_size=3, dtype="uint8", interpolation="nearest")
    by_name = {os.path.basename(p): im for p, im in zip(gen.file_paths, gen[0][0])}
    rotated = by_name["rotated.jpg"]
    assert rotated[2, 20, 0] > 200 and rotated[37, 20, 0] < 60  # red on top after rotation
    for name in ("cmyk.jpg", "palette.png"):
        im = by_name[name].astype(int)
        assert im[20, 5, 0] > 200 and im[20, 5, 1:].max() < 60, name  # left still red
        assert im[20, 35].max() < 60, name  # right still black


def test_two_generators_on_one_cache_file_never_mix_images(image_folder, tmp_path):
    spec = str(tmp_path / "shared.cache")
    common = dict(image_size=(6, 6), batch_size=16, shuffle=False, cache=spec, seed=1,
                  validation_split=0.5)
    train = kg.ImageFolderGenerator(image_folder, subset="training", **common)
    with pytest.warns(UserWarning, match="Give each generator its own cache file"):
        val = kg.ImageFolderGenerator(image_folder, subset="validation", **common)
    val[0]
    with pytest.raises(RuntimeError, match="Give each generator its own cache file"):
        train[0]


def test_skip_needs_a_class_to_pick_stand_ins_from(tmp_path, image_folder):
    lines = ["filename,a,b", "cat/cat_0.png,1,0", "dog/dog_0.png,0,1"]
    (image_folder / "ml.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="on_error='skip' replaces a bad image"):
        kg.CSVGenerator(image_folder / "ml.csv", y_col=["a", "b"], label_mode="multi_label",
                        on_error="skip")


DISK_FULL = """
import os, subprocess, sys
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", {mnt!r}], check=True)
import kerasgen as kg
try:
    kg.ImageFolderGenerator({folder!r}, image_size=(128, 128), cache={cache!r})
    print("built")
except OSError as error:
    print("OSError:", error)
print("left:", sorted(os.listdir({mnt!r})))
"""


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("unshare"), reason="needs util-linux's unshare to "
                    "mount a small tmpfs in a private mount namespace")
def test_a_file_cache_on_a_really_full_tmpfs_is_an_error_not_sigbus(image_folder, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    code = DISK_FULL.format(mnt=str(mnt), folder=str(image_folder),
                            cache=str(mnt / "cache.bin"))
    # a user and mount namespace of its own: the tmpfs needs no root and vanishes with it
    done = subprocess.run(["unshare", "-rm", sys.executable, "-c", code], text=True,
                          capture_output=True, timeout=300)
    if done.returncode != 0 and "mount" in done.stderr and "OSError" not in done.stdout:
        pytest.skip(f"this machine does not let a test mount a tmpfs: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]  # not killed by SIGBUS (-7)
    assert "OSError: [Errno 28] Cannot reserve" in done.stdout  # ENOSPC, named
    assert str(mnt / "cache.bin") in done.stdout
    assert "left: []" in done.stdout  # no cache file, no temporary file


@pytest.mark.parametrize("encoding", [[], [cv2.IMWRITE_JPEG_PROGRESSIVE, 1],
                                      [cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
                                       cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444]])
def test_jpegs_decode_to_opencvs_pixels_bit_for_bit(encoding):
    """The default decoder reads JPEGs with libjpeg-turbo through simplejpeg (its
    warnings raised, kerasgen.loading.jpeg): every pixel as OpenCV's imdecode gives it, full
    size and at 1/2, 1/4 and 1/8 scale, in colour and grayscale."""
    from sklearn.datasets import load_sample_image

    photo = cv2.cvtColor(load_sample_image("flower.jpg"), cv2.COLOR_RGB2BGR)  # 427x640
    data = cv2.imencode(".jpg", photo, [cv2.IMWRITE_JPEG_QUALITY, 85] + encoding)[1]
    for mode, full, reduced in (("rgb", images._IMREAD_RGB, images._REDUCED["rgb"]),
                                ("grayscale", cv2.IMREAD_GRAYSCALE,
                                 images._REDUCED["grayscale"])):
        for target, r in ((None, 1), ((300, 300), 1), ((200, 200), 2), ((100, 100), 4),
                          ((50, 50), 8)):
            expected = cv2.imdecode(data, reduced[r] if r > 1 else full)
            if mode == "rgb" and r > 1:  # the reduced flags decode to BGR
                expected = cv2.cvtColor(expected, cv2.COLOR_BGR2RGB)
            got = images.decode_bytes(data, mode, target)
            jpeg = _jpeg.info(data)  # the path taken: simplejpeg's, not OpenCV's fallback
            assert _jpeg.decodable(jpeg, mode) and _jpeg.decode(data, jpeg, mode, r, "x") \
                is not None
            np.testing.assert_array_equal(got.reshape(expected.shape), expected,
                                          err_msg=f"{mode} {target}")
            assert got.shape[:2] == (-(-427 // r), -(-640 // r))
