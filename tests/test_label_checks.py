"""Labels that would come out wrong with no error: split tables, generators of one fit that
disagree on classes, forgotten multi_label, numeric-looking labels, malformed CSV files,
symbolic-link loops."""

import json
import os
import sqlite3
import warnings

import keras
import numpy as np
import pytest

import kerasgen as kg
from kerasgen import cli

from .conftest import write_image


@pytest.fixture
def pics(tmp_path):
    for i in range(12):
        write_image(str(tmp_path / "pics" / f"{i}.png"), value=10 * i, height=4, width=4)
    return tmp_path / "pics"


def write_csv(path, header, cells, encoding="utf-8"):
    """A CSV of pics/<i>.png with one label cell (or several cells) per row."""
    lines = [header] + [f"pics/{i}.png,{c}" for i, c in enumerate(cells)]
    path.write_text("\n".join(lines) + "\n", encoding=encoding)
    return path


def build(csv, **kwargs):
    return kg.CSVGenerator(csv, image_size=(4, 4), **kwargs)


# ----------------------------------------------------------------- validation_split


def test_csv_split_is_seeded_stratified_disjoint_and_shares_the_classes(pics, tmp_path):
    labels = ["china"] * 6 + ["flower"] * 4 + ["gray"] * 2
    csv = write_csv(tmp_path / "all.csv", "filename,label", labels)
    common = dict(validation_split=0.25, seed=3, label_mode="int")
    train = build(csv, subset="training", **common)
    with pytest.warns(UserWarning, match="validation subset .* no sample of 1 class: 'gray'"):
        val = build(csv, subset="validation", **common)
    assert not set(train.file_paths) & set(val.file_paths)
    assert sorted(train.file_paths + val.file_paths) == sorted(build(csv).file_paths)
    assert np.bincount(val.labels, minlength=3).tolist() == [2, 1, 0]  # round(.25 * n)
    # 'gray' (2 rows) has none in validation, yet validation keeps training's ids
    assert val.class_names == train.class_names == ["china", "flower", "gray"]
    assert val.num_classes == 3
    for gen in (train, val):
        names = [gen.class_names[k] for k in gen.labels]
        rows = [int(os.path.basename(p)[:-4]) for p in gen.file_paths]
        assert names == [labels[r] for r in rows]
    with pytest.warns(UserWarning, match="no sample of 1 class: 'gray'"):
        again = build(csv, subset="validation", **common)
    assert again.file_paths == val.file_paths
    with pytest.raises(ValueError, match="`seed` must be given"):
        build(csv, validation_split=0.25, subset="training")
    with pytest.raises(ValueError, match="`subset` needs `validation_split`"):
        build(csv, subset="training", seed=1)


def test_sql_split_for_images_and_features(pics, tmp_path):
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (path TEXT, a REAL, kind TEXT)")
        db.executemany("INSERT INTO t VALUES (?, ?, ?)",
                       [(f"pics/{i}.png", float(i), "ab"[i < 9]) for i in range(12)])
    common = dict(validation_split=0.25, seed=0, label_mode="int", shuffle=False)
    parts = [kg.SQLGenerator(path, "SELECT path, kind FROM t", x_col="path", y_col="kind",
                             image_size=(4, 4), subset=s, **common)
             for s in ("training", "validation")]
    assert not set(parts[0].file_paths) & set(parts[1].file_paths)
    assert len(parts[0].file_paths) + len(parts[1].file_paths) == 12
    rows = [kg.SQLGenerator(path, "SELECT a, kind FROM t", x_col=["a"], y_col="kind",
                            subset=s, **common) for s in ("training", "validation")]
    seen = [set(np.concatenate([g[i][0][:, 0] for i in range(len(g))]).tolist()) for g in rows]
    assert not seen[0] & seen[1] and len(seen[0] | seen[1]) == 12
    assert rows[1].class_names == ["a", "b"] and np.bincount(rows[1].labels).tolist() == [1, 2]


# ----------------------------------------------------------------- generators of one fit


