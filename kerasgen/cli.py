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
import traceback
import warnings

from kerasgen import _redact
from kerasgen._quiet import drop_tensorflow_lines, tensorflow_quiet  # noqa: F401


def _preview(args):
    from kerasgen import augment, viz

    viz.output_file(args.out, "--out")  # before any image is decoded
    transform = augment.typical(args.image_size) if args.augment else None
    batch = PreviewBatch(args.directory, args.image_size, args.n, args.seed, transform)
    shown = ("augmented with kg.augment.typical (as training sees them)" if args.augment
             else "as decoded and resized, no augmentation")
    viz.draw_batch(batch.x, batch.y, batch, args.out, args.n,
                   title=f"{args.directory}: seed {args.seed}, first batch, {shown}")
    from kerasgen.inspection import plural

    classes = (f"in {plural(len(batch.class_names), 'class', 'classes')}" if batch.class_names
               else "(no class subfolders: shown without labels)")
    print(f"wrote {args.out}: {plural(len(batch.x), 'sample')} of {batch.num_samples} "
          f"{classes}")
    return 0


class PreviewBatch:
    """The first batch (x uint8, y int class ids) that
    ImageFolderGenerator(directory, image_size=image_size, batch_size=n, seed=seed,
    augment=transform, label_mode="int", dtype="uint8") yields, made without Keras, so
    that `kerasgen preview` starts in a moment (tests/test_dropin.py checks it equals
    the generator's): the same listing, epoch-0 order, loader and augmentation draws.
    A folder without class subfolders is read flat, as with label_mode=None: y is None.
    """

    epoch = 0

    def __init__(self, directory, image_size, n, seed, transform=None):
        import numpy as np

        from kerasgen import augment
        from kerasgen import _seeding as seeding
        from kerasgen.sources import _listing as listing
        from kerasgen.loader import ImageLoader

        paths, class_ids, class_names, _ = listing.list_image_folder(
            directory, classes_required=False, on_error="skip")  # what can be read
        self.class_names = class_names or []
        self.label_mode = "int" if class_names else None
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
        self.y = None if class_ids is None else class_ids[order].astype("int32")


def _inspect(args):
    import json
    import warnings

    from kerasgen import inspection

    label_mode = None if args.label_mode == "none" else args.label_mode
    with warnings.catch_warnings():  # the report lists them
        warnings.simplefilter("ignore")
        report = inspection.inspect(args.source, x_col=args.x_col, y_col=args.y_col,
                                    directory=args.directory, verbose=0 if args.json else 1,
                                    label_mode=label_mode,
                                    label_delimiter=args.label_delimiter or None,
                                    encoding=args.encoding, max_pixels=args.max_pixels,
                                    allow_outside=args.allow_outside)
    print(json.dumps(report, indent=2) if args.json else inspection.format_report(report))
    for message in report["label_errors"]:  # what the generator would say
        print(f"kerasgen inspect: {message}", file=sys.stderr)
    if not report["corrupt"]:
        return 1 if report["label_errors"] else 0
    missing = sum(c.get("problem") == "missing" for c in report["corrupt"])
    found = " and ".join(inspection.plural(n, f"{what} file") for n, what in
                         ((len(report["corrupt"]) - missing, "corrupt"), (missing, "missing"))
                         if n)
    ways = [way for n, way in (
        (len(report["corrupt"]) - missing, "on_error='skip' leaves corrupt files out"),
        (missing, "on_missing='skip' (CSVGenerator) leaves rows naming a missing file out"))
        if n]
    print(f"kerasgen inspect: found {found} (listed above), which the generators refuse "
          f"({'; '.join(ways)}, with a warning)", file=sys.stderr)
    return 1


