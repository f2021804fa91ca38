"""Memory without bounds (issue 47, class 5): what one member, record or chunk of a shard
may expand to is bounded by `max_record_bytes` (kerasgen/_budget.py), checked before it
is read or decompressed, on every shard generator.

The hostile files are made here, small on disk: a 1.6 MB .tar.gz whose member inflates
to 1.6 GB (it drove a process to 4.8 GB with batch_size=1, and out of memory with the
default batch size), a pax header declaring 1.6 GB, a TFRecord length of 2**62 with its
CRC right, a GZIP TFRecord of zeros inflating to 1 GiB, a 1 GiB JSON label member, a
valid tar followed by 128 MiB of compressed zeros, an ArrayRecord chunk of 64 MiB. Each
is read by a child process (one for all, Keras imported once) that measures its own peak
memory around the read (VmHWM, reset through /proc/self/clear_refs) and the bytes it
writes; a watchdog thread stops it above 2 GiB, so a regression fails instead of taking
the machine's memory.
"""

import functools
import gzip
import io
import json
import os
import re
import struct
import subprocess
import sys
import tarfile
import textwrap
import zlib

import cv2
import google_crc32c
import numpy as np
import pytest

import kerasgen as kg

MiB = 1 << 20
BOMB = 1600 * MiB  # what the member of the 1.6 MB .tar.gz inflated to
LIMIT = 64 * MiB  # the peak a refused bomb may cost (it costs a few MiB)
ZEROS = 16 * MiB

pytestmark = pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK),
                                reason="peak memory is measured through Linux's /proc "
                                       "(VmHWM, reset by writing 5 to clear_refs)")


# ------------------------------------------------------------------ hostile files
@functools.lru_cache(None)
def _zero_member():
    return gzip.compress(bytes(ZEROS), 6)


def gzip_zeros(n):
    """n zero bytes as concatenated gzip members (16 KB per 16 MiB)."""
    whole, rest = divmod(n, ZEROS)
    return _zero_member() * whole + gzip.compress(bytes(rest))


def tar_header(name, size, kind=tarfile.REGTYPE):
    info = tarfile.TarInfo(name)
    info.size, info.type, info.mtime = size, kind, 0
    return info.tobuf(tarfile.GNU_FORMAT)


def png():
    return cv2.imencode(".png", np.full((4, 4, 3), 7, np.uint8))[1].tobytes()


def small_tar():
    """A valid tar of one sample (a.png, a.cls), without its end-of-archive marker."""
    out = io.BytesIO()
    for name, data in (("a.png", png()), ("a.cls", b"1")):
        out.write(tar_header(name, len(data)))
        out.write(data + bytes(-len(data) % 512))
    return out.getvalue()


