"""ImageOptions: the image options checked once, as the public constructors name them;
every image option has one effect on every image-reading generator; no import circle."""

import io
import re
import sqlite3
import tarfile
import threading

import cv2
import numpy as np
import pandas as pd
import pytest

import kerasgen as kg
from kerasgen.loading import images as _images
from kerasgen._redact import KerasgenWarning
from kerasgen.loader import ImageLoader
from kerasgen.loading.options import ImageOptions


def test_options_are_checked_once_and_frozen():
    options = ImageOptions(image_size=[10, 12], rescale=1 / 255, decode_threads=2)
    assert options.image_size == (10, 12) and options.aspect is None
    assert options.loader_kwargs("uint16")["bit_depth"] == 16
    with pytest.raises(Exception):
        options.image_size = (1, 1)
    with pytest.raises(ValueError, match="Only one of"):
        ImageOptions(crop_to_aspect_ratio=True, pad_to_aspect_ratio=True)
    with pytest.raises(ValueError, match="on_error"):
        ImageOptions(on_error="ignore")
    with pytest.raises(ValueError, match="rescale"):
        ImageOptions(rescale=0)


def test_take_removes_the_options_from_the_keywords():
    keywords = {"image_size": (5, 5), "batch_size": 3, "cache": "memory"}
    options = ImageOptions.take(keywords, {"cache": None, "verbose": 0})
    assert keywords == {"batch_size": 3}
    assert (options.image_size, options.cache, options.verbose) == ((5, 5), "memory", 0)
    assert options.replace(color_mode="grayscale").color_mode == "grayscale"



def test_a_generator_carries_one_options_object_down_to_its_loaders(tmp_path):
    import pickle

    data = _Data(tmp_path, "clean")
    gen = _folder(data, image_size=SIZE, interpolation="area", rescale=0.5, verbose=0,
                  crop_to_aspect_ratio=True)
    options = gen.image_options
    assert options == ImageOptions(image_size=SIZE, interpolation="area", rescale=0.5,
                                   verbose=0, crop_to_aspect_ratio=True, bit_depth=8)
    assert (gen.image_size, gen.interpolation, gen.cache, gen.decoder, gen.bit_depth) == (
        SIZE, "area", "auto", "opencv", 8)
    assert gen.loader.options is gen.source.loader.options  # one object, carried whole
    shared = gen.loader.for_processes(2)
    assert shared.options is gen.loader.options and shared.processes == 2
    assert type(shared.cache).__name__ == "SharedMemoryCache"
    copy = pickle.loads(pickle.dumps(gen.loader))  # what worker processes receive
    assert copy.options == options.replace(rescale=None) or copy.options == options
    gen.rescale = 0.25  # what users set later shows in the options they read
    assert gen.image_options.rescale == 0.25
    assert ImageOptions.of({"image_size": (3, 4), "batch_size": 2}) == ImageOptions(
        image_size=(3, 4))


def test_the_loaders_older_keywords_still_build_its_options(tmp_path):
    data = _Data(tmp_path, "clean")
    old = ImageLoader(data.paths, SIZE, "grayscale", "nearest", aspect="pad")
    assert old.options == ImageOptions(image_size=SIZE, color_mode="grayscale",
                                       interpolation="nearest", pad_to_aspect_ratio=True,
                                       cache=None, bit_depth=8)
    new = ImageLoader(data.paths, old.options)
    np.testing.assert_array_equal(old.load(2), new.load(2))
    with pytest.raises(TypeError, match="one ImageOptions"):
        ImageLoader(data.paths, old.options, cache="memory")
    with pytest.raises(ValueError, match="aspect"):
        ImageOptions.from_loader_keywords(SIZE, aspect="stretch")