def tiny_model(loss="sparse_categorical_crossentropy"):
    model = keras.Sequential([keras.Input((4, 4, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(3, activation="softmax")])
    model.compile("sgd", loss)
    return model


def test_fit_refuses_a_validation_generator_with_other_classes(pics, tmp_path):
    train = build(write_csv(tmp_path / "train.csv", "filename,label",
                            ["china", "flower", "gray"] * 2),
                  label_mode="int", batch_size=3, seed=0)
    val_csv = write_csv(tmp_path / "val.csv", "filename,label", ["china", "gray"])
    shifted = build(val_csv, label_mode="int", batch_size=3)
    assert shifted.labels.tolist() == [0, 1]  # 'gray' is 1 here, 2 in training
    model = tiny_model()
    weights = [w.copy() for w in model.get_weights()]
    match = (r"class_names=\['china', 'flower', 'gray'\].*class_names=\['china', 'gray'\]"
             r".*class id 1 is 'flower'.*'gray'.*class_names=train.class_names")
    with pytest.raises(ValueError, match=match):
        model.fit(train, validation_data=shifted, epochs=1, verbose=0)
    for before, after in zip(weights, model.get_weights()):  # not a step was trained
        np.testing.assert_array_equal(before, after)
    val = build(val_csv, label_mode="int", batch_size=3, class_names=train.class_names)
    assert val.labels.tolist() == [0, 2]
    history = model.fit(train, validation_data=val, epochs=1, verbose=0)
    assert "val_loss" in history.history


def test_fit_compares_widths_and_ignores_data_without_classes(pics, tmp_path):
    csv = write_csv(tmp_path / "ids.csv", "filename,label", [0, 1, 2, 0, 1, 2])
    train = build(csv, label_mode="categorical", batch_size=3, seed=0)
    wider = build(csv, label_mode="categorical", batch_size=3, num_classes=4)
    with pytest.raises(ValueError, match="num_classes is 3 in the training data and 4"):
        tiny_model("categorical_crossentropy").fit(train, validation_data=wider, epochs=1,
                                                   verbose=0)
    # class ids as ints: a validation part without the last class reads every id right
    ints = build(csv, label_mode="int", batch_size=3, seed=0)
    fewer = build(write_csv(tmp_path / "few.csv", "filename,label", [0, 1, 1]),
                  label_mode="int", batch_size=3)
    assert fewer.class_names == ["0", "1"]
    tiny_model().fit(ints, validation_data=fewer, epochs=1, verbose=0)
    x = np.stack([ints[0][0][0]] * 3)
    tiny_model().fit(ints, validation_data=(x, np.array([0, 1, 2])), epochs=1, verbose=0)


# ----------------------------------------------------------------- forgotten multi_label


def test_delimited_cells_under_a_single_label_mode_are_refused(pics, tmp_path):
    csv = write_csv(tmp_path / "tags.csv", "filename,tags",
                    ["temple|big|wide", "big", "wide|temple"])
    for mode in ("int", "categorical", "binary"):
        with pytest.raises(ValueError, match=r"Column 'tags' holds 2 cells with the label "
                           r"delimiter '\|' \(e.g. 'temple\|big\|wide' at line 2 .*"
                           r"label_mode='multi_label'.*label_delimiter=None"):
            build(csv, y_col="tags", label_mode=mode)
    tags = build(csv, y_col="tags", label_mode="multi_label", shuffle=False)
    assert tags.class_names == ["big", "temple", "wide"]
    names = build(csv, y_col="tags", label_mode="int", label_delimiter=None)
    assert names.class_names == ["big", "temple|big|wide", "wide|temple"]
    frame_like = write_csv(tmp_path / "semi.csv", "filename,tags", ["a;b", "a"])
    with pytest.raises(ValueError, match="label delimiter ';'"):
        build(frame_like, y_col="tags", label_mode="int", label_delimiter=";")
    with pytest.raises(ValueError, match="`label_delimiter` must be a non-empty string"):
        build(csv, y_col="tags", label_mode="multi_label", label_delimiter="")


def test_list_cells_of_a_dataframe_need_multi_label(pics):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"filename": [str(pics / f"{i}.png") for i in range(3)],
                          "tags": [["a", "b"], ["b"], []]})
    with pytest.raises(ValueError, match="holds lists of labels.*label_mode='multi_label'"):
        kg.CSVGenerator(frame, y_col="tags", image_size=(4, 4), label_mode="categorical")
    gen = kg.CSVGenerator(frame, y_col="tags", image_size=(4, 4), label_mode="multi_label",
                          shuffle=False)
    assert gen[0][1].tolist() == [[1, 1], [0, 1], [0, 0]]


