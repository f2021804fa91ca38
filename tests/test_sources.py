"""kerasgen.sources: a new source is one class; sources compose (several CSV files as one
table, concatenation, zip) and train through fit; a generator over another's source
makes its batches byte for byte."""

import os

import cv2
import keras
import numpy as np
import pytest

import kerasgen as kg

from .conftest import write_image


class Records:
    """A source over a list of (encoded PNG bytes, label) records: the whole class."""

    def __init__(self, records):
        self.records = records
        self.labels = [label for _, label in records]
        self.class_names = None

    def __len__(self):
        return len(self.records)

    def describe(self, index):
        return f"record {index}"

    def load(self, index):
        data = np.frombuffer(self.records[index][0], np.uint8)
        return cv2.imdecode(data, cv2.IMREAD_COLOR)[..., ::-1]


def png_records(n=24, size=8):
    rng = np.random.default_rng(0)
    records = []
    for i in range(n):
        label = ["round", "square"][i % 2]
        image = np.full((size, size, 3), 40 if label == "round" else 200, np.uint8)
        image += rng.integers(0, 20, image.shape, dtype=np.uint8)
        records.append((cv2.imencode(".png", image)[1].tobytes(), label))
    return records


def tiny_model(inputs, classes=2):
    x = keras.layers.Flatten()(inputs) if not isinstance(inputs, list) else (
        keras.layers.Concatenate()([keras.layers.Flatten()(i) for i in inputs]))
    outputs = keras.layers.Dense(classes, activation="softmax")(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def test_a_new_source_is_one_class_and_trains_through_fit():
    gen = kg.Generator(source=Records(png_records()), label_mode="int", batch_size=8, seed=3)
    assert gen.num_samples == 24 and len(gen) == 3
    assert gen.class_names == ["round", "square"]
    assert gen.labels.tolist()[:4] == [0, 1, 0, 1]
    x, y = gen[0]
    assert x.shape == (8, 8, 8, 3) and x.dtype == np.float32 and y.shape == (8,)
    # the label of each row is its record's: dark images are "round" (0)
    plan = gen.epoch_plan()[:8]
    assert y.tolist() == [i % 2 for i in plan]
    assert ((x.mean(axis=(1, 2, 3)) > 120) == (y == 1)).all()
    history = tiny_model(keras.Input((8, 8, 3))).fit(gen, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and gen.epoch == 2


def test_batches_of_a_source_are_those_of_its_generator(image_folder):
    common = dict(image_size=(8, 8), batch_size=5, seed=4, cache=None)
    gen = kg.ImageFolderGenerator(image_folder, **common)
    again = kg.Generator(source=gen.source, batch_size=5, seed=4, label_mode="int")
    assert len(again) == len(gen)
    for epoch in range(2):
        for i in range(len(gen)):
            (xa, ya), (xb, yb) = gen[i], again[i]
            np.testing.assert_array_equal(xa, xb)
            np.testing.assert_array_equal(ya, yb)
        gen.on_epoch_end()
        again.on_epoch_end()


def test_source_errors_name_what_is_wrong():
    with pytest.raises(TypeError, match="`source` must be a kerasgen source.*has no "
                                        "describe, load, labels, class_names"):
        kg.Generator(source=[1, 2, 3])
    with pytest.raises(TypeError, match="pass no `num_samples` or `labels` with it"):
        kg.Generator(3, source=Records(png_records(4)))
    with pytest.raises(TypeError, match="needs `source`.*or `num_samples`"):
        kg.Generator()
    arrays = kg.sources.ArraySource(np.zeros((5, 2)), [0, 1, 0, 1, 0])
    with pytest.raises(ValueError, match="same number of samples. Received lengths"):
        kg.sources.zip(arrays, kg.sources.ArraySource(np.zeros((4, 2))))
    with pytest.raises(ValueError, match="Every part of a concatenation must have labels"):
        kg.sources.concatenate(arrays, kg.sources.ArraySource(np.zeros((4, 2))))


def _csv(path, rows):
    path.write_text("filename,label\n" + "".join(f"{f},{label}\n" for f, label in rows))
    return path


@pytest.fixture
def split_csvs(tmp_path, image_folder):
    """The folder's images listed in two CSV files (one per folder, relative paths)."""
    rows = [(str(p.relative_to(image_folder)), p.relative_to(image_folder).parts[0])
            for p in sorted(image_folder.rglob("*")) if p.suffix in (".png", ".jpg")]
    _csv(image_folder / "all.csv", rows)
    other = tmp_path / "more"
    other.mkdir()
    for k, (name, label) in enumerate(rows[6:]):  # the second part in another folder
        write_image(str(other / name), value=10 * (k + 6), seed=k + 6)
    first = _csv(image_folder / "part-1.csv", rows[:6])
    second = _csv(other / "part-2.csv", rows[6:])
    return first, second


def test_several_csv_files_read_as_one_table(split_csvs, image_folder):
    first, second = split_csvs
    common = dict(image_size=(8, 8), batch_size=4, shuffle=False, cache=None)
    parts = kg.CSVGenerator([first, second], **common)
    whole = kg.CSVGenerator(image_folder / "all.csv", **common)
    assert parts.num_samples == whole.num_samples == 12
    assert parts.class_names == whole.class_names == ["cat", "dog", "fox"]
    np.testing.assert_array_equal(parts.labels, whole.labels)
    # file names are relative to their own CSV file's folder; rows named by their file
    assert parts.file_paths[6].startswith(str(second.parent))
    assert parts.describe_sample(0).endswith(f"(line 2 of {first})")
    assert parts.describe_sample(6).endswith(f"(line 2 of {second})")
    for i in range(len(parts)):
        np.testing.assert_array_equal(parts[i][1], whole[i][1])
    # a glob pattern reads the matching files, sorted
    globbed = kg.CSVGenerator(str(image_folder / "part-*.csv"), **common)
    assert globbed.num_samples == 6
    with pytest.raises(FileNotFoundError, match=r"a pattern no file matches"):
        kg.CSVGenerator(str(image_folder / "nothing-*.csv"), **common)


def test_csv_parts_split_and_train_alike(split_csvs, image_folder):
    first, second = split_csvs
    common = dict(image_size=(8, 8), batch_size=4, validation_split=0.25, seed=7, cache=None)
    train = kg.CSVGenerator([first, second], subset="training", **common)
    val = kg.CSVGenerator([first, second], subset="validation", **common)
    assert not set(train.file_paths) & set(val.file_paths)
    assert train.num_samples + val.num_samples == 12
    assert train.class_names == val.class_names == ["cat", "dog", "fox"]
    model = tiny_model(keras.Input((8, 8, 3)), classes=3)
    model.fit(train, validation_data=val, epochs=1, verbose=0)


def test_csv_parts_must_share_their_columns(tmp_path, image_folder):
    a = _csv(image_folder / "a.csv", [("cat/cat_0.png", "cat")])
    b = image_folder / "b.csv"
    b.write_text("path,label\ncat/cat_1.jpg,cat\n")
    with pytest.raises(ValueError, match=rf"same columns. Received: {b} has columns "
                                         r"\['path', 'label'\]"):
        kg.CSVGenerator([a, b], image_size=(8, 8))


def test_a_concatenation_keeps_one_class_mapping_and_trains(image_folder, split_csvs):
    first, second = split_csvs
    folder = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), cache=None)
    csv = kg.CSVGenerator(second, image_size=(8, 8), cache=None)
    assert csv.class_names == ["dog", "fox"] != folder.class_names  # ids differ
    both = kg.Generator(source=kg.sources.concatenate(folder, csv), label_mode="int",
                        batch_size=6, seed=2)
    assert both.num_samples == 12 + 6
    assert both.class_names == ["cat", "dog", "fox"]
    names = [both.class_names[i] for i in both.labels]
    assert names[:12] == [folder.class_names[i] for i in folder.labels]
    assert names[12:] == ["dog"] + ["fox"] * 5
    assert both.describe_sample(12) == csv.describe_sample(0)
    # every row is its part's image, with its part's label
    x, y = both[0]
    for row, index in enumerate(both.epoch_plan()[:6]):
        part, local = (folder, index) if index < 12 else (csv, index - 12)
        np.testing.assert_array_equal(x[row], part.source.load(int(local)))
        assert both.class_names[y[row]] == part.class_names[part.labels[local]]
    tiny_model(keras.Input((8, 8, 3)), classes=3).fit(both, epochs=1, verbose=0)


