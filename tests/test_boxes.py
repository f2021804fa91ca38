"""Box geometry (_boxes) and annotation readers (_annotations): formats equal Keras's
convert_format, boxes follow the loader's resize, and bad annotation files are named."""

import json

import cv2
import keras
import numpy as np
import pandas as pd
import pytest

from kerasgen.sources import _annotations as annotations
from kerasgen.sources import _boxes as boxes
from kerasgen.sources import _listing as listing


def _random_boxes(n=6, seed=0):
    xy = np.sort(np.random.default_rng(seed).uniform(0, 60, (n, 2, 2)), axis=1)
    return np.concatenate([xy[:, 0], xy[:, 1]], axis=1).astype("float32")


@pytest.mark.parametrize("fmt", boxes.FORMATS)
def test_formats_are_keras_convert_format(fmt):
    b = _random_boxes()
    expected = keras.ops.convert_to_numpy(keras.utils.bounding_boxes.convert_format(
        b, source="xyxy", target=fmt, height=60, width=80))
    np.testing.assert_allclose(boxes.from_xyxy(b, fmt, 60, 80), expected, atol=1e-4)
    np.testing.assert_allclose(boxes.to_xyxy(expected, fmt, 60, 80), b, atol=1e-3)


def test_resize_moves_boxes_as_the_image_moves():
    box = np.array([[0, 0, 100, 50], [150, 0, 200, 10]], "float32")
    stretched, kept = boxes.resized_boxes(box, (100, 200), (50, 50), None)
    assert stretched.tolist() == [[0, 0, 25, 25], [37.5, 0, 50, 5]] and kept.tolist() == [0, 1]
    cropped, kept = boxes.resized_boxes(box, (100, 200), (50, 50), "crop")
    assert cropped.tolist() == [[0, 0, 25, 25]] and kept.tolist() == [0]  # 2nd cut away
    padded, _ = boxes.resized_boxes(box, (100, 200), (50, 50), "pad")
    # fitted at scale 1/4 into rows 12..37 (tf.image.resize_with_pad rounds the top down)
    assert padded.tolist() == [[0, 12, 25, 24.5], [37.5, 12, 50, 14.5]]


def test_pad_fills_with_minus_one():
    out = boxes.pad([np.ones((2, 4)), np.zeros((0, 4))], 3, 4, "float32")
    assert out.shape == (2, 3, 4) and (out[0, 2] == -1).all() and (out[1] == -1).all()


@pytest.fixture
def images(tmp_path):
    for name, (h, w) in {"a.jpg": (40, 60), "b.png": (30, 20)}.items():
        cv2.imwrite(str(tmp_path / name), np.zeros((h, w, 3), np.uint8))
    return tmp_path


def test_coco(images):
    coco = {"images": [{"id": 1, "file_name": "a.jpg", "width": 60, "height": 40},
                       {"id": 2, "file_name": "b.png", "width": 20, "height": 30}],
            "annotations": [{"id": 7, "image_id": 1, "bbox": [1, 2, 10, 20], "category_id": 3},
                            {"id": 8, "image_id": 1, "bbox": [5, 5, 5, 5], "category_id": 1}],
            "categories": [{"id": 3, "name": "cat"}, {"id": 1, "name": "dog"}]}
    path = images / "coco.json"
    path.write_text(json.dumps(coco))
    found = annotations.read_coco(str(path))
    assert found.class_names == ["dog", "cat"] and found.labels == [["cat", "dog"], []]
    assert found.boxes[0].tolist() == [[1, 2, 11, 22], [5, 5, 10, 10]]
    assert found.boxes[1].shape == (0, 4) and found.sizes == [(40, 60), (30, 20)]
    coco["annotations"].append({"id": 9, "image_id": 5, "bbox": [0, 0, 1, 1], "category_id": 1})
    path.write_text(json.dumps(coco))
    with pytest.raises(ValueError, match=r"image_id=5 in annotation 9 \(entry 2"):
        annotations.read_coco(str(path))


def test_voc(images):
    (images / "voc").mkdir()
    (images / "voc" / "a.xml").write_text(
        "<annotation><filename>a.jpg</filename><size><width>60</width><height>40</height>"
        "</size><object><name>cat</name><bndbox><xmin>1</xmin><ymin>2</ymin><xmax>11</xmax>"
        "<ymax>22</ymax></bndbox></object></annotation>")
    found = annotations.read_voc(images / "voc", str(images))
    assert found.boxes[0].tolist() == [[1, 2, 11, 22]] and found.labels == [["cat"]]
    assert found.sizes == [(40, 60)]


def test_csv_rows_per_box_and_sizes(images):
    frame = pd.DataFrame({"filename": ["a.jpg", "a.jpg", "b.png"], "xmin": [1, 5, ""],
                          "ymin": [2, 5, ""], "xmax": [11, 10, ""], "ymax": [22, 10, ""],
                          "class": ["cat", "dog", ""]})
    found = annotations.read_csv(
        listing.Table.read(frame), x_col="filename", y_col="class",
        box_cols=["xmin", "ymin", "xmax", "ymax"], boxes_col=None, keypoints_col=None,
        box_format="xyxy", directory=str(images), allow_outside=False)
    assert found.labels == [["cat", "dog"], []] and found.boxes[1].shape == (0, 4)
    assert [annotations.image_size_of(p, None) for p in found.paths] == [(40, 60), (30, 20)]
    frame.loc[0, "xmax"] = 0
    with pytest.raises(ValueError, match=r"`box_cols` must be a box that does not end before "
                                         r"it starts.*row 0 of the DataFrame"):
        annotations.read_csv(
            listing.Table.read(frame), x_col="filename", y_col="class",
            box_cols=["xmin", "ymin", "xmax", "ymax"], boxes_col=None, keypoints_col=None,
            box_format="xyxy", directory=str(images), allow_outside=False)
