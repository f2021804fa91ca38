"""decoder="nvimgcodec" against the default OpenCV decoder, on this machine's CPU (or GPU).

One pass over the benchmark photos (500x375 JPEGs, quality 90; made by benchmarks/data.py
on the first run) through `kg.ImageFolderGenerator(..., cache=None)` per decoder, the
decoders interleaved, `--repeats` times; prints images/s (median, min, max), the ratio
nvimgcodec / opencv, and where nvImageCodec decoded (gpu, or its cpu backend).

    python -m benchmarks.decode                 # 2000 files, 224x224, 3 repeats
    python -m benchmarks.decode --quick         # 200 files, 1 repeat
    python -m benchmarks.decode --augment       # decode to 256x256, then
                                                # kg.augment.typical((224, 224)), float32/255

With --augment both decoders feed the same augmentation, run on the CPU in the decode
threads after the decode (as benchmarks/augment.py's kerasgen row).
"""

import argparse
import os
import statistics
import time

from benchmarks import data, machine


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-files", type=int, default=2000)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="200 files, 1 repeat")
    parser.add_argument("--augment", action="store_true",
                        help="decode to 256x256 and augment with kg.augment.typical to "
                             "--image-size, float32 batches scaled by 1/255")
    parser.add_argument("--max-other", type=float, default=0.3,
                        help="before each pass, wait until other processes use at most this "
                             "many cores (default 0.3)")
    parser.add_argument("--quiet-wait", type=float, default=30,
                        help="give up waiting after this many seconds (default 30)")
    args = parser.parse_args(argv)
    if args.quick:
        args.num_files, args.repeats = 200, 1
    return args


def one_pass(folder, decoder, args):
    import kerasgen as kg

    size = (args.image_size, args.image_size)
    options = dict(dtype="uint8")
    if args.augment:
        options = dict(augment=kg.augment.typical(size), dtype="float32", rescale=1 / 255)
        size = (256, 256)
    gen = kg.ImageFolderGenerator(folder, image_size=size, batch_size=args.batch_size,
                                  cache=None, decoder=decoder, verbose=0, seed=1, **options)
    gen[0]  # the decoder made (nvImageCodec loads its libraries once)
    start = time.perf_counter()
    for i in range(len(gen)):
        gen[i]
    seconds = time.perf_counter() - start
    device = gen.loader.nv.device if gen.loader.nv is not None else "cpu"
    return gen.num_samples / seconds, device


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # no network request at import
    folder = data.default_folder(args.num_files)
    data.build_data(folder, args.num_files, threads=machine.usable_cores())
    rates = {"opencv": [], "nvimgcodec": []}
    device = None
    for _ in range(args.repeats):
        for decoder in rates:
            machine.wait_for_quiet(args.max_other, args.quiet_wait)
            rate, where = one_pass(folder, decoder, args)
            rates[decoder].append(rate)
            device = where if decoder == "nvimgcodec" else device
    what = (f"256x256 + kg.augment.typical({args.image_size}), float32/255" if args.augment
            else f"{args.image_size}x{args.image_size}, uint8")
    print(f"{args.num_files} JPEGs 500x375 -> {what}, batch "
          f"{args.batch_size}, cache=None, {machine.usable_cores()} cores, "
          f"{args.repeats} interleaved passes; nvImageCodec decoded on: {device}")
    for decoder, values in rates.items():
        print(f"  {decoder:<11} {statistics.median(values):8.1f} images/s  (min "
              f"{min(values):.1f}, max {max(values):.1f})")
    ratio = statistics.median(rates["nvimgcodec"]) / statistics.median(rates["opencv"])
    print(f"nvimgcodec / opencv: {ratio:.2f}")


if __name__ == "__main__":
    main()
