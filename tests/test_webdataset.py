"""WebDatasetGenerator: samples of WebDataset tar shards (written by webdataset's
TarWriter and by plain tarfile) read by random access: the batches of the same images
as files, the samples webdataset's own reader yields, shards by list, glob and brace
notation, local and memory://, worker processes, and an error naming the shard and the
key for every kind of bad shard."""

import io
import os
import pickle
import re
import tarfile
import uuid

import cv2
import fsspec
import keras
import numpy as np
import pytest

import kerasgen as kg
from kerasgen import webdataset as wdsmod
from kerasgen.storage.remote_cache import RemoteCache

from . import test_contract as contract

wds = pytest.importorskip("webdataset")
WebDatasetGenerator = getattr(kg, "WebDatasetGenerator", wdsmod.WebDatasetGenerator)
NAMES = ("cat", "dog", "fox")
COMMON = dict(image_size=(6, 6), verbose=0)


def image(k, flat=False):
    """Sample k's 10x12 image: noise seeded by k, or every value 10 * k (`flat`)."""
    if flat:
        return np.full((10, 12, 3), 10 * k, np.uint8)
    return np.random.default_rng(k).integers(0, 256, (10, 12, 3), dtype=np.uint8)


def png(k, flat=False):
    ok, data = cv2.imencode(".png", image(k, flat))
    assert ok
    return data.tobytes()


