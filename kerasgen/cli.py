"""The `kerasgen` command line: `preview`, `inspect` and `bench` (also `python -m kerasgen`).

    kerasgen --version
    kerasgen preview DIR --out preview.png [--image-size 128x128] [--augment]
    kerasgen inspect DIR|CSV [--label-mode int|multi_label] [--label-delimiter '|'] [--json]
                     [--max-pixels N|none]
    kerasgen bench DIR|CSV --image-size 224 (or 224x224, 224,224) --batch-size 32
                   [--workers N] [--cache none|auto|memory|PATH] [--max-pixels N|none]

Imports happen inside each command: `--help`, `preview` and `inspect` never import Keras
(nor TensorFlow, its start-up time and log lines); `bench` runs Keras's own loop.
"""

import argparse
import os
import re
import sys


def _preview(args):
    from kerasgen import augment, viz

    transform = augment.typical(args.image_size) if args.augment else None
    batch = PreviewBatch(args.directory, args.image_size, args.n, args.seed, transform)
    shown = ("augmented with kg.augment.typical (as training sees them)" if args.augment
             else "as decoded and resized, no augmentation")
    viz.draw_batch(batch.x, batch.y, batch, args.out, args.n,
                   title=f"{args.directory}: seed {args.seed}, first batch, {shown}")
    print(f"wrote {args.out}: {len(batch.x)} samples of "
          f"{batch.num_samples} in {len(batch.class_names)} classes")
    return 0


class PreviewBatch:
    """The first batch (x uint8, y int class ids) that
    ImageFolderGenerator(directory, image_size=image_size, batch_size=n, seed=seed,
    augment=transform, label_mode="int", dtype="uint8") yields, made without Keras, so
    that `kerasgen preview` starts in a moment (tests/test_dropin.py checks it equals
    the generator's): the same listing, epoch-0 order, loader and augmentation draws."""

    label_mode = "int"
    epoch = 0

    def __init__(self, directory, image_size, n, seed, transform=None):
        import numpy as np

        from kerasgen import augment
        from kerasgen import _seeding as seeding
        from kerasgen import _listing as listing
        from kerasgen.loader import ImageLoader

        paths, class_ids, self.class_names = listing.list_image_folder(directory)
        self.num_samples = len(paths)
        order = seeding.rng(seed, seeding.ORDER, 0).permutation(len(paths))[:n]
        loader = ImageLoader(paths, image_size, "rgb", "bilinear", verbose=0)
        augmenter = None if transform is None else augment.SampleAugment(transform)
        samples = []
        for position, index in enumerate(order):
            x = loader.load(int(index))
            if augmenter is not None:
                x = augmenter(x, seeding.rng(seed, seeding.AUGMENT, 0, position))
            samples.append(np.asarray(x, dtype=np.uint8))
        self.x = np.stack(samples)
        self.y = class_ids[order].astype("int32")


def _inspect(args):
    import json
    import warnings

    from kerasgen import inspection

    with warnings.catch_warnings():  # the report lists them
        warnings.simplefilter("ignore")
        report = inspection.inspect(args.source, x_col=args.x_col, y_col=args.y_col,
                                    directory=args.directory, verbose=0 if args.json else 1,
                                    label_mode=args.label_mode,
                                    label_delimiter=args.label_delimiter or None,
                                    encoding=args.encoding, max_pixels=args.max_pixels)
    print(json.dumps(report, indent=2) if args.json else inspection.format_report(report))
    return 0


def _bench(args):
    import json
    import time

    import keras

    from kerasgen.generators import CSVGenerator, ImageFolderGenerator

    common = dict(image_size=args.image_size, batch_size=args.batch_size,
                  workers=args.workers, use_multiprocessing=args.processes,
                  cache=None if args.cache == "none" else args.cache, dtype=args.dtype,
                  stats=True, label_mode=None, max_pixels=args.max_pixels,
                  shuffle=False, verbose=0, rescale=1 / 255 if args.dtype != "uint8" else None)
    if os.path.isdir(args.source):
        gen = ImageFolderGenerator(args.source, **common)
    else:
        gen = CSVGenerator(args.source, x_col=args.x_col, directory=args.directory, **common)
    shape = args.image_size + (3,)
    model = keras.Sequential([keras.Input(shape), keras.layers.GlobalAveragePooling2D()])
    rows = []
    for epoch in range(args.epochs):
        gen.stats(reset=True)
        start = time.perf_counter()
        model.predict(gen, verbose=0)  # Keras's own loop: workers and queue as in fit
        seconds = time.perf_counter() - start
        stats = gen.stats()
        rows.append({"epoch": epoch, "seconds": round(seconds, 3),
                     "images_per_s": round(gen.num_samples / seconds, 1),
                     "stages_s": stats["stages_s"] if stats["batches"] else None})
    result = {"source": args.source, "images": gen.num_samples,
              "image_size": list(args.image_size),
              "batch_size": args.batch_size, "workers": args.workers,
              "processes": args.processes, "cache": args.cache, "dtype": args.dtype,
              "epochs": rows}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    height, width = args.image_size
    print(f"{args.source}: {gen.num_samples} images -> {height}x{width}, "
          f"batch {args.batch_size}, workers {args.workers}"
          f"{' (processes)' if args.processes else ''}, cache {args.cache}, {args.dtype}")
    for row in rows:
        stages = row["stages_s"]
        detail = ("stage seconds (summed over batches): " + ", ".join(
            f"{k} {v:.2f}" for k, v in stages.items() if v) if stages else
            "stages: made in worker processes, not counted here")
        print(f"  epoch {row['epoch']}: {row['images_per_s']:8.1f} images/s "
              f"({row['seconds']:.2f} s)  {detail}")
    return 0


