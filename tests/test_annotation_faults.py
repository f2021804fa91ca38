"""Malformed or silently wrong detection annotations (issue 47): every malformed field of
a COCO JSON or VOC XML file is a ValueError naming the file, the entry and the field, in
the one message form; categories used twice, an image listed twice and pixel boxes
under a rel_ format are refused with what to change; one image may hold at most
`max_boxes` boxes (10,000 by default), counted before any box is converted, and many
boxes are read in one vectorised pass."""

import json
import os

import cv2
import numpy as np
import pandas as pd
import pytest

import kerasgen as kg

COMMON = dict(image_size=(8, 8), cache=None, shuffle=False, verbose=0)


@pytest.fixture
def folder(tmp_path):
    cv2.imwrite(str(tmp_path / "a.png"), np.zeros((40, 60, 3), np.uint8))
    cv2.imwrite(str(tmp_path / "b.png"), np.zeros((40, 60, 3), np.uint8))
    return tmp_path


def coco(folder, change=None, raw=None):
    """The COCO file of a.png (a cat at [1, 2, 10, 20]) changed by `change`, or `raw`."""
    data = {"images": [{"id": 1, "file_name": "a.png", "height": 40, "width": 60}],
            "annotations": [{"id": 7, "image_id": 1, "bbox": [1, 2, 10, 20],
                             "category_id": 3}],
            "categories": [{"id": 3, "name": "cat"}]}
    path = folder / "coco.json"
    if raw is None:
        if change is not None:
            change(data)
        raw = json.dumps(data).encode()
    path.write_bytes(raw)
    return path


IMAGE = r"image 1 \(entry 0 of `images`\) of COCO file .*coco\.json"
ANNOTATION = r"annotation 7 \(entry 0 of `annotations`\) of COCO file .*coco\.json"
CATEGORY = r"entry 0 of `categories` of COCO file .*coco\.json"


def _set(key, index, **values):
    return lambda data: data[key][index].update(values)


def _drop(key, index, field):
    return lambda data: data[key][index].pop(field)


@pytest.mark.parametrize("change,match", [
    (_drop("categories", 0, "id"), rf"`id` must be an integer id .*Received: no `id` in "
                                   rf"{CATEGORY}"),
    (_set("categories", 0, id=True), rf"`id` must be .*Received: id=True in {CATEGORY}"),
    (_set("categories", 0, id=[3]), rf"Received: id=\[3\] in {CATEGORY}"),
    (_set("categories", 0, name=None), rf"`name` must be the category's name .*Received: "
                                       rf"name=None in category 3 \({CATEGORY}"),
    (lambda d: d["categories"].append("dog"), r"`categories\[1\]` must be a JSON object.*"
                                              r"Received: categories\[1\]='dog' in COCO file"),
    (_set("images", 0, height=float("nan")), rf"`height` must be a positive whole number of "
                                             rf"pixels .*Received: height=nan in {IMAGE}"),
    (_set("images", 0, height="sixty"), rf"Received: height='sixty' in {IMAGE}"),
    (_set("images", 0, width=float("inf")), rf"Received: width=inf in {IMAGE}"),
    (_set("images", 0, width=10**30), rf"Received: width=1000000000000000000000000000000 in "
                                      rf"{IMAGE}"),
    (_set("images", 0, width=-60), rf"Received: width=-60 in {IMAGE}"),
    (_set("images", 0, width=0), rf"Received: width=0 in {IMAGE}"),
    (_set("images", 0, width=True), rf"Received: width=True in {IMAGE}"),
    (_drop("images", 0, "id"), r"`id` must be .*Received: no `id` in entry 0 of `images`"),
    (_drop("images", 0, "file_name"), rf"`file_name` must be .*Received: no `file_name` in "
                                      rf"{IMAGE}"),
    (_set("images", 0, file_name=5), rf"Received: file_name=5 in {IMAGE}"),
    (lambda d: d["images"].append(None), r"`images\[1\]` must be a JSON object"),
    (_set("annotations", 0, bbox="1,2,10,20"), rf"`bbox` must be 4 finite numbers \(xywh\)"
                                               rf"\. Received: bbox='1,2,10,20' in "
                                               rf"{ANNOTATION}"),
    (_drop("annotations", 0, "bbox"), rf"Received: no `bbox` in {ANNOTATION}"),
    (_set("annotations", 0, bbox=[1, 2, 10]), rf"Received: bbox=\[1, 2, 10\] in {ANNOTATION}"),
    (_set("annotations", 0, bbox=[1, 2, True, 20]), rf"bbox=\[1, 2, True, 20\] in {ANNOTATION}"),
    (_set("annotations", 0, bbox=[1, 2, float("nan"), 20]), rf"bbox=\[1, 2, nan, 20\] in "
                                                            rf"{ANNOTATION}"),
    (_set("annotations", 0, bbox=[1, 2, 10**400, 20]), rf"Received: bbox=.* in {ANNOTATION}"),
    (_set("annotations", 0, bbox=[[1, 2], [10, 20]]), rf"bbox=\[\[1, 2\], \[10, 20\]\] in "
                                                      rf"{ANNOTATION}"),
    (_set("annotations", 0, bbox=[1, 2, -10, 20]), rf"`bbox` must be a box that does not end "
                                                   rf"before it starts .* in {ANNOTATION}"),
    (_drop("annotations", 0, "image_id"), rf"`image_id` must be the id of an image in "
                                          rf"`images`\. Received: no `image_id` in {ANNOTATION}"),
    (_set("annotations", 0, image_id=True), rf"Received: image_id=True in {ANNOTATION}"),
    (_set("annotations", 0, category_id=9), rf"`category_id` must be the id of a category in "
                                            rf"`categories` \(ids \[3\]\)\. Received: "
                                            rf"category_id=9 in {ANNOTATION}"),
    (lambda d: d.pop("images"), r"`images` must be a list, as in COCO's instances files\. "
                                r"Received: no `images` in COCO file .*coco\.json\. Its keys"),
])
def test_a_malformed_coco_field_is_named_with_its_file_and_entry(folder, change, match):
    with pytest.raises(ValueError, match=match):
        kg.DetectionGenerator(coco(folder, change), **COMMON)