def test_wrong_delimiter_under_multi_label_warns(pics, tmp_path):
    commas = write_csv(tmp_path / "c.csv", "filename,tags",
                       ['"temple,big"', "big", '"wide,temple"'])
    with pytest.warns(UserWarning, match=r"No cell of column 'tags' holds label_delimiter="
                      r"'\|', but 2 cells hold ',' \(e.g. 'temple,big' at line 2.*"
                      r"label_delimiter=','"):
        build(commas, y_col="tags", label_mode="multi_label")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        right = build(commas, y_col="tags", label_mode="multi_label", label_delimiter=",")
    assert right.class_names == ["big", "temple", "wide"]
    mixed = write_csv(tmp_path / "m.csv", "filename,tags",
                      ["a|b", '"a,b"', "c"])
    with pytest.warns(UserWarning, match=r"mixes separators: 'a,b' \(in 'a,b' at line 3"
                      r".*\['a', 'b'\]"):
        build(mixed, y_col="tags", label_mode="multi_label")
    names = write_csv(tmp_path / "n.csv", "filename,tags", ['"Paris, France"|city', "city"])
    with warnings.catch_warnings():  # a comma inside a name, labels split at '|': fine
        warnings.simplefilter("error")
        assert build(names, y_col="tags", label_mode="multi_label").num_classes == 2


