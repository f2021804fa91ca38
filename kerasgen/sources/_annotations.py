"""Detection annotations read from COCO JSON, Pascal VOC XML and CSV lists.

Each reader returns `Annotations`: one image path per sample, and per image its boxes
(pixel xyxy of the file, float32), one class label per box (a name, or COCO's category
as its name), its (height, width) when the file says it, and keypoints when read. Every
error names the file and the entry (annotation id, XML file, CSV row) at fault.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kerasgen.sources import _boxes as boxes_mod
from kerasgen import _images as images
from kerasgen import _jpeg
from kerasgen.sources import _listing as listing
from kerasgen.sources import _remote

HEAD_BYTES = 1 << 18  # read to find an image's size in its header (JPEG markers, PNG IHDR)


@dataclass
class Annotations:
    """What a detection generator's samples are: images, and their boxes and labels.

    paths: one image path (or URL) per sample; boxes: per image, (n_i, 4) pixel xyxy
    float32 on the file's image; labels: per image, n_i class labels (names, or integer
    ids); sizes: per image, (height, width) as the annotation file gives it, or None;
    keypoints: per image, (k, 2) pixel (x, y) float32 (NaN: not annotated), or None
    without keypoints; class_names: the classes in class-id order when the file lists
    them (COCO's categories), else None; where: per image, where its annotations are
    (for errors).
    """

    paths: list[str]
    boxes: list[np.ndarray]
    labels: list[list[Any]]
    sizes: list[tuple[int, int] | None]
    keypoints: list[np.ndarray] | None
    class_names: list[str] | None
    where: list[str]
    relative: bool = False  # boxes are rel_xyxy (0..1): scaled once the sizes are known

    def subset(self, keep: Sequence[int]) -> Annotations:
        pick = [int(i) for i in keep]
        return Annotations(
            [self.paths[i] for i in pick], [self.boxes[i] for i in pick],
            [self.labels[i] for i in pick], [self.sizes[i] for i in pick],
            None if self.keypoints is None else [self.keypoints[i] for i in pick],
            self.class_names, [self.where[i] for i in pick], self.relative)


def _box(values: Any, fmt: str, size: tuple[int, int] | None, where: str) -> np.ndarray:
    """One box of 4 finite numbers in format `fmt` -> pixel xyxy; a relative format
    needs the image's size."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(
            values) != 4 or not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                    and math.isfinite(v) for v in values):
        raise ValueError(f"A box must be 4 finite numbers. Received: {values!r} at {where}.")
    if fmt.startswith("rel_") and size is None:
        raise ValueError(f"Boxes in a relative format ({fmt!r}) need the image's size, "
                         f"which is unknown for {where}.")
    height, width = size or (1, 1)
    box = boxes_mod.to_xyxy(np.array(values, np.float64), fmt, height, width)[0]
    if box[2] < box[0] or box[3] < box[1]:
        raise ValueError(f"A box must not end before it starts. Received: {values!r} "
                         f"({fmt}) at {where}, which is x {box[0]}..{box[2]}, "
                         f"y {box[1]}..{box[3]}. Check the box format (box_format=).")
    return box


def _stack(rows: list[np.ndarray]) -> np.ndarray:
    return np.array(rows, np.float32).reshape(-1, 4)


# ----------------------------------------------------------------------------- COCO
def read_coco(path: str, image_dir: str | None = None, store: Any = None) -> Annotations:
    """The images and boxes of a COCO instances file (`images`, `annotations`,
    `categories`). Images are `image_dir/file_name` (default: the JSON file's folder);
    class ids follow the categories sorted by their id, so `class_names[k]` is the
    k-th category's name. Images without annotations are kept (no boxes)."""
    where = f"COCO file {path}"
    if _remote.is_url(path):
        data = json.loads((store or _remote.Store()).read(path, "COCO file").tobytes())
    else:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"`annotations` must be an existing COCO JSON file. "
                                    f"Received: {path!r} (not found).")
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as error:
                raise ValueError(f"Cannot read {where}: not JSON ({error}).") from None
    for key in ("images", "annotations", "categories"):
        if not isinstance(data, dict) or not isinstance(data.get(key), list):
            found = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"{where} must hold a list {key!r}, as COCO's instances "
                             f"files do. Received: keys {found}.")
    categories = sorted(data["categories"], key=lambda c: c["id"])
    names = {c["id"]: str(c["name"]) for c in categories}
    root = image_dir if image_dir is not None else (
        path.rsplit("/", 1)[0] if _remote.is_url(path) else os.path.dirname(os.path.abspath(path)))
    remote_root = _remote.is_url(os.fspath(root))
    join = (lambda a, b: f"{a.rstrip('/')}/{b}") if remote_root else os.path.join
    order: dict[Any, int] = {}
    paths: list[str] = []
    sizes: list[tuple[int, int] | None] = []
    boxes: list[list[np.ndarray]] = []
    labels: list[list[Any]] = []
    places: list[str] = []
    for image in data["images"]:
        if image.get("id") in order:
            raise ValueError(f"{where} lists image id {image.get('id')!r} twice.")
        order[image.get("id")] = len(paths)
        if not isinstance(image.get("file_name"), str):
            raise ValueError(f"Image {image.get('id')!r} of {where} has no `file_name`.")
        paths.append(join(os.fspath(root), image["file_name"]))
        h, w = image.get("height"), image.get("width")
        sizes.append((int(h), int(w)) if isinstance(h, int) and isinstance(w, int) else None)
        boxes.append([])
        labels.append([])
        places.append(f"image {image['file_name']!r} of {where}")
    for ann in data["annotations"]:
        at = f"annotation {ann.get('id')!r} of {where}"
        k = order.get(ann.get("image_id"))
        if k is None:
            raise ValueError(f"{at} names image_id {ann.get('image_id')!r}, which is not "
                             "in `images`.")
        if ann.get("category_id") not in names:
            raise ValueError(f"{at} names category_id {ann.get('category_id')!r}, which "
                             f"is not in `categories` (ids {sorted(names)}).")
        boxes[k].append(_box(ann.get("bbox"), "xywh", sizes[k], at))
        labels[k].append(names[ann["category_id"]])
    return Annotations(paths, [_stack(b) for b in boxes], labels, sizes, None,
                       [names[c["id"]] for c in categories], places)