def tfrecord_header(length):
    """A TFRecord record's header declaring `length`, its CRC32C right."""
    head = struct.pack("<Q", length)
    crc = google_crc32c.value(head)
    return head + struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    """{name: (path, child code reading it)}."""
    folder = tmp_path_factory.mktemp("bombs")
    found = {}

    def bomb(name, data, action):
        path = folder / name
        if data is not None:
            path.write_bytes(data)
        found[name] = (str(path), action.format(path=str(path), cache=str(folder / "cache")))
        return path

    stream = ("kg.StreamGenerator({path!r}, image_size=(4, 4), batch_size=1, "
              "shuffle=False, num_classes=2{extra})[0]")
    bomb("member.tar.gz", gzip.compress(tar_header("big.jpg", BOMB))
         + gzip_zeros(BOMB + 1024), stream.replace("{extra}", ""))
    bomb("pax.tar.gz", gzip.compress(tar_header("././@PaxHeader", BOMB, tarfile.XHDTYPE))
         + gzip_zeros(BOMB + 1024), stream.replace("{extra}", ""))
    # a valid shard, then 128 MiB of zeros in the same gzip stream: one unbounded
    # decompress call inflated 256 KiB of it to all of them
    squeeze = zlib.compressobj(6, zlib.DEFLATED, 31)
    zeros, data = bytes(ZEROS), squeeze.compress(small_tar())
    data += b"".join(squeeze.compress(zeros) for _ in range(128 * MiB // ZEROS))
    bomb("tail.tar.gz", data + squeeze.flush(), stream.replace("{extra}", ""))
    bomb("length.tfrecord.gz", gzip.compress(tfrecord_header(2 ** 62)) + gzip_zeros(BOMB),
         stream.replace("{extra}", ", records='tfrecord', compression_type='GZIP'"))
    bomb("zeros.tfrecord.gz", gzip_zeros(1024 * MiB),
         "kg.TFRecordGenerator({path!r}, {{'image': 'image', 'label': 'label'}}, "
         "compression_type='GZIP', remote_cache={cache!r}, verbose=0)")
    path = bomb("length.tfrecord", tfrecord_header(1024 * MiB),
                "kg.TFRecordGenerator({path!r}, {{'image': 'image', 'label': 'label'}}, "
                "verbose=0)")
    with open(path, "r+b") as f:  # sparse: the record's 1 GiB of zeros take no disk
        f.truncate(12 + 1024 * MiB + 4)
    path = bomb("label.tar", None, "kg.WebDatasetGenerator({path!r}, image_key='png', "
                "label_key='json', verbose=0)")
    with open(path, "wb") as f:
        f.write(small_tar()[:1024])  # a.png
        f.write(tar_header("a.json", 1024 * MiB))
        f.seek(1024 * MiB, os.SEEK_CUR)  # sparse
        f.write(bytes(1024))
    from array_record.python.array_record_module import ArrayRecordWriter

    path = folder / "chunk.array_record"
    writer = ArrayRecordWriter(str(path), "group_size:1")
    writer.write(bytes(64 * MiB))
    writer.close()
    bomb("chunk.array_record", None, "kg.ArrayRecordGenerator({path!r}, {{'image': 'image'}},"
         f" max_record_bytes={MiB}, verbose=0)")
    return found


CHILD = """
import json, os, sys, threading, time

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

def written():
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))

import kerasgen as kg
from kerasgen import arrayrecord, stream, tfrecord, webdataset  # Keras, before measuring
from tensorflow.core.example.example_pb2 import Example  # TFRecord's parser
current = None

def watch():  # a regression is stopped before it takes the machine's memory
    while True:
        if status("VmRSS") > 2 << 30:
            print(json.dumps({"name": current, "peak": None}), flush=True)
            os._exit(3)
        time.sleep(0.01)

threading.Thread(target=watch, daemon=True).start()
for name, action in json.loads(sys.argv[1]):
    current = name
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    base, wrote, start = status("VmHWM"), written(), time.monotonic()
    try:
        eval(action)
        error = None
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    print(json.dumps({"name": name, "peak": status("VmHWM") - base, "error": error,
                      "written": written() - wrote,
                      "seconds": time.monotonic() - start}), flush=True)
"""


@pytest.fixture(scope="module")
def measured(bombs):
    """{name: {"peak", "written", "seconds", "error"}} of each bomb read in a child."""
    actions = json.dumps([(name, action) for name, (_, action) in bombs.items()])
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), actions],
                          capture_output=True, text=True, timeout=240,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    results = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            result = json.loads(line)
            results[result["name"]] = result
    assert done.returncode == 0, (results, done.stderr[-3000:])
    return results


def _refused(measured, name, *parts):
    result = measured[name]
    assert result["error"] is not None and result["error"].startswith("ValueError: "), result
    for part in parts:
        assert part in result["error"], (part, result["error"])
    assert "max_record_bytes" in result["error"] and "Pass a larger `max_record_bytes`" \
        in result["error"]
    assert result["peak"] < LIMIT, result
    return result["error"]


