"""kg.DetectionGenerator: images with boxes (and keypoints) from COCO, VOC and CSV,
batched as KerasHub's detectors take them, moved by albumentations exactly as
albumentations moves them when called directly, trained through fit."""

import copy
import json
import pickle
import random

import albumentations as A
import cv2
import keras
import numpy as np
import pandas as pd
import pytest
from keras.src.trainers.data_adapters import get_data_adapter

import kerasgen as kg
from kerasgen import _seeding as seeding

CLASSES = {5: "green", 6: "red"}  # COCO category ids: green sorts first by id


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """40 PNGs of one filled rectangle each on grey (red: class 6, green: class 5), of
    four heights, and their COCO file (ids 5 and 6: class ids 0 and 1)."""
    folder = tmp_path_factory.mktemp("scenes")
    rng = np.random.default_rng(0)
    images, anns = [], []
    for i in range(40):
        h, w = 48 + 8 * (i % 4), 64
        img = np.full((h, w, 3), 40, np.uint8)
        bw, bh = int(rng.integers(12, 28)), int(rng.integers(12, 28))
        x0, y0 = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
        category = 5 + i % 2
        colour = (0, 0, 255) if category == 6 else (0, 255, 0)  # BGR
        img[y0:y0 + bh, x0:x0 + bw] = colour
        cv2.imwrite(str(folder / f"im{i:02d}.png"), img)
        images.append({"id": i, "file_name": f"im{i:02d}.png", "height": h, "width": w})
        anns.append({"id": 100 + i, "image_id": i, "category_id": category,
                     "bbox": [x0, y0, bw, bh]})
    coco = {"images": images, "annotations": anns,
            "categories": [{"id": 6, "name": "red"}, {"id": 5, "name": "green"}]}
    (folder / "coco.json").write_text(json.dumps(coco))
    return folder


COMMON = dict(image_size=(32, 32), batch_size=8, seed=3, cache=None)


def test_coco_batches_are_kerashubs_format_with_boxes_moved_by_the_resize(scenes):
    gen = kg.DetectionGenerator(scenes / "coco.json", shuffle=False, **COMMON)
    assert gen.class_names == ["green", "red"] and gen.num_classes == 2
    assert gen.label_mode == "boxes" and len(gen) == 5 and gen.max_boxes == 1
    x, y = gen[0]
    assert x.shape == (8, 32, 32, 3) and set(y) == {"boxes", "labels"}
    assert y["boxes"].shape == (8, 1, 4) and y["boxes"].dtype == np.float32
    assert y["labels"].dtype == np.int32 and y["labels"][:, 0].tolist() == [0, 1] * 4
    coco = json.loads((scenes / "coco.json").read_text())
    for k in range(8):
        x0, y0, bw, bh = coco["annotations"][k]["bbox"]
        h = coco["images"][k]["height"]
        expected = [x0 * 32 / 64, y0 * 32 / h, (x0 + bw) * 32 / 64, (y0 + bh) * 32 / h]
        np.testing.assert_allclose(y["boxes"][k, 0], expected, rtol=1e-6)
        # the pixels inside the box are the rectangle's colour (red is channel 0: RGB)
        a, b, c, d = np.round(y["boxes"][k, 0]).astype(int)
        inside = x[k, b + 1:d - 1, a + 1:c - 1]
        assert (inside[..., 0 if y["labels"][k, 0] == 1 else 1] > 200).all()


