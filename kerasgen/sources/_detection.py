"""The source of detection generators: images and, per image, boxes, classes, keypoints.

`DetectionSource` is an `ImageSource` whose samples carry targets: each image's boxes,
moved once at build as the loader resizes it (`sources._boxes.resized_boxes`), their class ids
and its keypoints (`sources._boxes.ImageBoxes`). A batch decodes each image, takes the targets
of the image it holds (a skipped file's stand-in brings its own), lets augmentation move
them with it (albumentations' bbox_params), and packs them as KerasHub's detectors take
them: {"boxes": (b, M, 4), "labels": (b, M)}, padded with -1 (`pack`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kerasgen.arrays import batching
from kerasgen.sources import _boxes as boxes_mod
from kerasgen.sources._image import ImageSource
from kerasgen.sources._batch_request import BatchRequest, default_assemble


class DetectionSource(ImageSource):
    """Images (`loader`) with their detection targets.

    Args:
        loader, class_names, rescale, describe, files_found, listing_s: as for
            `ImageSource` (it has no per-sample labels: an image has several boxes).
        targets: one `sources._boxes.ImageBoxes` per sample, on the loaded (resized) image.
        bounding_box_format: the format of y's boxes (Keras's names: "xyxy", "yxyx",
            "xywh", "center_xywh", "rel_xyxy", ...).
        max_boxes: M, the boxes of each row of y (None: ragged lists of arrays).
        max_keypoints: K, the keypoints of each row of y (None: no keypoints).
    """

    def __init__(self, loader: Any, targets: Sequence[boxes_mod.ImageBoxes], *,
                 bounding_box_format: str, max_boxes: int | None,
                 max_keypoints: int | None = None, class_names: Sequence[str] | None = None,
                 rescale: float | None = None, describe: Any = None,
                 files_found: int | None = None, listing_s: float = 0.0) -> None:
        super().__init__(loader, None, class_names=class_names, rescale=rescale,
                         describe=describe, files_found=files_found, listing_s=listing_s)
        self.targets = list(targets)
        self.bounding_box_format = boxes_mod.check_format("bounding_box_format",
                                                          bounding_box_format)
        self.max_boxes = max_boxes
        self.max_keypoints = max_keypoints

    def for_processes(self, processes: int) -> DetectionSource:
        """This source with its loader shared by `processes` worker processes."""
        loader = self.loader.for_processes(processes)
        if loader is self.loader:
            return self
        return DetectionSource(
            loader, self.targets, bounding_box_format=self.bounding_box_format,
            max_boxes=self.max_boxes, max_keypoints=self.max_keypoints,
            class_names=self.class_names, rescale=self.rescale, describe=self._describe,
            files_found=self.files_found, listing_s=self.listing_s)

    def load_batch(self, request: BatchRequest) -> tuple[Any, Any]:
        """(x, y) of `request`: each image decoded (a bad file replaced by a stand-in,
        on_error="skip", which brings its own boxes), augmented with its boxes on the
        loader's threads, then assembled and packed."""
        if request.partners is not None:
            raise ValueError("Synthetic samples (SMOTE) cannot blend boxes.")
        loader, indices = self.loader, request.indices
        loader.prefetch(indices)

        def chunk(a: int, b: int) -> list[tuple[Any, boxes_mod.ImageBoxes]]:
            pixels = np.empty((b - a,) + loader.sample_shape, loader.pixel_dtype)
            held: list[int] = []  # the image each row holds (a stand-in's, skipped)
            with request.stage("decode"):  # decoder="nvimgcodec": the JPEGs in one call
                loader.load_rows(indices[a:b], pixels, None, request.substitutes, held)
            done = []
            for k in range(a, b):
                x, targets = pixels[k - a], self.targets[held[k - a]]
                if request.augment is not None:
                    with request.stage("augment"):
                        x, targets = request.augmented(x, request.positions[k], targets)
                done.append((x, targets))
            return done

        pairs = [pair for part in loader.decode_pool.in_threads(len(indices), chunk)
                 for pair in part]
        with request.stage("assemble"):
            x = default_assemble(request, self.describe)([np.asarray(x) for x, _ in pairs], indices)
            x = batching.convert(x, request.dtype, request.rescale, request.buffers)
            y = self.pack([t for _, t in pairs], x.shape[1:3], indices, self.describe)
        return x, y

    def pack(self, targets: Sequence[boxes_mod.ImageBoxes], size: tuple[int, int],
             indices: np.ndarray, describe: Any) -> dict[str, Any]:
        """y of a batch whose images are `size` (height, width): "boxes" in
        bounding_box_format and "labels" (class ids), (b, M, 4) float32 and (b, M)
        int32 padded with -1 (lists of arrays when ragged); "keypoints" (b, K, 2) pixel
        (x, y), -1 where a point is missing."""
        height, width = size
        boxes = [boxes_mod.from_xyxy(t.boxes, self.bounding_box_format, height, width)
                 for t in targets]
        labels = [t.classes for t in targets]
        y: dict[str, Any]
        if self.max_boxes is None:
            y = {"boxes": boxes, "labels": labels}
        else:
            for k, row in enumerate(boxes):
                if len(row) > self.max_boxes:  # an augmentation that adds boxes
                    raise ValueError(
                        f"`max_boxes` must hold every image's boxes. Received: "
                        f"max_boxes={self.max_boxes}, and {describe(int(indices[k]))} has "
                        f"{len(row)} after augmentation. Pass a larger max_boxes.")
            y = {"boxes": boxes_mod.pad(boxes, self.max_boxes, 4, "float32"),
                 "labels": boxes_mod.pad(labels, self.max_boxes, None, "int32")}
        if self.max_keypoints is not None:
            points = [np.where(np.isnan(t.keypoints), boxes_mod.PAD, t.keypoints)
                      if t.keypoints is not None else np.zeros((0, 2), np.float32)
                      for t in targets]
            y["keypoints"] = (points if self.max_boxes is None else
                              boxes_mod.pad(points, self.max_keypoints, 2, "float32"))
        return y