# ----------------------------------------------------------------------------- VOC
def read_voc(folder: str, image_dir: str | None = None) -> Annotations:
    """The images and boxes of a folder of Pascal VOC XML files (sorted by name), or of
    a VOC year folder holding `Annotations/` and `JPEGImages/`. Images are
    `image_dir/<filename>` (default: the `JPEGImages` folder beside `Annotations`, else
    the XML files' folder)."""
    folder = os.fspath(folder)
    if os.path.isdir(os.path.join(folder, "Annotations")):
        folder = os.path.join(folder, "Annotations")
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"`annotations` must be an existing folder of VOC XML "
                                f"files. Received: {folder!r} (not found).")
    if image_dir is None:
        beside = os.path.join(os.path.dirname(os.path.abspath(folder)), "JPEGImages")
        image_dir = beside if os.path.basename(os.path.abspath(folder)) == "Annotations" and (
            os.path.isdir(beside)) else folder
    files = sorted(f for f in os.listdir(folder) if f.lower().endswith(".xml"))
    if not files:
        raise ValueError(f"No VOC XML file (*.xml) in {folder!r}.")
    paths, sizes, boxes, labels, places = [], [], [], [], []
    for name in files:
        xml_path = os.path.join(folder, name)
        try:
            root = ElementTree.parse(xml_path).getroot()
        except ElementTree.ParseError as error:
            raise ValueError(f"Cannot read VOC file {xml_path}: {error}.") from None
        filename = root.findtext("filename")
        if not filename:
            raise ValueError(f"VOC file {xml_path} has no <filename>.")
        size = root.find("size")
        hw = None
        height = None if size is None else size.findtext("height")
        width = None if size is None else size.findtext("width")
        if height and width:
            hw = (int(float(height)), int(float(width)))
            hw = hw if hw[0] > 0 and hw[1] > 0 else None  # VOC writes 0 when unknown
        rows, names = [], []
        for k, obj in enumerate(root.findall("object")):
            at = f"object {k} ({obj.findtext('name')!r}) of VOC file {xml_path}"
            box = obj.find("bndbox")
            if box is None or not obj.findtext("name"):
                raise ValueError(f"{at} needs a <name> and a <bndbox>.")
            try:
                values = [float(box.findtext(t) or "") for t in ("xmin", "ymin", "xmax",
                                                                 "ymax")]
            except (TypeError, ValueError):
                raise ValueError(f"{at}: <bndbox> needs numbers xmin, ymin, xmax, ymax.") from None
            rows.append(_box(values, "xyxy", hw, at))
            names.append((obj.findtext("name") or "").strip())
        paths.append(os.path.join(image_dir, filename))
        sizes.append(hw)
        boxes.append(_stack(rows))
        labels.append(names)
        places.append(f"VOC file {xml_path}")
    return Annotations(paths, boxes, labels, sizes, None, None, places)


# ----------------------------------------------------------------------------- CSV
def _cell_json(value: Any, column: str, where: str) -> Any:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        if not value.strip():
            return []
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            pass
    raise ValueError(f"Column {column!r} must hold a JSON list. Received: {value!r} at "
                     f"{where}.")