def test_a_zip_is_one_multi_input_sample_and_trains(image_folder):
    folder = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), cache=None,
                                     shuffle=False)
    meta = kg.sources.ArraySource(np.arange(12, dtype="float32").reshape(12, 1) * 2)
    zipped = kg.Generator(source=kg.sources.zip(folder, meta), label_mode="int",
                          batch_size=4, seed=5)
    assert zipped.class_names == folder.class_names
    (images, numbers), y = zipped[0]
    plan = zipped.epoch_plan()[:4]
    assert images.shape == (4, 8, 8, 3) and numbers.shape == (4, 1)
    np.testing.assert_array_equal(numbers[:, 0], plan * 2)
    np.testing.assert_array_equal(y, folder.labels[plan])
    named = kg.Generator(source=kg.sources.zip(image=folder, meta=meta), label_mode="int",
                         batch_size=4, seed=5)
    x, _ = named[0]
    assert sorted(x) == ["image", "meta"]
    np.testing.assert_array_equal(x["image"], images)
    model = tiny_model([keras.Input((8, 8, 3)), keras.Input((1,))], classes=3)
    model.fit(zipped, epochs=1, verbose=0)


def test_a_zip_augments_whole_samples():
    arrays = kg.sources.ArraySource(np.arange(8, dtype="float32").reshape(8, 1))
    doubled = kg.sources.ArraySource(np.arange(8, dtype="float32").reshape(8, 1) * 2)

    def augment(x, rng):  # sees the whole multi-input sample
        a, b = x
        return a + 100, b

    gen = kg.Generator(source=kg.sources.zip(arrays, doubled), augment=augment,
                       batch_size=4, shuffle=False)
    ((a, b),) = gen[0]  # unlabeled: x alone, a tuple of inputs kept wrapped
    np.testing.assert_array_equal(a[:, 0], np.arange(4) + 100)
    np.testing.assert_array_equal(b[:, 0], np.arange(4) * 2)