@pytest.mark.parametrize("raw,match", [
    (b"", r"Cannot read COCO file .*coco\.json: not JSON \(the file is empty\)"),
    (b"{oops", r"Cannot read COCO file .*coco\.json: not JSON \(Expecting property name"),
    (b"[1, 2]", r"A COCO file must be a JSON object .*Received: a JSON list in COCO file "),
    (b'{"images": [{"id": 1, "file_name": "caf\xe9.png"}]}',
     r"Cannot read COCO file .*coco\.json: it is not UTF-8 text \(byte 0xe9 on line 1\)"),
    (b"[" * 100_000 + b"]" * 100_000, r"Cannot read COCO file .*coco\.json: its JSON is "
                                      r"nested more deeply than Python's JSON reader allows"),
])
def test_a_coco_file_that_is_not_utf8_json_is_named(folder, raw, match):
    with pytest.raises(ValueError, match=match):
        kg.DetectionGenerator(coco(folder, raw=raw), **COMMON)


def test_a_coco_file_with_a_byte_order_mark_is_read(folder):
    raw = b"\xef\xbb\xbf" + coco(folder).read_bytes()
    gen = kg.DetectionGenerator(coco(folder, raw=raw), **COMMON)
    assert gen.class_names == ["cat"] and gen.box_labels[0].tolist() == [0]


def test_a_coco_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "coco.json")
    with pytest.raises(ValueError, match=r"Cannot read COCO file .*coco\.json: it is a FIFO"):
        kg.DetectionGenerator(tmp_path / "coco.json", **COMMON)


# ----------------------------------------------------------------- silently wrong labels
@pytest.mark.parametrize("extra,match", [
    ({"id": 3, "name": "dog"}, r"COCO file .*coco\.json lists category id 3 twice \(named "
                               r"'cat' and 'dog'\).*Give each category its own id"),
    ({"id": 4, "name": "cat"}, r"COCO file .*coco\.json names two categories 'cat' \(ids 3 "
                               r"and 4\).*Give each category its own name, or merge them"),
])
def test_coco_categories_sharing_an_id_or_a_name_are_refused(folder, extra, match):
    with pytest.raises(ValueError, match=match):
        kg.DetectionGenerator(coco(folder, lambda d: d["categories"].append(extra)), **COMMON)


