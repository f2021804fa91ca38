"""One confinement rule for every path read from data (issue 47): CSV and SQL rows, folder
walks, COCO `file_name`, VOC `<filename>` and the XML files themselves, masks and target
images paired by name, `kg.inspect` / `kerasgen inspect --directory`, and URL roots.
Each refusal is the one message of `storage.paths`, naming the entry as written, where
it was read, the root and why, checked when the generator is built and again when the
file is opened; `allow_outside=True` (or `follow_links=True` for folders) lifts it."""

import json
import os
import re
import sqlite3

import cv2
import numpy as np
import pytest

import kerasgen as kg
from kerasgen import cli
from tests.conftest import write_image

# The one form: "The path '<entry>' in <source> leaves <root> (<folder>): <why>. Nothing
# outside <root> is read unless <argument>=True..."
ONE_FORM = re.compile(r"The path '(?P<entry>[^']+)' in (?P<source>.+) leaves (?P<root>.+?) "
                      r"\((?P<folder>[^)]+)\): (?P<why>.+?)\. Nothing outside .+ is read "
                      r"unless (allow_outside|follow_links)=True")


def one_form(error, entry, source, folder):
    """The refusal's parts, checked against what it must name."""
    found = ONE_FORM.search(str(error.value))
    assert found, str(error.value)
    assert found["entry"] == entry and re.search(source, found["source"]), str(error.value)
    assert os.path.realpath(found["folder"]) == os.path.realpath(folder), str(error.value)
    return found["why"]


def replace_by_link(path, target):
    os.remove(path)
    os.symlink(target, path)


@pytest.fixture
def scene(tmp_path):
    """imgs/a.png and imgs/b.png with their COCO file, and secret.png beside imgs/."""
    imgs = tmp_path / "imgs"
    write_image(str(imgs / "a.png"), 20, 30, value=50)
    write_image(str(imgs / "b.png"), 20, 30, value=90)
    write_image(str(tmp_path / "secret.png"), 20, 30, value=255)
    return imgs


def coco_file(folder, names, path=None):
    coco = {"images": [{"id": k, "file_name": n} for k, n in enumerate(names)],
            "annotations": [{"id": 10 + k, "image_id": k, "category_id": 1,
                             "bbox": [1, 1, 5, 5]} for k in range(len(names))],
            "categories": [{"id": 1, "name": "thing"}]}
    path = path or folder / "coco.json"
    path.write_text(json.dumps(coco))
    return path


COMMON = dict(image_size=(8, 8), cache=None, batch_size=2, shuffle=False, verbose=0)


# ----------------------------------------------------------------- COCO and VOC entries
@pytest.mark.parametrize("name,why", [("../secret.png", "its '..' goes above it"),
                                      ("ABSOLUTE", "it is an absolute path")])
def test_a_coco_file_name_leaving_its_root_is_refused_with_or_without_directory(
        scene, name, why):
    name = str(scene.parent / "secret.png") if name == "ABSOLUTE" else name
    path = coco_file(scene, ["a.png", name])
    with pytest.raises(ValueError) as error:  # the JSON's folder is the root
        kg.DetectionGenerator(path, **COMMON)
    assert one_form(error, name, r"image 1 \(entry 1 of `images`\) of COCO file .*coco\.json",
                    scene) == why
    assert "the COCO file's folder" in str(error.value)
    elsewhere = coco_file(scene, ["a.png", name], scene.parent / "elsewhere.json")
    with pytest.raises(ValueError) as error:  # `directory` is the root
        kg.DetectionGenerator(elsewhere, directory=scene, **COMMON)
    one_form(error, name, "of COCO file .*elsewhere.json", scene)
    gen = kg.DetectionGenerator(path, allow_outside=True, dtype="uint8", **COMMON)
    assert (gen[0][0][1] == 255).all()  # the secret is read only when allowed


def test_a_coco_image_that_is_a_link_out_is_refused_then_and_when_read(scene):
    os.symlink(scene.parent / "secret.png", scene / "c.png")
    with pytest.raises(ValueError) as error:
        kg.DetectionGenerator(coco_file(scene, ["a.png", "c.png"]), **COMMON)
    assert one_form(error, "c.png", "COCO file", scene).startswith(
        "a symbolic link on its way leads to ")
    gen = kg.DetectionGenerator(coco_file(scene, ["a.png", "b.png"]), **COMMON)
    replace_by_link(scene / "b.png", scene.parent / "secret.png")
    with pytest.raises(ValueError, match=r"Cannot read image file .*b\.png: it now leads to "
                                         r".*secret\.png, outside the COCO file's folder"):
        gen[0]