def test_a_concatenation_of_sources_is_reproducible_with_workers(image_folder):
    folder = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), cache=None)
    arrays = kg.sources.ArraySource(
        np.zeros((4, 8, 8, 3), np.uint8) + 255, ["cat", "dog", "dog", "fox"])
    batches = []
    for workers in (1, 3):
        gen = kg.Generator(source=kg.sources.concatenate(folder, arrays), label_mode="int",
                           batch_size=5, seed=9, workers=workers, prefetch=2)
        batches.append([gen[i] for i in range(len(gen))])
    for (xa, ya), (xb, yb) in zip(*batches):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)


def _request(indices, **overrides):
    return kg.sources.BatchRequest(np.asarray(indices), np.arange(len(indices)), **overrides)


def test_stages_run_without_a_generator(image_folder):
    """A source answers a data-only BatchRequest alone; BatchMaker makes a batch from a
    frozen slice of an order and a source: no stage needs a generator."""
    from kerasgen.labels import encoding as _labels
    from kerasgen.pipeline import making as _making
    from kerasgen.pipeline import order as _order
    from kerasgen.sources._image import ImageSource
    from kerasgen.loader import ImageLoader

    paths = sorted(str(p) for p in image_folder.rglob("*") if p.suffix in (".png", ".jpg"))
    source = ImageSource(ImageLoader(paths, (8, 8), "rgb", "bilinear"), rescale=0.5)
    x, masks = source.load_batch(_request([3, 0], rescale=0.5))
    assert masks is None and x.dtype == np.float32
    np.testing.assert_array_equal(x[1], source.load(0) * np.float32(0.5))
    # SMOTE's row 1: halfway between samples 0 and 3, before conversion
    blended, _ = source.load_batch(_request([3, 0], partners=np.array([-1, 3]),
                                            lams=np.array([0.0, 0.5]), dtype="uint8"))
    mid = np.rint((source.load(0).astype(np.float32) + source.load(3)) / 2)
    np.testing.assert_array_equal(blended[1], mid.astype(np.uint8))

    rows = kg.sources.ArraySource(np.arange(10, dtype="float32")[:, None])
    order = _order.EpochOrder(10, 4, shuffle=True, seed=3)
    maker = _making.BatchMaker(rows, _labels.encode(np.arange(10) % 2, "int"))
    x, y = maker.make(order.slice(1))
    np.testing.assert_array_equal(x[:, 0], order.epoch_plan()[4:8])
    np.testing.assert_array_equal(y, order.epoch_plan()[4:8] % 2)


def test_composed_sources_convert_each_part_as_its_own(image_folder):
    """rescale goes with each part: one shared by a concatenation's parts (and checked
    against the dtype), each part's own in a zip (features are not rescaled)."""
    common = dict(image_size=(8, 8), cache=None, shuffle=False, batch_size=4)
    scaled = kg.ImageFolderGenerator(image_folder, rescale=1 / 255, **common)
    both = kg.Generator(source=kg.sources.concatenate(scaled, scaled), label_mode="int",
                        batch_size=4, shuffle=False)
    assert both[0][0].max() <= 1.0
    np.testing.assert_array_equal(both[0][0], scaled[0][0])
    with pytest.raises(ValueError, match="`rescale` applies to float batches only"):
        kg.Generator(source=kg.sources.concatenate(scaled, scaled), label_mode="int",
                     dtype="uint8")
    raw = kg.ImageFolderGenerator(image_folder, **common)
    with pytest.raises(ValueError, match="must share one `rescale`"):
        kg.sources.concatenate(scaled, raw)
    meta = kg.sources.ArraySource(np.full((12, 1), 100.0))
    for augment in (None, lambda x, rng: x):
        zipped = kg.Generator(source=kg.sources.zip(scaled, meta), label_mode="int",
                              batch_size=4, shuffle=False, augment=augment)
        (images, numbers), _ = zipped[0]
        np.testing.assert_array_equal(images, scaled[0][0])
        assert (numbers == 100.0).all()