def tar_member(tar, name, data, kind=tarfile.REGTYPE, link=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, len(data)
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def write_dataset(folder, writer="webdataset", sizes=(5, 4, 3), flat=False, txt=True):
    """Shards `train-{000..}.tar` of samples 0.. in order (a PNG, "cls" k % 3 and, with
    `txt`, the class name); the same images as files `files/<k % 3>/<key>.png`.
    Returns (shard paths, the files' folder, [(key, class id)])."""
    os.makedirs(folder / "files", exist_ok=True)
    paths, samples, k = [], [], 0
    for s, count in enumerate(sizes):
        path = str(folder / f"train-{s:03d}.tar")
        if writer == "webdataset":
            with wds.TarWriter(path) as sink:
                for _ in range(count):
                    key = f"{k:05d}"
                    fields = {"__key__": key, "png": png(k, flat), "cls": k % 3}
                    if txt:
                        fields["txt"] = NAMES[k % 3]
                    sink.write(fields)
                    samples.append((key, k % 3))
                    k += 1
        else:  # plain tarfile: keys in folders, and members webdataset leaves out
            with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
                tar_member(tar, "__info__", b"{}")  # metadata
                tar_member(tar, f"part{s}", b"", tarfile.DIRTYPE)
                tar_member(tar, "README", b"no dot: no field")
                for _ in range(count):
                    key = f"part{s}/{k:05d}"
                    tar_member(tar, f"{key}.PNG" if k % 2 else f"{key}.png", png(k, flat))
                    tar_member(tar, f"{key}.cls", f"{k % 3}\n".encode())
                    if txt:
                        tar_member(tar, f"{key}.txt", NAMES[k % 3].encode())
                    tar_member(tar, f"{key}.link", b"", tarfile.SYMTYPE, "elsewhere")
                    samples.append((key, k % 3))
                    k += 1
                tar_member(tar, "__meta__/notes.json", b"{}")
        paths.append(path)
    for key, label in samples:
        target = folder / "files" / str(label) / (key.replace("/", "_") + ".png")
        os.makedirs(target.parent, exist_ok=True)
        target.write_bytes(png(int(key[-5:]), flat))
    return paths, folder / "files", samples


@pytest.fixture(params=["webdataset", "tarfile"])
def dataset(request, tmp_path):
    return write_dataset(tmp_path, request.param)


def batches(gen, epochs=2):
    found = []
    for epoch in range(epochs):
        view = gen.at_epoch(epoch)
        found += [[np.array(part) for part in view[i]] for i in range(len(gen))]
    return found


def assert_same(a, b):
    assert len(a) == len(b)
    for one, other in zip(a, b):
        assert len(one) == len(other)
        for x, y in zip(one, other):
            np.testing.assert_array_equal(x, y)


# ----- the same batches as the images as files
def test_batches_equal_the_image_folder_and_array_generators(dataset):
    shards, folder, samples = dataset
    gen = WebDatasetGenerator(shards, shuffle=False, batch_size=100, dtype="uint8", **COMMON)
    ref = kg.ImageFolderGenerator(folder, shuffle=False, batch_size=100, dtype="uint8",
                                  **COMMON)
    assert gen.keys == [key for key, _ in samples] and gen.num_samples == 12
    shard_of = np.repeat(np.arange(3), (5, 4, 3))
    assert gen.file_paths == [f"{shards[shard_of[k]]}#{key}"
                              for k, (key, _) in enumerate(samples)]
    assert gen.class_names == ref.class_names == ["0", "1", "2"]
    x, y = gen[0]
    rx, ry = ref[0]
    row = {os.path.basename(p)[:-4]: i for i, p in enumerate(ref.file_paths)}
    order = [row[key.replace("/", "_")] for key in gen.keys]
    np.testing.assert_array_equal(x, rx[order])  # PNG: exact pixels
    np.testing.assert_array_equal(y, ry[order])
    np.testing.assert_array_equal(gen.labels, [label for _, label in samples])
    # shuffled across shards, batch b of epoch e is the in-memory generator's
    shuffled = WebDatasetGenerator(shards, batch_size=5, seed=11, **COMMON)
    arrays = kg.ArrayGenerator(rx[order], np.asarray(gen.labels), batch_size=5, seed=11,
                               label_mode="int")
    assert_same(batches(shuffled), batches(arrays))
    assert len({int(shuffled.samples.shard[i]) for i in shuffled.epoch_plan(0)[:5]}) > 1


def test_the_samples_are_what_webdatasets_own_reader_yields(dataset):
    shards, _, samples = dataset
    reader = wds.WebDataset(shards, shardshuffle=False).decode()
    theirs = [(s["__key__"], s["cls"], s["txt"], s["png"]) for s in reader]
    gen = WebDatasetGenerator(shards, **COMMON)
    assert {(k, c) for k, c, _, _ in theirs} == set(zip(gen.keys, gen.labels.tolist()))
    assert [k for k, _, _, _ in theirs] == gen.keys  # in the same order
    assert [bytes(gen.samples.read(i)) for i in range(len(gen.keys))] == \
        [data for _, _, _, data in theirs]
    named = WebDatasetGenerator(shards, label_key="txt", **COMMON)
    assert {(k, t) for k, _, t, _ in theirs} == {
        (k, named.class_names[c]) for k, c in zip(named.keys, named.labels.tolist())}


def test_members_are_keyed_as_webdataset_keys_them():
    for name in ("a.jpg", "dir/a.b.png", "a.b/c.cls", "x/.hidden.jpg", "README", ".x.png",
                 "a/b/.x.jpg", "dir.d/file", "__key__.jpg", "a..b", "k.seg.PNG"):
        assert wdsmod.base_plus_ext(name) == wds.tariterators.base_plus_ext(name), name
    skip = re.compile(r"__[^/]*__($|/)")
    for name in ("__meta__", "__", "___", "__info__/a.json", "a/__x__.jpg", "__x__y.jpg"):
        theirs = ("/" not in name and name.startswith("__") and name.endswith("__")) or \
            bool(skip.match(name))
        assert wdsmod.is_meta(name) == theirs, name


def write_formats(path, tar_format, extra=()):
    """A tar of every kind of member, in `tar_format`: long names (ustar's prefix, GNU's
    long-name and long-link members, pax paths), non-ASCII names, folders (also V7's
    "name/"), links, devices, FIFOs, empty and odd-sized files."""
    deep = "/".join(["folder-with-a-long-name"] * 6)
    members = [("a.jpg", b"x" * 700), ("a.cls", b"1"), (f"{deep}/b.jpg", b"y" * 512),
               (f"{deep}/b.cls", b""), ("c" * 120 + ".png", b"z"), ("ünï/cödé.txt", "é".encode()),
               ("d.json", b"{}")]
    if tar_format == tarfile.USTAR_FORMAT:  # no long file names: long paths (a prefix)
        members = [m for m in members if not m[0].startswith("ccc")]
    with tarfile.open(path, "w", format=tar_format, pax_headers=dict(extra)) as tar:
        tar_member(tar, "dir", b"", tarfile.DIRTYPE)
        for k, (name, data) in enumerate(members):
            tar_member(tar, name, data)
            if k == 1:
                tar_member(tar, "v7dir/", b"", tarfile.AREGTYPE)
                tar_member(tar, "a.link", b"", tarfile.SYMTYPE,
                           "x" * (90 if tar_format == tarfile.USTAR_FORMAT else 150))
                tar_member(tar, "a.hard", b"", tarfile.LNKTYPE, "a.jpg")
                tar_member(tar, "fifo", b"", tarfile.FIFOTYPE)
                tar_member(tar, "dev.chr", b"", tarfile.CHRTYPE)
    return str(path)


@pytest.mark.parametrize("tar_format", ["ustar", "gnu", "pax", "pax-global"])
def test_the_quick_header_reader_reads_what_tarfile_reads(tmp_path, tar_format):
    formats = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT}
    extra = {"comment": "global"} if tar_format == "pax-global" else {}
    path = write_formats(tmp_path / "all.tar", formats.get(tar_format, tarfile.PAX_FORMAT),
                         extra)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        quick = wdsmod.tar_members(f, size)
        slow = wdsmod.tarfile_members(f, size, path)
    expected = [(m.name, m.offset_data, m.size) for m in tarfile.open(path) if m.isreg()]
    assert slow == expected and len(expected) >= 5
    assert quick == (None if tar_format == "pax-global" else expected)  # global: tarfile's
    gen = WebDatasetGenerator(path, image_key="jpg;png;txt;json", label_mode=None, **COMMON)
    assert gen.keys == [s["__key__"] for s in wds.WebDataset(path, shardshuffle=False)]