class _CacheCount:
    """A loader's cache, counting its lookups and hits: how many images of an epoch came
    from the cache rather than from decoding (the loader times both as "decode")."""

    def __init__(self, cache):
        import threading

        self.cache = cache
        self.lookups = self.hits = 0
        self.lock = threading.Lock()

    def get(self, index):
        found = self.cache.get(index)
        with self.lock:
            self.lookups += 1
            self.hits += found is not None
        return found

    def put(self, index, sample):
        self.cache.put(index, sample)

    def take(self):
        """(lookups, hits) since the last take."""
        with self.lock:
            counts = self.lookups, self.hits
            self.lookups = self.hits = 0
        return counts

    def __getattr__(self, name):
        return getattr(self.cache, name)


def _bench_generator(args, kind):
    """The generator `bench` times, built as the user's would be (Keras imported)."""
    from kerasgen.generators import CSVGenerator, ImageFolderGenerator

    common = dict(image_size=args.image_size, batch_size=args.batch_size,
                  workers=args.workers, use_multiprocessing=args.processes,
                  cache=None if args.cache == "none" else args.cache, dtype=args.dtype,
                  decode_threads=args.decode_threads, on_error=args.on_error,
                  stats=True, label_mode=None, max_pixels=args.max_pixels,
                  shuffle=False, verbose=0, rescale=1 / 255 if args.dtype != "uint8" else None)
    if kind == "folder":
        return ImageFolderGenerator(args.source, **common)
    return CSVGenerator(args.source, x_col=args.x_col, directory=args.directory,
                        on_missing=args.on_missing, allow_outside=args.allow_outside,
                        **common)


def _stage_text(row):
    """The stages of one epoch as people read them: a decode served by the cache is
    "from the cache", not "decode"."""
    stages = row["stages_s"]
    if stages is None:
        return "stage times: measured in the worker processes, not shown"
    lookups, hits = row["cache_lookups"], row["from_cache"]
    share = hits / lookups if lookups else 0.0  # the work-ahead may add a few of either
    names = {"decode": ("from the cache" if share >= 0.9 else "decode" if share <= 0.1 else
                        f"decode + cache ({lookups - hits} images decoded, {hits} read "
                        "from the cache)")}
    largest = max(stages.values())
    shown = [f"{names.get(k, k)} {v:.2f} s" if v >= 0.005 else f"{names.get(k, k)} {v:.4f} s"
             for k, v in stages.items() if v >= 0.005 or (v and v == largest)]
    return "stages, summed over batches: " + (", ".join(shown) or "none timed")


def _decode_share(row):
    stages = row["stages_s"] or {}
    total = sum(stages.values())
    return stages.get("decode", 0.0) / total if total else 0.0


def _advice(rows, facts):
    """The last line of `bench`: what to try, drawn from the epochs' numbers (whether
    training waits for data depends on the model, which bench does not have)."""
    first, last = rows[0], rows[-1]
    tips = []
    cached = [r["cache_lookups"] > 0 and r["from_cache"] >= 0.9 * r["cache_lookups"]
              for r in rows]
    on_disk = facts["cache"] not in ("none", "auto", "memory")
    if facts["processes"]:
        tips.append("stage times are measured in the worker processes: compare this rate "
                    "with a run without --processes")
    elif cached[0]:
        tips.append(f"every epoch read the cache{' file' if on_disk else ''}, "
                    "made by an earlier run")
    elif cached[-1]:
        tips.append(f"epochs after the first read decoded images from the cache, at "
                    f"{last['images_per_s'] / first['images_per_s']:.1f}x the first epoch's "
                    "rate" + ("" if on_disk else
                              "; --cache FILE keeps them on disk for the next run"))
    elif facts["cache"] != "none" and facts["capacity"] < facts["images"]:
        tips.append(f"--cache auto holds {facts['capacity']} of {facts['images']} images "
                    "(its RAM budget): --cache FILE keeps them all on disk, --cache "
                    "memory in RAM")
    elif facts["cache"] == "none" and _decode_share(first) >= 0.5:
        tips.append(f"decoding is {_decode_share(first):.0%} of the time making batches, "
                    "every epoch: --cache auto (the default) or --cache FILE lets epochs "
                    "after the first skip it")
    elif facts["cache"] != "none" and len(rows) == 1:
        tips.append("--epochs 2 shows the cache at work")
    if not facts["processes"] and not cached[-1] and _decode_share(last) >= 0.5:
        threads, cores = facts["decode_threads"], facts["cores"]
        tips.append(f"decoding uses {threads} thread{'s' if threads > 1 else ''} on "
                    f"{cores} core{'s' if cores > 1 else ''}: " + (
                        f"--decode-threads {cores}" if threads < cores else
                        "more --workers or --processes add no cores"))
    if not facts["processes"] and facts["dtype"] != "uint8" and (
            cached[-1] or _decode_share(last) >= 0.5):
        tips.append(f"--dtype uint8 skips the conversion to {facts['dtype']} and hands "
                    "over a quarter of the bytes (let the model rescale)")
    tips = tips[:2]
    tips.append("in fit, kg.callbacks.PipelineStats's data/wait_s says whether the model "
                "waits for data")
    return "advice: " + "; ".join(tips) + "."


