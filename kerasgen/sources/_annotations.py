"""Detection annotations read from COCO JSON, Pascal VOC XML and CSV lists.

Each reader returns `Annotations`: one image path per sample, and per image its boxes
(pixel xyxy of the file, float32), one class label per box (a name, or COCO's category
as its name), its (height, width) when the file says it, and keypoints when read. Every
error names the file, the entry (image, annotation id, XML file, CSV row) and the field
at fault, in the one message form; no malformed field is ignored or guessed at.

Image paths are joined to a root (`_paths.Root`) and confined to it unless
`allow_outside`: `directory` when given, else COCO's JSON folder, VOC's JPEGImages/
beside Annotations/ (else the XML folder); a CSV without `directory` takes its paths as
written (documented). An image holds at most `max_boxes` boxes (default `MAX_BOXES`),
counted before any box is converted, so a file of millions fails at once; boxes are
checked and converted in one vectorised pass per file.
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

from kerasgen import _checks
from kerasgen.sources import _boxes as boxes_mod
from kerasgen.sources._boxes import MISSING as _MISSING, SHOW as _SHOW
from kerasgen.sources._boxes import field_error as _bad, finite as _finite
from kerasgen.loading import images
from kerasgen.loading import jpeg as _jpeg
from kerasgen.sources import _listing as listing
from kerasgen.storage import paths as _paths
from kerasgen.storage import remote as _remote

HEAD_BYTES = 1 << 18  # read to find an image's size in its header (JPEG markers, PNG IHDR)
MAX_BOXES = 10_000  # the most boxes one image may hold unless `max_boxes` says more
MAX_SIDE = 2**31 - 1  # the largest image side an annotation may declare


@dataclass
class Annotations:
    """What a detection generator's samples are: images, and their boxes and labels.

    paths: one image path (or URL) per sample; boxes: per image, (n_i, 4) pixel xyxy
    float32 on the file's image; labels: per image, n_i class labels (names, or integer
    ids); sizes: per image, (height, width) as the annotation file gives it, or None;
    keypoints: per image, (k, 2) pixel (x, y) float32 (NaN: not annotated), or None
    without keypoints; class_names: the classes in class-id order when the file lists
    them (COCO's categories), else None; where: per image, where its annotations are
    (for errors); root: the `_paths.Root` its images are confined to (None: not
    confined), checked again as each image is opened.
    """

    paths: list[str]
    boxes: list[np.ndarray]
    labels: list[list[Any]]
    sizes: list[tuple[int, int] | None]
    keypoints: list[np.ndarray] | None
    class_names: list[str] | None
    where: list[str]
    relative: bool = False  # boxes are rel_xyxy (0..1): scaled once the sizes are known
    root: _paths.Root | None = None

    def subset(self, keep: Sequence[int]) -> Annotations:
        pick = [int(i) for i in keep]
        return Annotations(
            [self.paths[i] for i in pick], [self.boxes[i] for i in pick],
            [self.labels[i] for i in pick], [self.sizes[i] for i in pick],
            None if self.keypoints is None else [self.keypoints[i] for i in pick],
            self.class_names, [self.where[i] for i in pick], self.relative, self.root)


def _entry(value: Any, key: str, k: int, where: str) -> dict:
    """Entry `k` of COCO's list `key`, which must be a JSON object."""
    if not isinstance(value, dict):
        raise _bad(f"{key}[{k}]", "a JSON object, as in COCO's instances files", value,
                   where)
    return value


def _ident(entry: dict, field: str, where: str) -> Any:
    """An id: an integer (not a bool) or a non-empty string."""
    value = entry.get(field, _MISSING)
    if isinstance(value, bool) or not (isinstance(value, int) or (
            isinstance(value, str) and value.strip())):
        raise _bad(field, "an integer id (or a non-empty string)", value, where)
    return value


def _side(value: Any, field: str, where: str, zero_unknown: bool = False) -> int | None:
    """An image side: a positive integer (a whole float, or its text in XML, too)."""
    if value is _MISSING or value is None:
        return None
    number = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not _finite(
            number) or number != int(number) or not 0 <= number <= MAX_SIDE or (
            number == 0 and not zero_unknown):
        raise _bad(field, f"a positive whole number of pixels (at most {MAX_SIDE:,})",
                   value, where)
    return int(number) or None  # VOC writes 0 when the size is unknown


def _per_image(owner: Sequence[int], num_images: int, max_boxes: int | None,
               where: Sequence[str]) -> np.ndarray:
    """The box counts of each image; an image with more than `max_boxes` (None:
    `MAX_BOXES`) is an error naming it (before any box is converted)."""
    counts = np.bincount(np.asarray(owner, np.int64), minlength=num_images)
    limit = MAX_BOXES if max_boxes is None else max_boxes
    if len(counts) and counts.max() > limit:
        k = int(np.argmax(counts))
        shown = (f"max_boxes=None (at most {MAX_BOXES:,} boxes an image)"
                 if max_boxes is None else f"max_boxes={max_boxes}")
        raise ValueError(
            f"`max_boxes` must hold every image's boxes. Received: {shown}, and "
            f"{where[k]} has {int(counts[k]):,}. Pass max_boxes={int(counts[k])} or more "
            "if that is intended (padded batches hold that many rows an image; "
            "ragged=True does not pad).")
    return counts


def _split(xyxy: np.ndarray, owner: Sequence[int], counts: np.ndarray) -> list[np.ndarray]:
    """`xyxy` (one row per box, in file order) split per image, each image's in order."""
    if not len(counts):
        return []
    order = np.argsort(np.asarray(owner, np.int64), kind="stable")
    return np.split(xyxy[order].astype(np.float32), np.cumsum(counts)[:-1])


# ----------------------------------------------------------------------------- COCO
def _read_text(path: str, what: str, store: Any) -> str:
    """The text of the annotation file `path` (a URL through `store`): a regular file
    (a FIFO is refused, not waited on), UTF-8 (a byte-order mark allowed)."""
    if _remote.is_url(path):
        data = (store or _remote.Store()).read(path, what).tobytes()
    else:
        with _checks.open_regular(path, what) as f:
            data = f.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(f"Cannot read {what} {path}: it is not UTF-8 text (byte "
                         f"{data[error.start]:#04x} on line {line}). Save it as UTF-8, "
                         "as JSON must be.") from None


def read_coco(path: str, image_dir: str | None = None, store: Any = None, *,
              allow_outside: bool = False, max_boxes: int | None = None) -> Annotations:
    """The images and boxes of a COCO instances file (`images`, `annotations`,
    `categories`). Images are `image_dir/file_name` (default: the JSON file's folder),
    confined to it unless `allow_outside`; class ids follow the categories sorted by
    their id, so `class_names[k]` is the k-th category's name. Images without
    annotations are kept (no boxes)."""
    where = f"COCO file {path}"
    if not _remote.is_url(path) and not os.path.exists(path):
        raise FileNotFoundError(f"`annotations` must be an existing COCO JSON file. "
                                f"Received: {path!r} (not found).")
    text = _read_text(path, "COCO file", store)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        empty = " (the file is empty)" if not text.strip() else ""
        raise ValueError(f"Cannot read {where}: not JSON{empty} ({error}).") from None
    except RecursionError:
        raise ValueError(f"Cannot read {where}: its JSON is nested more deeply than "
                         "Python's JSON reader allows; a COCO file is three levels "
                         "deep.") from None
    if not isinstance(data, dict):
        raise ValueError(f"A COCO file must be a JSON object holding the lists `images`, "
                         f"`annotations` and `categories`. Received: a JSON "
                         f"{type(data).__name__} in {where}.")
    for key in ("images", "annotations", "categories"):
        if not isinstance(data.get(key), list):
            raise _bad(key, "a list, as in COCO's instances files", data.get(key, _MISSING),
                       where, f"Its keys: {_SHOW.repr(sorted(map(str, data)))}.")
    names, class_names = _categories(data["categories"], where)
    root = _paths.Root.of(image_dir) if image_dir is not None else _paths.Root.of(
        path.rsplit("/", 1)[0] if _remote.is_url(path) else os.path.dirname(
            os.path.abspath(path)), "the COCO file's folder")
    order: dict[Any, int] = {}
    first: dict[str, Any] = {}  # an image path -> the id it is listed under first
    paths: list[str] = []
    sizes: list[tuple[int, int] | None] = []
    places: list[str] = []
    for k, image in enumerate(data["images"]):
        at = f"entry {k} of `images` of {where}"
        image_id = _ident(_entry(image, "images", k, where), "id", at)
        if image_id in order:
            raise ValueError(f"{where} lists image id {image_id!r} twice (entries "
                             f"{order[image_id]} and {k} of `images`). Give each image "
                             "one entry.")
        at = f"image {image_id!r} (entry {k} of `images`) of {where}"
        name = image.get("file_name", _MISSING)
        if not isinstance(name, str) or not name.strip():
            raise _bad("file_name", "the image's path (a non-empty string)", name, at)
        full = root.join(name, at)
        if not allow_outside:
            root.check(name, full, at, "fix the COCO file or pass `directory`")
        if full in first:
            raise ValueError(f"{where} lists the image {name!r} under image ids "
                             f"{first[full]!r} and {image_id!r}: its boxes would be split "
                             "over two samples, each with part of them. Give the image one "
                             "entry in `images`, and point its annotations at that id.")
        first[full] = image_id
        order[image_id] = k
        paths.append(full)
        h = _side(image.get("height", _MISSING), "height", at)
        w = _side(image.get("width", _MISSING), "width", at)
        sizes.append((h, w) if h is not None and w is not None else None)
        places.append(f"image {name!r} (id {image_id!r}) of {where}")
    anns = data["annotations"]
    owner, category, values = [], [], []
    for k, ann in enumerate(anns):  # the checks are cheap; an error's words are not
        if type(ann) is not dict:
            _entry(ann, "annotations", k, where)
        image_id, cat = ann.get("image_id", _MISSING), ann.get("category_id", _MISSING)
        if type(image_id) not in (int, str) or image_id not in order:
            raise _bad("image_id", "the id of an image in `images`", image_id,
                       _annotation(ann, k, where))
        if type(cat) not in (int, str) or cat not in names:
            raise _bad("category_id", f"the id of a category in `categories` (ids "
                                      f"{_SHOW.repr(sorted(names, key=_id_key))})", cat,
                       _annotation(ann, k, where))
        owner.append(order[image_id])
        category.append(names[cat])
        values.append(ann.get("bbox", _MISSING))
    counts = _per_image(owner, len(paths), max_boxes, places)

    boxes = _split(boxes_mod.checked(values, "xywh",
                                     lambda k: _annotation(anns[k], k, where)),
                   owner, counts)
    label_order = np.argsort(np.asarray(owner, np.int64), kind="stable")
    flat = np.asarray(category, dtype=object)[label_order]
    labels = [part.tolist() for part in np.split(flat, np.cumsum(counts)[:-1])]
    return Annotations(paths, boxes, labels, sizes, None, class_names, places,
                       root=None if allow_outside else root)


def _annotation(ann: dict, k: int, where: str) -> str:
    return f"annotation {_SHOW.repr(ann.get('id'))} (entry {k} of `annotations`) of {where}"


def _id_key(value: Any) -> tuple[bool, Any]:
    return isinstance(value, str), value  # integer ids first, then string ids


def _categories(entries: list, where: str) -> tuple[dict[Any, str], list[str]]:
    """({category id: name}, the names in id order) of COCO's `categories`; an entry
    without an integer id or a name, or an id or name used twice, is an error naming
    it (two ids of one name, or one id of two names, would mislabel boxes)."""
    names: dict[Any, str] = {}
    owners: dict[str, Any] = {}
    for k, category in enumerate(entries):
        at = f"entry {k} of `categories` of {where}"
        cat = _ident(_entry(category, "categories", k, where), "id", at)
        name = category.get("name", _MISSING)
        if not isinstance(name, str) or not name.strip():
            raise _bad("name", "the category's name (a non-empty string)", name,
                       f"category {cat!r} ({at})")
        if cat in names:
            raise ValueError(f"{where} lists category id {cat!r} twice (named "
                             f"{names[cat]!r} and {name!r}): its boxes could take either "
                             "class. Give each category its own id.")
        if name in owners:
            raise ValueError(f"{where} names two categories {name!r} (ids {owners[name]!r} "
                             f"and {cat!r}): their boxes would share one class name but "
                             "count as two classes. Give each category its own name, or "
                             "merge them into one id.")
        names[cat], owners[name] = name, cat
    ordered = sorted(names, key=_id_key)
    return names, [names[c] for c in ordered]


# ----------------------------------------------------------------------------- VOC
def read_voc(folder: str, image_dir: str | None = None, *, allow_outside: bool = False,
             max_boxes: int | None = None) -> Annotations:
    """The images and boxes of a folder of Pascal VOC XML files (sorted by name), or of
    a VOC year folder holding `Annotations/` and `JPEGImages/`. Images are
    `image_dir/<filename>` (default: the `JPEGImages` folder beside `Annotations`, else
    the XML files' folder), confined to it unless `allow_outside`, as the XML files are
    to their folder."""
    folder = os.fspath(folder)
    if os.path.isdir(os.path.join(folder, "Annotations")):
        folder = os.path.join(folder, "Annotations")
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"`annotations` must be an existing folder of VOC XML "
                                f"files. Received: {folder!r} (not found).")
    if image_dir is not None:
        root = _paths.Root.of(image_dir)
    else:
        beside = os.path.join(os.path.dirname(os.path.abspath(folder)), "JPEGImages")
        root = (_paths.Root.of(beside, "the JPEGImages folder") if os.path.basename(
            os.path.abspath(folder)) == "Annotations" and os.path.isdir(beside)
            else _paths.Root.of(folder, "the folder of the VOC files"))
    files = sorted(f for f in os.listdir(folder) if f.lower().endswith(".xml"))
    if not files:
        raise ValueError(f"No VOC XML file (*.xml) in {folder!r}.")
    own = _paths.Root.of(folder, "`annotations`")
    paths: list[str] = []
    sizes: list[tuple[int, int] | None] = []
    labels: list[list[Any]] = []
    places: list[str] = []
    first: dict[str, str] = {}  # an image -> the VOC file naming it first
    owner: list[int] = []  # per box: its image, its 4 numbers, where it is
    values: list[list[float]] = []
    objects: list[str] = []
    for name in files:
        xml_path = os.path.join(folder, name)
        if not allow_outside:
            own.check(name, xml_path, f"the folder {folder}", "replace the link by the file")
        image, hw, found = _voc_file(xml_path, root, allow_outside)
        if image in first:
            raise ValueError(f"VOC files {first[image]} and {xml_path} name the same image "
                             f"{image}: its boxes would be split over two samples. Put all "
                             "of its objects in one file.")
        first[image] = xml_path
        if len(found) > (MAX_BOXES if max_boxes is None else max_boxes):
            _per_image([0] * len(found), 1, max_boxes, [f"VOC file {xml_path}"])
        for box, label, at in found:
            owner.append(len(paths))
            values.append(box)
            objects.append(at)
        paths.append(image)
        sizes.append(hw)
        labels.append([label for _, label, _ in found])
        places.append(f"VOC file {xml_path}")
    counts = _per_image(owner, len(paths), max_boxes, places)
    boxes = _split(boxes_mod.checked(values, "xyxy", objects.__getitem__, "<bndbox>"), owner,
                   counts)
    return Annotations(paths, boxes, labels, sizes, None, None, places,
                       root=None if allow_outside else root)


