"""Training on an imbalanced image folder, without and with a kerasgen sampler.

Writes scikit-learn's bundled handwritten digits (real data, no download) as an image
folder in which three digits are rare (about 10% of their images kept), then trains the
quick-start CNN twice from `kg.ImageFolderGenerator` with the same seeded validation
split: once as the folder is, once with a sampler that rebalances each training epoch.
The validation subset keeps the natural imbalance; the script prints each run's recall per
class on it, and the mean recall of the rare classes (5 validation images per rare digit,
so one run's recall moves in steps of 0.2; see `make_sampler` for means over seeds).

    python examples/imbalanced_images.py [--epochs 10] [--data DIR]
        [--sampler oversample|balanced|smote]
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import cv2  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import kerasgen as kg  # noqa: E402
from quickstart import build_model  # noqa: E402  (the same small CNN as the quick start)

RARE = (1, 5, 8)        # the digits made rare
KEEP_RARE = 0.10        # fraction of their images kept
SEED = 1                # data, split, sampler and weights all follow this seed


def write_imbalanced_digits(root):
    """One PNG per kept digit image (8x8, 0-16 scaled to 0-255) in root/<digit>/;
    returns {digit: images written}."""
    digits = load_digits()
    rng = np.random.default_rng(SEED)
    counts = {}
    for digit in range(10):
        members = np.flatnonzero(digits.target == digit)
        if digit in RARE:
            members = rng.choice(members, int(round(KEEP_RARE * len(members))),
                                 replace=False)
        folder = os.path.join(root, str(digit))
        os.makedirs(folder, exist_ok=True)
        for k in sorted(members):
            pixels = np.round(digits.images[k] * (255 / 16)).astype(np.uint8)
            cv2.imwrite(os.path.join(folder, f"{k:04d}.png"), pixels)
        counts[digit] = len(members)
    return counts


def make_sampler(name):
    """The sampler of the second run.

    BalancedBatchSampler is the default: every batch holds about as many images of each
    digit (3 or 4 of 32), rare ones repeated in a fresh order each pass. Measured with
    this script (10 epochs, seeds 1-5; the seed also picks the rare images kept and the
    split), mean recall of the rare digits on the validation subset / of the others:

        no sampler                          0.64 / 0.980
        no sampler, 15 epochs (same steps)  0.71 / 0.984
        RandomOverSampler                   0.87 / 0.973
        BalancedBatchSampler                0.87 / 0.979
        SMOTE (8x8 thumbnails)              0.83 / 0.976

    Over-sampling and balanced batches lift the rare digits alike; balanced batches
    cost the common digits less here. SMOTE blends two same-class images (neighbours among
    8x8 thumbnails); a blend of two handwritten digits is a ghosted double stroke rather
    than a new plausible digit, so it helps less here. It is the better choice for
    feature vectors (tabular rows, embeddings), where points between neighbours are
    plausible samples. Samplers also add steps per epoch (43 batches here instead of 29),
    but training without one for as many steps lifts the rare digits far less.
    """
    if name == "oversample":
        return kg.samplers.RandomOverSampler(seed=SEED)
    if name == "balanced":
        return kg.samplers.BalancedBatchSampler(seed=SEED)
    return kg.samplers.SMOTE(k_neighbors=5, seed=SEED)


def recall_per_class(model, val):
    """{class name: recall} on the validation generator (shuffle=False: plan order)."""
    predicted = model.predict(val, verbose=0).argmax(axis=1)
    truth = val.labels
    return {name: float((predicted[truth == c] == c).mean())
            for c, name in enumerate(val.class_names)}


def train_and_report(title, data, epochs, sampler):
    common = dict(image_size=(16, 16), color_mode="grayscale", rescale=1 / 255,
                  validation_split=0.3, seed=SEED, batch_size=32, verbose=0)
    train = kg.ImageFolderGenerator(data, subset="training", sampler=sampler, **common)
    val = kg.ImageFolderGenerator(data, subset="validation", shuffle=False, **common)
    counts = train.class_counts()
    print(f"[{title}] training images per epoch: {dict(counts['after'])} "
          f"({len(train)} batches)")
    keras.utils.set_random_seed(SEED)
    model = build_model(train.num_classes)
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(train, epochs=epochs, verbose=0)
    recall = recall_per_class(model, val)
    cells = "  ".join(f"{name}:{r:.2f}" for name, r in recall.items())
    rare = float(np.mean([recall[str(d)] for d in RARE]))
    print(f"[{title}] recall per class: {cells}")
    print(f"[{title}] mean recall of rare digits {list(RARE)}: {rare:.3f}")
    return recall, rare


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--data", default=None,
                        help="folder to write the digits to (default: a temporary folder)")
    parser.add_argument("--sampler", choices=["oversample", "balanced", "smote"],
                        default="balanced", help="the sampler of the second run")
    args = parser.parse_args()

    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or os.path.join(tmp, "digits")
        if not os.path.isdir(data):
            counts = write_imbalanced_digits(data)
            print(f"Wrote {sum(counts.values())} digit images to {data}; rare digits "
                  f"{list(RARE)} kept {[counts[d] for d in RARE]} images each, the others "
                  f"~{int(np.median(list(counts.values())))}")
        val = kg.ImageFolderGenerator(data, image_size=(16, 16), color_mode="grayscale",
                                      validation_split=0.3, subset="validation", seed=SEED,
                                      shuffle=False, verbose=0)
        print(f"validation subset (natural imbalance): "
              f"{dict(val.class_counts()['before'])}")
        sampler = make_sampler(args.sampler)
        _, rare_plain = train_and_report("no sampler", data, args.epochs, None)
        _, rare_sampled = train_and_report(type(sampler).__name__, data, args.epochs,
                                           sampler)
    print(f"rare-digit recall: {rare_plain:.3f} without a sampler, {rare_sampled:.3f} "
          f"with {type(sampler).__name__} ({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