@pytest.mark.parametrize("name", ["../../secret.png", "/etc/hostname"])
def test_a_voc_filename_leaving_jpegimages_is_refused_naming_the_xml_file(tmp_path, name):
    year = tmp_path / "VOC"
    (year / "Annotations").mkdir(parents=True)
    write_image(str(year / "JPEGImages" / "a.png"), 20, 30)
    write_image(str(tmp_path / "secret.png"), 20, 30)
    (year / "Annotations" / "a.xml").write_text(
        f"<annotation><filename>{name}</filename><object><name>cat</name><bndbox><xmin>1"
        "</xmin><ymin>1</ymin><xmax>5</xmax><ymax>5</ymax></bndbox></object></annotation>")
    with pytest.raises(ValueError) as error:
        kg.DetectionGenerator(year, **COMMON)
    one_form(error, name, r"VOC file .*Annotations/a\.xml", year / "JPEGImages")
    assert "the JPEGImages folder" in str(error.value)


def test_a_voc_xml_file_linked_from_outside_its_folder_is_refused(tmp_path):
    (tmp_path / "ann").mkdir()
    write_image(str(tmp_path / "ann" / "a.png"), 20, 30)
    (tmp_path / "other.xml").write_text(
        "<annotation><filename>a.png</filename></annotation>")
    os.symlink(tmp_path / "other.xml", tmp_path / "ann" / "a.xml")
    with pytest.raises(ValueError) as error:
        kg.DetectionGenerator(tmp_path / "ann", class_names=["cat"], **COMMON)
    one_form(error, "a.xml", "the folder .*ann", tmp_path / "ann")
    gen = kg.DetectionGenerator(tmp_path / "ann", class_names=["cat"], allow_outside=True,
                                **COMMON)
    assert gen.num_samples == 1


# ----------------------------------------------------------------- masks and targets
@pytest.fixture
def paired(tmp_path):
    """images/0..1.png, masks/0..1.png and clean/0..1.png; outside/ beside them."""
    for i in range(2):
        write_image(str(tmp_path / "images" / f"{i}.png"), value=40 * (i + 1))
        write_image(str(tmp_path / "clean" / f"{i}.png"), value=40 * (i + 2))
        (tmp_path / "masks").mkdir(exist_ok=True)
        assert cv2.imwrite(str(tmp_path / "masks" / f"{i}.png"), np.full((12, 16), i, np.uint8))
    (tmp_path / "outside").mkdir()
    write_image(str(tmp_path / "outside" / "x.png"), value=255)
    assert cv2.imwrite(str(tmp_path / "outside" / "m.png"), np.full((12, 16), 7, np.uint8))
    return tmp_path


@pytest.mark.parametrize("kind", ["mask_dir", "target_dir"])
def test_a_mask_or_target_linked_outside_is_refused_as_an_input_link_is(paired, kind):
    folder, outside = ("masks", "m.png") if kind == "mask_dir" else ("clean", "x.png")
    replace_by_link(paired / folder / "1.png", paired / "outside" / outside)
    options = dict(COMMON, label_mode="mask" if kind == "mask_dir" else "image")
    options[kind] = paired / folder
    with pytest.raises(ValueError) as error:
        kg.ImageFolderGenerator(paired / "images", **options)
    assert one_form(error, "1.png", rf"the .* folder .*{folder} \(the .* of .*images.1\.png\)",
                    paired / folder).startswith("a symbolic link on its way leads to ")
    assert f"leaves `{kind}`" in str(error.value)
    os.symlink(paired / "outside" / "x.png", paired / "images" / "2.png")  # the same link
    with pytest.raises(ValueError, match=r"'2\.png' in the folder .* leaves `directory`"):
        kg.ImageFolderGenerator(paired / "images", **dict(options, follow_links=False))
    os.remove(paired / "images" / "2.png")
    kg.ImageFolderGenerator(paired / "images", follow_links=True, **options)  # allowed