# ----------------------------------------------------------------- no import circle
def _import_circles():
    """The strongly connected sets (of two modules or more) of kerasgen's run-time
    imports (`tests.test_dropin._kerasgen_imports`: TYPE_CHECKING blocks left out)."""
    from tests.test_dropin import _kerasgen_imports, _modules

    modules = _modules()
    graph = {name: sorted(_kerasgen_imports(path, modules) & set(modules) - {name})
             for name, path in modules.items()}
    order, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(start):  # Tarjan's algorithm, without recursion
        work = [(start, iter(graph[start]))]
        order[start] = low[start] = len(order)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in order:
                    order[child] = low[child] = len(order)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], order[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    circles.append(sorted(members))

    for name in sorted(graph):
        if name not in order:
            visit(name)
    return circles


def test_no_import_circle_among_kerasgen_modules():
    assert _import_circles() == []


# ----------------------------------------------------------------- every option, every generator
# Each image option passed to each image-reading generator has the same effect. The
# generators read the same four JPEGs (classes a, a, b, b, in this order), one batch of
# four, unshuffled; their batch must be what one ImageLoader of the same options loads.

SIZE = (6, 6)
LABELS = [0, 0, 1, 1]


def _jpeg(height, width, seed):
    image = np.random.default_rng(seed).integers(0, 256, (height, width, 3), np.uint8)
    image[: height // 2] //= 3  # some structure, so that resizing methods differ
    return cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()


def _images_of(kind):
    """The encoded images: 10x16 JPEGs; "corrupt": the second cut short; "big": the
    second 40x40 (1600 pixels, over max_pixels=1000)."""
    datas = [_jpeg(10, 16, seed) for seed in range(4)]
    if kind == "corrupt":
        datas[1] = datas[1][:40]
    elif kind == "big":
        datas[1] = _jpeg(40, 40, 1)
    return datas


class _Data:
    """The four images written once in every form the generators read."""

    def __init__(self, root, kind):
        self.datas = _images_of(kind)
        self.root = root
        self.paths = []
        for i, data in enumerate(self.datas):
            path = root / "images" / "ab"[LABELS[i]] / f"{i}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            self.paths.append(str(path))
        relative = [f"{'ab'[LABELS[i]]}/{i}.jpg" for i in range(4)]
        self.table = pd.DataFrame({"filename": relative, "label": [
            "ab"[y] for y in LABELS]})
        self.boxes = self.table.rename(columns={"label": "class"}).assign(
            xmin=1, ymin=1, xmax=9, ymax=8)
        self.db = str(root / "images" / "rows.db")
        with sqlite3.connect(self.db) as db:
            db.execute("CREATE TABLE rows (filename TEXT, label TEXT)")
            db.executemany("INSERT INTO rows VALUES (?, ?)", self.table.values.tolist())
        db.close()
        self.tar = str(root / "shard.tar")
        with tarfile.open(self.tar, "w") as tar:
            for i, data in enumerate(self.datas):
                for ext, payload in (("jpg", data), ("cls", str(LABELS[i]).encode())):
                    info = tarfile.TarInfo(f"{i:04d}.{ext}")
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
        self._records = None

    def records(self):
        """Serialized tf.train.Examples of the images and labels (TensorFlow writes)."""
        if self._records is None:
            tf = pytest.importorskip("tensorflow")
            self._records = [tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[y])),
            })).SerializeToString() for data, y in zip(self.datas, LABELS)]
        return self._records

    def tfrecord(self):
        path = str(self.root / "images.tfrecord")
        records = self.records()
        import tensorflow as tf

        with tf.io.TFRecordWriter(path) as writer:
            for record in records:
                writer.write(record)
        return path

    def arrayrecord(self):
        module = pytest.importorskip("array_record.python.array_record_module")
        path = str(self.root / "images.array_record")
        records = self.records()
        writer = module.ArrayRecordWriter(path, "group_size:1")
        for record in records:
            writer.write(record)
        writer.close()
        return path


_COMMON = dict(batch_size=4, shuffle=False, seed=0)


def _folder(data, **options):
    return kg.ImageFolderGenerator(data.root / "images", **_COMMON, **options)


def _csv(data, **options):
    return kg.CSVGenerator(data.table, directory=data.root / "images", **_COMMON, **options)


def _sql(data, **options):
    return kg.SQLGenerator(data.db, "SELECT filename, label FROM rows ORDER BY rowid",
                               **_COMMON, **options)


def _detection(data, **options):
    return kg.DetectionGenerator(data.boxes, directory=data.root / "images", **_COMMON,
                                 **options)


def _keras_function(data, **options):
    verbose = bool(options.pop("verbose", 0))
    return kg.image_dataset_from_directory(data.root / "images", format="kerasgen",
                                           verbose=verbose, **_COMMON, **options)


def _webdataset(data, **options):
    return kg.WebDatasetGenerator(data.tar, image_key="jpg", label_key="cls", **_COMMON,
                                  **options)


def _tfrecord(data, **options):
    return kg.TFRecordGenerator(data.tfrecord(), {"image": "image", "label": "label"},
                                **_COMMON, **options)


def _arrayrecord(data, **options):
    return kg.ArrayRecordGenerator(data.arrayrecord(), {"image": "image", "label": "label"},
                                   **_COMMON, **options)


def _stream(data, **options):
    return kg.StreamGenerator(data.tar, "webdataset", image_key="jpg", label_key="cls",
                              num_streams=1, **_COMMON, **options)


GENERATORS = {"ImageFolderGenerator": _folder, "CSVGenerator": _csv, "SQLGenerator": _sql,
              "DetectionGenerator": _detection, "image_dataset_from_directory": _keras_function,
              "WebDatasetGenerator": _webdataset, "TFRecordGenerator": _tfrecord,
              "ArrayRecordGenerator": _arrayrecord, "StreamGenerator": _stream}

