"""Labels that would come out wrong with no error: split tables, generators of one fit that
disagree on classes, forgotten multi_label, numeric-looking labels, malformed CSV files,
symbolic-link loops."""

import os

import pytest

import kerasgen as kg

from .conftest import write_image


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