@pytest.mark.timeout(300)
def test_a_tar_gz_member_inflating_to_gigabytes_is_refused_from_its_header(bombs, measured):
    _refused(measured, "member.tar.gz", f"record 0 of shard {bombs['member.tar.gz'][0]}",
             "member big.jpg of sample 'big' (at byte 0)", f"declares {BOMB:,} bytes",
             "more than max_record_bytes=268,435,456 bytes")


@pytest.mark.timeout(300)
def test_a_pax_header_declaring_gigabytes_is_refused_before_tarfile_reads_it(bombs, measured):
    _refused(measured, "pax.tar.gz", f"record 0 of shard {bombs['pax.tar.gz'][0]}",
             "the tar header at byte 0 (a pax header, which tarfile reads whole)",
             f"declares {BOMB:,} bytes")


@pytest.mark.timeout(300)
def test_a_valid_shard_followed_by_inflating_zeros_is_read_in_bounded_chunks(measured):
    result = measured["tail.tar.gz"]
    assert result["error"] is None and result["peak"] < LIMIT, result


@pytest.mark.timeout(300)
def test_a_tfrecord_length_of_2_to_the_62_is_refused_before_it_is_read(bombs, measured):
    _refused(measured, "length.tfrecord.gz",
             f"record 0 of shard {bombs['length.tfrecord.gz'][0]}",
             "its header (at byte 0) declares a length of 4,611,686,018,427,387,904 bytes")


@pytest.mark.timeout(300)
def test_a_gzip_tfrecord_of_zeros_is_named_corrupt_before_it_is_written_out(bombs,
                                                                            measured):
    result = measured["zeros.tfrecord.gz"]
    assert result["error"] == (
        f"ValueError: {bombs['zeros.tfrecord.gz'][0]} (decompressed) is corrupt: the length "
        "of record 0 (at byte 0) fails its CRC32C check (what it decompresses to is not a "
        "TFRecord file). Rewrite the file, or restore an intact copy.")
    assert result["written"] < LIMIT and result["peak"] < LIMIT, result  # not 1 GiB


@pytest.mark.timeout(300)
def test_a_tfrecord_record_of_a_gigabyte_is_refused_when_indexed(bombs, measured):
    _refused(measured, "length.tfrecord",
             f"Record 0 (byte 0) of {bombs['length.tfrecord'][0]} declares a length of "
             f"{1024 * MiB:,} bytes")


@pytest.mark.timeout(300)
def test_a_json_label_member_of_a_gigabyte_is_refused_before_it_is_read(bombs, measured):
    _refused(measured, "label.tar",
             f"Member a.json of {bombs['label.tar'][0]} (sample 'a'), the label at byte 1536,"
             f" declares {1024 * MiB:,} bytes")


@pytest.mark.timeout(300)
def test_an_arrayrecord_chunk_is_refused_from_its_header_before_it_is_decoded(bombs,
                                                                            measured):
    _refused(measured, "chunk.array_record",
             f"Record 0 of {bombs['chunk.array_record'][0]} (a chunk at byte 64) decodes to "
             f"{64 * MiB:,} bytes, more than max_record_bytes={MiB:,} bytes")
    assert measured["chunk.array_record"]["peak"] < 16 * MiB


# ------------------------------------------------------------------ one option, everywhere
def test_every_shard_generator_takes_max_record_bytes_checked_up_front(tmp_path):
    makers = [lambda **k: kg.StreamGenerator(["s0"], records=lambda s: [], **k),
              lambda **k: kg.WebDatasetGenerator(tmp_path / "missing.tar", **k),
              lambda **k: kg.TFRecordGenerator(tmp_path / "missing.tfrecord",
                                               {"image": "image"}, **k),
              lambda **k: kg.ArrayRecordGenerator(tmp_path / "missing.array_record",
                                                  {"image": "image"}, **k)]
    for make in makers:
        for bad in (0, -1, True, 1.5, "1"):
            message = ("`max_record_bytes` must be None or a positive integer (default "
                       f"268_435_456: 256 MiB). Received: max_record_bytes={bad!r}")
            with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
                make(max_record_bytes=bad)
