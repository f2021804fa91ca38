"""CSVGenerator: label columns, DataFrames, missing files, paths that leave `directory`."""

import os

import numpy as np
import pytest

import kerasgen as kg

from .conftest import write_image


def write_csv(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def pics(tmp_path):
    for i in range(4):
        write_image(str(tmp_path / "pics" / f"{i}.png"), value=10 * i)
    return tmp_path / "pics"


def test_string_labels_relative_to_the_csv(csv_file, image_folder):
    gen = kg.CSVGenerator(csv_file, image_size=(6, 6), shuffle=False, label_mode="int")
    assert gen.class_names == ["cat", "dog", "fox"]
    assert gen.labels.tolist() == [0] * 4 + [1] * 3 + [2] * 5
    assert gen.file_paths[0] == os.path.join(str(image_folder), "cat", "cat_0.png")
    folder = kg.ImageFolderGenerator(image_folder, image_size=(6, 6), shuffle=False,
                                     batch_size=32)
    np.testing.assert_array_equal(kg.CSVGenerator(csv_file, image_size=(6, 6),
                                                  shuffle=False, batch_size=32)[0][0],
                                  folder[0][0])


def test_integer_labels_and_directory(pics, tmp_path):
    csv = write_csv(tmp_path / "list.csv", ["path,y", "0.png,2", "1.png,0", "2.png,1",
                                            "3.png,2"])
    gen = kg.CSVGenerator(csv, x_col="path", y_col="y", directory=pics, shuffle=False,
                          image_size=(4, 4), label_mode="int", batch_size=4)
    assert gen[0][1].tolist() == [2, 0, 1, 2]
    assert gen.class_names == ["0", "1", "2"]


def test_multi_label_columns_and_delimiter(pics, tmp_path):
    csv = write_csv(tmp_path / "ml.csv", ["filename,cat,dog,tags", "pics/0.png,1,0,cat",
                                          "pics/1.png,1,1,cat|dog", "pics/2.png,0,1,dog",
                                          "pics/3.png,0,0,"])
    gen = kg.CSVGenerator(csv, y_col=["cat", "dog"], label_mode="multi_label",
                          shuffle=False, image_size=(4, 4), batch_size=4)
    assert gen.class_names == ["cat", "dog"]
    assert gen[0][1].tolist() == [[1, 0], [1, 1], [0, 1], [0, 0]]
    three = write_csv(tmp_path / "ml3.csv", ["filename,tags", "pics/0.png,cat",
                                             "pics/1.png,cat|dog", "pics/2.png,dog"])
    tags = kg.CSVGenerator(three, y_col="tags", label_mode="multi_label", shuffle=False,
                           image_size=(4, 4), batch_size=4)
    assert tags.class_names == ["cat", "dog"]
    assert tags[0][1].tolist() == [[1, 0], [1, 1], [0, 1]]
    with pytest.raises(ValueError, match="line 5"):  # the empty tags cell of 3.png
        kg.CSVGenerator(csv, y_col="tags", label_mode="multi_label")


def test_multi_target_regression(pics, tmp_path):
    csv = write_csv(tmp_path / "reg.csv", ["filename,a,b", "pics/0.png,0.5,1",
                                           "pics/1.png,1.5,2", "pics/2.png,-1,0"])
    gen = kg.CSVGenerator(csv, y_col=["a", "b"], label_mode="raw", shuffle=False,
                          image_size=(4, 4))
    np.testing.assert_allclose(gen[0][1], [[0.5, 1], [1.5, 2], [-1, 0]])
    bad = write_csv(tmp_path / "bad.csv", ["filename,a,b", "pics/0.png,0.5,x"])
    with pytest.raises(ValueError, match="Column 'b' must hold numbers.*line 2"):
        kg.CSVGenerator(bad, y_col=["a", "b"], label_mode="raw")
    with pytest.raises(ValueError, match="Several `y_col` columns need"):
        kg.CSVGenerator(csv, y_col=["a", "b"], label_mode="categorical")


def test_dataframe_in_place_of_a_path(pics):
    pd = pytest.importorskip("pandas")  # optional dependency; installed by the test extra
    frame = pd.DataFrame({"filename": [str(pics / f"{i}.png") for i in range(4)],
                          "label": ["b", "a", "b", "a"]}, index=[10, 11, 12, 13])
    gen = kg.CSVGenerator(frame, shuffle=False, image_size=(4, 4), label_mode="int")
    assert gen[0][1].tolist() == [1, 0, 1, 0]
    frame.loc[12, "label"] = None
    with pytest.raises(ValueError, match="row 12"):
        kg.CSVGenerator(frame, image_size=(4, 4))


def test_missing_files_raise_or_skip(pics, tmp_path):
    lines = ["filename,label"] + [f"pics/{i}.png,a" for i in range(4)]
    lines += [f"pics/gone{i}.png,b" for i in range(7)]
    csv = write_csv(tmp_path / "m.csv", lines)
    with pytest.raises(FileNotFoundError, match=r"7 files .*gone0.png \(line 6.* \.\.\."):
        kg.CSVGenerator(csv)
    with pytest.warns(UserWarning, match="Skipping 7 rows"):
        gen = kg.CSVGenerator(csv, on_missing="skip", image_size=(4, 4))
    assert gen.num_samples == 4 and len(gen.skipped) == 7
    assert gen.class_names == ["a"]


def test_paths_leaving_directory_are_refused(pics, tmp_path):
    outside = tmp_path / "outside.png"
    write_image(str(outside))
    for name in ("../outside.png", str(outside)):
        csv = write_csv(tmp_path / "esc.csv", ["filename,label", "0.png,a", f"{name},b"])
        with pytest.raises(ValueError, match="line 3.*allow_outside=True"):
            kg.CSVGenerator(csv, directory=pics)
        gen = kg.CSVGenerator(csv, directory=pics, allow_outside=True, image_size=(4, 4))
        assert gen.num_samples == 2


def test_inference_without_labels(pics, tmp_path):
    csv = write_csv(tmp_path / "inf.csv", ["filename"] + [f"pics/{i}.png" for i in range(4)])
    gen = kg.CSVGenerator(csv, label_mode=None, shuffle=False, image_size=(4, 4))
    assert isinstance(gen[0], np.ndarray) and gen[0].shape == (4, 4, 4, 3)  # x alone


def test_csv_errors(pics, tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        kg.CSVGenerator(tmp_path / "nope.csv")
    with pytest.raises(ValueError, match="is empty"):
        kg.CSVGenerator(write_csv(tmp_path / "empty.csv", ["filename,label"]))
    csv = write_csv(tmp_path / "c.csv", ["path,cls", "pics/0.png,a"])
    with pytest.raises(ValueError, match=r"`x_col` must name a column.*\['path', 'cls'\]"):
        kg.CSVGenerator(csv)
    with pytest.raises(ValueError, match=r"`y_col` must name a column.*\['path', 'cls'\]"):
        kg.CSVGenerator(csv, x_col="path")
    with pytest.raises(ValueError, match="`on_missing` must be one of"):
        kg.CSVGenerator(csv, x_col="path", y_col="cls", on_missing="ignore")
    blank = write_csv(tmp_path / "blank.csv", ["filename,label", "pics/0.png,a",
                                               "pics/1.png,"])
    with pytest.raises(ValueError, match="missing or NaN.*line 3"):
        kg.CSVGenerator(blank)
    with pytest.raises(TypeError, match="`csv` must be a path"):
        kg.CSVGenerator(42)


@pytest.mark.parametrize("magic,what,read", [
    (b"PAR1", "a Parquet file", "pandas.read_parquet"),
    (b"ARROW1\x00\x00", r"an Arrow IPC \(Feather v2\) file", r"pyarrow.ipc.open_file"),
    (b"FEA1", "a Feather v1 file", "pandas.read_feather"),
])
def test_a_binary_table_is_named_not_called_bad_text(tmp_path, magic, what, read):
    """A Parquet or Arrow file given as the CSV list is named for what it is, with the
    DataFrame to pass instead; never advice to change the text encoding."""
    path = tmp_path / "rows.csv"
    path.write_bytes(magic + bytes(range(200, 256)) * 4)
    with pytest.raises(ValueError, match=rf"rows.csv is {what}, not CSV text.*{read}") as info:
        kg.CSVGenerator(path)
    assert "encoding" not in str(info.value)