def test_a_model_trains_from_local_and_memory_shards(tmp_path, memory_root):
    shards, _, _ = write_dataset(tmp_path, sizes=(6, 6))
    urls = upload(shards, memory_root)
    for given in (shards, memory_root + "/train-{000..001}.tar"):
        gen = WebDatasetGenerator(given, batch_size=4, seed=1, **COMMON)
        model = keras.Sequential([keras.Input((6, 6, 3)), keras.layers.Rescaling(1 / 255),
                                  keras.layers.Flatten(), keras.layers.Dense(3)])
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        history = model.fit(gen, epochs=2, verbose=0)
        assert np.isfinite(history.history["loss"]).all() and gen.epoch == 2
    assert gen.paths == urls and all(os.path.isfile(p) for p in gen.local_paths)
    assert_same(batches(gen), batches(WebDatasetGenerator(shards, batch_size=4, seed=1,
                                                          **COMMON)))


def test_class_names_from_a_text_field(tmp_path):
    shards, _, samples = write_dataset(tmp_path, "tarfile")
    gen = WebDatasetGenerator(shards, label_key="txt", label_mode="categorical", **COMMON)
    assert gen.class_names == ["cat", "dog", "fox"]  # sorted
    np.testing.assert_array_equal(gen.labels, [label for _, label in samples])
    assert gen[0][1].shape == (min(32, 12), 3)
    given = WebDatasetGenerator(shards, label_key="txt", class_names=["fox", "dog", "cat"],
                                **COMMON)
    np.testing.assert_array_equal(given.labels, [2 - label for _, label in samples])
    path = tmp_path / "names.tar"
    with tarfile.open(path, "w") as tar:
        for k, text in enumerate([b"cat\n", b" dog ", b'"fox"']):
            tar_member(tar, f"{k}.jpg", png(k))
            tar_member(tar, f"{k}.{'json' if k == 2 else 'txt'}", text)
    mixed = WebDatasetGenerator(str(path), label_key="txt;json", **COMMON)
    assert mixed.class_names == ["cat", "dog", "fox"]  # whitespace dropped, JSON read
    with pytest.raises(ValueError, match=r"Label 'cat' at .*names\.tar#0 is not one of "
                                         r"`class_names`"):
        WebDatasetGenerator(str(path), label_key="txt;json", class_names=["dog", "fox"],
                            **COMMON)