@pytest.mark.parametrize("kind", ["mask_dir", "target_dir", "directory"])
def test_a_folder_file_replaced_by_a_link_after_building_is_refused_when_read(paired, kind):
    options = dict(COMMON, label_mode=None)
    if kind == "mask_dir":
        options.update(label_mode="mask", mask_dir=paired / "masks")
    elif kind == "target_dir":
        options.update(label_mode="image", target_dir=paired / "clean")
    gen = kg.ImageFolderGenerator(paired / "images", **options)
    folder = {"mask_dir": "masks", "target_dir": "clean", "directory": "images"}[kind]
    replace_by_link(paired / folder / "1.png", paired / "outside" / (
        "m.png" if kind == "mask_dir" else "x.png"))
    with pytest.raises(ValueError, match=rf"Cannot read (image|mask) file .*{folder}.1\.png: "
                                         rf"it now leads to .*outside.*, outside .*`{kind}`"):
        gen[0]


# ----------------------------------------------------------------- CSV, SQL, inspect
def csv_leaving(tmp_path):
    root = tmp_path / "root"
    write_image(str(root / "img" / "0.png"))
    write_image(str(tmp_path / "secret.png"), value=255)
    csv = tmp_path / "list.csv"
    csv.write_text("filename,label\nimg/0.png,a\n../secret.png,b\n")
    return root, csv


def test_kg_inspect_with_directory_refuses_a_row_leaving_it_as_csvgenerator_does(tmp_path):
    root, csv = csv_leaving(tmp_path)
    with pytest.raises(ValueError) as error:
        kg.CSVGenerator(csv, directory=root, image_size=8)
    one_form(error, "../secret.png", r"line 3 of .*list\.csv", root)
    with pytest.raises(ValueError) as inspected:
        kg.inspect(csv, directory=root, verbose=0)
    assert str(inspected.value) == str(error.value)
    assert kg.inspect(csv, directory=root, allow_outside=True, verbose=0)["files"] == 2


def test_kerasgen_inspect_directory_refuses_a_row_leaving_it(tmp_path, capsys):
    root, csv = csv_leaving(tmp_path)
    assert cli.main(["inspect", str(csv), "--directory", str(root)]) == 2
    err = capsys.readouterr().err
    assert re.search(r"kerasgen inspect: The path '\.\./secret\.png' in line 3 of .*list\.csv "
                     r"leaves `directory`", err), err
    assert "secret.png: " not in err  # nothing of the file was read or reported


def test_kg_inspect_reads_a_csv_file_only_inside_directory(tmp_path, monkeypatch):
    root, _ = csv_leaving(tmp_path)
    (tmp_path / "in.csv").write_text("filename,label\nimg/0.png,a\n")
    opened = []
    from kerasgen.storage import paths as _paths
    name = "open_within" if _paths.FD_PATHS else "opened"  # the check this system makes
    real = getattr(_paths, name)
    monkeypatch.setattr(_paths, name, lambda *a: opened.append(a[0]) or real(*a))
    report = kg.inspect(tmp_path / "in.csv", directory=root, verbose=0)
    assert report["corrupt"] == [] and opened == [str(root / "img" / "0.png")]


@pytest.mark.parametrize("fd_paths", [True, False], ids=["opened file", "path first"])
def test_a_file_swapped_for_a_link_out_is_refused_both_ways(tmp_path, monkeypatch,
                                                             fd_paths):
    """The real path of the file (Linux's /proc/self/fd, through an O_PATH descriptor),
    or the path's (elsewhere), before it is opened: either way a link leading out is
    refused and nothing outside is opened for reading (a FIFO outside, opened, would
    release its writer; read, it would wait forever)."""
    from kerasgen.loading import images
    from kerasgen.storage import paths as _paths

    if fd_paths and _paths.FD_PATHS is None:
        pytest.skip("this system names no open file's path")
    if not fd_paths:
        monkeypatch.setattr(_paths, "FD_PATHS", None)
    root = tmp_path / "root"
    (root / "img").mkdir(parents=True)
    (tmp_path / "secret.png").write_bytes(b"secret")
    (root / "img" / "in.png").write_bytes(b"inside")
    (root / "img" / "linked.png").symlink_to(root / "img" / "in.png")  # a link inside
    assert bytes(images.read_file(str(root / "img" / "linked.png"), str(root))) == b"inside"
    (root / "img" / "out.png").symlink_to(tmp_path / "secret.png")
    with pytest.raises(ValueError, match=r"out\.png: it now leads to .*secret\.png, outside"):
        images.read_file(str(root / "img" / "out.png"), str(root))
    (root / "img" / "sub").symlink_to(tmp_path, target_is_directory=True)  # a folder link
    with pytest.raises(ValueError, match=r"it now leads to .*secret\.png, outside"):
        images.read_file(str(root / "img" / "sub" / "secret.png"), str(root))
    os.mkfifo(tmp_path / "pipe")  # opened for reading, a FIFO outside would be touched
    (root / "img" / "pipe.png").symlink_to(tmp_path / "pipe")
    reads = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda p, flags, *a: reads.append(
        (str(p), flags & (os.O_WRONLY | os.O_RDWR | getattr(os, "O_PATH", 0))))
        or real_open(p, flags, *a))
    with pytest.raises(ValueError, match=r"pipe\.png: it now leads to .*pipe, outside"):
        images.read_file(str(root / "img" / "pipe.png"), str(root))
    # nothing was opened for reading: only an O_PATH handle (Linux), or nothing at all
    assert all(kind == getattr(os, "O_PATH", -1) for _, kind in reads), reads