def test_boxes_after_augmentation_are_albumentations_own_bit_for_bit(scenes):
    aug = A.Compose([A.HorizontalFlip(p=0.5), A.RandomCrop(24, 24, p=1.0),
                     A.Affine(rotate=(-20, 20), p=1.0)],
                    bbox_params=A.BboxParams(format="coco", label_fields=["classes"],
                                             min_visibility=0.3))
    common = dict(COMMON, shuffle=False, dtype="uint8")
    plain = kg.DetectionGenerator(scenes / "coco.json", **common)
    gen = kg.DetectionGenerator(scenes / "coco.json", bounding_box_format="xywh",
                                augment=aug, max_boxes=1, **common)
    coco = json.loads((scenes / "coco.json").read_text())
    for epoch in (0, 1):
        for b in range(len(gen)):
            x, y = gen[b]
            images, _ = plain[b]
            for k in range(len(x)):
                i = b * 8 + k
                x0, y0, bw, bh = coco["annotations"][i]["bbox"]  # resized, in float64
                sx, sy = 32 / 64, 32 / coco["images"][i]["height"]
                box = np.array([[x0 * sx, y0 * sy, (x0 + bw) * sx, (y0 + bh) * sy]])
                rng = seeding.rng(3, seeding.AUGMENT, epoch, i)
                direct = copy.deepcopy(aug)  # a fresh copy, as albumentations users make
                direct.set_random_state(rng, random.Random(int(rng.integers(2**63))))
                out = direct(image=images[k], bboxes=np.concatenate(
                    [box[:, :2], box[:, 2:] - box[:, :2]], axis=1), classes=[i % 2])
                np.testing.assert_array_equal(x[k], out["image"])
                n = len(out["bboxes"])
                np.testing.assert_array_equal(y["boxes"][k, :n],
                                              np.asarray(out["bboxes"], np.float32))
                assert y["labels"][k, :n].tolist() == list(out["classes"])
                assert (y["boxes"][k, n:] == -1).all() and (y["labels"][k, n:] == -1).all()
        gen.on_epoch_end()
        plain.on_epoch_end()