def test_one_coco_image_under_two_ids_is_refused_not_split_over_two_samples(folder):
    def twice(data):
        data["images"].append({"id": 2, "file_name": "./a.png"})
        data["annotations"].append({"id": 8, "image_id": 2, "bbox": [5, 5, 5, 5],
                                    "category_id": 3})
    with pytest.raises(ValueError, match=r"COCO file .*coco\.json lists the image "
                                         r"'\./a\.png' under image ids 1 and 2: its boxes "
                                         r"would be split over two samples"):
        kg.DetectionGenerator(coco(folder, twice), **COMMON)


def test_two_voc_files_naming_one_image_are_refused(folder):
    (folder / "voc").mkdir()
    for name in ("1.xml", "2.xml"):
        (folder / "voc" / name).write_text(
            "<annotation><filename>a.png</filename><object><name>cat</name><bndbox><xmin>1"
            "</xmin><ymin>1</ymin><xmax>5</xmax><ymax>5</ymax></bndbox></object>"
            "</annotation>")
    with pytest.raises(ValueError, match=r"VOC files .*1\.xml and .*2\.xml name the same "
                                         r"image .*a\.png"):
        kg.DetectionGenerator(folder / "voc", directory=folder, **COMMON)


@pytest.mark.parametrize("fmt", ["rel_xyxy", "rel_xywh", "rel_center_xywh", "rel_yxyx"])
def test_pixel_boxes_under_a_rel_format_are_refused_naming_the_row(folder, fmt):
    frame = pd.DataFrame({"filename": ["a.png", "b.png"], "boxes": ["[[0.3, 0.3, 0.4, 0.4]]",
                                                                    "[[10, 12, 30, 36]]"],
                          "class": ['["cat"]', '["cat"]']})
    with pytest.raises(ValueError, match=rf"`box_format` must be the format of the boxes\. "
                                         rf"Received: box_format='{fmt}' in row 1 of the "
                                         r"DataFrame\. Its box \[10, 12, 30, 36\] lies beyond "
                                         rf"0\.\.1 .*pass box_format='{fmt[4:]}'"):
        kg.DetectionGenerator(frame, directory=folder, boxes_col="boxes", box_format=fmt,
                              **COMMON)


def test_relative_boxes_within_rounding_of_the_edge_are_read(folder):
    frame = pd.DataFrame({"filename": ["a.png"], "xmin": [0.5], "ymin": [-0.001],
                          "xmax": [1.004], "ymax": [0.5], "class": ["cat"]})
    gen = kg.DetectionGenerator(frame, directory=folder, box_format="rel_xyxy",
                                box_cols=["xmin", "ymin", "xmax", "ymax"],
                                bounding_box_format="rel_xyxy", **COMMON)
    np.testing.assert_allclose(gen.boxes[0], [[0.5, 0, 1, 0.5]], atol=1e-6)


# ----------------------------------------------------------------- VOC fields
GOOD_VOC = ("<annotation><filename>a.png</filename><size><width>60</width><height>40"
            "</height></size><object><name>cat</name><bndbox><xmin>1</xmin><ymin>2</ymin>"
            "<xmax>11</xmax><ymax>22</ymax></bndbox></object></annotation>")
OBJECT = r"object 0 \(cat\) of VOC file .*a\.xml"


@pytest.mark.parametrize("old,new,match", [
    ("<width>60", "<width>sixty", r"`<width>` must be a positive whole number of pixels .*"
                                  r"Received: <width>='sixty' in VOC file .*a\.xml"),
    ("<width>60", "<width>nan", r"Received: <width>='nan' in VOC file"),
    ("<height>40", "<height>1e400", r"Received: <height>='1e400' in VOC file"),
    ("<height>40", "<height>-40", r"Received: <height>='-40' in VOC file"),
    ("bndbox>", "box>", rf"`<bndbox>` must be the object's box .*Received: no `<bndbox>` "
                          rf"in {OBJECT}"),
    ("<name>cat</name>", "", r"`<name>` must be the object's class name\. Received: no "
                             r"`<name>` in object 0 \(unnamed\) of VOC file"),
    ("<xmin>1", "<xmin>one", rf"`<xmin>` must be a finite number of pixels\. Received: "
                             rf"<xmin>='one' in {OBJECT}"),
    ("<ymin>2</ymin>", "", rf"Received: no `<ymin>` in {OBJECT}"),
    ("<xmax>11", "<xmax>inf", rf"Received: <xmax>='inf' in {OBJECT}"),
    ("<xmax>11", "<xmax>0", rf"`<bndbox>` must be a box that does not end before it starts "
                            rf".* in {OBJECT}"),
    ("annotation>", "notes>", r"`<annotation>` must be the root element of a VOC file\. "
                              r"Received: <notes> in VOC file .*a\.xml"),
    ("<filename>a.png</filename>", "", r"`<filename>` must be the image's file name\. "
                                       r"Received: no `<filename>` in VOC file .*a\.xml"),
    ("</annotation>", "", r"Cannot read VOC file .*a\.xml: not well-formed XML"),
    ("<annotation>", '<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x SYSTEM '
                     '"file:///etc/hostname">]><annotation>', r"xx^"),
])
def test_a_malformed_voc_field_is_named_with_its_file_and_object(folder, old, new, match):
    (folder / "voc").mkdir()
    text = GOOD_VOC.replace(old, new)
    if match == r"xx^":  # an external entity is never fetched
        text, match = text.replace("a.png</filename>", "&x;</filename>"), "undefined entity"
    (folder / "voc" / "a.xml").write_text(text)
    with pytest.raises(ValueError, match=match):
        kg.DetectionGenerator(folder / "voc", directory=folder, **COMMON)