def test_sql_rows_are_confined_to_directory(tmp_path):
    root, _ = csv_leaving(tmp_path)
    db = tmp_path / "db.sqlite"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE t (filename TEXT, label TEXT)")
        connection.executemany("INSERT INTO t VALUES (?, ?)",
                               [("img/0.png", "a"), ("../secret.png", "b")])
    connection.close()
    with pytest.raises(ValueError) as error:
        kg.SQLGenerator(db, "SELECT * FROM t", directory=root, image_size=8)
    one_form(error, "../secret.png", r"row 2 of the query result", root)


@pytest.mark.parametrize("name,why", [("../other/x.png", "its '..' goes above it"),
                                      ("/top.png", "it starts at the bucket's")])
def test_a_csv_row_leaving_a_url_directory_is_refused(tmp_path, name, why):
    pytest.importorskip("fsspec")
    frame = __import__("pandas").DataFrame({"filename": ["a.png", name], "label": [0, 1]})
    with pytest.raises(ValueError) as error:
        kg.CSVGenerator(frame, directory="memory://bucket/imgs", image_size=8)
    assert one_form(error, name, "row 1 of the DataFrame", "memory://bucket/imgs").startswith(
        why)


def test_a_path_holding_a_nul_byte_is_named_not_a_bare_error(tmp_path):
    (tmp_path / "list.csv").write_text('filename,label\n"a\x00b.png",x\n')
    with pytest.raises(ValueError, match=r"The path 'a\\x00b\.png' in line 2 of .*list\.csv "
                                         r"holds a NUL byte"):
        kg.CSVGenerator(tmp_path / "list.csv", directory=tmp_path, image_size=8)
    coco = coco_file(tmp_path, ["a\x00.png"])
    with pytest.raises(ValueError, match=r"The path 'a\\x00\.png' in image 0 \(entry 0 of "
                                         r"`images`\) of COCO file .*coco\.json holds a NUL"):
        kg.DetectionGenerator(coco, **COMMON)


def test_inspect_of_a_folder_reads_no_file_replaced_by_a_link_out_after_listing(
        tmp_path, monkeypatch):
    """kg.inspect walks a folder as ImageFolderGenerator does (no link out is listed),
    and reads each file inside it: a file replaced by a link leading out between the
    listing and the read is reported, not read."""
    from kerasgen import inspection
    from tests.conftest import write_image

    folder, outside = tmp_path / "pets", tmp_path / "secret.png"
    write_image(str(folder / "cat" / "a.png"))
    write_image(str(folder / "cat" / "b.png"), seed=1)
    write_image(str(outside), seed=2)
    listed = inspection._folder_files

    def then_swapped(*args):
        found = listed(*args)
        os.remove(folder / "cat" / "b.png")
        os.symlink(outside, folder / "cat" / "b.png")
        return found

    monkeypatch.setattr(inspection, "_folder_files", then_swapped)
    report = kg.inspect(folder, verbose=0)
    assert [os.path.basename(c["path"]) for c in report["corrupt"]] == ["b.png"]
    assert "outside" in report["corrupt"][0]["error"] or "leave" in report["corrupt"][0][
        "error"]