def _voc_file(xml_path: str, root: _paths.Root, allow_outside: bool,
              ) -> tuple[str, tuple[int, int] | None, list[tuple[list, str, str]]]:
    """(image path, (height, width) or None, [(box, name, where)...]) of one VOC file;
    every malformed field is an error naming the file, the object and the field."""
    where = f"VOC file {xml_path}"
    with _checks.open_regular(xml_path, "VOC file") as f:  # a FIFO would block
        data = f.read()
    try:
        top = ElementTree.fromstring(data)
    except ElementTree.ParseError as error:
        try:
            data.decode("utf-8")
            hint = ""
        except UnicodeDecodeError:
            hint = (" It is not UTF-8 text: save it as UTF-8, or declare its encoding "
                    "(<?xml version=\"1.0\" encoding=\"latin-1\"?>).")
        raise ValueError(f"Cannot read {where}: not well-formed XML ({error}).{hint}") from None
    if top.tag != "annotation":
        raise ValueError(f"`<annotation>` must be the root element of a VOC file. Received: "
                         f"<{_SHOW.repr(top.tag)[1:-1]}> in {where}.")
    filename = (top.findtext("filename") or "").strip()
    if not filename:
        raise _bad("<filename>", "the image's file name", top.findtext("filename",
                                                                        _MISSING), where)
    image = root.join(filename, where)
    if not allow_outside:
        root.check(filename, image, where, "fix the VOC file or pass `directory`")
    size, hw = top.find("size"), None
    if size is not None:
        h = _side(size.findtext("height", _MISSING), "<height>", where, zero_unknown=True)
        w = _side(size.findtext("width", _MISSING), "<width>", where, zero_unknown=True)
        hw = (h, w) if h is not None and w is not None else None
    found = []
    for k, obj in enumerate(top.findall("object")):
        label = (obj.findtext("name") or "").strip()
        at = f"object {k} ({label or 'unnamed'}) of {where}"
        if not label:
            raise _bad("<name>", "the object's class name", obj.findtext("name", _MISSING),
                       at)
        box = obj.find("bndbox")
        if box is None:
            raise _bad("<bndbox>", "the object's box (xmin, ymin, xmax, ymax)", _MISSING,
                       at)
        numbers_ = []
        for tag in ("xmin", "ymin", "xmax", "ymax"):
            text = box.findtext(tag, _MISSING)
            try:
                numbers_.append(float(text.strip()) if isinstance(text, str) else None)
            except ValueError:
                numbers_.append(None)
            if numbers_[-1] is None or not math.isfinite(numbers_[-1]):
                raise _bad(f"<{tag}>", "a finite number of pixels", text, at)
        found.append((numbers_, label, at))
    return image, hw, found