def read_csv(table: listing.Table, *, x_col: str, y_col: str,
             box_cols: Sequence[str] | None, boxes_col: str | None,
             keypoints_col: str | None, box_format: str, directory: Any,
             allow_outside: bool) -> Annotations:
    """The images and boxes of a table: one row per box (`box_cols`, four columns;
    the rows of one image together or not, images in the order they first appear; a
    row whose box cells are empty is an image without boxes), or one row per image
    (`boxes_col`: a JSON list of boxes, `y_col` a JSON list of their labels)."""
    if (box_cols is None) == (boxes_col is None):
        raise ValueError("Give the boxes as four columns (box_cols=[...]) or as one "
                         "column of JSON lists (boxes_col=...), not both. Received: "
                         f"box_cols={box_cols!r}, boxes_col={boxes_col!r}.")
    table.column(x_col, "x_col")
    table.column(y_col, "y_col")
    if box_cols is not None:
        box_cols = list(box_cols)
        if len(box_cols) != 4:
            raise ValueError(f"`box_cols` must name 4 columns. Received: {box_cols!r}.")
        for c in box_cols:
            table.column(c, "box_cols")
    else:
        table.column(boxes_col, "boxes_col")
    if keypoints_col is not None:
        table.column(keypoints_col, "keypoints_col")
    resolved = listing.resolve_paths(table.columns[x_col], table, directory, allow_outside,
                                     table.describe)
    order: dict[str, int] = {}
    paths: list[str] = []
    boxes: list[list[np.ndarray]] = []
    labels: list[list[Any]] = []
    points: list[Any] = []  # an array per image once its rows are read
    places: list[str] = []
    relative = box_format.startswith("rel_")
    for i, path in enumerate(resolved):
        at = table.describe(i)
        k = order.get(path)
        if k is None:
            k = order[path] = len(paths)
            paths.append(path)
            boxes.append([])
            labels.append([])
            points.append(None)
            places.append(at)
        size = (1, 1) if relative else None  # relative boxes stay rel_xyxy here
        if box_cols is not None:
            cells = [listing.parse_number(table.columns[c][i]) for c in box_cols]
            label = listing.parse_number(table.columns[y_col][i])
            if all(_empty(v) for v in cells) and _empty(label):
                pass  # an image without boxes
            else:
                boxes[k].append(_box(cells, box_format, size, at))
                labels[k].append(_label(label, y_col, at))
        else:
            assert boxes_col is not None
            row_boxes = _cell_json(table.columns[boxes_col][i], boxes_col, at)
            row_labels = _cell_json(table.columns[y_col][i], y_col, at)
            if len(row_boxes) != len(row_labels):
                raise ValueError(f"Column {y_col!r} must hold one label per box of "
                                 f"{boxes_col!r}. Received: {len(row_labels)} labels for "
                                 f"{len(row_boxes)} boxes at {at}.")
            boxes[k].extend(_box(b, box_format, size, at) for b in row_boxes)
            labels[k].extend(_label(v, y_col, at) for v in row_labels)
        if keypoints_col is not None:
            found = _points(_cell_json(table.columns[keypoints_col][i], keypoints_col, at),
                            keypoints_col, at)
            if points[k] is not None and not np.array_equal(points[k], found, equal_nan=True):
                raise ValueError(f"The rows of one image must hold the same keypoints. "
                                 f"Received: other keypoints for {path} at {at} than at "
                                 f"{places[k]}.")
            points[k] = found
    return Annotations(paths, [_stack(b) for b in boxes], labels, [None] * len(paths),
                       points if keypoints_col is not None else None, None, places,
                       relative=relative)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or (
        isinstance(value, float) and math.isnan(value))


def _label(value: Any, column: str, where: str) -> Any:
    if _empty(value) or isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"Column {column!r} must hold a class name or an integer id for "
                         f"each box. Received: {value!r} at {where}.")
    return value


def _points(values: list, column: str, where: str) -> np.ndarray:
    """A JSON list of [x, y] points (null for one not annotated) -> (k, 2) float32."""
    rows = []
    for point in values:
        if point is None:
            rows.append([np.nan, np.nan])
            continue
        if not (isinstance(point, list) and len(point) == 2 and all(
                isinstance(v, numbers.Real) and not isinstance(v, bool) for v in point)):
            raise ValueError(f"Column {column!r} must hold a list of [x, y] points. "
                             f"Received: {point!r} at {where}.")
        rows.append(point)
    return np.array(rows, np.float32).reshape(-1, 2)


# ----------------------------------------------------------------------------- sizes
def image_size_of(path: str, read: Any) -> tuple[int, int]:
    """(height, width) of the image file `path` as the loader decodes it (EXIF
    orientations 5-8 swap the two), read from its header; `read(path)` gives the
    bytes of a URL."""
    if _remote.is_url(path):
        data = read(path)
    else:
        with open(path, "rb") as f:
            data = np.frombuffer(f.read(HEAD_BYTES), np.uint8)
    size = images.header_size(data)
    if size is None and not _remote.is_url(path):  # a format read in full to be known
        data = images.read_file(path)
        size = images.header_size(data)
    if size is None:
        decoded = images.decode_bytes(data, "rgb", None, f"image file {path}")
        return int(decoded.shape[0]), int(decoded.shape[1])
    jpeg = _jpeg.info(data)
    if jpeg is not None and jpeg.orientation in (5, 6, 7, 8):
        return int(size[1]), int(size[0])
    return int(size[0]), int(size[1])