def _bench_epoch(model, gen, counter, epoch):
    """One pass of Keras's own loop (workers and queue as in fit) with a progress bar;
    the epoch's row of the report."""
    import time

    import keras

    from kerasgen import _progress

    gen.stats(reset=True)
    if counter is not None:
        counter.take()
    bar = _progress.bar(len(gen), f"epoch {epoch}")
    start = time.perf_counter()
    try:
        model.predict(gen, verbose=0, callbacks=[keras.callbacks.LambdaCallback(
            on_predict_batch_end=lambda batch, logs=None: bar.update(1))])
    finally:
        bar.close()
    seconds = time.perf_counter() - start
    stats = gen.stats()
    lookups, hits = counter.take() if counter is not None else (0, 0)
    return {"epoch": epoch, "seconds": round(seconds, 3),
            "images_per_s": round(gen.num_samples / seconds, 1),
            "stages_s": stats["stages_s"] if stats["batches"] else None,
            "cache_lookups": lookups, "from_cache": hits}


def _bench(args):
    import json
    import time

    from kerasgen import inspection
    from kerasgen.loader import usable_cores

    kind = inspection.check_source(args.source, "bench")
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if args.json else (
        lambda text: print(text, flush=True))
    height, width = args.image_size
    say(f"kerasgen bench: {inspection.plural(args.epochs, 'epoch')} of {args.source} "
        f"through Keras's predict loop ({height}x{width}, batch {args.batch_size}, workers "
        f"{args.workers}{' (processes)' if args.processes else ''}, cache {args.cache}, "
        f"{args.dtype}); starting Keras...")
    started = time.perf_counter()
    with tensorflow_quiet():
        import keras
    gen = _bench_generator(args, kind)
    counter = None
    if gen.loader.cache is not None and not args.processes:
        counter = gen.loader.cache = _CacheCount(gen.loader.cache)
    facts = {"images": gen.num_samples, "cache": args.cache, "dtype": args.dtype,
             "processes": args.processes, "decode_threads": gen.loader.threads(),
             "cores": usable_cores(),
             "capacity": gen.num_samples if counter is None else counter.capacity}
    say(f"{args.source}: {inspection.plural(gen.num_samples, 'image')}, "
        f"{inspection.plural(len(gen), 'batch', 'batches')} per epoch, "
        f"{inspection.plural(facts['decode_threads'], 'decode thread')}"
        f"{' per process' if args.processes else ''} "
        f"(Keras started in {time.perf_counter() - started:.1f} s)")
    model = keras.Sequential([keras.Input(args.image_size + (3,)),
                              keras.layers.GlobalAveragePooling2D()])
    import numpy as np

    warm_up = np.zeros((args.batch_size + 1,) + args.image_size + (3,), args.dtype)
    model.predict(warm_up, batch_size=args.batch_size, verbose=0)  # traced before timing
    rows = []
    for epoch in range(args.epochs):
        rows.append(_bench_epoch(model, gen, counter, epoch))
        row = rows[-1]
        say(f"  epoch {epoch}: {row['images_per_s']:8.1f} images/s ({row['seconds']:.2f} s)"
            f"  {_stage_text(row)}")
    advice = _advice(rows, facts)
    say(advice)
    if args.json:
        print(json.dumps({"source": args.source, "images": gen.num_samples,
                          "image_size": list(args.image_size),
                          "batch_size": args.batch_size, "workers": args.workers,
                          "processes": args.processes, "cache": args.cache,
                          "dtype": args.dtype, "decode_threads": facts["decode_threads"],
                          "epochs": rows, "advice": advice}, indent=2))
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


