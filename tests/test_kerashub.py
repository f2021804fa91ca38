"""kg.DetectionGenerator against KerasHub itself (keras-hub 0.32): a small
RetinaNetObjectDetector, built from its config with no weights, trains, evaluates and
predicts on a generator's batches in the form docs/targets.md shows, and receives
exactly the generator's boxes and labels.

KerasHub's models (every `keras_hub.models.Task`: detectors, classifiers...) take a
tf.data.Dataset, a grain dataset or arrays, never a PyDataset: keras-hub 0.32's
`PipelineModel.fit` converts any other `x` with `np.array(x)` (tf.data's
`from_tensor_slices` without grain), which iterates the generator's (x, y) batches into
one array and fails ("inhomogeneous shape"). So the generator goes in as
`gen.to_tf_dataset()`, with the steps of one epoch.

keras-hub is part of the test install (the Makefile installs it with --no-deps, as its
declared dependencies pull the full TensorFlow and tensorflow-text): a missing one is a
failure that says how to install it, not a skip.
"""

import json
import os
import subprocess
import sys
import textwrap

import cv2
import keras
import numpy as np
import pytest

import kerasgen as kg

INSTALL = ('pip install --no-deps "keras-hub==0.32.*" "tokenizers>=0.20,<1" "regex>=2022" '
           "(the Makefile's install does)")


def import_keras_hub():
    """keras_hub, or the test fails (not skips): it is part of the test install."""
    try:
        import keras_hub
    except ImportError as error:
        missing = error
    else:
        return keras_hub
    pytest.fail(f"keras-hub is part of the test install and is missing ({missing}). "
                f"Install it: {INSTALL}", pytrace=False)


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """12 PNGs of 40x48 or 48x48, each with one to three filled rectangles (green: class
    id 0, red: 1), and their COCO file: images hold different numbers of boxes, so the
    batches carry -1 padding."""
    folder = tmp_path_factory.mktemp("shapes")
    rng = np.random.default_rng(0)
    images, annotations = [], []
    for i in range(12):
        height, width = 40 + 8 * (i % 2), 48
        image = np.full((height, width, 3), 30, np.uint8)
        for j in range(1 + i % 3):
            w, h = (int(v) for v in rng.integers(10, 20, 2))
            x, y = int(rng.integers(0, width - w)), int(rng.integers(0, height - h))
            image[y:y + h, x:x + w] = (0, 0, 255) if j % 2 else (0, 255, 0)  # BGR
            annotations.append({"id": len(annotations), "image_id": i,
                                "category_id": 1 + j % 2, "bbox": [x, y, w, h]})
        cv2.imwrite(str(folder / f"{i}.png"), image)
        images.append({"id": i, "file_name": f"{i}.png", "height": height, "width": width})
    categories = [{"id": 1, "name": "green"}, {"id": 2, "name": "red"}]
    (folder / "coco.json").write_text(json.dumps(
        {"images": images, "annotations": annotations, "categories": categories}))
    return folder / "coco.json"


def tiny_retinanet(keras_hub, num_classes, cls=None, **kwargs):
    """A RetinaNetObjectDetector from its config, no weights: a one-block-per-stage
    ResNet, feature levels 3 and 4, one conv layer per head."""
    image_encoder = keras_hub.models.ResNetBackbone(
        input_conv_filters=[64], input_conv_kernel_sizes=[3],
        stackwise_num_filters=[64, 16, 16], stackwise_num_blocks=[1, 1, 1],
        stackwise_num_strides=[1, 2, 2], block_type="basic_block",
        use_pre_activation=False, image_shape=(None, None, 3))
    backbone = keras_hub.models.RetinaNetBackbone(
        image_encoder=image_encoder, min_level=3, max_level=4, use_p5=False)
    cls = cls or keras_hub.models.RetinaNetObjectDetector
    return cls(backbone=backbone, num_classes=num_classes, pre_logits_num_conv_layers=1,
               **kwargs)