def test_composed_sources_refuse_what_would_make_a_label_wrong(image_folder, tmp_path):
    common = dict(image_size=(8, 8), cache=None)
    skipping = kg.ImageFolderGenerator(image_folder, on_error="skip", label_mode="raw",
                                       **common)
    with pytest.raises(ValueError, match="on_error='skip' replaces a bad image"):
        kg.Generator(source=kg.sources.concatenate(skipping, skipping), label_mode="raw")
    with pytest.raises(ValueError, match="Part 0 of the zip skips bad files"):
        kg.sources.zip(skipping, kg.sources.ArraySource(np.zeros((12, 1))))
    folder = kg.ImageFolderGenerator(image_folder, **common)
    with pytest.raises(ValueError, match="part 1's labels differ"):
        kg.sources.zip(folder, kg.sources.ArraySource(np.zeros((12, 1)), ["x"] * 12))
    with pytest.raises(ValueError, match="`class_names` must be the source's own"):
        kg.Generator(source=folder.source, class_names=["dog", "cat", "fox"],
                     label_mode="int")
    rows = [("cat/cat_0.png", 1, 0), ("dog/dog_0.png", 0, 1)]
    for name, header in (("ab.csv", "filename,a,b"), ("ba.csv", "filename,b,a")):
        (image_folder / name).write_text(header + "\n" + "".join(
            f"{f},{a},{b}\n" for f, a, b in rows))
    parts = [kg.CSVGenerator(image_folder / name, y_col=cols, label_mode="multi_label",
                             **common)
             for name, cols in (("ab.csv", ["a", "b"]), ("ba.csv", ["b", "a"]))]
    with pytest.raises(ValueError, match="must name their label columns alike"):
        kg.sources.concatenate(*parts)


def test_a_concatenation_keeps_each_parts_values(image_folder):
    small = kg.sources.ArraySource(np.full((3, 2), 7, np.uint8), [0, 1, 0])
    fine = kg.sources.ArraySource(np.full((3, 2), 0.7), [1, 0, 1])
    gen = kg.Generator(source=kg.sources.concatenate(small, fine), label_mode="int",
                       dtype=None, batch_size=6, shuffle=False)
    x, _ = gen[0]
    assert x.dtype == np.float64 and x[3:].tolist() == [[0.7, 0.7]] * 3


def test_smote_over_a_concatenation_reads_only_the_thumbnails_it_needs(image_folder):
    folder = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), cache=None)
    both = kg.sources.concatenate(folder, folder)
    rows = both.features[[0, 13]]
    assert rows.shape == (2, 8, 8, 3)
    np.testing.assert_array_equal(rows[0], folder.source.features[[0]][0])
    np.testing.assert_array_equal(rows[1], folder.source.features[[1]][0])
    assert len(folder.source.features.table) == 2  # samples 0 and 1 of the part only
    gen = kg.Generator(source=both, label_mode="int", batch_size=8, seed=1,
                       sampler=kg.samplers.SMOTE(k_neighbors=2))
    assert gen.num_samples == 24 and len(gen.epoch_plan().indices) > 24


def test_worker_processes_share_the_cache_and_keep_the_source_kind(image_folder):
    one = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), workers=1,
                                  use_multiprocessing=True)
    assert type(one.loader.cache).__name__ == "SharedMemoryCache"
    assert one.loader.processes == 1
    alone = kg.ImageFolderGenerator(image_folder, image_size=(8, 8))
    assert type(alone.loader.cache).__name__ == "MemoryCache"
    shared = kg.Generator(source=alone.source, label_mode="int", workers=2,
                          use_multiprocessing=True)
    assert type(shared.source) is type(alone.source) and shared.source is not alone.source
    assert type(shared.source.loader.cache).__name__ == "SharedMemoryCache"