def _positive(text):
    """-n, --batch-size, --epochs...: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def _non_negative(text):
    """--seed, --workers: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, not {text!r}")
    return value


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
ALLOW_OUTSIDE_HELP = ("read CSV rows whose file leaves --directory ('..', an absolute "
                      "path, a link out of it), which are refused otherwise")
IMAGE_SIZE_HELP = "size every image is resized to: 224, 224x224 or 224,224 (height, width)"


def _add_preview(commands, defaults):
    """The `preview` command's options (a grid of an image folder's first batch)."""
    preview = commands.add_parser(
        "preview", help="write a grid of samples of an image folder, with class names",
        formatter_class=defaults)
    preview.add_argument("directory", help="image folder, one subfolder per class (a "
                                           "folder without them is shown unlabeled)")
    preview.add_argument("--out", default="preview.png",
                         help="picture to write, its format from its extension (.png, "
                              ".pdf, .svg, .jpg...); a folder or a special file is refused")
    preview.add_argument("-n", type=_positive, default=16, help="number of samples")
    preview.add_argument("--image-size", type=_image_size, default="128x128",
                         help=IMAGE_SIZE_HELP)
    preview.add_argument("--seed", type=_non_negative, default=0,
                         help="seed of the order and draws")
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
    inspect.add_argument("--allow-outside", action="store_true", help=ALLOW_OUTSIDE_HELP)
    inspect.add_argument("--label-mode", default="int",
                         choices=["int", "categorical", "binary", "multi_label", "none"],
                         help="multi_label: count each label of a CSV cell split at "
                              "--label-delimiter (int: one class per cell); none: "
                              "unlabeled, a folder without class subfolders is read flat")
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
    bench.add_argument("--image-size", type=_image_size, default="224x224",
                       help=IMAGE_SIZE_HELP)
    bench.add_argument("--batch-size", type=_positive, default=32, help="samples per batch")
    bench.add_argument("--workers", type=_non_negative, default=1,
                       help="worker threads (worker processes with --processes)")
    bench.add_argument("--processes", action="store_true",
                       help="worker processes (use_multiprocessing=True)")
    bench.add_argument("--decode-threads", type=_positive, default=None,
                       help="decode threads per process (None: the cores it may use)")
    bench.add_argument("--cache", default="auto",
                       help="'auto' (the generators' default), 'none', 'memory' or a file path")
    bench.add_argument("--dtype", default="float32", choices=["float32", "float16", "uint8"],
                       help="the batches' dtype (uint8: a quarter of the bytes)")
    bench.add_argument("--epochs", type=_positive, default=2,
                       help="passes (two or more show the cache at work)")
    bench.add_argument("--on-error", default="raise", choices=["raise", "skip"],
                       help="a file that does not decode: an error, or skipped with a "
                            "warning (the generators' on_error)")
    bench.add_argument("--x-col", default="filename", help="CSV column of image paths")
    bench.add_argument("--directory", default=None, help="folder CSV paths are relative to")
    bench.add_argument("--allow-outside", action="store_true", help=ALLOW_OUTSIDE_HELP)
    bench.add_argument("--on-missing", default="raise", choices=["raise", "skip"],
                       help="a CSV row naming a missing file: an error, or left out with "
                            "a warning (CSVGenerator's on_missing)")
    bench.add_argument("--max-pixels", type=_max_pixels, default=89_478_485,
                       help=MAX_PIXELS_HELP)
    bench.add_argument("--json", action="store_true", help="print JSON, for scripts")
    bench.set_defaults(run=_bench)