# ----------------------------------------------------------------------------- CSV
def _cell_json(value: Any, column: str, where: str) -> Any:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        if not value.strip():
            return []
        try:
            found = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            found = None
        if isinstance(found, list):
            return found
    raise ValueError(f"Column {column!r} must hold a JSON list. Received: "
                     f"{_SHOW.repr(value)} at {where}.")


def read_csv(table: listing.Table, *, x_col: str, y_col: str,
             box_cols: Sequence[str] | None, boxes_col: str | None,
             keypoints_col: str | None, box_format: str, directory: Any,
             allow_outside: bool, max_boxes: int | None = None) -> Annotations:
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
    labels: list[list[Any]] = []
    points: list[Any] = []  # an array per image once its rows are read
    places: list[str] = []
    owner: list[int] = []  # per box: its image, its 4 cells, its row
    values: list[Any] = []
    rows: list[int] = []
    counts: list[int] = []
    for i, path in enumerate(resolved):
        at = table.describe(i)
        k = order.get(path)
        if k is None:
            k = order[path] = len(paths)
            paths.append(path)
            labels.append([])
            points.append(None)
            places.append(at)
            counts.append(0)
        if box_cols is not None:
            cells = [listing.parse_number(table.columns[c][i]) for c in box_cols]
            label = listing.parse_number(table.columns[y_col][i])
            row_boxes = [] if all(_empty(v) for v in cells) and _empty(label) else [cells]
            row_labels = [label] if row_boxes else []
        else:
            assert boxes_col is not None
            row_boxes = _cell_json(table.columns[boxes_col][i], boxes_col, at)
            row_labels = _cell_json(table.columns[y_col][i], y_col, at)
            if len(row_boxes) != len(row_labels):
                raise ValueError(f"Column {y_col!r} must hold one label per box of "
                                 f"{boxes_col!r}. Received: {len(row_labels)} labels for "
                                 f"{len(row_boxes)} boxes at {at}.")
        counts[k] += len(row_boxes)
        if counts[k] > (MAX_BOXES if max_boxes is None else max_boxes):  # at once
            _per_image([0] * counts[k], 1, max_boxes, [f"{path} ({places[k]})"])
        owner.extend([k] * len(row_boxes))
        values.extend(row_boxes)
        rows.extend([i] * len(row_boxes))
        labels[k].extend(_label(v, y_col, at) for v in row_labels)
        if keypoints_col is not None:
            found = _points(_cell_json(table.columns[keypoints_col][i], keypoints_col, at),
                            keypoints_col, at)
            if points[k] is not None and not np.array_equal(points[k], found, equal_nan=True):
                raise ValueError(f"The rows of one image must hold the same keypoints. "
                                 f"Received: other keypoints for {path} at {at} than at "
                                 f"{places[k]}.")
            points[k] = found
    xyxy = boxes_mod.checked(values, box_format, lambda b: table.describe(rows[b]),
                             "box_cols" if boxes_col is None else boxes_col,
                             "Check the box format (box_format=).")
    boxes = _split(xyxy, owner, np.asarray(counts, np.int64))
    return Annotations(paths, boxes, labels, [None] * len(paths),
                       points if keypoints_col is not None else None, None, places,
                       relative=box_format.startswith("rel_"),
                       root=None if directory is None or allow_outside
                       else _paths.Root.of(directory))


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or (
        isinstance(value, float) and math.isnan(value))