def test_a_box_regression_model_learns_the_boxes_through_fit(scenes):
    aug = A.Compose([A.HorizontalFlip(p=0.5)],
                    bbox_params=A.BboxParams(format="pascal_voc", label_fields=["c"]))
    gen = kg.DetectionGenerator(scenes / "coco.json", bounding_box_format="rel_xyxy",
                                augment=aug, rescale=1 / 255, **COMMON)
    inputs = keras.Input((32, 32, 3))
    h = keras.layers.Conv2D(16, 3, padding="same", activation="relu")(inputs)
    h = keras.layers.MaxPooling2D(2)(h)
    h = keras.layers.Conv2D(16, 3, padding="same", activation="relu")(h)
    h = keras.layers.Flatten()(h)
    boxes = keras.layers.Reshape((1, 4), name="boxes")(
        keras.layers.Dense(4, activation="sigmoid")(h))
    labels = keras.layers.Reshape((1, 2), name="labels")(keras.layers.Dense(2)(h))
    model = keras.Model(inputs, {"boxes": boxes, "labels": labels})
    model.compile(keras.optimizers.Adam(0.003),
                  loss={"boxes": "mse",
                        "labels": keras.losses.SparseCategoricalCrossentropy(from_logits=True)})
    history = model.fit(gen, epochs=12, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.5 * losses[0], losses


def test_batches_are_the_same_with_threads_and_processes(scenes):
    aug = A.Compose([A.HorizontalFlip(p=0.5), A.RandomCrop(24, 24)],
                    bbox_params=A.BboxParams(format="yolo", label_fields=["c"]))
    one = kg.DetectionGenerator(scenes / "coco.json", augment=aug, max_boxes=1, **COMMON)
    expected = [one[b] for b in range(len(one))]
    for options in (dict(workers=2), dict(workers=2, use_multiprocessing=True)):
        gen = kg.DetectionGenerator(scenes / "coco.json", augment=aug, max_boxes=1,
                                    **COMMON, **options)
        got = list(get_data_adapter(gen, shuffle=False).get_numpy_iterator())
        gen.on_epoch_end()
        assert len(got) == len(expected)
        for (x, y), (x1, y1) in zip(got, expected):
            np.testing.assert_array_equal(x, x1)
            np.testing.assert_array_equal(y["boxes"], y1["boxes"])
            np.testing.assert_array_equal(y["labels"], y1["labels"])


def test_csv_rows_per_box_pad_images_without_boxes_and_ragged_keeps_lists(scenes):
    frame = pd.DataFrame({
        "filename": ["im00.png", "im01.png", "im00.png", "im02.png"],
        "xmin": [0, 32, 10, ""], "ymin": [0, 0, 10, ""], "xmax": [32, 64, 20, ""],
        "ymax": [24, 48, 20, ""], "class": ["cat", "dog", "dog", ""]})
    gen = kg.DetectionGenerator(frame, directory=scenes, shuffle=False, image_size=(24, 32),
                                batch_size=3, cache=None)
    assert gen.class_names == ["cat", "dog"] and gen.file_paths[0].endswith("im00.png")
    _, y = gen[0]
    assert y["labels"].tolist() == [[0, 1], [1, -1], [-1, -1]]
    assert y["boxes"][0].tolist() == [[0, 0, 16, 12], [5, 5, 10, 10]]
    assert (y["boxes"][2] == -1).all()
    ragged = kg.DetectionGenerator(frame, directory=scenes, shuffle=False,
                                   image_size=(24, 32), batch_size=3, ragged=True,
                                   bounding_box_format="rel_xyxy", cache=None)
    _, y = ragged[0]
    assert [len(b) for b in y["boxes"]] == [2, 1, 0]
    np.testing.assert_allclose(y["boxes"][1], [[0.5, 0, 1, 48 / 56]])  # im01: 56 high


def test_keypoints_move_with_their_image_and_missing_ones_stay_missing(scenes):
    frame = pd.DataFrame({"filename": ["im00.png", "im04.png"],
                          "boxes": ["[[0, 0, 16, 16]]", "[]"], "class": ['["a"]', "[]"],
                          "points": ["[[4, 8], null, [60, 2]]", "[[1, 1]]"]})
    aug = A.Compose([A.HorizontalFlip(p=1.0)],
                    bbox_params=A.BboxParams(format="pascal_voc", label_fields=["c"]),
                    keypoint_params=A.KeypointParams(format="xy", remove_invisible=True))
    gen = kg.DetectionGenerator(frame, directory=scenes, boxes_col="boxes",
                                keypoints_col="points", image_size=(48, 64), augment=aug,
                                shuffle=False, batch_size=2, cache=None)
    _, y = gen[0]
    assert y["keypoints"].shape == (2, 3, 2)
    # albumentations flips a point's pixel: x -> 63 - x on a 64 wide image
    assert y["keypoints"][0].tolist() == [[59, 8], [-1, -1], [3, 2]]
    assert y["keypoints"][1].tolist() == [[62, 1], [-1, -1], [-1, -1]]
    assert y["boxes"][0].tolist() == [[48, 0, 64, 16]]
    with pytest.raises(TypeError, match="keypoint_params"):
        kg.DetectionGenerator(frame, directory=scenes, boxes_col="boxes",
                              keypoints_col="points", augment=A.Compose(
                                  [A.HorizontalFlip()], bbox_params=A.BboxParams("coco")))


def test_voc_folder_and_a_skipped_file_brings_its_own_boxes(scenes, tmp_path):
    coco = json.loads((scenes / "coco.json").read_text())
    voc = tmp_path / "Annotations"
    voc.mkdir()
    for image, ann in list(zip(coco["images"], coco["annotations"]))[:4]:
        x0, y0, bw, bh = ann["bbox"]
        (voc / f"{image['id']}.xml").write_text(
            f"<annotation><filename>{image['file_name']}</filename><object><name>"
            f"{CLASSES[ann['category_id']]}</name><bndbox><xmin>{x0}</xmin><ymin>{y0}</ymin>"
            f"<xmax>{x0 + bw}</xmax><ymax>{y0 + bh}</ymax></bndbox></object></annotation>")
    good = kg.DetectionGenerator(tmp_path, directory=scenes, shuffle=False, batch_size=4,
                                 image_size=(32, 32), cache=None)
    (tmp_path / "broken.png").write_bytes(b"not a png")
    (voc / "1.xml").write_text((voc / "1.xml").read_text().replace("im01.png", "broken.png"))
    with pytest.raises(ValueError, match="broken.png"), pytest.warns(  # no size to read
            UserWarning, match="Skipping 3 annotated image"):
        kg.DetectionGenerator(tmp_path, directory=tmp_path, on_missing="skip")
    both = tmp_path / "both"
    both.mkdir()
    for i in range(4):
        (both / f"im{i:02d}.png").write_bytes((scenes / f"im{i:02d}.png").read_bytes())
    sizes = coco["images"][1]
    (voc / "1.xml").write_text((voc / "1.xml").read_text().replace(
        "</filename>", f"</filename><size><width>{sizes['width']}</width><height>"
        f"{sizes['height']}</height></size>"))
    (both / "broken.png").write_bytes(b"not a png")
    with pytest.warns(UserWarning, match="broken.png"):
        skipping = kg.DetectionGenerator(tmp_path, directory=both, shuffle=False,
                                         batch_size=4, image_size=(32, 32), cache=None,
                                         on_error="skip", seed=1)
        x, y = skipping[0]
    k = skipping.file_paths.index(str(both / "broken.png"))
    gx, gy = good[0]
    stand_in = [j for j in range(4) if j != k and np.array_equal(x[k], gx[j])]
    assert stand_in, "a skipped file is replaced by another image"
    assert y["boxes"][k].tolist() == gy["boxes"][stand_in[0]].tolist()
    assert y["labels"][k].tolist() == gy["labels"][stand_in[0]].tolist()


def test_crop_to_aspect_ratio_drops_boxes_cut_away_and_records_them(tmp_path):
    cv2.imwrite(str(tmp_path / "wide.png"), np.zeros((20, 80, 3), np.uint8))
    frame = pd.DataFrame({"filename": ["wide.png"] * 2, "xmin": [0, 35], "ymin": [0, 0],
                          "xmax": [10, 45], "ymax": [10, 10], "class": ["a", "b"]})
    with pytest.warns(UserWarning, match="Dropped 1 box"):
        gen = kg.DetectionGenerator(frame, directory=tmp_path, image_size=(10, 10),
                                    crop_to_aspect_ratio=True, cache=None)
    assert gen.dropped_boxes == [(str(tmp_path / "wide.png"), 0)]
    _, y = gen[0]
    assert y["boxes"][0].tolist() == [[2.5, 0, 7.5, 5]] and y["labels"].tolist() == [[1]]


def _coco_with(scenes, tmp_path, change):
    coco = json.loads((scenes / "coco.json").read_text())
    change(coco)
    path = tmp_path / "coco.json"
    path.write_text(json.dumps(coco))
    return dict(annotations=path, directory=scenes)


@pytest.mark.parametrize("options,error,match", [
    (dict(augment=A.Compose([A.HorizontalFlip()])), TypeError, "bbox_params"),
    (dict(augment=lambda image, rng: image), TypeError, "bbox_params"),
    (dict(batch_augment=keras.layers.RandomFlip(seed=1)), ValueError, "without their boxes"),
    (dict(sampler=kg.samplers.RandomOverSampler()), ValueError, "several classes"),
    (dict(label_mode="int"), ValueError, "label_mode is 'boxes'"),
    (dict(labels=[0] * 40), TypeError, "takes its labels from its annotations"),
    (dict(bounding_box_format="xyxy_rel"), ValueError, "bounding_box_format"),
])
def test_what_detection_cannot_take_is_refused_by_name(scenes, options, error, match):
    with pytest.raises(error, match=match):
        kg.DetectionGenerator(scenes / "coco.json", **options)


def test_bad_annotations_are_named(scenes, tmp_path):
    with pytest.raises(ValueError, match=r"max_boxes=1, and image 'im07.png' .* has 2"):
        kg.DetectionGenerator(**_coco_with(scenes, tmp_path, lambda c: c["annotations"].append(
            dict(c["annotations"][7], id=999))), max_boxes=1)
    with pytest.raises(ValueError, match=r"im03.png is 72x64 .* says 50x64"):
        kg.DetectionGenerator(**_coco_with(scenes, tmp_path, lambda c: c["images"][3].update(
            height=50)))
    with pytest.raises(FileNotFoundError, match=r"gone.png \(image 'gone.png'"):
        kg.DetectionGenerator(**_coco_with(scenes, tmp_path, lambda c: c["images"][3].update(
            file_name="gone.png")))
    with pytest.warns(UserWarning, match="gone.png"):
        gen = kg.DetectionGenerator(**_coco_with(scenes, tmp_path, lambda c: c["images"][3]
                                                 .update(file_name="gone.png")),
                                    on_missing="skip", image_size=(8, 8))
    assert gen.num_samples == 39 and gen.skipped == [str(scenes / "gone.png")]


def test_a_validation_split_parts_the_images(scenes):
    common = dict(image_size=(8, 8), validation_split=0.25, seed=4, cache=None)
    train = kg.DetectionGenerator(scenes / "coco.json", subset="training", **common)
    val = kg.DetectionGenerator(scenes / "coco.json", subset="validation", **common)
    assert train.num_samples == 30 and val.num_samples == 10
    assert not set(train.file_paths) & set(val.file_paths)
    assert train.class_names == val.class_names


def test_the_generator_contract_holds_for_detection(scenes):
    """Every image once per epoch with its own boxes, an order that is a function of
    (seed, epoch), pickling and a resumed state, as tests/test_contract.py asks of every
    generator (whose label checks need one class per sample)."""
    aug = A.Compose([A.HorizontalFlip(p=0.5)],
                    bbox_params=A.BboxParams(format="pascal_voc", label_fields=["c"]))
    make = lambda **kw: kg.DetectionGenerator(scenes / "coco.json", augment=aug,  # noqa: E731
                                              dtype="uint8", **dict(COMMON, **kw))
    gen = make()
    plain = kg.DetectionGenerator(scenes / "coco.json", **dict(COMMON, dtype="uint8"))
    by_pixels = {plain.source.loader.load(i).tobytes(): i for i in range(40)}
    epochs = []
    for _ in range(2):
        seen = []
        for b in range(len(gen)):
            x, y = gen[b]
            for k in range(len(x)):
                i = by_pixels.get(x[k].tobytes(), by_pixels.get(x[k][:, ::-1].tobytes()))
                assert i is not None, "each image is a source image (flipped or not)"
                box = plain.boxes[i][0]
                flipped = [32 - box[2], box[1], 32 - box[0], box[3]]
                assert np.allclose(y["boxes"][k, 0], box) or np.allclose(y["boxes"][k, 0],
                                                                         flipped)
                assert y["labels"][k, 0] == plain.box_labels[i][0]
                seen.append(i)
        assert sorted(seen) == list(range(40))
        epochs.append(seen)
        gen.on_epoch_end()
    assert epochs[0] != epochs[1]
    clone = pickle.loads(pickle.dumps(gen))
    fresh = make()
    fresh.set_state(gen.get_state())
    for b in range(len(gen)):
        for other in (clone, fresh):
            np.testing.assert_array_equal(other[b][0], gen[b][0])
            np.testing.assert_array_equal(other[b][1]["boxes"], gen[b][1]["boxes"])


def test_the_source_shared_by_worker_processes_keeps_its_boxes(scenes):
    gen = kg.DetectionGenerator(scenes / "coco.json", shuffle=False, **COMMON)
    shared = gen.source.for_processes(2)
    assert shared is not gen.source and shared.loader.processes == 2
    assert len(shared.targets) == 40 and all(
        a is b for a, b in zip(shared.targets, gen.source.targets))
    assert shared.max_boxes == gen.source.max_boxes
    assert shared.bounding_box_format == gen.source.bounding_box_format