def test_a_retinanet_trains_evaluates_and_predicts_on_the_generators_batches(shapes):
    keras_hub = import_keras_hub()
    seen = []

    class Recording(keras_hub.models.RetinaNetObjectDetector):
        """Keeps the (x, y) each training and test step computes its loss on."""

        def compute_loss(self, x, y, y_pred, sample_weight, **kwargs):
            seen.append((keras.ops.convert_to_numpy(x),
                         {key: keras.ops.convert_to_numpy(v) for key, v in y.items()}))
            return super().compute_loss(x, y, y_pred, sample_weight, **kwargs)

    # the detector's preprocessor rescales (as a preset's does), so the generator does not
    converter = keras_hub.layers.RetinaNetImageConverter(scale=1 / 255)
    detector = tiny_retinanet(
        keras_hub, 2, cls=Recording, preprocessor=keras_hub.models.
        RetinaNetObjectDetectorPreprocessor(image_converter=converter))
    detector.compile(optimizer="adam", run_eagerly=True)  # eager: compute_loss records

    # the documented calls (docs/targets.md), with the detector's box format; the images
    # hold 1 to 3 boxes, so rows are padded with -1
    train = kg.DetectionGenerator(shapes, image_size=(48, 48), batch_size=4,
                                  bounding_box_format=detector.bounding_box_format, seed=0)
    held_out = kg.DetectionGenerator(shapes, image_size=(48, 48), batch_size=4,
                                     bounding_box_format=detector.bounding_box_format,
                                     shuffle=False)
    history = detector.fit(train.to_tf_dataset(), steps_per_epoch=len(train), epochs=2,
                           validation_data=held_out.to_tf_dataset(),
                           validation_steps=len(held_out), shuffle=False, verbose=0)
    assert len(history.history["loss"]) == len(history.history["val_loss"]) == 2
    assert np.isfinite(history.history["loss"] + history.history["val_loss"]).all()
    loss = detector.evaluate(train.to_tf_dataset(), steps=len(train), verbose=0)
    assert np.isfinite(loss).all()

    # what each loss was computed on: epoch 0 of train, the held-out images, epoch 1 of
    # train, the held-out images again, then (evaluate) epoch 0 of train: a new dataset
    # begins at the generator's epoch, which fit through tf.data leaves where it was
    steps = range(len(train))
    expected = ([train.at_epoch(0)[b] for b in steps] + [held_out[b] for b in steps]
                + [train.at_epoch(1)[b] for b in steps] + [held_out[b] for b in steps]
                + [train.at_epoch(0)[b] for b in steps])
    assert train.epoch == 0 and len(seen) == len(expected) == 15
    assert train.max_boxes == 3 and (held_out[0][1]["labels"] == -1).any()
    assert not np.array_equal(expected[0][1]["boxes"], expected[6][1]["boxes"])  # reshuffled
    for (x, y), (gen_x, gen_y) in zip(seen, expected):
        assert y.keys() == gen_y.keys() == {"boxes", "labels"}
        np.testing.assert_array_equal(y["boxes"], gen_y["boxes"])
        np.testing.assert_array_equal(y["labels"], gen_y["labels"])
        np.testing.assert_allclose(x, gen_x / 255, rtol=1e-6)

    # predictions in the files' order, from the generator that does not shuffle
    predictions = detector.predict(held_out.to_tf_dataset(), steps=len(held_out), verbose=0)
    assert predictions["boxes"].shape == (12, 100, 4)
    assert predictions["labels"].shape == predictions["confidence"].shape == (12, 100)
    assert predictions["num_detections"].shape == (12,)


def test_keras_hub_models_take_no_pydataset_so_the_generator_goes_in_as_tf_data(shapes):
    """Pins what docs/targets.md says: keras-hub 0.32 reads a PyDataset as arrays (with
    np.array; with tf.data's from_tensor_slices where grain is missing). If this starts to
    fail, keras-hub takes generators: document `detector.fit(gen)`."""
    keras_hub = import_keras_hub()
    detector = tiny_retinanet(keras_hub, 2)
    detector.compile(optimizer="adam")
    gen = kg.DetectionGenerator(shapes, image_size=(48, 48), batch_size=4,
                                bounding_box_format=detector.bounding_box_format)
    with pytest.raises(ValueError, match="inhomogeneous shape|non-rectangular"):
        detector.fit(gen, epochs=1, verbose=0)


JAX_SCRIPT = textwrap.dedent("""
    import sys

    import numpy as np

    import keras
    import kerasgen as kg
    from test_kerashub import tiny_retinanet
    import keras_hub

    assert keras.backend.backend() == "jax"
    detector = tiny_retinanet(keras_hub, 2)
    detector.compile(optimizer="adam")
    gen = kg.DetectionGenerator(sys.argv[1], image_size=(48, 48), batch_size=4,
                                bounding_box_format=detector.bounding_box_format, seed=0)
    history = detector.fit(gen.to_tf_dataset(), steps_per_epoch=len(gen), epochs=1,
                           shuffle=False, verbose=0)
    loss = detector.evaluate(gen.to_tf_dataset(), steps=len(gen), verbose=0)
    predictions = detector.predict(gen.to_tf_dataset(), steps=len(gen), verbose=0)
    assert np.isfinite(history.history["loss"]).all() and np.isfinite(loss).all()
    print("ok", predictions["boxes"].shape)
""")


@pytest.mark.slow
def test_the_same_calls_train_on_the_jax_backend(shapes):
    import_keras_hub()
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.path.dirname(__file__))
    result = subprocess.run([sys.executable, "-c", JAX_SCRIPT, str(shapes)], env=env,
                            capture_output=True, text=True, timeout=280)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "ok (12, 100, 4)"
