"""Label modes: what y looks like for each, on arrays and through the other generators."""

import os
import sqlite3

import numpy as np
import pytest

import kerasgen as kg

X = np.zeros((6, 2), dtype="float32")


def first_y(**kwargs):
    return kg.ArrayGenerator(X, batch_size=6, shuffle=False, **kwargs)[0][1]


def test_int_and_categorical():
    y = np.array([0, 2, 1, 2, 0, 1])
    np.testing.assert_array_equal(first_y(y=y, label_mode="int"), y)
    assert first_y(y=y, label_mode="int").dtype == np.int32
    onehot = first_y(y=y, label_mode="categorical")
    assert onehot.dtype == np.float32 and onehot.shape == (6, 3)
    np.testing.assert_array_equal(onehot.argmax(1), y)
    assert first_y(y=y, label_mode="categorical", num_classes=5).shape == (6, 5)


def test_one_hot_input_is_accepted_as_categorical():
    y = np.eye(3)[[0, 2, 1, 2, 0, 1]]
    np.testing.assert_array_equal(first_y(y=y, label_mode="categorical"), y)


def test_string_labels_map_to_sorted_class_names():
    y = ["dog", "cat", "dog", "eel", "cat", "cat"]
    gen = kg.ArrayGenerator(X, np.array(y), batch_size=6, shuffle=False, label_mode="int")
    assert gen.class_names == ["cat", "dog", "eel"]
    assert gen[0][1].tolist() == [1, 0, 1, 2, 0, 0]
    assert gen.labels.tolist() == [1, 0, 1, 2, 0, 0]


def test_binary():
    y = np.array([0, 1, 1, 0, 1, 0])
    out = first_y(y=y, label_mode="binary")
    assert out.shape == (6, 1) and out.dtype == np.float32
    np.testing.assert_array_equal(out[:, 0], y)
    with pytest.raises(ValueError, match="at most two classes"):
        first_y(y=np.arange(6) % 3, label_mode="binary")


def test_multi_label_from_matrix_and_lists():
    matrix = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0], [1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(first_y(y=matrix, label_mode="multi_label"), matrix)
    lists = [["a", "c"], [], ["a", "b", "c"], ["b"], ["a"], ["c"]]
    gen = kg.ArrayGenerator(X, np.array(lists, dtype=object), batch_size=6, shuffle=False,
                            label_mode="multi_label")
    np.testing.assert_array_equal(gen[0][1], matrix)
    assert gen.class_names == ["a", "b", "c"]
    assert gen.labels is None


def test_multi_label_lists_through_array_generator():
    gen = kg.ArrayGenerator(np.zeros((4, 1)), [["a"], ["b", "c"], [], ["c"]],
                            label_mode="multi_label", batch_size=4, shuffle=False)
    assert gen[0][1].tolist() == [[1, 0, 0], [0, 1, 1], [0, 0, 0], [0, 0, 1]]
    pairs = kg.ArrayGenerator(np.zeros((2, 1)), [["a", "b"], ["b", "c"]],
                              label_mode="multi_label", batch_size=2, shuffle=False)
    assert pairs[0][1].tolist() == [[1, 1, 0], [0, 1, 1]]


def test_names_and_messages_hold_plain_python_values():
    gen = kg.ArrayGenerator(X, np.array(["b", "a", "b", "a", "a", "b"]), label_mode="int")
    assert repr(gen.class_names) == "['a', 'b']"
    with pytest.raises(ValueError, match=r"Received: 0.5 at sample 0"):
        first_y(y=np.array([0.5, 1, 1, 1, 0, 1]), label_mode="int")


def test_raw_and_none():
    y = np.linspace(0, 1, 12).reshape(6, 2).astype("float32")
    np.testing.assert_array_equal(first_y(y=y), y)  # raw is the array default
    batch = kg.ArrayGenerator(X, y, batch_size=6, label_mode=None)[0]
    np.testing.assert_array_equal(batch, X)  # x alone, as Keras's unlabeled datasets
    ints = kg.ArrayGenerator(X, np.array([3, 1, 0, 2, 2, 1]), batch_size=6)
    assert ints.labels.tolist() == [3, 1, 0, 2, 2, 1]  # raw integer targets still give labels


@pytest.mark.parametrize("bad,match", [
    (np.array([0, 1, np.nan, 1, 0, 1]), "NaN"),
    (np.array([0, 1, 7, 1, 0, 1]), r"\[0, 3\)"),
    (np.array([0, 1, -1, 1, 0, 1]), "out of range"),
    (np.array([0.5, 1, 1, 1, 0, 1]), "must be integers"),
])
def test_bad_class_labels_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        first_y(y=bad, label_mode="int", num_classes=3 if "3" in match else None)


def test_nan_or_infinite_raw_targets_are_refused():
    with pytest.raises(ValueError, match="NaN at sample 2"):
        first_y(y=np.array([0.0, 1.0, np.nan, 1.0, 0.0, 1.0]))
    with pytest.raises(ValueError, match="must not be NaN or infinite. Received: -inf at "
                                         "sample 4"):
        first_y(y=np.array([0.0, 1.0, 2.0, 1.0, -np.inf, 1.0]))


def test_folder_and_csv_default_to_int_as_keras(image_folder, csv_file):
    folder = kg.ImageFolderGenerator(image_folder, image_size=(4, 4), batch_size=4)
    csv = kg.CSVGenerator(csv_file, image_size=(4, 4), batch_size=4)
    for gen in (folder, csv):
        assert gen.class_names == ["cat", "dog", "fox"]
        y = gen[0][1]
        assert y.shape == (4,) and y.dtype == np.int32
        assert gen.label_mode == "int"


def test_integer_and_boolean_labels_from_databases_and_frames(tmp_path):
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (a REAL, b REAL, label INTEGER)")
        db.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, -i, i % 2) for i in range(6)])
    gen = kg.SQLGenerator(path, "SELECT a, b, label FROM t", x_col=["a", "b"],
                          label_mode="int", shuffle=False)
    assert gen[0][1].tolist() == [0, 1, 0, 1, 0, 1]
    flags = kg.ArrayGenerator(np.zeros((4, 1)), np.array([True, False, True, True]),
                              label_mode="binary", shuffle=False)
    assert flags[0][1][:, 0].tolist() == [1, 0, 1, 1]