def test_a_voc_file_that_is_not_utf8_says_so(folder):
    (folder / "voc").mkdir()
    (folder / "voc" / "a.xml").write_bytes(GOOD_VOC.replace("cat", "caf\u00e9").encode(
        "latin-1"))
    with pytest.raises(ValueError, match=r"Cannot read VOC file .*a\.xml: not well-formed XML "
                                         r".* It is not UTF-8 text"):
        kg.DetectionGenerator(folder / "voc", directory=folder, **COMMON)


def test_a_voc_size_of_zero_is_unknown_and_read_from_the_image(folder):
    (folder / "voc").mkdir()
    (folder / "voc" / "a.xml").write_text(GOOD_VOC.replace("<width>60", "<width>0"))
    gen = kg.DetectionGenerator(folder / "voc", directory=folder, **COMMON)
    assert gen.annotations.sizes == [None] and gen.boxes[0].shape == (1, 4)


# ----------------------------------------------------------------- boxes an image holds
def many_boxes(folder, n):
    """A COCO file whose a.png holds `n` boxes of 3 classes, and those boxes."""
    rng = np.random.default_rng(0)
    xy = rng.integers(0, [50, 30], (n, 2))  # inside the 60x40 image
    boxes = np.concatenate([xy, np.full((n, 2), 8)], axis=1)
    coco(folder, lambda d: d.update(
        annotations=[{"id": k, "image_id": 1, "bbox": boxes[k].tolist(),
                      "category_id": 3 + k % 3} for k in range(n)],
        categories=[{"id": 3 + c, "name": f"c{c}"} for c in range(3)]))
    return boxes


def test_an_image_with_more_boxes_than_the_default_bound_is_refused_naming_it(folder):
    many_boxes(folder, 10_001)
    with pytest.raises(ValueError, match=r"`max_boxes` must hold every image's boxes\. "
                                         r"Received: max_boxes=None \(at most 10,000 boxes an "
                                         r"image\), and image 'a\.png' \(id 1\) of COCO file "
                                         r".*coco\.json has 10,001\. Pass max_boxes=10001"):
        kg.DetectionGenerator(folder / "coco.json", **COMMON)


def test_a_raised_max_boxes_reads_many_boxes_in_one_pass_exactly(folder):
    boxes = many_boxes(folder, 20_000)
    gen = kg.DetectionGenerator(folder / "coco.json", max_boxes=20_000, ragged=True,
                                image_size=(40, 60), cache=None, verbose=0)
    xyxy = np.concatenate([boxes[:, :2], boxes[:, :2] + 8], axis=1)
    np.testing.assert_array_equal(gen.boxes[0], xyxy)
    assert gen.box_labels[0].tolist() == [k % 3 for k in range(20_000)]


def test_csv_rows_beyond_max_boxes_fail_at_that_row(folder):
    frame = pd.DataFrame({"filename": ["a.png"] * 4, "xmin": [1, 1, 1, "not even read"],
                          "ymin": [1] * 4, "xmax": [5] * 4, "ymax": [5] * 4,
                          "class": ["cat"] * 4})
    with pytest.raises(ValueError, match=r"Received: max_boxes=2, and .*a\.png \(row 0 of the "
                                         r"DataFrame\) has 3\. Pass max_boxes=3"):
        kg.DetectionGenerator(frame, directory=folder, max_boxes=2, **COMMON)