def test_unlabeled_shards_and_other_image_fields(tmp_path):
    path = tmp_path / "unlabeled.tar"
    with tarfile.open(path, "w") as tar:
        for k in range(3):
            tar_member(tar, f"{k}.webp" if k else f"{k}.png", png(k))
    with pytest.raises(ValueError, match=r"Sample '1' of .*unlabeled\.tar has no member for "
                                         r"image_key='jpg;png;jpeg': its members are "
                                         r"1\.webp\. Pass image_key='webp'"):
        WebDatasetGenerator(str(path), label_mode=None, **COMMON)
    gen = WebDatasetGenerator(str(path), image_key="png;webp", label_mode=None,
                              batch_size=3, shuffle=False, **COMMON)
    x = gen[0]
    assert not isinstance(x, tuple) and x.shape == (3, 6, 6, 3)  # x alone, as Keras
    assert gen.labels is None and gen.class_names is None


# ----- shards: lists, glob patterns, brace notation
PATTERNS = ["shard-{000000..000011}.tar", "a{1,2}b{x,y}", "{a..e}", "{07..10}", "{4..1}",
            "{2..-1}", "{0..8..2}", "{a..g..2}", "x{1,{2,3}}y", "{x}", "{}", "a{,b}",
            "{a,b}{1..3}", "py{2.{5..7},3.{2,3}}", "{-05..5..5}", "{G..b}", "plain.tar"]


def test_brace_notation_expands_as_braceexpand_does():
    braceexpand = pytest.importorskip("braceexpand").braceexpand
    for pattern in PATTERNS:
        assert wdsmod.expand_braces(pattern) == list(braceexpand(pattern)), pattern
    for bad in ("{a,b", "a}b", "{1{2,3}"):
        with pytest.raises(ValueError, match="Unbalanced braces"):
            wdsmod.expand_braces(bad)


def test_lists_globs_and_braces_expand_in_order(tmp_path):
    shards, _, _ = write_dataset(tmp_path, sizes=(2, 2, 2, 2))
    folder = str(tmp_path)
    assert WebDatasetGenerator(folder + "/train-*.tar", **COMMON).paths == shards  # sorted
    braces = WebDatasetGenerator(folder + "/train-{003,{000..001}}.tar", **COMMON)
    assert braces.paths == [shards[3], shards[0], shards[1]]  # braceexpand's order
    assert braces.keys == ["00006", "00007", "00000", "00001", "00002", "00003"]
    mixed = WebDatasetGenerator([shards[2], folder + "/train-00[01].tar",
                                 folder + "/train-{003,002}.tar", "file://" + shards[0]],
                                **COMMON)
    assert mixed.paths == [shards[2], shards[0], shards[1], shards[3], shards[2], shards[0]]
    literal = tmp_path / "odd{1,2}.tar"  # a file named like a pattern is that file
    literal.write_bytes(open(shards[1], "rb").read())
    assert WebDatasetGenerator(str(literal), **COMMON).paths == [str(literal)]


def test_shards_that_are_missing_or_not_paths_are_refused(tmp_path):
    shards, _, _ = write_dataset(tmp_path, sizes=(2,))
    with pytest.raises(FileNotFoundError, match=r"WebDataset shard not found: .*train-001"):
        WebDatasetGenerator(str(tmp_path / "train-{000..001}.tar"), **COMMON)
    with pytest.raises(FileNotFoundError, match=r"No WebDataset shard matches the pattern "
                                                r".*nothing-\*\.tar\."):
        WebDatasetGenerator([shards[0], str(tmp_path / "nothing-*.tar")], **COMMON)
    with pytest.raises(ValueError, match=r"`shards` must be a WebDataset shard path or URL, "
                                         r"a glob pattern, a brace pattern or a non-empty "
                                         r"list of them\. Received: shards=\[\]"):
        WebDatasetGenerator([], **COMMON)
    with pytest.raises(TypeError, match=r"Received: shards=\[.*, 3\]\. 3 is not a path"):
        WebDatasetGenerator([shards[0], 3], **COMMON)
    with pytest.raises(ValueError, match=r"'.*train-\{000\.tar' has unbalanced braces"):
        WebDatasetGenerator(str(tmp_path / "train-{000.tar"), **COMMON)


