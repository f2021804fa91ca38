"""The `kerasgen` command line: `kerasgen preview DIR --out preview.png`."""

import argparse
import sys


def _preview(args):
    from kerasgen import augment, viz
    from kerasgen.generators import ImageFolderGenerator

    transform = augment.typical(args.image_size) if args.augment else None
    gen = ImageFolderGenerator(args.directory, image_size=(args.image_size,) * 2,
                               batch_size=args.n, seed=args.seed, augment=transform,
                               label_mode="int", dtype="uint8", verbose=0)
    viz.show_batch(gen, n=args.n, path=args.out)
    print(f"wrote {args.out}: {min(args.n, gen.num_samples)} samples of "
          f"{gen.num_samples} in {gen.num_classes} classes")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="kerasgen", description="kerasgen tools")
    commands = parser.add_subparsers(dest="command", required=True)
    preview = commands.add_parser(
        "preview", help="write a grid of samples of an image folder, with class names")
    preview.add_argument("directory", help="image folder, one subfolder per class")
    preview.add_argument("--out", default="preview.png", help="PNG file to write")
    preview.add_argument("-n", type=int, default=16, help="number of samples")
    preview.add_argument("--image-size", type=int, default=128)
    preview.add_argument("--seed", type=int, default=0)
    preview.add_argument("--augment", action="store_true",
                         help="apply a typical augmentation (needs albumentations)")
    preview.set_defaults(run=_preview)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError, ImportError) as error:
        print(f"kerasgen {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