@pytest.mark.parametrize("form", [list, tuple, np.asarray, "names"])
def test_a_concatenation_maps_every_form_of_labels_through_names_in_fit(form):
    """Parts whose labels are class ids of class_names in different orders: each sample
    keeps its class, whatever form the ids take (issue 36: a list of ids was merged
    raw, so one part's dogs became cats). Checked for every sample seen in model.fit."""
    ids_a, ids_b = [0, 0, 1, 1, 0, 1], [1, 0, 0, 1, 1, 0]
    names_a, names_b = ["dog", "cat"], ["cat", "dog"]

    def labels(ids, names):
        return [names[i] for i in ids] if form == "names" else form(ids)

    # x carries the sample's true class in feature 0 (0: cat, 1: dog), its row in feature 1
    truth_a = [names_a[i] == "dog" for i in ids_a]
    truth_b = [names_b[i] == "dog" for i in ids_b]
    x_a = np.stack([truth_a, np.arange(6)], 1).astype("float32")
    x_b = np.stack([truth_b, 6 + np.arange(6)], 1).astype("float32")
    part_a = kg.sources.ArraySource(x_a, labels=labels(ids_a, names_a), class_names=names_a)
    part_b = kg.sources.ArraySource(x_b, labels=labels(ids_b, names_b), class_names=names_b)
    gen = kg.Generator(source=kg.sources.concatenate(part_a, part_b), batch_size=4, seed=3,
                       label_mode="int")
    assert gen.class_names == ["cat", "dog"]
    seen = []

    class Recording(keras.Model):
        def train_step(self, data):
            x, y = data
            seen.append((x, y))
            return super().train_step(data)

    inputs = keras.Input((2,))
    model = Recording(inputs, keras.layers.Dense(2)(inputs))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    model.fit(gen, epochs=2, verbose=0)
    rows = np.concatenate([np.asarray(x) for x, _ in seen])
    ys = np.concatenate([np.asarray(y) for _, y in seen])
    assert len(rows) == 24 and sorted(rows[:12, 1]) == list(range(12))
    np.testing.assert_array_equal(ys, rows[:, 0].astype(int))  # every label right
    zipped = kg.sources.zip(part_a, kg.sources.ArraySource(
        x_a, labels=labels([1 - i for i in ids_a], ["cat", "dog"]), class_names=["cat", "dog"]))
    assert len(zipped) == 6  # the same labels, written with the other order: equal


def test_a_part_with_options_of_its_own_is_refused_not_dropped(image_folder):
    import albumentations as A

    flips = A.Compose([A.HorizontalFlip(p=1.0)])
    plain = kg.ImageFolderGenerator(image_folder, image_size=8)
    for options, named in (({"augment": flips}, "augment="),
                           ({"sample_weight": np.ones(12)}, "sample_weight="),
                           ({"sampler": kg.samplers.RandomOverSampler()}, "sampler=")):
        part = kg.ImageFolderGenerator(image_folder, image_size=8, **options)
        for compose in (kg.sources.concatenate, kg.sources.zip):
            with pytest.raises(ValueError, match=rf"Part 1 of the composition is a generator "
                                                 rf"with {named} of its own, which a "
                                                 r"composition would drop"):
                compose(plain, part)
    both = kg.Generator(source=kg.sources.concatenate(plain, plain), augment=flips,
                        sample_weight=np.ones(24), batch_size=24, shuffle=False)
    x, _, w = both[0]  # given to the generator over the composition: kept
    assert w.shape == (24,) and x.shape == (24, 8, 8, 3)


def test_duplicate_csv_rows_never_put_one_file_in_both_subsets(image_folder, tmp_path):
    rows = [f"{os.path.relpath(p, image_folder)},{os.path.basename(os.path.dirname(p))}"
            for p in sorted(str(q) for q in image_folder.rglob("*.png"))]
    table = tmp_path / "dup.csv"
    table.write_text("filename,label\n" + "\n".join(rows + rows[:4] + rows[:2]) + "\n")
    common = dict(directory=image_folder, image_size=8, validation_split=0.5, seed=1)
    with pytest.warns(UserWarning, match=r"6 rows name a file listed before \(.*line \d+.* "
                                         r"repeats .*line \d+.*\): each file's rows are put "
                                         r"in one subset"), pytest.warns(
            UserWarning, match="training subset .* has no sample of 1 class"):
        train = kg.CSVGenerator(table, subset="training", **common)
    with pytest.warns(UserWarning, match="name a file listed before"), pytest.warns(
            UserWarning, match="validation subset .* has no sample of 2 classes"):
        val = kg.CSVGenerator(table, subset="validation", **common)
    assert not set(train.file_paths) & set(val.file_paths)
    assert len(train.file_paths) + len(val.file_paths) == len(rows) + 6  # no row lost