def _label(value: Any, column: str, where: str) -> Any:
    if _empty(value) or isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"Column {column!r} must hold a class name or an integer id for "
                         f"each box. Received: {_SHOW.repr(value)} at {where}.")
    return value


def _points(values: list, column: str, where: str) -> np.ndarray:
    """A JSON list of [x, y] points (null for one not annotated) -> (k, 2) float32."""
    rows = []
    for point in values:
        if point is None:
            rows.append([np.nan, np.nan])
            continue
        if not (isinstance(point, list) and len(point) == 2 and all(
                isinstance(v, numbers.Real) and not isinstance(v, bool) and _finite(v)
                for v in point)):
            raise ValueError(f"Column {column!r} must hold a list of [x, y] points of "
                             f"finite numbers. Received: {_SHOW.repr(point)} at {where}.")
        rows.append(point)
    return np.array(rows, np.float32).reshape(-1, 2)


# ----------------------------------------------------------------------------- sizes
def image_size_of(path: str, read: Any, root: Any = None) -> tuple[int, int]:
    """(height, width) of the image file `path` as the loader decodes it (EXIF
    orientations 5-8 swap the two), read from its header; `read(path)` gives the
    bytes of a URL. A local file is read as the loader reads it: a regular file only,
    inside `root` (see `images.read_file`)."""
    if _remote.is_url(path):
        data = read(path)
    else:
        data = images.read_file(path, root, max_bytes=HEAD_BYTES)
    size = images.header_size(data)
    if size is None and not _remote.is_url(path):  # a format read in full to be known
        data = images.read_file(path, root)
        size = images.header_size(data)
    if size is None:
        decoded = images.decode_bytes(data, "rgb", None, f"image file {path}")
        return int(decoded.shape[0]), int(decoded.shape[1])
    jpeg = _jpeg.info(data)
    if jpeg is not None and jpeg.orientation in (5, 6, 7, 8):
        return int(size[1]), int(size[0])
    return int(size[0]), int(size[1])