def test_arguments_are_checked_before_any_shard_is_read(tmp_path):
    gone = str(tmp_path / "gone.tar")
    for kwargs, error, message in [
            (dict(image_key=""), ValueError, r"`image_key` must be a field name"),
            (dict(image_key="jpg;"), ValueError, r"Received: image_key='jpg;'"),
            (dict(label_key=3), TypeError, r"`label_key` must be a field name"),
            (dict(label_key=None), ValueError, r"`label_key` must be a field name \('cls'\) "
                                               r"with label_mode='int'.*label_mode=None"),
            (dict(label_mode="mask"), ValueError, r"`label_mode` must be one of 'int', "
                                                  r"'categorical', 'binary', 'raw', None"),
            (dict(on_error="ignore"), ValueError, r"`on_error` must be one of"),
            (dict(labels=[0, 1]), TypeError, r"takes its labels from the `label_key` field"),
            (dict(batch_sise=3), TypeError, r"batch_sise"),
            (dict(crop_to_aspect_ratio=True, pad_to_aspect_ratio=True), ValueError,
             "Only one of")]:
        with pytest.raises(error, match=message):
            WebDatasetGenerator(gone, **kwargs, **COMMON)


# ----- bad shards: errors naming the shard and the key
def write_tar(path, members):
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            tar_member(tar, name, data)
    return str(path)


def test_bad_samples_are_errors_naming_the_shard_and_the_key(tmp_path):
    good = [("a.png", png(0)), ("a.cls", b"0")]
    cases = [
        ([*good, ("b.cls", b"1")], r"Sample 'b' of .*missing-image\.tar has no member for "
                                   r"image_key='jpg;png;jpeg': its members are b\.cls\. "
                                   r"Pass image_key= naming the field of its image\."),
        ([*good, ("b.png", png(1)), ("b.txt", b"dog")],
         r"Sample 'b' of .*missing-label\.tar has no member for label_key='cls': its "
         r"members are b\.png, b\.txt\. Pass label_key='txt', or label_mode=None"),
        ([*good, ("b.png", png(1)), ("b.cls", b"dog")],
         r"Member b\.cls of .*not-int\.tar \(sample 'b'\) must hold an integer class id "
         r"as text, as webdataset's 'cls' field does\. Received: b'dog'"),
        ([*good, ("b.png", png(1)), ("b.cls", b"1"), ("a.json", b"{}")],
         r"Sample 'a' of .*split-key\.tar is not in one piece: member a\.json comes after "
         r"members of other samples \(a\.png, a\.cls came first\)"),
        ([*good, ("a.PNG", png(1))],
         r"Sample 'a' of .*two-fields\.tar has two members of field 'png': a\.png and "
         r"a\.PNG"),
        ([("a.png", png(0)), ("a.cls", b"\xff")],
         r"Member a\.cls of .*not-utf8\.tar \(sample 'a'\) must hold UTF-8 text"),
    ]
    names = ["missing-image", "missing-label", "not-int", "split-key", "two-fields",
             "not-utf8"]
    for name, (members, message) in zip(names, cases):
        path = write_tar(tmp_path / f"{name}.tar", members)
        with pytest.raises(ValueError, match=message):
            WebDatasetGenerator(path, **COMMON)
    # webdataset refuses the same field twice as well
    with pytest.raises(ValueError, match="duplicate file name"):
        list(wds.WebDataset(str(tmp_path / "two-fields.tar"), shardshuffle=False))
    path = write_tar(tmp_path / "label.tar", [("a.png", png(0)), ("a.label", b"0")])
    with pytest.raises(ValueError, match=r"`label_key` must name a field holding a class id "
                                         r".*Received: label_key's field 'label' \(a\.label "
                                         r"of .*label\.tar\)"):
        WebDatasetGenerator(path, label_key="label", **COMMON)
    path = write_tar(tmp_path / "json.tar", [("a.png", png(0)), ("a.json", b"[1]")])
    with pytest.raises(ValueError, match=r"a\.json of .*json\.tar \(sample 'a'\) must hold "
                                         r"a JSON class id \(3\) or class name"):
        WebDatasetGenerator(path, label_key="json", **COMMON)
    path = write_tar(tmp_path / "ids.tar", [("a.png", png(0)), ("a.cls", b"5")])
    with pytest.raises(ValueError, match=r"label 5 at .*ids\.tar#a .*Pass `num_classes` or "
                                         r"`class_names`"):
        WebDatasetGenerator(path, class_names=["cat", "dog"], **COMMON)


