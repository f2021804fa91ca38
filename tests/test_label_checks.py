"""Labels that would come out wrong with no error: split tables, generators of one fit that
disagree on classes, forgotten multi_label, numeric-looking labels, malformed CSV files,
symbolic-link loops."""

import os

import pytest

import kerasgen as kg

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