def build_parser() -> argparse.ArgumentParser:
    """The `kerasgen` argument parser: --version, --debug and one subcommand per tool,
    each option's help showing its default."""
    from kerasgen import __version__

    parser = argparse.ArgumentParser(prog="kerasgen", description="kerasgen tools")
    parser.add_argument("--version", action="version", version=f"kerasgen {__version__}")
    debug_help = "on a failure, show the full traceback (not only kerasgen's message)"
    parser.add_argument("--debug", action="store_true", help=debug_help)
    commands = parser.add_subparsers(dest="command", required=True)
    defaults = argparse.ArgumentDefaultsHelpFormatter  # every option's help shows its default
    _add_preview(commands, defaults)
    _add_inspect(commands, defaults)
    _add_bench(commands, defaults)
    for command in commands.choices.values():  # `kerasgen bench DIR --debug` too
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help=debug_help)
    return parser


# A line of TensorFlow's or absl's C++ log ("I0000 00:00:1796162897.157932    8903
# port.cc:153] oneDNN custom operations are on..."), absl's note printed before its
# logging starts, and the lines that continue a log line.
def _message(error: BaseException, command: str, debug: bool = False) -> str:
    """kerasgen's one line for a failure: the error's message, with how to go on."""
    text = str(error) or type(error).__name__
    if not isinstance(error, (ValueError, OSError, ImportError, TypeError)):
        text = f"{type(error).__name__}: {text}"
        if not debug:
            text += " (--debug shows the traceback)"
    if command == "inspect" and "pass label_mode=None" in text:
        text += " On the command line: --label-mode none."
    if command in ("bench", "inspect"):  # the generators' options, as the flags name them
        text = text.replace("allow_outside=True", "--allow-outside")
    if command == "bench":
        text = re.sub(r"(?:pass )?on_(error|missing)='(skip|raise)'",
                      lambda m: f"--on-{m.group(1)} {m.group(2)}", text)
        if text.startswith("Cannot decode") and "--on-error" not in text:
            text += (" `kerasgen inspect` lists every file that does not decode; "
                     "--on-error skip leaves such files out.")
    return text


def main(argv: list[str] | None = None) -> int:
    """Runs the command `argv` names (sys.argv's by default); returns its exit status:
    0; 1 when `inspect` finds corrupt or missing files or labels the generators
    refuse; 2 with kerasgen's one message on stderr (no traceback; `--debug` prints it
    first) for a bad argument, file or missing dependency, or any other failure. TensorFlow's
    start-up log lines are silenced (TF_CPP_MIN_LOG_LEVEL=3 unless set) before anything
    imports it."""
    if "tensorflow" not in sys.modules:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # every line printed, argparse's errors and --debug's traceback included, redacted
    with _redact.redacted_output(sys.argv[1:] if argv is None else argv):
        return _run(build_parser().parse_args(argv))


def _run(args: argparse.Namespace) -> int:
    with warnings.catch_warnings():
        if not args.debug:  # --debug leaves Python's warnings as they are
            warnings.showwarning = lambda message, *rest, **kw: print(
                f"kerasgen {args.command}: warning: {message}", file=sys.stderr)
        try:
            return args.run(args)
        except KeyboardInterrupt:
            print(f"kerasgen {args.command}: interrupted", file=sys.stderr)
            return 130
        except Exception as error:  # noqa: BLE001 -- every failure ends in one message
            if args.debug:  # the traceback too, and the same exit status
                traceback.print_exc()
            print(f"kerasgen {args.command}: {_message(error, args.command, args.debug)}",
                  file=sys.stderr)
            return 2

if __name__ == "__main__":
    sys.exit(main())