def _image_size(text):
    """--image-size: 224, 224x224 or 224,224 (height, width)."""
    parts = [part for part in re.split(r"[xX, ]+", text.strip()) if part]
    try:
        values = [int(part) for part in parts]
    except ValueError:
        values = []
    if len(values) == 1:
        values *= 2
    if len(values) != 2 or min(values) <= 0:
        raise argparse.ArgumentTypeError(
            f"must be a size such as 224, 224x224 or 224,224 (height, width), not {text!r}")
    return tuple(values)


def _max_pixels(text):
    """--max-pixels: a positive integer, or 'none' for no limit."""
    if text.strip().lower() == "none":
        return None
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'none', not {text!r}")
    return value


MAX_PIXELS_HELP = ("images whose header declares more pixels are refused (Pillow's "
                   "decompression-bomb limit; 'none': no limit)")
IMAGE_SIZE_HELP = "size every image is resized to: 224, 224x224 or 224,224 (height, width)"


def _add_preview(commands, defaults):
    """The `preview` command's options (a grid of an image folder's first batch)."""
    preview = commands.add_parser(
        "preview", help="write a grid of samples of an image folder, with class names",
        formatter_class=defaults)
    preview.add_argument("directory", help="image folder, one subfolder per class")
    preview.add_argument("--out", default="preview.png", help="PNG file to write")
    preview.add_argument("-n", type=int, default=16, help="number of samples")
    preview.add_argument("--image-size", type=_image_size, default=(128, 128),
                         help=IMAGE_SIZE_HELP)
    preview.add_argument("--seed", type=int, default=0, help="seed of the order and draws")
    preview.add_argument("--augment", action="store_true",
                         help="apply a typical augmentation (needs albumentations)")
    preview.set_defaults(run=_preview)


def _add_inspect(commands, defaults):
    """The `inspect` command's options (kg.inspect's report of a folder or CSV file)."""
    inspect = commands.add_parser(
        "inspect", help="class counts, imbalance, image sizes and formats, corrupt files",
        formatter_class=defaults)
    inspect.add_argument("source", help="image folder (one subfolder per class) or CSV file")
    inspect.add_argument("--x-col", default="filename", help="CSV column of image paths")
    inspect.add_argument("--y-col", default="label", help="CSV column of labels")
    inspect.add_argument("--directory", default=None, help="folder CSV paths are relative to")
    inspect.add_argument("--label-mode", default="int",
                         choices=["int", "categorical", "binary", "multi_label"],
                         help="multi_label: count each label of a CSV cell split at "
                              "--label-delimiter (int: one class per cell)")
    inspect.add_argument("--label-delimiter", default="|",
                         help="separates the labels of one CSV cell ('' for none)")
    inspect.add_argument("--encoding", default="utf-8", help="the CSV file's text encoding")
    inspect.add_argument("--max-pixels", type=_max_pixels, default=89_478_485,
                         help=MAX_PIXELS_HELP)
    inspect.add_argument("--json", action="store_true", help="print JSON, for scripts")
    inspect.set_defaults(run=_inspect)


def _add_bench(commands, defaults):
    """The `bench` command's options (images/s inside Keras's own loop)."""
    bench = commands.add_parser(
        "bench", help="images/s and where the time goes, to tune workers and cache",
        formatter_class=defaults)
    bench.add_argument("source", help="image folder or CSV file")
    bench.add_argument("--image-size", type=_image_size, default=(224, 224),
                       help=IMAGE_SIZE_HELP)
    bench.add_argument("--batch-size", type=int, default=32, help="samples per batch")
    bench.add_argument("--workers", type=int, default=1,
                       help="worker threads (worker processes with --processes)")
    bench.add_argument("--processes", action="store_true",
                       help="worker processes (use_multiprocessing=True)")
    bench.add_argument("--cache", default="auto",
                       help="'auto' (the generators' default), 'none', 'memory' or a file path")
    bench.add_argument("--dtype", default="float32", choices=["float32", "float16", "uint8"],
                       help="the batches' dtype (uint8: a quarter of the bytes)")
    bench.add_argument("--epochs", type=int, default=2,
                       help="passes (two or more show the cache at work)")
    bench.add_argument("--x-col", default="filename", help="CSV column of image paths")
    bench.add_argument("--directory", default=None, help="folder CSV paths are relative to")
    bench.add_argument("--max-pixels", type=_max_pixels, default=89_478_485,
                       help=MAX_PIXELS_HELP)
    bench.add_argument("--json", action="store_true", help="print JSON, for scripts")
    bench.set_defaults(run=_bench)


def build_parser() -> argparse.ArgumentParser:
    """The `kerasgen` argument parser: --version and one subcommand per tool, each
    option's help showing its default."""
    from kerasgen import __version__

    parser = argparse.ArgumentParser(prog="kerasgen", description="kerasgen tools")
    parser.add_argument("--version", action="version", version=f"kerasgen {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    defaults = argparse.ArgumentDefaultsHelpFormatter  # every option's help shows its default
    _add_preview(commands, defaults)
    _add_inspect(commands, defaults)
    _add_bench(commands, defaults)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs the command `argv` names (sys.argv's by default); returns its exit status:
    0, or 2 with the error on stderr for a bad argument, file or missing dependency."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError, ImportError) as error:
        print(f"kerasgen {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