# option -> (the keywords, the images they read, what to check)
OPTIONS = {
    "image_size": ({}, "clean", "pixels"),
    "color_mode": ({"color_mode": "grayscale"}, "clean", "pixels"),
    "interpolation": ({"interpolation": "nearest"}, "clean", "pixels"),
    "crop_to_aspect_ratio": ({"crop_to_aspect_ratio": True}, "clean", "pixels"),
    "pad_to_aspect_ratio": ({"pad_to_aspect_ratio": True}, "clean", "pixels"),
    "rescale": ({"rescale": 0.5, "dtype": "float32"}, "clean", "pixels"),
    "bit_depth": ({"bit_depth": 16, "dtype": "uint16"}, "clean", "pixels"),
    "decoder": ({"decoder": "nvimgcodec"}, "clean", "decoder"),
    "cache": ({"cache": "memory"}, "clean", "cache"),
    "on_error": ({"on_error": "skip"}, "corrupt", "skipped"),
    "max_pixels": ({"max_pixels": 1000, "on_error": "skip"}, "big", "skipped"),
    "decode_threads": ({"decode_threads": 1}, "clean", "threads"),
    "verbose": ({"verbose": 0}, "clean", "pixels"),
    "stats": ({"stats": True}, "clean", "stats"),
}

# the cells that fail until the generator takes the option (issue 49: helpers pending)


def _cells():
    for generator in GENERATORS:
        for option in OPTIONS:
            yield pytest.param(generator, option, id=f"{generator}-{option}")


def _expected(data, keywords):
    """The batch one ImageLoader of the options loads from the image files."""
    options = {k: v for k, v in keywords.items() if k != "dtype"}
    dtype = keywords.get("dtype", "float32")
    loader = ImageLoader(data.paths, kg.loader.ImageOptions(
        image_size=SIZE, cache=None, **options).for_dtype(dtype))
    pixels = np.stack([loader.load(i) for i in range(4)])
    rescale = keywords.get("rescale")
    return pixels.astype(dtype) * np.asarray(rescale, dtype) if rescale else pixels.astype(
        dtype)


def _x(batch):
    return batch[0] if isinstance(batch, tuple) else batch


@pytest.mark.parametrize("generator, option", list(_cells()))
def test_every_image_option_has_its_effect_on_every_image_generator(
        tmp_path, generator, option, monkeypatch):
    keywords, kind, check = OPTIONS[option]
    data = _Data(tmp_path, kind)  # its own: no other test's threads decode its images
    build = GENERATORS[generator]
    decoded = []  # the thread that decoded each of this test's images
    decode_bytes = _images.decode_bytes

    def counting(data, color_mode, target_size, name, *rest, **kwargs):
        if str(tmp_path) in str(name):
            decoded.append(threading.current_thread().name)
        return decode_bytes(data, color_mode, target_size, name, *rest, **kwargs)

    monkeypatch.setattr(_images, "decode_bytes", counting)
    if check == "skipped":
        with pytest.warns(KerasgenWarning, match="Skipping"):
            gen = build(data, image_size=SIZE, **{"verbose": 0, **keywords})
            x = _x(gen[0])
        assert x.shape[0] == 4 and len(gen.skipped) == 1
        # the second image, by its file, its key or its record
        assert re.search(r"\b1\.jpg|0001|record 1\b", gen.skipped[0]), gen.skipped
        return
    if check == "decoder":
        from kerasgen.loading import nvdecode as _nvdecode

        if not _nvdecode.available():
            with pytest.raises(ImportError, match="nvImageCodec"):
                build(data, image_size=SIZE, **{"verbose": 0, **keywords})
            return
        calls = []
        real = _nvdecode.NvDecoder.decode
        monkeypatch.setattr(_nvdecode.NvDecoder, "decode",
                            lambda self, datas: calls.append(len(datas)) or real(self, datas))
    gen = build(data, image_size=SIZE, **{"verbose": 0, "dtype": "uint8", **keywords})
    x = _x(gen[0])
    if check in ("pixels", "decoder"):
        expected = _expected(data, {"dtype": "uint8", **keywords})
        assert x.dtype == expected.dtype
        if check == "decoder":
            assert sum(calls) > 0  # nvImageCodec decoded them
            np.testing.assert_allclose(x.astype(float), expected.astype(float), atol=40)
        else:
            np.testing.assert_array_equal(x, expected)
    elif check == "cache":
        assert len(decoded) >= 4
        gen.on_epoch_end()
        decoded.clear()
        np.testing.assert_array_equal(_x(gen[0]), x)
        assert decoded == []  # the second epoch decodes nothing: all from the cache
    elif check == "threads":
        assert decoded and not [n for n in decoded if n.startswith("kerasgen-decode")]
    elif check == "stats":
        report = gen.stats()
        assert report["made"] >= 1 and report["samples"] == 4
