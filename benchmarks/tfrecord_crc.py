#!/usr/bin/env python
"""What TFRecordGenerator's CRC32C checks cost, on 1,000 records of about 50 KB.

Standalone script (never part of the test suite). It writes a TFRecord file of
`--records` tf.train.Examples to a temporary folder, each holding one JPEG of noise (about
50 KB: noise does not compress, as photos barely do) and an int64 label, then times, per
record and as the median of `--repeats` passes over the whole file (from the page cache):

- read + check + parse: `TFRecordGenerator._record(k)` for every k (seek, read, the
  masked CRC32C of the data, `Example.FromString`);
- the CRC32C alone: `kerasgen.tfrecord.masked_crc` over every record's data;
- the decode that follows in a real pipeline: `cv2.imdecode` of the JPEG;
- tf.data's own read: `tf.data.TFRecordDataset(path)` iterated (it checks CRCs too).

The CRC's share is reported against read + parse, and against read + parse + decode.
"""

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import cv2  # noqa: E402
import numpy as np  # noqa: E402


def write_file(path, records, kb):
    import tensorflow as tf

    rng = np.random.default_rng(0)
    side = int((kb * 1024 / 0.95) ** 0.5)  # JPEG of noise, quality 90: ~0.95 B a pixel
    sizes = []
    with tf.io.TFRecordWriter(path) as writer:
        for k in range(records):
            image = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
            ok, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 90])
            sizes.append(len(jpeg))
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg.tobytes()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[k % 10])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(
                feature=feature)).SerializeToString())
    return statistics.mean(sizes)


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--kb", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import google_crc32c
    import tensorflow as tf

    import kerasgen as kg
    from kerasgen.tfrecord import masked_crc

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "data.tfrecord")
        mean_kb = write_file(path, args.records, args.kb) / 1024
        gen = kg.TFRecordGenerator(path, {"image": "image", "label": "label"},
                                   image_size=(64, 64), verbose=0)
        n = len(gen.index)
        with open(path, "rb") as f:
            raw = f.read()
        payloads = [raw[offset:offset + length] for _, offset, length, _ in gen.index]
        jpegs = [np.frombuffer(gen._image_bytes(k), np.uint8) for k in range(n)]

        def read_parse():
            for k in range(n):
                gen._record(k)

        def crc():
            for data in payloads:
                masked_crc(data)

        def decode():
            for jpeg in jpegs:
                cv2.imdecode(jpeg, cv2.IMREAD_COLOR)

        def tf_data():
            for _ in tf.data.TFRecordDataset(path):
                pass

        per = {name: median_time(fn, args.repeats) / n * 1e6
               for name, fn in [("read + check + parse", read_parse), ("CRC32C alone", crc),
                                ("JPEG decode", decode), ("tf.data read (eager)", tf_data)]}
    print(f"{n} records of {mean_kb:.1f} KB (google-crc32c implementation: "
          f"{google_crc32c.implementation}), median of {args.repeats} passes")
    for name, us in per.items():
        print(f"  {name:22s} {us:8.1f} us/record")
    crc_us = per["CRC32C alone"]
    print(f"  CRC share of read + parse:          {crc_us / per['read + check + parse']:.1%}")
    print(f"  CRC share of read + parse + decode: "
          f"{crc_us / (per['read + check + parse'] + per['JPEG decode']):.1%}")


if __name__ == "__main__":
    main()
