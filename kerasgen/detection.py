"""`DetectionGenerator`: images with bounding boxes (and keypoints), from COCO JSON,
Pascal VOC XML folders or CSV lists, batched as KerasHub's detectors take them."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from kerasgen.sources import _annotations as annotations_mod
from kerasgen.sources import _boxes as boxes_mod
from kerasgen import _checks
from kerasgen.storage import remote as _remote
from kerasgen.loading import images
from kerasgen.labels import encoding as label_encoding
from kerasgen.sources import _listing as listing
from kerasgen import augment as augment_mod
from kerasgen.loading.image_loader import ImageLoader
from kerasgen.loading.options import ImageOptions
from kerasgen.sources._detection import DetectionSource
from kerasgen.storage.remote_cache import RemoteCache
from kerasgen._typing import (Cache, ColorMode, Decoder, ImageSize, Interpolation, OnError,
                              StrPath, Subset)
from kerasgen.builders.common import check_common, one_subset, worker_processes
from kerasgen.builders.image_files import ImageFileGenerator
from kerasgen import _redact

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("auto", "coco", "voc", "csv")


class DetectionGenerator(ImageFileGenerator):
    """Images and their bounding boxes (and keypoints), for object detection.

    A batch is `(images, {"boxes": (b, M, 4) float32, "labels": (b, M) int32})`, the
    format KerasHub's detectors (RetinaNetObjectDetector) train on, through
    `gen.to_tf_dataset()` (docs/targets.md): each image's boxes in
    `bounding_box_format`, their class ids, padded to M rows with -1. With keypoints,
    y also holds "keypoints": (b, K, 2) pixel (x, y), -1 where a point is missing.

    Boxes move with their image: the resize (stretched, `crop_to_aspect_ratio` or
    `pad_to_aspect_ratio`, as the image is) and `augment`, an albumentations Compose
    with `bbox_params` (and `keypoint_params`), which moves, clips and drops boxes as
    albumentations decides. A box that the crop to the aspect ratio cuts away, or that
    has no area once resized, is dropped with a warning; `gen.dropped_boxes` lists them.

    Args:
        annotations: a COCO instances JSON file (a local path or a URL), a folder of
            Pascal VOC XML files (or a VOC year folder holding Annotations/ and
            JPEGImages/), or a CSV file (or pandas DataFrame) of boxes.
        format: "auto" (default: .json is COCO, a folder VOC, else CSV), "coco", "voc",
            "csv".
        directory: the folder (or URL) the images are in. Default: COCO's JSON file's
            folder, VOC's JPEGImages/ beside Annotations/ (else the XML folder), the CSV
            file's folder. An image path of COCO (`file_name`) or VOC (`<filename>`)
            that leaves that folder ('..', an absolute path, a symbolic link) is an
            error naming the entry and its file, and so is a CSV row's when `directory`
            is given (without it, a CSV's paths are taken as written); each image is
            checked again as it is opened.
        allow_outside: True reads image paths that leave that folder.
        x_col: CSV: the image path column.
        y_col: CSV: the box class column (a class name or integer id per box).
        box_cols: CSV, one row per box: the four box columns, in `box_format`'s order
            (default: xmin, ymin, xmax, ymax). An image's rows need not be together; a
            row whose box and class cells are empty is an image without boxes.
        boxes_col: CSV, one row per image instead: a column of JSON lists of boxes, with
            `y_col` a JSON list of their classes.
        keypoints_col: CSV: a column of JSON lists of [x, y] points per image (null for
            one not annotated).
        box_format: the format of the CSV's boxes (Keras's names; default "xyxy", pixel
            corners). COCO boxes are "xywh" and VOC boxes "xyxy", as their files define.
            A box beyond 0..1 under a "rel_" format is an error naming its row (pixel
            boxes need the format without "rel_").
        bounding_box_format: the format of y's boxes (default "xyxy"; Keras's names:
            "yxyx", "xywh", "center_xywh", "center_yxhw", "rel_xyxy", "rel_yxyx",
            "rel_xywh", "rel_center_xywh"), as the model's `bounding_box_format`.
        max_boxes: M, the rows of each image's boxes (default: the most any image has),
            and the most boxes one image's annotations may hold (default: 10,000): an
            image with more is an error naming it, raised as the annotations are read,
            before any box is converted.
        ragged: y's "boxes", "labels" (and "keypoints") as lists of one array per image
            instead of padded arrays (for a custom training loop; Keras's fit needs the
            padded ones).
        class_names: the classes in class-id order (default: COCO's categories in id
            order, else the class names sorted, or the integer ids as they are).
        on_missing: "raise" (default) when an annotated image file does not exist, or
            "skip" to drop it with a warning (`gen.skipped` lists them).
        validation_split: a seeded, random split of the images (it needs `seed`).
        subset: "training" or "validation".
        **common: see `kg.Generator`; `augment` must be an albumentations Compose with
            bbox_params; samplers and batch_augment are refused (they act on one class
            per sample, and on images without their boxes).

    `image_size`, `color_mode`, `interpolation`, `crop_to_aspect_ratio`,
    `pad_to_aspect_ratio`, `rescale`, `cache`, `on_error`, `decode_threads`, `verbose`,
    `max_pixels`, `bit_depth`, `storage_options` and `remote_cache` are as for
    ImageFolderGenerator. A bad file skipped (on_error="skip") is replaced by another
    image, with that image's boxes.
    """

    def __init__(self, annotations: StrPath | pd.DataFrame, *,
                 format: Literal["auto", "coco", "voc", "csv"] = "auto",  # noqa: A002
                 directory: StrPath | None = None, x_col: str = "filename",
                 y_col: str = "class", box_cols: Sequence[str] | None = None,
                 boxes_col: str | None = None, keypoints_col: str | None = None,
                 box_format: str = "xyxy", bounding_box_format: str = "xyxy",
                 max_boxes: int | None = None, ragged: bool = False,
                 class_names: Sequence[str] | None = None,
                 on_missing: Literal["raise", "skip"] = "raise", allow_outside: bool = False,
                 image_size: ImageSize = (256, 256), color_mode: ColorMode = "rgb",
                 interpolation: Interpolation = "bilinear",
                 crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
                 rescale: float | None = None, cache: Cache = "auto",
                 on_error: OnError = "raise", decode_threads: int | None = None,
                 decoder: Decoder = "opencv", verbose: int = 1,
                 validation_split: float | None = None, subset: Subset | None = None,
                 seed: int | None = None, encoding: str = "utf-8",
                 max_pixels: int | None = images.MAX_PIXELS, bit_depth: int | None = None,
                 storage_options: Mapping[str, Any] | None = None,
                 remote_cache: StrPath | RemoteCache | None = None,
                 **common: Any) -> None:
        _checks.labels_come_from(self, common, "its annotations")
        check_common(self, common)  # before reading the annotations
        options = ImageOptions.of(locals()).for_dtype(common.get("dtype"))
        _refuse(common)
        one_subset(self, subset)
        common.pop("label_mode", None)
        store = _remote.Store(storage_options, _remote.check_cache(remote_cache))
        box_format = boxes_mod.check_format("box_format", box_format)
        boxes_mod.check_format("bounding_box_format", bounding_box_format)
        _checks.one_of("on_missing", on_missing, ("raise", "skip"))
        aspect = options.aspect
        size: tuple[int, int] = options.image_size  # type: ignore[assignment]
        if max_boxes is not None:
            max_boxes = _checks.positive_int("max_boxes", max_boxes)
        started = time.perf_counter()
        found = _read(annotations, _checks.one_of("format", format, FORMATS), directory,
                      x_col, y_col, box_cols, boxes_col, keypoints_col, box_format,
                      bool(allow_outside), encoding, store, max_boxes)
        if "augment" in common and common["augment"] is not None:
            augment_mod.check_box_augment(common["augment"], found.keypoints is not None)
        found, skipped = _existing(found, on_missing, store)
        keep = listing.validation_subset(None, len(found.paths), validation_split, subset,
                                         seed, files=found.paths, stacklevel=4)
        if keep is not None:
            found = found.subset(keep)
        class_ids, names = _class_ids(found, class_names)
        sizes = _sizes(found, store, decode_threads, options.on_error)
        targets, dropped = _resized(found, class_ids, sizes, size, aspect)
        if dropped:
            shown = ", ".join(f"box {b} of {found.where[i]}" for i, b in dropped[:3])
            _redact.warn(f"Dropped {len(dropped)} box(es) with no area left once the image "
                         f"is resized (cut away by crop_to_aspect_ratio, or empty): "
                         f"{shown}{' ...' if len(dropped) > 3 else ''}. "
                         "`gen.dropped_boxes` lists them all.", stacklevel=2)
        counts = [len(t.boxes) for t in targets]  # within max_boxes: read so
        if max_boxes is None and not ragged:
            max_boxes = max(max(counts, default=0), 1)
        keypoints = None if found.keypoints is None else max(
            max((len(p) for p in found.keypoints if p is not None), default=0), 1)
        self.annotations = found
        self.bounding_box_format = bounding_box_format
        self.box_format = box_format
        self.max_boxes, self.ragged = (None if ragged else max_boxes), bool(ragged)
        self.crop_to_aspect_ratio = options.crop_to_aspect_ratio
        self.pad_to_aspect_ratio = options.pad_to_aspect_ratio
        self.validation_split, self.subset = validation_split, subset
        self.dropped_boxes = [(found.paths[i], b) for i, b in dropped]
        self.directory = directory
        root: Any = found.root  # each image read inside it (images.read_file)
        loader = ImageLoader(found.paths, options, root=root, skipped=skipped,
                             processes=worker_processes(common), store=store)
        source = DetectionSource(
            loader, targets, bounding_box_format=bounding_box_format,
            max_boxes=self.max_boxes, max_keypoints=keypoints, class_names=names,
            describe=_Annotated(found.paths, found.where),
            listing_s=time.perf_counter() - started)
        super().__init__(source=source, label_mode="boxes", num_classes=len(names),
                         seed=seed, **common)

    @property
    def boxes(self) -> list[np.ndarray]:
        """Per image, its boxes on the loaded image (before augmentation), in
        `bounding_box_format`."""
        h, w = self.image_size
        return [boxes_mod.from_xyxy(t.boxes, self.bounding_box_format, h, w)
                for t in self.source.targets]

    @property
    def box_labels(self) -> list[np.ndarray]:
        """Per image, the class id of each of its boxes."""
        return [t.classes for t in self.source.targets]


class _Annotated:
    """Names image i in errors: its path and where it is annotated (picklable)."""

    def __init__(self, paths: list[str], where: list[str]) -> None:
        self.paths, self.where = paths, where

    def __call__(self, index: int) -> str:
        return f"{self.paths[index]} ({self.where[index]})"


def _refuse(common: Mapping[str, Any]) -> None:
    """What detection cannot take of the common arguments."""
    if common.get("sampler") is not None:
        raise ValueError(
            "`sampler` balances one class per sample, but an image holds boxes of "
            "several classes. Received: sampler="
            f"{type(common['sampler']).__name__}. Leave it out (repeat rare images in the "
            "annotations to oversample them).")
    if common.get("batch_augment") is not None:
        raise ValueError("`batch_augment` transforms batches of images without their "
                         "boxes. Use `augment` (an albumentations Compose with "
                         "bbox_params), which moves the boxes with each image.")
    if common.get("label_mode", "boxes") != "boxes":
        raise ValueError(f"DetectionGenerator's label_mode is 'boxes'. Received: "
                         f"label_mode={common['label_mode']!r}.")


def _read(annotations: Any, fmt: str, directory: Any, x_col: str, y_col: str,
          box_cols: Sequence[str] | None, boxes_col: str | None, keypoints_col: str | None,
          box_format: str, allow_outside: bool, encoding: str,
          store: _remote.Store, max_boxes: int | None) -> annotations_mod.Annotations:
    """The annotations, read in their format (found from `annotations` for "auto")."""
    if fmt == "auto":
        text = None if not isinstance(annotations, (str, os.PathLike)) else os.fspath(
            annotations)
        if text is not None and text.lower().endswith(".json"):
            fmt = "coco"
        elif text is not None and not _remote.is_url(text) and os.path.isdir(text):
            fmt = "voc"
        else:
            fmt = "csv"
    if fmt != "csv" and (box_cols is not None or boxes_col is not None or (
            keypoints_col is not None)):
        raise ValueError(f"`box_cols`, `boxes_col` and `keypoints_col` name CSV columns; "
                         f"the annotations are {fmt.upper()}.")
    folder = None if directory is None else os.fspath(directory)
    if fmt == "coco":
        return annotations_mod.read_coco(os.fspath(annotations), folder, store,
                                         allow_outside=allow_outside, max_boxes=max_boxes)
    if fmt == "voc":
        return annotations_mod.read_voc(os.fspath(annotations), folder,
                                        allow_outside=allow_outside, max_boxes=max_boxes)
    table = listing.Table.read(annotations, encoding, store)
    if box_cols is None and boxes_col is None:
        box_cols = ["xmin", "ymin", "xmax", "ymax"]
    return annotations_mod.read_csv(
        table, x_col=x_col, y_col=y_col, box_cols=box_cols, boxes_col=boxes_col,
        keypoints_col=keypoints_col, box_format=box_format, directory=directory,
        allow_outside=allow_outside, max_boxes=max_boxes)


def _existing(found: annotations_mod.Annotations, on_missing: str,
              store: _remote.Store) -> tuple[annotations_mod.Annotations, list[str]]:
    """The annotations of the images that exist; a missing one is an error naming it
    and where it is annotated, or (on_missing="skip") dropped with a warning."""
    there = listing.exists(found.paths, store)
    missing = [i for i, ok in enumerate(there) if not ok]
    if not missing:
        return found, []
    shown = ", ".join(f"{found.paths[i]} ({found.where[i]})" for i in missing[:5])
    more = " ..." if len(missing) > 5 else ""
    if on_missing == "raise":
        raise FileNotFoundError(f"{len(missing)} annotated image file(s) do not exist: "
                                f"{shown}{more}. Fix the paths (or `directory`), or pass "
                                "on_missing='skip' to drop them.")
    _redact.warn(f"Skipping {len(missing)} annotated image(s) whose file does not exist: "
                 f"{shown}{more}. `gen.skipped` lists them all.", stacklevel=3)
    gone = set(missing)
    keep = [i for i in range(len(found.paths)) if i not in gone]
    if not keep:
        raise ValueError("No annotated image file exists.")
    return found.subset(keep), [found.paths[i] for i in missing]


def _class_ids(found: annotations_mod.Annotations,
               class_names: Sequence[str] | None) -> tuple[list[np.ndarray], list[str]]:
    """(per image, its boxes' class ids; the class names in id order). Each distinct
    label is encoded (and checked) once, at its first box, so a million boxes cost a
    dictionary pass."""
    if class_names is None:
        class_names = found.class_names
    bounds = np.cumsum([0] + [len(labels) for labels in found.labels])
    first: dict[Any, int] = {}  # a label -> its index among the distinct labels
    at: list[int] = []  # the box where each distinct label first appears
    inverse = np.empty(int(bounds[-1]), np.int64)
    for k, label in enumerate(label for labels in found.labels for label in labels):
        j = first.get(label)
        if j is None:
            j = first[label] = len(at)
            at.append(k)
        inverse[k] = j
    if not at:
        if class_names is None:
            raise ValueError("The annotations hold no box, so the classes are unknown. "
                             "Pass `class_names`.")
        return [np.zeros(0, np.int32) for _ in found.labels], list(class_names)

    def describe(j: int) -> str:
        k = at[j]
        image = int(np.searchsorted(bounds, k, side="right")) - 1
        return f"box {k - int(bounds[image])} of {found.where[image]}"

    distinct = list(first)
    targets = label_encoding.encode_class_labels(np.array(distinct, dtype=object) if isinstance(
        distinct[0], str) else np.array(distinct), "int", class_names, None, describe)
    # encode_class_labels gives every sample its class id and counts the classes
    assert targets.class_ids is not None and targets.num_classes is not None
    ids = targets.class_ids.astype(np.int32)[inverse]
    names = targets.class_names if targets.class_names is not None else [
        str(k) for k in range(targets.num_classes)]
    return [ids[a:b] for a, b in zip(bounds[:-1], bounds[1:])], list(names)


def _sizes(found: annotations_mod.Annotations, store: _remote.Store,
           threads: int | None, on_error: str = "raise") -> list[tuple[int, int] | None]:
    """Each image's (height, width) as the loader decodes it: read from the file's
    header (a local file always: a size the annotations give must agree), else the
    annotations' size (a URL's, not fetched twice). A file whose header cannot be read
    and whose size the annotations do not give is an error, or with on_error="skip"
    None: the loader skips it when it is loaded (a stand-in brings its own boxes)."""
    from concurrent.futures import ThreadPoolExecutor

    def read(path: str) -> np.ndarray:
        return store.read(path, "image file")

    def size(i: int) -> tuple[int, int] | None:
        path, given = found.paths[i], found.sizes[i]
        if given is not None and _remote.is_url(path):
            return given
        try:
            real = annotations_mod.image_size_of(path, read, found.root)
        except (OSError, ValueError):
            if given is not None:
                return given  # a bad file: on_error decides when it is loaded
            if on_error == "skip":
                return None  # never loaded: its boxes are never used
            raise
        if given is not None and tuple(given) != tuple(real):
            raise ValueError(
                f"{path} is {real[0]}x{real[1]} (height x width) as decoded, but "
                f"{found.where[i]} says {given[0]}x{given[1]}. Its boxes would land in the "
                "wrong place. Fix the annotation's size (an EXIF orientation that turns "
                "the image swaps the two).")
        return real

    with ThreadPoolExecutor(threads or min(8, (os.cpu_count() or 1) * 2)) as pool:
        return list(pool.map(size, range(len(found.paths))))


def _resized(found: annotations_mod.Annotations, class_ids: list[np.ndarray],
             sizes: list[tuple[int, int] | None], image_size: tuple[int, int],
             aspect: str | None) -> tuple[list[boxes_mod.ImageBoxes], list[tuple[int, int]]]:
    """(per image, its ImageBoxes on the loaded image; the (image, box) pairs dropped:
    no area left once resized)."""
    targets: list[boxes_mod.ImageBoxes] = []
    dropped: list[tuple[int, int]] = []
    for i, size in enumerate(sizes):
        if size is None:  # a bad file skipped when loaded: no boxes of its own
            targets.append(boxes_mod.ImageBoxes(
                np.zeros((0, 4), np.float32), class_ids[i][:0],
                None if found.keypoints is None else np.zeros((0, 2), np.float32)))
            continue
        boxes = found.boxes[i]
        if found.relative:
            boxes = boxes * np.array([size[1], size[0], size[1], size[0]], np.float32)
        moved, kept = boxes_mod.resized_boxes(boxes, size, image_size, aspect)
        gone = np.ones(len(boxes), bool)
        gone[kept] = False
        dropped.extend((i, int(b)) for b in np.flatnonzero(gone))
        points = None
        if found.keypoints is not None:
            raw = found.keypoints[i]
            points = np.zeros((0, 2), np.float32) if raw is None else (
                boxes_mod.resized_points(raw, size, image_size, aspect))
        targets.append(boxes_mod.ImageBoxes(moved, class_ids[i][kept], points))
    return targets, dropped