def test_truncated_corrupt_compressed_and_empty_shards_are_named(tmp_path):
    shards, _, _ = write_dataset(tmp_path, sizes=(3,))
    data = open(shards[0], "rb").read()
    end = max(m.offset_data + m.size for m in tarfile.open(shards[0]))
    header = end + (-end) % 512  # no member after it: the end-of-archive marker
    members = tarfile.open(shards[0]).getmembers()
    cases = {  # cut: in an image's data, at a member's end, in a header, a bad header
        "in-data": (data[:members[-1].offset_data + 3], r"is truncated: it ends inside"),
        "no-end": (data[:header], r"is truncated: it ends at byte \d+, where a tar header "
                                  r"or the end-of-archive marker should be"),
        "in-header": (data[:members[3].offset + 100], r"is truncated: it ends at byte"),
        "bad-header": (data[:members[3].offset] + b"\x01" * 512 + data[members[3].offset + 512:],
                       r"is corrupt: the block at byte \d+ is neither a tar header"),
        "gzip": (__import__("gzip").compress(data), r"is gzip-compressed: WebDatasetGenerator "
                                                     r"reads each image by its byte offset"),
        "not-tar": (b"just some text\n" * 100, r"is not a tar file, or it is corrupt"),
        "empty": (b"", r"is not a tar file, or it is corrupt \(tarfile: empty file\)"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / f"{name}.tar"
        path.write_bytes(content)
        with pytest.raises(ValueError, match=rf"^{re.escape(str(path))} {message}"):
            WebDatasetGenerator([shards[0], str(path)], **COMMON)
    nothing = write_tar(tmp_path / "nothing.tar", [("README", b"x")])
    with pytest.warns(UserWarning, match=r"nothing\.tar holds no sample"):
        assert WebDatasetGenerator([shards[0], nothing], **COMMON).num_samples == 3
    with pytest.warns(UserWarning), pytest.raises(ValueError, match=r"No samples in "
                                                                    r".*nothing\.tar"):
        WebDatasetGenerator(nothing, **COMMON)


def test_an_undecodable_image_is_an_error_or_skipped_by_its_name(tmp_path):
    members = []
    for k in range(6):
        members += [(f"{k}.png", png(k) if k != 2 else b"not an image"),
                    (f"{k}.cls", str(k % 2).encode())]
    path = write_tar(tmp_path / "bad.tar", members)
    gen = WebDatasetGenerator(path, batch_size=6, shuffle=False, **COMMON)
    with pytest.raises(ValueError, match=r"bad\.tar#2"):
        gen[0]
    skipping = WebDatasetGenerator(path, batch_size=6, shuffle=False, on_error="skip",
                                   seed=0, **COMMON)
    with pytest.warns(UserWarning, match="Skipping an undecodable image"):
        x, y = skipping[0]
    assert skipping.skipped == [f"{path}#2"]
    np.testing.assert_array_equal(y, [0, 1, 0, 1, 0, 1])
    stand_in = [k for k in (0, 4) if np.array_equal(x[2], x[k])]
    assert stand_in  # another sample of class 0
    assert skipping.validate() == [f"{path}#2"]


# ----- remote shards, copies, worker processes
@pytest.fixture
def memory_root():
    root = f"memory://kg-wds-{uuid.uuid4().hex[:8]}"
    yield root
    fs = fsspec.filesystem("memory")
    base = "/" + root.split("://", 1)[1]
    if fs.exists(base):
        fs.rm(base, recursive=True)


def upload(paths, root):
    fs = fsspec.filesystem("memory")
    urls = []
    for path in paths:
        url = f"{root}/{os.path.basename(path)}"
        fs.pipe(url, open(path, "rb").read())
        urls.append(url)
    return urls


def test_errors_in_remote_shards_name_the_url(tmp_path, memory_root):
    shards, _, _ = write_dataset(tmp_path, sizes=(3,))
    fs = fsspec.filesystem("memory")
    url = memory_root + "/cut.tar"
    fs.pipe(url, open(shards[0], "rb").read()[:-10240])
    with pytest.raises(ValueError, match=rf"^{memory_root}/cut\.tar is truncated"):
        WebDatasetGenerator(url, **COMMON)
    fs.pipe(url, write_dataset_bytes([("k.png", png(0)), ("k.cls", b"x")]))
    with pytest.raises(ValueError, match=rf"{memory_root}/cut\.tar \(sample 'k'\)"):
        WebDatasetGenerator(url, **COMMON)
    with pytest.raises(FileNotFoundError, match=rf"WebDataset shard not found: "
                                                rf"{memory_root}/gone\.tar"):
        WebDatasetGenerator(memory_root + "/{cut,gone}.tar", **COMMON)


def write_dataset_bytes(members):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members:
            tar_member(tar, name, data)
    return buffer.getvalue()


def test_a_copy_removed_by_another_process_is_fetched_again(tmp_path, memory_root):
    shards, _, _ = write_dataset(tmp_path, sizes=(3, 3))
    urls = upload(shards, memory_root)
    cache = RemoteCache(tmp_path / "cache")
    gen = WebDatasetGenerator(urls, remote_cache=cache, batch_size=4, seed=2, **COMMON)
    assert all(p.startswith(str(tmp_path / "cache")) for p in gen.local_paths)
    assert gen.file_paths[0] == f"{urls[0]}#00000"
    expected = batches(gen)
    cache.clear()  # what another process's size bound does
    again = pickle.loads(pickle.dumps(gen))  # as a worker process: no file open yet
    assert_same(batches(again), expected)
    assert all(os.path.exists(p) for p in again.local_paths)
    again_index = WebDatasetGenerator(urls, remote_cache=cache, batch_size=4, seed=2,
                                      **COMMON)
    assert_same(batches(again_index), expected)


def test_a_file_cache_gives_the_same_batches_and_follows_the_shards(tmp_path):
    shards, _, _ = write_dataset(tmp_path, sizes=(3, 3))
    plain = WebDatasetGenerator(shards, batch_size=4, seed=2, cache=None, **COMMON)
    path = str(tmp_path / "decoded.cache")
    cached = WebDatasetGenerator(shards, batch_size=4, seed=2, cache=path, **COMMON)
    expected = batches(plain)
    assert_same(batches(cached), expected)
    key = cached.loader.cache.key
    assert WebDatasetGenerator(shards, cache=path, **COMMON).loader.cache.key == key
    os.utime(shards[1], ns=(1, 1))
    with pytest.warns(UserWarning, match="was made for other files or settings; rebuilding"):
        assert WebDatasetGenerator(shards, cache=path, **COMMON).loader.cache.key != key


def test_state_resumes_across_shards(tmp_path):
    shards, _, _ = write_dataset(tmp_path, sizes=(4, 4, 4))
    gen = WebDatasetGenerator(shards, batch_size=3, seed=5, **COMMON)
    gen.on_epoch_end()
    state = gen.get_state()
    fresh = WebDatasetGenerator(shards, batch_size=3, seed=0, **COMMON)
    fresh.set_state(state)
    assert_same([fresh[i] for i in range(len(fresh))], [gen[i] for i in range(len(gen))])


def test_worker_processes_give_the_batches_of_one_worker(tmp_path, memory_root):
    shards, _, _ = write_dataset(tmp_path, sizes=(5, 5, 4))
    urls = upload(shards, memory_root)
    one = WebDatasetGenerator(shards, batch_size=4, seed=3, **COMMON)
    gen = WebDatasetGenerator(urls, batch_size=4, seed=3, workers=2,
                              use_multiprocessing=True, **COMMON)
    fsspec.filesystem("memory").rm(urls)  # the workers read the local copies only
    try:
        for _ in range(2):
            assert_same([gen[i] for i in range(len(gen))], [one[i] for i in range(len(one))])
            gen.on_epoch_end()
            one.on_epoch_end()
    finally:
        gen.on_epoch_end()


# ----- the contract of every generator (tests/test_contract.py), over shards
@pytest.fixture
def factory(tmp_path):
    shards, _, _ = write_dataset(tmp_path, sizes=(7, 6, 4), flat=True, txt=False)

    def make(**kwargs):
        kwargs.setdefault("batch_size", 5)
        return WebDatasetGenerator(shards, **COMMON, **kwargs)
    return make


test_length_and_bounds = contract.test_length_and_bounds
test_every_sample_once_per_epoch_with_its_label = \
    contract.test_every_sample_once_per_epoch_with_its_label
test_order_is_a_function_of_seed_and_epoch = contract.test_order_is_a_function_of_seed_and_epoch
test_shuffle_false_keeps_source_order = contract.test_shuffle_false_keeps_source_order
test_pickle_round_trip_keeps_epoch_and_batches = \
    contract.test_pickle_round_trip_keeps_epoch_and_batches
test_seed_none_draws_one_seed_and_shows_it = contract.test_seed_none_draws_one_seed_and_shows_it
test_state_resumes_in_a_fresh_generator = contract.test_state_resumes_in_a_fresh_generator
test_state_of_other_data_is_refused = contract.test_state_of_other_data_is_refused


# ----- max_record_bytes: members above it are refused from their headers
def test_members_above_max_record_bytes_are_refused_naming_the_shard_and_member(tmp_path):
    image, label = png(0), b"1" + b" " * 999  # a JSON label of 1000 bytes
    path = write_tar(tmp_path / "big.tar", [("a.png", image), ("a.json", label)])
    with pytest.raises(ValueError, match=rf"^Member a\.png of {re.escape(path)} \(sample 'a', "
                                         rf"the image at byte 512\) declares {len(image):,} "
                                         rf"bytes, more than max_record_bytes=100 bytes \(a "
                                         r"guard against decompression bombs.*\)\. Pass a "
                                         r"larger `max_record_bytes`, or max_record_bytes="
                                         r"None, if records are meant to be that large\.$"):
        WebDatasetGenerator(path, label_key="json", max_record_bytes=100, **COMMON)
    label_at = 512 + len(image) + (-len(image)) % 512 + 512
    with pytest.raises(ValueError, match=rf"^Member a\.json of {re.escape(path)} \(sample "
                                         rf"'a'\), the label at byte {label_at}, declares "
                                         rf"1,000 bytes, more than max_record_bytes=999 "):
        WebDatasetGenerator(path, label_key="json", max_record_bytes=999, **COMMON)
    for limit in (1000, None):
        gen = WebDatasetGenerator(path, label_key="json", max_record_bytes=limit,
                                  label_mode="raw", **COMMON)
        assert gen.labels.tolist() == [1]
    long = "x" * 200 + ".png"  # a pax header holds its name
    with tarfile.open(tmp_path / "pax.tar", "w", format=tarfile.PAX_FORMAT) as tar:
        tar_member(tar, long.replace(".png", ".cls"), b"0")
    pax = (tmp_path / "pax.tar").read_bytes()
    size = int(pax[124:136].rstrip(b"\0"), 8)  # the pax header's own size
    with pytest.raises(ValueError, match=rf"^The tar header at byte 0 of .*pax\.tar \(a pax "
                                         rf"header, which tarfile reads whole\) declares "
                                         rf"{size} bytes, more than max_record_bytes=100 "):
        WebDatasetGenerator(str(tmp_path / "pax.tar"), max_record_bytes=100, **COMMON)


def test_a_json_label_nested_too_deep_is_a_value_error_naming_the_member(tmp_path):
    path = write_tar(tmp_path / "deep.tar", [("a.png", png(0)),
                                            ("a.json", b"[" * 100_000 + b"]" * 100_000)])
    with pytest.raises(ValueError, match=r"Member a\.json of .*deep\.tar \(sample 'a'\) must "
                                         r"hold a JSON class id \(3\) or class name"):
        WebDatasetGenerator(path, label_key="json", **COMMON)