def test_inspect_takes_label_mode_and_delimiter(pics, tmp_path, capsys):
    csv = write_csv(tmp_path / "tags.csv", "filename,tags", ["temple|big", "big", "wide"])
    with pytest.warns(UserWarning, match="label delimiter '\\|'"):
        plain = kg.inspect(csv, y_col="tags", verbose=0)
    assert plain["classes"] == {"big": 1, "temple|big": 1, "wide": 1}
    assert "label_mode='multi_label'" in plain["warnings"][0]
    multi = kg.inspect(csv, y_col="tags", verbose=0, label_mode="multi_label")
    assert multi["classes"] == {"big": 2, "temple": 1, "wide": 1} and not multi["warnings"]
    assert cli.main(["inspect", str(csv), "--y-col", "tags"]) == 0
    assert "warning: Column 'tags' holds 1 cells with the label delimiter" in (
        capsys.readouterr().out)
    assert cli.main(["inspect", str(csv), "--y-col", "tags", "--label-mode", "multi_label",
                     "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["classes"] == multi["classes"]
    commas = write_csv(tmp_path / "c.csv", "filename,tags", ['"temple,big"', "big"])
    assert cli.main(["inspect", str(commas), "--y-col", "tags", "--label-mode",
                     "multi_label", "--label-delimiter", ",", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["classes"] == {"big": 2, "temple": 1}


# ----------------------------------------------------------------- numeric-looking labels


def test_numeric_looking_labels_are_never_merged(pics, tmp_path):
    csv = write_csv(tmp_path / "n.csv", "filename,label", ["007", "7", "07", "7"])
    with pytest.warns(UserWarning, match="Labels '007', '07', '7' of column 'label' are "
                      "written differently"):
        gen = build(csv, label_mode="int", shuffle=False)
    assert gen.class_names == ["007", "07", "7"] and gen.num_classes == 3
    assert gen.labels.tolist() == [0, 2, 1, 2]
    codes = write_csv(tmp_path / "codes.csv", "filename,label", ["007", "012", "007"])
    padded = build(codes, label_mode="categorical", shuffle=False)
    assert padded.class_names == ["007", "012"] and padded[0][1].shape == (3, 2)


def test_integer_labels_are_ids_and_invent_no_class(pics, tmp_path):
    dense = build(write_csv(tmp_path / "d.csv", "filename,label", [2, 0, 1, 2]),
                  label_mode="int", shuffle=False)
    assert dense.class_names == ["0", "1", "2"] and dense.labels.tolist() == [2, 0, 1, 2]
    sparse = write_csv(tmp_path / "s.csv", "filename,label", [2, 5, 7, 5])
    with pytest.raises(ValueError, match=r"Column 'label' holds integer labels, which are "
                       r"class ids, but ids 0, 1, 3, 4, 6 of 0..7 have no row.*"
                       r"num_classes=8.*class_names=\['2', '5', '7'\]"):
        build(sparse, label_mode="int")
    ids = build(sparse, label_mode="int", num_classes=8, shuffle=False)
    assert ids.labels.tolist() == [2, 5, 7, 5] and ids.num_classes == 8
    named = build(sparse, label_mode="int", class_names=["2", "5", "7"], shuffle=False)
    assert named.labels.tolist() == [0, 1, 2, 1] and named.num_classes == 3
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"filename": [str(pics / f"{i}.png") for i in range(3)],
                          "label": [0, 3, 1]})
    with pytest.raises(ValueError, match="ids 2 of 0..3 have no row"):
        kg.CSVGenerator(frame, image_size=(4, 4), label_mode="int")
    # integer arrays keep their meaning: ids, num_classes = max id + 1
    arrays = kg.ArrayGenerator(np.zeros((3, 1)), np.array([0, 3, 1]), label_mode="int")
    assert arrays.num_classes == 4


# ----------------------------------------------------------------- malformed CSV files


def test_rows_longer_than_the_header_are_refused_with_their_line(pics, tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("filename,label\npics/0.png,a\n\npics/1.png,b,oops\n")
    with pytest.raises(ValueError, match=r"Line 4 of .*long.csv has 3 cells, but the header "
                       r"names 2 columns.*\['oops'\] would be lost"):
        kg.CSVGenerator(path)
    path.write_text("filename,label\npics/0.png,a,\npics/1.png,b\n")  # an empty extra cell
    assert kg.CSVGenerator(path, image_size=(4, 4)).num_samples == 2
    path.write_text("filename,label\n\npics/0.png,\npics/1.png,b\n")
    with pytest.raises(ValueError, match="missing or NaN.*line 3 of"):  # blank lines count
        kg.CSVGenerator(path)


def test_a_column_named_twice_is_refused(pics, tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("filename,label,label\npics/0.png,a,b\n")
    with pytest.raises(ValueError, match="names column 'label' twice \\(columns 2 and 3\\)"):
        kg.CSVGenerator(path)
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame([[str(pics / "0.png"), "a", "b"]],
                         columns=["filename", "label", "label"])
    with pytest.raises(ValueError, match="DataFrame passed as `csv` names column 'label'"):
        kg.CSVGenerator(frame)


def test_encoding(pics, tmp_path):
    path = write_csv(tmp_path / "latin.csv", "filename,label", ["café", "thé"], "latin-1")
    with pytest.raises(ValueError, match=r"latin.csv is not 'utf-8' text: byte 0xe9 on line "
                       r"2.*encoding='latin-1'"):
        kg.CSVGenerator(path)
    gen = kg.CSVGenerator(path, encoding="latin-1", image_size=(4, 4), label_mode="int")
    assert gen.class_names == ["café", "thé"]
    with pytest.raises(ValueError, match="`encoding` must be a text encoding"):
        kg.CSVGenerator(path, encoding="klingon")
    bom = tmp_path / "bom.csv"
    bom.write_bytes("filename,label\npics/0.png,a\n".encode("utf-8-sig"))
    assert kg.CSVGenerator(bom, image_size=(4, 4)).class_names == ["a"]
    assert kg.inspect(path, encoding="latin-1", verbose=0)["classes"] == {"café": 1,
                                                                          "thé": 1}


# ----------------------------------------------------------------- symbolic-link loops


def test_follow_links_lists_every_real_file_once(tmp_path):
    root = tmp_path / "data"
    for name in ("a", "b"):
        for i in range(2):
            write_image(str(root / name / "sub" / f"{name}{i}.png"), height=4, width=4)
    os.symlink(root / "a", root / "a" / "sub" / "loop")       # back to its own class
    os.symlink(root, root / "b" / "up")                       # to the root: every class
    os.symlink(root / "a" / "sub", root / "b" / "a_sub")      # into another class
    with pytest.warns(UserWarning, match="a loop of symbolic links") as caught:
        gen = kg.ImageFolderGenerator(root, follow_links=True, image_size=(4, 4),
                                      label_mode="int", shuffle=False)
    assert {str(w.message).split("'")[1] for w in caught} == {
        str(root / "a" / "sub" / "loop"), str(root / "b" / "up"), str(root / "b" / "a_sub")}
    real = [os.path.realpath(p) for p in gen.file_paths]
    assert len(real) == len(set(real)) == 4
    assert [os.path.basename(p) for p in gen.file_paths] == ["a0.png", "a1.png", "b0.png",
                                                            "b1.png"]
    assert gen.labels.tolist() == [0, 0, 1, 1]