def named(gen):
    """The class of each sample read back through the public API."""
    return [gen.class_names[k] for k in gen.labels]


class Records(kg.Generator):
    def __init__(self, labels, **kwargs):
        super().__init__(num_samples=len(labels), labels=labels, **kwargs)

    def load_sample(self, index):
        return np.zeros(2, "float32")


def test_gen_labels_are_the_labels_given_as_class_ids(image_folder, csv_file):
    """`labels=` is one label per sample as given; `gen.labels` the same labels as class
    ids: class_names[labels[i]] is the name given, or for an integer id that id's name."""
    names = ["dog", "cat", "owl", "cat", "dog", "owl"]
    ids = [2, 0, 1, 0, 2, 1]
    for mode in ("int", "categorical"):
        for gen in (kg.ArrayGenerator(X, names, label_mode=mode), Records(names),
                    kg.ArrayGenerator(X, names, label_mode=mode,
                                      class_names=["owl", "dog", "cat"])):
            assert named(gen) == names
        for gen in (kg.ArrayGenerator(X, ids, label_mode=mode), Records(ids),
                    kg.ArrayGenerator(X, np.eye(3)[ids], label_mode="categorical")):
            assert gen.labels.tolist() == ids and named(gen) == [str(k) for k in ids]
        given = kg.ArrayGenerator(X, ids, label_mode=mode, class_names=["a", "b", "c"])
        assert given.labels.tolist() == ids and named(given) == ["c", "a", "b", "a", "c", "b"]
    ordered = kg.ArrayGenerator(X, names, label_mode="int", batch_size=6, shuffle=False)
    assert ordered[0][1].tolist() == ordered.labels.tolist()  # the ids it trains on
    assert kg.ArrayGenerator(X, [["a"], ["b"]] * 3, label_mode="multi_label").labels is None

    inferred = kg.ImageFolderGenerator(image_folder, image_size=(4, 4))
    folders = [os.path.relpath(p, image_folder).split(os.sep)[0] for p in inferred.file_paths]
    assert named(inferred) == folders and set(folders) == {"cat", "dog", "fox"}
    count = len(inferred.file_paths)
    listed = ["b", "a", "c"] * (count // 3) + ["a"] * (count % 3)
    assert named(kg.ImageFolderGenerator(image_folder, labels=listed,
                                         image_size=(4, 4))) == listed
    listed_ids = [k % 3 for k in range(count)]
    by_id = kg.ImageFolderGenerator(image_folder, labels=listed_ids, image_size=(4, 4))
    assert by_id.labels.tolist() == listed_ids

    table = kg.CSVGenerator(csv_file, image_size=(4, 4))
    rows = [line.split(",")[1] for line in csv_file.read_text().splitlines()[1:]]
    assert named(table) == rows
    id_file = csv_file.with_name("ids.csv")
    id_file.write_text("filename,id\n" + "".join(
        f"{path},{k}\n" for path, k in zip(table.file_paths, listed_ids)))
    by_id = kg.CSVGenerator(id_file, y_col="id", image_size=(4, 4))
    assert by_id.labels.tolist() == listed_ids
    assert named(by_id) == [str(k) for k in listed_ids]
