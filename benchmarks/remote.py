#!/usr/bin/env python
"""Images/s in `model.fit` with the data on an S3 server 20 ms away, or local, per feed
(issues 31 and 50).

Standalone script (never part of the test suite). It

1. builds, once, the photo folder of benchmarks/data.py (`--num-files` JPEGs of
   `--photo-size`, default 500x375, 10 classes; another size has folders of its own) and,
   from it, WebDataset tar shards (members "<key>.jpg", "<key>.cls"), TFRecord shards
   (tf.train.Example: "image" bytes, "label" int64) and ArrayRecord shards (the same
   Examples, group_size:1), kept in benchmarks/.data/remote-N-S[-WxH];
2. starts, in this process, moto's S3 server (tests/servers.py `S3Server`), uploads the
   photos ("s3://bench/photos/class_NN/...") and the shards ("s3://bench/wds/*.tar",
   "s3://bench/tfr/*.tfrecord", "s3://bench/ar/*.array_record"), and puts a `FaultProxy`
   in front of it that holds every request `--latency` seconds (default 0.020) before
   forwarding it: the feeds reach the server through the proxy only; and, beside it, a
   light GET front (`light_front_class`: the photos' bytes read once into memory, each
   `GET /bench/photos/...` answered from them after the same `--latency` sleep, as S3
   answers it, every other request forwarded to moto), for the feed "kerasgen s3:// cold,
   light server";
3. fills a `kg.RemoteCache` folder once (a pass of kerasgen over "s3://bench/photos", in a
   child process);
4. trains a small CNN (Keras's tutorial CNN: Rescaling, Conv2D 16/32/64 with max pooling,
   global average pooling, Dense; or with `--model tiny` Rescaling, global average pooling
   and Dense, so that fit's rate is the feed's) at `--image-size` (default 128x128), batch 32, for 2
   epochs per run, each run in a fresh process (this script with the hidden `--part`);
   epoch 1 is the warm-up, epoch 2 is timed; then one more pass over the feed without a
   model (the bare loop) is timed. Rounds interleave the feeds, so drift hits them alike;
5. prints each feed's images/s (median of `--repeats` runs, min, max), the bare-loop
   rate, the time the feed took to build (listing, downloading shards, indexing), the CPU
   milliseconds per image of the run's process and children (timed epoch and bare loop),
   the cores used by the run, by the server and by other processes, and the ratios
   against the peers measured in the same run, with each round's ratio.

The feeds (see FEEDS): kerasgen on the local folder (`cache=None`: every epoch decodes,
the reference); kerasgen on s3:// cold (`cache=None`, no remote_cache: every epoch fetches
every object; through moto and the proxy, and through the light GET front) and warm
(`remote_cache=` filled before: the timed epoch reads local copies, after one listing);
kerasgen's WebDatasetGenerator and TFRecordGenerator on the s3:// shards (downloaded when
the generator is made: the build time); tf.data's
TFRecordDataset over the same shards (TensorFlow has no S3 filesystem since 2.6, and
tensorflow-io has no build for this TensorFlow, so s3fs downloads them first: the build
time); tf.data's from_generator over s3fs reads of the image objects (16 generators in a
parallel interleave, as a careful user would, decoded in tf); webdataset's own
`WebDataset` over the s3:// shards (an fsspec handler in `webdataset.gopen_schemes`,
`.decode("rgb8")`, cv2 resize, `.batched(32)`, given to fit as a Python generator with
`steps_per_epoch`); and an in-memory batch (info: what the model alone reaches here).
Issue 50 adds, each beside its kerasgen twin: Keras's `image_dataset_from_directory` on
the local folder; TFRecordDataset and WebDataset on the local shards; kerasgen's
ArrayRecordGenerator on the local and the s3:// ArrayRecord shards; grain's
ArrayRecordDataSource on the local shards and on s3fs copies of the s3:// ones
(benchmarks/small_peers.py).

The S3 server, the proxies and the light front are Python threads of this process; the CPU
they use during a timed epoch is shown apart ("server"), and is not counted as other
processes' load. Real S3 costs the training machine nothing but the client's side of each
request; here the server shares the training's cores, an artefact of the benchmark. moto
and the proxy spend ~3 ms of CPU per GET (0.8 cores at ~250 images/s), which caps "kerasgen
s3:// cold" below what the client alone would reach; the light front spends ~0.15 ms per
GET, so "kerasgen s3:// cold, light server" shows the client's side with the server's
cost mostly out of the way (listings still come from moto). Both rows are kept.

Run from the repository root, as a module:

    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.remote            # 3 rounds
    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.remote --quick    # smoke run
"""

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from benchmarks.data import (DATA_DIR, NUM_CLASSES, PHOTO_SIZE, build_data,  # noqa: E402
                             default_folder, expected_files, warm_page_cache)
from benchmarks import small_peers  # noqa: E402
from benchmarks.fit_cnn import tutorial_cnn  # noqa: E402
from benchmarks.pipelines import tiny_model  # noqa: E402
from benchmarks.machine import (CpuMeter, add_quiet_options, git_state,  # noqa: E402
                                machine_busy_seconds, usable_cores, wait_for_quiet)

MODULE = "benchmarks.remote"  # what the child processes run: python -m MODULE --part ...

BUCKET = "bench"
BATCH_SIZE = 32
DEFAULT_FILES, QUICK_FILES = 2000, 300
DEFAULT_SHARDS, QUICK_SHARDS = 8, 4
LATENCY = 0.020
INTERLEAVE = 16  # parallel generators of the tf.data from_generator feed

CEILING = "in-memory batch (model ceiling, info)"
KG_LOCAL = "kerasgen local folder"
KG_COLD = "kerasgen s3:// cold"
KG_COLD0 = "kerasgen s3:// cold, 0 ms proxy (info)"
KG_COLD_LIGHT = "kerasgen s3:// cold, light server"
KG_WARM = "kerasgen s3:// warm remote_cache"
KG_WDS = "kerasgen WebDatasetGenerator s3://"
KG_WDS_WARM = "kerasgen WebDatasetGenerator s3:// warm"
KG_WDS_LOCAL = "kerasgen WebDatasetGenerator local"
KG_TFR = "kerasgen TFRecordGenerator s3://"
KG_TFR_WARM = "kerasgen TFRecordGenerator s3:// warm"
KG_TFR_LOCAL = "kerasgen TFRecordGenerator local"
TF_TFR = "tf.data TFRecordDataset (s3fs copies)"
TF_GEN = "tf.data from_generator s3fs x16"
WDS = "webdataset.WebDataset s3:// (fsspec)"
LITDATA = "litdata.StreamingDataset s3:// (2 workers)"
KG_AR_LOCAL = "kerasgen ArrayRecordGenerator local"
KG_AR = "kerasgen ArrayRecordGenerator s3://"
KERAS_IDD = "keras image_dataset_from_directory local"
TF_TFR_LOCAL = "tf.data TFRecordDataset local"
WDS_LOCAL = "webdataset.WebDataset local"
GRAIN_AR_LOCAL = "grain ArrayRecordDataSource local"
GRAIN_AR = "grain ArrayRecordDataSource (s3fs copies)"
FEEDS = [CEILING, KG_LOCAL, KERAS_IDD, KG_COLD, KG_COLD_LIGHT, KG_COLD0, KG_WARM,
         KG_WDS_LOCAL, WDS_LOCAL, KG_WDS, KG_WDS_WARM,
         KG_TFR_LOCAL, TF_TFR_LOCAL, KG_TFR, KG_TFR_WARM,
         KG_AR_LOCAL, GRAIN_AR_LOCAL, KG_AR, GRAIN_AR,
         TF_TFR, TF_GEN, WDS, LITDATA]
TORCH_FEEDS = [LITDATA]  # run by --peers-python (torch is not in the project's venv)
SHORT = {CEILING: "ceiling", KG_LOCAL: "kg-local", KG_COLD: "kg-cold",
         KG_COLD0: "kg-cold-0ms", KG_COLD_LIGHT: "kg-cold-light", KG_WARM: "kg-warm",
         KG_WDS: "kg-wds", KG_WDS_WARM: "kg-wds-warm", KG_WDS_LOCAL: "kg-wds-local",
         KG_TFR: "kg-tfr", KG_TFR_WARM: "kg-tfr-warm", KG_TFR_LOCAL: "kg-tfr-local",
         TF_TFR: "tf-tfr", TF_GEN: "tf-gen",
         WDS: "wds", LITDATA: "litdata",
         KG_AR_LOCAL: "kg-ar-local", KG_AR: "kg-ar", KERAS_IDD: "keras-idd",
         TF_TFR_LOCAL: "tf-tfr-local", WDS_LOCAL: "wds-local",
         GRAIN_AR_LOCAL: "grain-ar-local", GRAIN_AR: "grain-ar"}
BY_SHORT = {v: k for k, v in SHORT.items()}
KG_S3 = [KG_COLD, KG_COLD_LIGHT, KG_WARM, KG_WDS, KG_WDS_WARM, KG_TFR, KG_TFR_WARM, KG_AR]
KG_LOCALS = [KG_LOCAL, KG_WDS_LOCAL, KG_TFR_LOCAL, KG_AR_LOCAL]
# the peers reading s3:// (or s3fs copies of its shards), and those reading local files:
# the strict lines of the report compare kerasgen's s3:// feeds with the first, its
# local feeds with the second
PEERS_S3 = [TF_TFR, TF_GEN, WDS, LITDATA, GRAIN_AR]
PEERS_LOCAL = [KERAS_IDD, TF_TFR_LOCAL, WDS_LOCAL, GRAIN_AR_LOCAL]
PEERS = PEERS_S3 + PEERS_LOCAL
# the kerasgen feed on local disk each kerasgen feed is compared with; before a kerasgen
# feed is built, the model trains 2 steps on this twin, so that its first epoch (timed
# from the feed's construction: "cold/s") holds no tracing
LOCAL_TWIN = {KG_LOCAL: KG_LOCAL, KG_COLD: KG_LOCAL, KG_COLD0: KG_LOCAL,
              KG_COLD_LIGHT: KG_LOCAL, KG_WARM: KG_LOCAL,
              KG_WDS: KG_WDS_LOCAL, KG_WDS_WARM: KG_WDS_LOCAL, KG_WDS_LOCAL: KG_WDS_LOCAL,
              KG_TFR: KG_TFR_LOCAL, KG_TFR_WARM: KG_TFR_LOCAL, KG_TFR_LOCAL: KG_TFR_LOCAL,
              KG_AR: KG_AR_LOCAL, KG_AR_LOCAL: KG_AR_LOCAL}
COLD = "cold"  # a ratio of "cold/s" rates: images over (build + first epoch) seconds
TARGETS = [  # label, numerator, denominator, target[, COLD]
    # issue 50: small images, shards and remote objects as fast as the fastest reader of
    # each (each pair reads the same files, in the same format)
    ("kerasgen local / keras image_dataset_from_directory", KG_LOCAL, KERAS_IDD, 1.1),
    ("kerasgen TFRecordGenerator local / tf.data TFRecordDataset local", KG_TFR_LOCAL,
     TF_TFR_LOCAL, 1.1),
    ("kerasgen TFRecordGenerator s3:// / tf.data TFRecordDataset", KG_TFR, TF_TFR, 1.1),
    ("kerasgen s3:// cold / kerasgen local", KG_COLD, KG_LOCAL, 0.7),
    # the same objects from the light GET front: the server's own CPU (moto and the
    # proxy, on the training machine's cores) out of the way, as with real S3
    ("kerasgen s3:// cold (light server) / kerasgen local", KG_COLD_LIGHT, KG_LOCAL, 0.7),
    ("kerasgen WebDatasetGenerator local / webdataset.WebDataset local", KG_WDS_LOCAL,
     WDS_LOCAL, 1.0),
    ("kerasgen WebDatasetGenerator s3:// / webdataset.WebDataset", KG_WDS, WDS, 1.0),
    ("kerasgen ArrayRecordGenerator local / grain local", KG_AR_LOCAL, GRAIN_AR_LOCAL, 1.0),
    ("kerasgen ArrayRecordGenerator s3:// / grain (s3fs copies)", KG_AR, GRAIN_AR, 1.0),
    # issue 31
    # the targets, on shards: warm = the shard cache (remote_cache=) filled by an
    # earlier run; cold = a first run, from the generator's construction (downloads
    # included) to the end of its first epoch
    ("WebDatasetGenerator s3:// warm shard cache / local shards", KG_WDS_WARM, KG_WDS_LOCAL,
     0.9),
    ("TFRecordGenerator s3:// warm shard cache / local shards", KG_TFR_WARM, KG_TFR_LOCAL,
     0.9),
    ("WebDatasetGenerator s3:// cold first epoch / local shards", KG_WDS, KG_WDS_LOCAL, 0.7,
     COLD),
    ("TFRecordGenerator s3:// cold first epoch / local shards", KG_TFR, KG_TFR_LOCAL, 0.7,
     COLD),
    # the same targets on image objects (one request each): warm = remote_cache= filled
    # before; cold = no cache at all, every epoch fetches every object
    ("kerasgen s3:// warm remote_cache / kerasgen local", KG_WARM, KG_LOCAL, 0.9),
    ("kerasgen s3:// cold first epoch / kerasgen local", KG_COLD, KG_LOCAL, 0.7, COLD),
    # each peer against kerasgen reading the same objects
    ("kerasgen s3:// cold / tf.data from_generator s3fs", KG_COLD, TF_GEN, 1.0),
    ("kerasgen WebDatasetGenerator s3:// / litdata.StreamingDataset", KG_WDS, LITDATA, 1.0),
    # across formats (no target of their own: see the strict line below)
    ("kerasgen s3:// cold / tf.data TFRecordDataset", KG_COLD, TF_TFR, None),
    ("kerasgen s3:// cold / webdataset.WebDataset", KG_COLD, WDS, None),
    ("kerasgen s3:// warm remote_cache / tf.data TFRecordDataset", KG_WARM, TF_TFR, None),
    ("kerasgen s3:// cold: 20 ms proxy / 0 ms proxy", KG_COLD, KG_COLD0, None),
    ("kerasgen TFRecordGenerator s3:// / kerasgen local", KG_TFR, KG_LOCAL, None),
    ("kerasgen WebDatasetGenerator s3:// / kerasgen local", KG_WDS, KG_LOCAL, None),
    ("kerasgen local / model ceiling", KG_LOCAL, CEILING, None),
]


# ----------------------------------------------------------------------------- data
def shard_folder(num_files, num_shards, size=None):
    """benchmarks/.data/remote-N-S; with a photo `size` (width, height) other than
    PHOTO_SIZE, remote-N-S-WxH."""
    if size is None or tuple(size) == PHOTO_SIZE:
        return DATA_DIR / f"remote-{num_files}-{num_shards}"
    return DATA_DIR / f"remote-{num_files}-{num_shards}-{size[0]}x{size[1]}"


def shard_ranges(num_files, num_shards):
    """(first, stop) file numbers of each shard: consecutive files, as even as can be."""
    edges = [round(k * num_files / num_shards) for k in range(num_shards + 1)]
    return list(zip(edges[:-1], edges[1:]))


def wds_name(k):
    return f"shard-{k:06d}.tar"


def tfr_name(k):
    return f"shard-{k:06d}.tfrecord"


def ar_name(k):
    return f"shard-{k:06d}.array_record"


SHARD_FORMATS = ["wds", "tfr", "ar"]  # the subfolders of a shard folder: what done.json says


def shards_done(folder):
    """Whether `folder` holds every shard format (done.json, written last, names them;
    a folder of an earlier version of this script lacks the ArrayRecord shards)."""
    try:
        done = json.loads((Path(folder) / "done.json").read_text())
    except (OSError, ValueError):
        return False
    return set(done.get("formats", ["wds", "tfr"])) >= set(SHARD_FORMATS)


def sample_key(i):
    return f"img_{i:05d}"


def build_shards(args):
    """Writes the WebDataset, TFRecord and ArrayRecord shards of the photo folder (in this
    child process: TensorFlow writes the records; ArrayRecord records are the same
    serialized tf.train.Example as the TFRecords, written with group_size:1, as
    kg.ArrayRecordGenerator reads fastest); shards already there are kept; a
    `done.json` last marks them complete."""
    import io
    import tarfile

    import tensorflow as tf
    from array_record.python.array_record_module import ArrayRecordWriter

    out = Path(args.shards)
    for sub in SHARD_FORMATS:
        (out / sub).mkdir(parents=True, exist_ok=True)
    files = expected_files(args.num_files)

    def examples(first, stop):
        for i in range(first, stop):
            image = (Path(args.data) / files[i]).read_bytes()
            yield tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(
                    value=[i % NUM_CLASSES]))})).SerializeToString()

    for k, (first, stop) in enumerate(shard_ranges(args.num_files, args.num_shards)):
        if not (out / "ar" / ar_name(k)).exists():
            part = out / "ar" / (ar_name(k) + ".part")
            writer = ArrayRecordWriter(os.fspath(part), "group_size:1")
            for record in examples(first, stop):
                writer.write(record)
            writer.close()
            os.replace(part, out / "ar" / ar_name(k))
        if (out / "wds" / wds_name(k)).exists() and (out / "tfr" / tfr_name(k)).exists():
            continue
        with tarfile.open(out / "wds" / (wds_name(k) + ".part"), "w",
                          format=tarfile.USTAR_FORMAT) as tar:
            for i in range(first, stop):
                image = (Path(args.data) / files[i]).read_bytes()
                for field, data in (("jpg", image), ("cls", str(i % NUM_CLASSES).encode())):
                    info = tarfile.TarInfo(f"{sample_key(i)}.{field}")
                    info.size, info.mtime, info.mode = len(data), 0, 0o644
                    tar.addfile(info, io.BytesIO(data))
        os.replace(out / "wds" / (wds_name(k) + ".part"), out / "wds" / wds_name(k))
        part = out / "tfr" / (tfr_name(k) + ".part")
        with tf.io.TFRecordWriter(os.fspath(part)) as writer:
            for record in examples(first, stop):
                writer.write(record)
        os.replace(part, out / "tfr" / tfr_name(k))
    done = {"num_files": args.num_files, "num_shards": args.num_shards,
            "photo_size": list(args.photo_size), "formats": SHARD_FORMATS}
    (out / "done.json").write_text(json.dumps(done))
    with open(args.part_out, "w") as f:
        json.dump(done, f)


def litdata_folder(args):
    return Path(args.shards) / "litdata"


def build_litdata(args):
    """Writes the photos as LitData chunks (`litdata.optimize`: raw JPEG bytes and the
    label, as many samples per chunk as a shard holds), run by --peers-python."""
    import litdata

    files = expected_files(args.num_files)
    out = litdata_folder(args)
    shutil.rmtree(out, ignore_errors=True)
    litdata.optimize(fn=_litdata_sample, inputs=[(os.fspath(Path(args.data) / files[i]), i)
                                                 for i in range(args.num_files)],
                     output_dir=os.fspath(out), num_workers=1,
                     chunk_size=math.ceil(args.num_files / args.num_shards))
    with open(args.part_out, "w") as f:
        json.dump({"chunks": len(list(out.glob("*.bin")))}, f)


def _litdata_sample(item):
    path, i = item
    return {"image": Path(path).read_bytes(), "label": i % NUM_CLASSES}


def light_front_class():
    """LightFront, a FaultProxy (tests/servers.py: a thread per keep-alive connection,
    requests read with a few readline calls) that answers the image objects' GETs itself
    from memory (made on first use: tests.servers imports pytest)."""
    import hashlib
    import itertools
    from email.utils import formatdate
    from urllib.parse import parse_qsl, unquote, urlsplit

    from tests.servers import FaultProxy, _encode, _read_body, _read_head

    # headers that make a GET conditional, or ask for something else than the bytes as
    # stored: such a request goes to moto
    conditional = ("if-match", "if-none-match", "if-modified-since", "if-unmodified-since",
                   "x-amz-server-side-encryption-customer-algorithm")

    class LightFront(FaultProxy):
        """A light GET front of the S3 server: `GET /<bucket>/<key>` (path style, no
        query but botocore's `x-id=GetObject`, no conditional header, no body) of an
        object of `objects` is answered from memory, as S3 answers it (Content-Length,
        ETag: the quoted MD5 of the bytes, as S3 gives for a single-part upload,
        Last-Modified as the server's listing gives it, Content-Type, Accept-Ranges,
        x-amz-request-id; `Range: bytes=a-b`, `a-` or `-n` gets 206 with Content-Range),
        after `latency` seconds (a sleep); every other request (listings, HEAD, a range
        past the end, ...) waits as long and is forwarded to the server unchanged, as
        FaultProxy forwards it. `served` and `forwarded` count them."""

        def __init__(self, target_host, target_port, objects):
            """`objects`: {"/bucket/key": (bytes, Last-Modified, Content-Type)}."""
            super().__init__(target_host, target_port)
            self.objects = {}
            for path, (data, modified, kind) in objects.items():
                fixed = [("Content-Type", kind), ("Last-Modified", modified),
                         ("ETag", '"%s"' % hashlib.md5(data).hexdigest()),
                         ("Accept-Ranges", "bytes"), ("Server", "AmazonS3")]
                self.objects[path] = (data, fixed)
            self.served = self.forwarded = 0
            self._ids = itertools.count(1)
            self._date = (0, "")

        def _http_date(self):
            now = int(time.time())
            if self._date[0] != now:  # made once a second
                self._date = (now, formatdate(now, usegmt=True))
            return self._date[1]

        def _object(self, method, target, head):
            """(bytes, fixed headers, range or None) of a GET this front answers; None
            for a request to forward."""
            if method != "GET" or head.get("content-length", "0") != "0" \
                    or head.get("transfer-encoding"):
                return None
            parts = urlsplit(target)
            if parts.query and any(k != "x-id" for k, _ in parse_qsl(
                    parts.query, keep_blank_values=True)):
                return None
            found = self.objects.get(unquote(parts.path))
            if found is None or any(head.get(name) for name in conditional):
                return None
            span = head.get("range")
            if not span:
                return found + (None,)
            size = len(found[0])
            unit, _, spec = span.partition("=")
            first, dash, last = spec.strip().partition("-")
            try:
                if unit.strip() != "bytes" or not dash or "," in spec:
                    return None
                if first:
                    start = int(first)
                    stop = min(size - 1, int(last)) if last else size - 1
                else:
                    start, stop = max(0, size - int(last)), size - 1
            except ValueError:
                return None
            if start > stop or start >= size:
                return None  # moto answers 416
            return found + ((start, stop),)

        def _answer(self, conn, rfile):
            head = _read_head(rfile)
            if head is None:
                return False
            method, target = (head.start.split(" ") + ["", ""])[:2]
            keep_alive = head.get("connection").lower() != "close"
            found = self._object(method, target, head)
            if found is None:
                if head.get("expect").lower() == "100-continue":
                    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                body = _read_body(rfile, head, until_close=False)
                with self._lock:
                    self.forwarded += 1
                if self._stopping.wait(self.latency):
                    return False
                response, response_body = self._forward(head, body,
                                                        head_only=method == "HEAD")
                return self._reply(conn, target, response, response_body) and keep_alive
            data, fixed, span = found
            with self._lock:
                self.served += 1
            if self._stopping.wait(self.latency):
                return False
            headers = fixed + [("Date", self._http_date()),
                               ("x-amz-request-id", "%016X" % next(self._ids))]
            if span is None:
                start = "HTTP/1.1 200 OK"
            else:
                headers.append(("Content-Range", f"bytes {span[0]}-{span[1]}/{len(data)}"))
                data, start = data[span[0]:span[1] + 1], "HTTP/1.1 206 Partial Content"
            headers.append(("Content-Length", str(len(data))))
            conn.sendall(_encode(start, headers, data))  # one write: no Nagle wait
            return keep_alive

    return LightFront


class Remote:
    """The S3 server (moto), its bucket holding the photos and the shards, the latency
    proxy in front of it, and the light GET front (`light`: the photos' GETs answered
    from memory, the rest forwarded to moto); all in this process (threads)."""

    def __init__(self, data, shards, latency):
        from tests.servers import FaultProxy, S3Server

        self.server = S3Server().start()
        self.server.create_bucket(BUCKET)
        start = time.perf_counter()
        self.objects = self.server.upload_folder(data, f"{BUCKET}/photos")
        self.objects += self.server.upload_folder(Path(shards) / "wds", f"{BUCKET}/wds")
        self.objects += self.server.upload_folder(Path(shards) / "tfr", f"{BUCKET}/tfr")
        self.objects += self.server.upload_folder(Path(shards) / "ar", f"{BUCKET}/ar")
        if (Path(shards) / "litdata").is_dir():
            self.objects += self.server.upload_folder(Path(shards) / "litdata",
                                                      f"{BUCKET}/litdata")
        self.upload_s = time.perf_counter() - start
        self.proxy = FaultProxy(self.server.host, self.server.port).start()
        self.proxy.latency = latency
        self.proxy0 = FaultProxy(self.server.host, self.server.port).start()  # latency 0
        self.light = light_front_class()(self.server.host, self.server.port,
                                         self.photo_objects(data)).start()
        self.light.latency = latency

    def photo_objects(self, data):
        """{"/bench/photos/<relative path>": (bytes, Last-Modified, Content-Type)} of the
        photo folder `data`, read once: Last-Modified and Content-Type as moto gives them
        (its listing, a HEAD), each ETag checked against the listing's."""
        import datetime
        import email.utils
        import hashlib

        client = self.server.client
        listed = {}
        for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=BUCKET, Prefix="photos/"):
            for item in page.get("Contents", ()):
                listed[item["Key"]] = item
        objects, kind = {}, None
        for key, item in listed.items():
            data_ = (Path(data) / key[len("photos/"):]).read_bytes()
            if item["ETag"] != '"%s"' % hashlib.md5(data_).hexdigest():
                raise RuntimeError(f"s3://{BUCKET}/{key}: moto's ETag is not its MD5")
            if kind is None:
                kind = client.head_object(Bucket=BUCKET, Key=key)["ContentType"]
            modified = email.utils.format_datetime(
                item["LastModified"].astimezone(datetime.timezone.utc), usegmt=True)
            objects[f"/{BUCKET}/{key}"] = (data_, modified, kind)
        return objects

    @property
    def storage_options(self):
        return self.server.storage_options_via(self.proxy)

    @property
    def storage_options_light(self):
        """Through the light GET front (its photos' GETs answered from memory)."""
        return self.server.storage_options_via(self.light)

    @property
    def storage_options0(self):
        """Through the proxy that adds no latency (the same work per request)."""
        return self.server.storage_options_via(self.proxy0)

    def stop(self):
        self.light.stop()
        self.proxy.stop()
        self.proxy0.stop()
        self.server.stop()


# ----------------------------------------------------------------------------- child
def s3_paths(fs, prefix):
    """(paths, labels) of the image objects under `prefix`, class = their folder."""
    paths = sorted(p for p in fs.find(prefix) if p.endswith(".jpg"))
    classes = sorted({p.split("/")[-2] for p in paths})
    return paths, [classes.index(p.split("/")[-2]) for p in paths]


def scratch_folder(prefix):
    """A temporary folder, removed when this process exits."""
    import atexit

    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, True)
    return folder


def drain(batches):
    """Takes every batch of `batches`, keeping none."""
    for _ in batches:
        pass


def shard_generator(name, args, opts, common):
    """A kerasgen shard generator: on the s3:// shards (downloaded when it is made: into
    this process's temporary folder, or with the `_WARM` feeds into the remote cache the
    fill step filled), or on the local copies of the same shards."""
    import kerasgen as kg

    last = args.num_shards - 1
    remote = {"storage_options": opts}
    if name in (KG_WDS_WARM, KG_TFR_WARM):
        remote["remote_cache"] = kg.RemoteCache(args.remote_cache)
    if name in (KG_WDS, KG_WDS_WARM, KG_WDS_LOCAL):
        where = (f"s3://{BUCKET}/wds" if name != KG_WDS_LOCAL
                 else os.fspath(Path(args.shards) / "wds"))
        return kg.WebDatasetGenerator(f"{where}/shard-{{000000..{last:06d}}}.tar",
                                      **(remote if name != KG_WDS_LOCAL else {}), **common)
    common = {k: v for k, v in common.items() if k != "cache"}  # no decoded images kept
    spec = {"image": "image", "label": "label"}
    if name in (KG_AR, KG_AR_LOCAL):
        where = (f"s3://{BUCKET}/ar" if name != KG_AR_LOCAL
                 else os.fspath(Path(args.shards) / "ar"))
        return kg.ArrayRecordGenerator(f"{where}/*.array_record", feature_spec=spec,
                                       **(remote if name != KG_AR_LOCAL else {}), **common)
    where = (f"s3://{BUCKET}/tfr" if name != KG_TFR_LOCAL
             else os.fspath(Path(args.shards) / "tfr"))
    return kg.TFRecordGenerator(f"{where}/*.tfrecord", feature_spec=spec,
                                **(remote if name != KG_TFR_LOCAL else {}), **common)


def make_feed(name, args):
    """(what fit gets, fit's keyword arguments, a function doing one bare pass)."""
    size = tuple(args.image_size)
    opts = json.loads(args.storage_options) if args.storage_options else {}
    steps = math.ceil(args.num_files / BATCH_SIZE)
    common = {"image_size": size, "batch_size": BATCH_SIZE, "cache": None, "seed": 0,
              "verbose": 0}
    if name == CEILING:  # one batch, in the graph: the model's own rate here
        import numpy as np
        import tensorflow as tf

        x = np.random.default_rng(0).uniform(0, 255, (BATCH_SIZE,) + size + (3,))
        y = np.arange(BATCH_SIZE, dtype="int32") % NUM_CLASSES
        ds = tf.data.Dataset.from_tensors((x.astype("float32"), y)).repeat(steps)
        return ds, {}, lambda: drain(ds)
    if name.startswith("kerasgen"):
        import kerasgen as kg

        if name == KG_LOCAL:
            gen = kg.ImageFolderGenerator(args.data, **common)
        elif name == KG_COLD:
            gen = kg.ImageFolderGenerator(f"s3://{BUCKET}/photos", storage_options=opts,
                                          **common)
        elif name == KG_COLD_LIGHT:
            gen = kg.ImageFolderGenerator(
                f"s3://{BUCKET}/photos", storage_options=json.loads(args.storage_options_light),
                **common)
        elif name == KG_COLD0:
            gen = kg.ImageFolderGenerator(f"s3://{BUCKET}/photos",
                                          storage_options=json.loads(args.storage_options0),
                                          **common)
        elif name == KG_WARM:
            gen = kg.ImageFolderGenerator(f"s3://{BUCKET}/photos", storage_options=opts,
                                          remote_cache=kg.RemoteCache(args.remote_cache),
                                          **common)
        elif name in (KG_WDS, KG_WDS_WARM, KG_TFR, KG_TFR_WARM, KG_WDS_LOCAL, KG_TFR_LOCAL,
                      KG_AR, KG_AR_LOCAL):
            gen = shard_generator(name, args, opts, common)
        else:
            raise ValueError(name)
        return gen, {}, lambda: drain(gen[i] for i in range(len(gen)))
    if name == KERAS_IDD:
        return small_peers.keras_idd(args.data, size, BATCH_SIZE)
    if name == GRAIN_AR_LOCAL:
        return small_peers.grain_ar(sorted(str(p) for p in (Path(args.shards) / "ar")
                                           .glob("*.array_record")),
                                    size, BATCH_SIZE, args.num_files)
    import fsspec
    import tensorflow as tf

    fs = fsspec.filesystem("s3", **opts)
    autotune = tf.data.AUTOTUNE

    def s3fs_copies(folder, pattern):
        """Local copies of the shards s3://bench/<folder>/<pattern> (s3fs: concurrently),
        in this process's temporary folder: what a user does where the reader cannot read
        s3:// (this TensorFlow has no S3 filesystem; grain's ArrayRecordDataSource reads
        local files)."""
        local = scratch_folder(f"kerasgen-remote-{folder}-")
        fs.get(sorted(fs.glob(f"{BUCKET}/{folder}/{pattern}")), local + "/")
        return sorted(str(p) for p in Path(local).glob(pattern))

    def decode(image, label):
        x = tf.image.resize(tf.io.decode_jpeg(image, channels=3), size)
        return x, label

    if name == GRAIN_AR:
        return small_peers.grain_ar(s3fs_copies("ar", "*.array_record"), size, BATCH_SIZE,
                                    args.num_files)
    if name in (TF_TFR, TF_TFR_LOCAL):
        files = (s3fs_copies("tfr", "*.tfrecord") if name == TF_TFR
                 else sorted(str(p) for p in (Path(args.shards) / "tfr").glob("*.tfrecord")))
        spec = {"image": tf.io.FixedLenFeature([], tf.string),
                "label": tf.io.FixedLenFeature([], tf.int64)}

        def parse(record):
            example = tf.io.parse_single_example(record, spec)
            return decode(example["image"], example["label"])

        ds = (tf.data.TFRecordDataset(files, num_parallel_reads=autotune)
              .shuffle(1024, seed=0).map(parse, num_parallel_calls=autotune)
              .batch(BATCH_SIZE).prefetch(autotune))
    elif name == TF_GEN:
        paths, labels = s3_paths(fs, f"{BUCKET}/photos")

        def objects(k):
            for i in range(int(k), len(paths), INTERLEAVE):
                yield fs.cat_file(paths[i]), labels[i]

        signature = (tf.TensorSpec((), tf.string), tf.TensorSpec((), tf.int32))
        # tf.data's thread pool has one thread per core: the 16 generators (each
        # waiting on its reads) would run two at a time, so it gets 16 threads
        options = tf.data.Options()
        options.threading.private_threadpool_size = INTERLEAVE
        ds = (tf.data.Dataset.range(INTERLEAVE)
              .interleave(lambda k: tf.data.Dataset.from_generator(
                  objects, args=(k,), output_signature=signature),
                  cycle_length=INTERLEAVE, num_parallel_calls=INTERLEAVE,
                  deterministic=False)
              .map(decode, num_parallel_calls=autotune)
              .batch(BATCH_SIZE).prefetch(autotune).with_options(options))
    elif name in (WDS, WDS_LOCAL):
        import cv2
        import numpy as np
        import webdataset as wds

        def stack(samples):
            xs, ys = zip(*samples)
            return np.stack(xs), np.asarray(ys, "int32")

        def gopen_s3(url, mode="rb", bufsize=8192, **kw):
            return fs.open(url, mode, block_size=8 << 20)

        wds.gopen_schemes["s3"] = gopen_s3
        urls = [f"s3://{BUCKET}/wds/{wds_name(k)}" if name == WDS
                else os.fspath(Path(args.shards) / "wds" / wds_name(k))
                for k in range(args.num_shards)]
        dataset = (wds.WebDataset(urls, shardshuffle=False, empty_check=False)
                   .decode("rgb8").to_tuple("jpg", "cls")
                   .map_tuple(lambda im: cv2.resize(im, size[::-1],
                                                    interpolation=cv2.INTER_LINEAR),
                              lambda c: np.int32(c))
                   .batched(BATCH_SIZE, partial=True, collation_fn=stack))

        def forever():
            while True:
                yield from dataset

        return forever(), {"steps_per_epoch": steps}, lambda: drain(dataset)
    elif name == LITDATA:
        import botocore.config
        import cv2
        import litdata
        import numpy as np

        def transform(sample):
            image = cv2.imdecode(np.frombuffer(sample["image"], np.uint8), cv2.IMREAD_COLOR)
            image = cv2.cvtColor(cv2.resize(image, size[::-1],
                                            interpolation=cv2.INTER_LINEAR),
                                 cv2.COLOR_BGR2RGB)
            return image, np.int32(sample["label"])

        from litdata.streaming import downloader

        # litdata's chunk downloads go through obstore, which refuses an http:// endpoint
        # unless its client options allow it; litdata has no setting for it (real S3 is
        # https), so its module-level client options get allow_http
        downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = True
        options = {"endpoint_url": opts["client_kwargs"]["endpoint_url"],
                   "region_name": opts["client_kwargs"]["region_name"],
                   "aws_access_key_id": opts["key"], "aws_secret_access_key": opts["secret"],
                   "config": botocore.config.Config(s3={"addressing_style": "path"})}
        dataset = litdata.StreamingDataset(
            f"s3://{BUCKET}/litdata", cache_dir=scratch_folder("kerasgen-litdata-"),
            storage_options=options, transform=transform)
        loader = litdata.StreamingDataLoader(dataset, batch_size=BATCH_SIZE, num_workers=2,
                                             persistent_workers=True)

        def numpy_batches():
            for x, y in loader:
                yield x.numpy(), y.numpy()

        def forever():
            while True:
                yield from numpy_batches()

        return forever(), {"steps_per_epoch": steps}, lambda: drain(numpy_batches())
    else:
        raise ValueError(name)
    # the batches an epoch holds, as a user who knows them tells Keras (the cardinality
    # of a TFRecordDataset or from_generator is unknown)
    ds = ds.apply(tf.data.experimental.assert_cardinality(steps))
    return ds, {}, lambda: drain(ds)


def process_cpu_seconds(pid):
    """CPU seconds (user + system) the process `pid` has used, from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def children_cpu_seconds():
    """{pid: CPU seconds} of this process's live child processes (DataLoader workers)."""
    found = {}
    me = str(os.getpid())
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            found[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


class Meter:
    """CpuMeter, plus the cores the parent process (the S3 server) used, and this
    process's child processes (counted as its own); `other_cores` excludes both."""

    def __enter__(self):
        self.server = process_cpu_seconds(os.getppid())
        self.children = children_cpu_seconds()
        self.cpu = CpuMeter().__enter__()
        return self

    def __exit__(self, *exc):
        self.cpu.__exit__(*exc)
        end = process_cpu_seconds(os.getppid())
        children = children_cpu_seconds()
        wall = self.cpu.wall
        workers = sum(t - self.children.get(pid, 0.0) for pid, t in children.items()) / wall
        self.server_cores = (None if end is None or self.server is None
                             else (end - self.server) / wall)
        others = self.cpu.other_cores
        if others is not None and self.server_cores is not None:
            others = max(0.0, others - self.server_cores - workers)
        self.result = {"seconds": wall, "own_cores": self.cpu.own_cores + workers,
                       "server_cores": self.server_cores, "other_cores": others}
        return False


def preload(name):
    """Imports what feed `name` uses."""
    import importlib

    modules = {LITDATA: ["litdata", "cv2"], WDS: ["webdataset", "s3fs", "cv2"],
               WDS_LOCAL: ["webdataset", "cv2"], TF_TFR: ["s3fs"], TF_GEN: ["s3fs"],
               GRAIN_AR_LOCAL: ["grain.python", "cv2"],
               GRAIN_AR: ["grain.python", "cv2", "s3fs"]}.get(name, [])
    if name.startswith("kerasgen"):
        modules = ["kerasgen.generators", "kerasgen.tfrecord", "kerasgen.webdataset",
                   "kerasgen.arrayrecord", "array_record.python.array_record_module",
                   "s3fs"]
    for module in modules:
        importlib.import_module(module)


def part(args):
    """One run in this fresh process: build the feed, fit 2 epochs (the second timed),
    one bare pass (timed); writes JSON to --part-out."""
    import keras
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    name = BY_SHORT[args.part]
    preload(name)  # the libraries' imports are not the feed's build time
    model = (tutorial_cnn(args.image_size, NUM_CLASSES) if args.model == "cnn"
             else tiny_model(True, args.image_size))
    if name in LOCAL_TWIN:  # traced on the local twin: the first epoch holds no tracing
        twin = make_feed(LOCAL_TWIN[name], args)[0]
        model.fit(twin, epochs=1, steps_per_epoch=2, verbose=0)
        del twin
    with Meter() as built:
        data, fit_kwargs, bare = make_feed(name, args)
    epochs, timed = [], Meter()

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                timed.__enter__()
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            epochs.append(time.perf_counter() - self.start)
            if epoch == 1:
                timed.__exit__(None, None, None)

    model.fit(data, epochs=2, verbose=0, callbacks=[Timer()], **fit_kwargs)
    with Meter() as loop:
        bare()
    with open(args.part_out, "w") as f:
        json.dump({"build": built.result, "epoch_seconds": epochs, "fit": timed.result,
                   "bare": loop.result}, f)


def fill(args):
    """Fills the remote cache folder: one pass of kerasgen over s3://.../photos, and the
    shards' copies (made when their generators are)."""
    import kerasgen as kg

    opts = json.loads(args.storage_options)
    common = {"image_size": tuple(args.image_size), "batch_size": BATCH_SIZE,
              "cache": None, "seed": 0, "verbose": 0}
    with Meter() as meter:
        gen = kg.ImageFolderGenerator(f"s3://{BUCKET}/photos", storage_options=opts,
                                      remote_cache=kg.RemoteCache(args.remote_cache),
                                      **common)
        for i in range(len(gen)):
            gen[i]
    for name in (KG_WDS_WARM, KG_TFR_WARM):
        shard_generator(name, args, opts, common)
    with open(args.part_out, "w") as f:
        json.dump(meter.result, f)


# ----------------------------------------------------------------------------- main
def child_args(args, remote):
    return ["--data", os.fspath(args.data), "--shards", os.fspath(args.shards),
            "--num-files", str(args.num_files), "--num-shards", str(args.num_shards),
            "--image-size", *map(str, args.image_size),
            "--photo-size", *map(str, args.photo_size), "--model", args.model,
            "--storage-options", json.dumps(remote.storage_options) if remote else "",
            "--storage-options0", json.dumps(remote.storage_options0) if remote else "",
            "--storage-options-light",
            json.dumps(remote.storage_options_light) if remote else "",
            "--remote-cache", args.remote_cache or ""]


def run_child(args, remote, what, extra=(), python=None):
    """This script again, with `what` as --part (run by `python`); its JSON."""
    with tempfile.TemporaryDirectory(prefix="kerasgen-remote-") as tmp:
        out = os.path.join(tmp, "part.json")
        code = subprocess.run([python or sys.executable, "-m", MODULE, "--part", what,
                               "--part-out", out, *child_args(args, remote), *extra],
                              check=False).returncode
        if code != 0 or not os.path.exists(out):
            raise RuntimeError(f"the {what} run failed (exit code {code})")
        with open(out) as f:
            return json.load(f)


def measure(args, remote, name):
    """One kept run of feed `name`: run again (up to --retries times) while other
    processes used more than --max-other cores during its timed epoch."""
    redone = []
    for attempt in range(1 + args.retries):
        quiet = wait_for_quiet(args.max_other, args.quiet_wait)[1]
        run = run_child(args, remote, SHORT[name],
                        python=args.peers_python if name in TORCH_FEEDS else None)
        run["images_per_s"] = args.num_files / run["epoch_seconds"][1]
        run["cold_images_per_s"] = args.num_files / (run["build"]["seconds"]
                                                     + run["epoch_seconds"][0])
        run["bare_images_per_s"] = args.num_files / run["bare"]["seconds"]
        run["num_files"] = args.num_files
        run["quiet_before"] = quiet
        others = run["fit"]["other_cores"]
        if others is None or others <= args.max_other:
            break
        redone.append(run)
        if attempt < args.retries:
            print(f"    {name}: other processes used {others:.2f} cores; run again",
                  flush=True)
    else:  # every attempt disturbed: keep the least disturbed one
        run = min(redone, key=lambda r: r["fit"]["other_cores"])
        redone.remove(run)
    run["redone"] = redone
    return run


def fmt(value, spec=".2f"):
    return "?" if value is None else format(value, spec)


def cpu_ms(run, part):
    """Milliseconds of CPU (user + system, this run's process and its child processes;
    not the S3 server's) per image of the timed `part` ("fit": epoch 2, "bare": the bare
    loop)."""
    return run[part]["own_cores"] * run[part]["seconds"] / run["num_files"] * 1000


def report(args, results):
    """Prints the table and the ratios; returns the ratios as a dict."""
    size = "x".join(map(str, args.image_size))
    photo = "x".join(map(str, args.photo_size))
    model = "tutorial CNN" if args.model == "cnn" else "tiny model"
    lines = ["", f"{model} at {size}, batch {BATCH_SIZE}, {args.num_files} photos "
             f"({photo} JPEG), S3 server behind a {args.latency * 1000:g} ms proxy; "
             f"images/s of epoch 2 of each run, median of {args.repeats} fresh processes; "
             "bare: one pass over the feed without a model; build: making the feed "
             "(listing, downloads, index); cold/s: images over build + epoch 1 (the model "
             "traced before, on the local twin); cores: the run's process, server: the "
             "S3 server, proxies and light GET front (this process's threads; real S3 "
             "costs the training machine nothing, so the light server row keeps that "
             "artefact small), others: other processes (all in the timed epoch, "
             "medians); cpu ms/img: CPU milliseconds (user + system) per image of the "
             "run's process and its children (not the server), in the timed epoch (fit, "
             "the model's training included) and in the bare loop (bare)",
             f"{'':<41s} {'':>7s} {'':>7s} {'':>7s} {'':>7s} {'':>7s} {'':>7s} "
             f"{'cpu ms/img':^13s}",
             f"{'feed':<41s} {'fit/s':>7s} {'min':>7s} {'max':>7s} {'bare/s':>7s} "
             f"{'build s':>7s} {'cold/s':>7s} {'fit':>6s} {'bare':>6s} {'cores':>5s} "
             f"{'server':>6s} {'others':>6s} {'redone':>6s}"]
    rates, spread, cold, cold_spread = {}, {}, {}, {}
    for name, runs in results.items():
        if isinstance(runs, str):
            lines.append(f"{name:<41s} FAILED: {runs}")
            continue
        if not runs:
            continue
        per_run = [r["images_per_s"] for r in runs]
        rates[name] = statistics.median(per_run)
        spread[name] = (min(per_run), max(per_run))
        firsts = [r["cold_images_per_s"] for r in runs]
        if name in LOCAL_TWIN:  # the others' first epoch holds the model's tracing
            cold[name] = statistics.median(firsts)
            cold_spread[name] = (min(firsts), max(firsts))

        def med(key, part="fit", runs=runs):
            values = [r[part][key] for r in runs if r[part][key] is not None]
            return statistics.median(values) if values else None

        lines.append(
            f"{name:<41s} {rates[name]:7.1f} {min(per_run):7.1f} {max(per_run):7.1f} "
            f"{statistics.median(r['bare_images_per_s'] for r in runs):7.1f} "
            f"{med('seconds', 'build'):7.2f} {fmt(cold.get(name), '7.1f'):>7s} "
            f"{statistics.median(cpu_ms(r, 'fit') for r in runs):6.2f} "
            f"{statistics.median(cpu_ms(r, 'bare') for r in runs):6.2f} "
            f"{fmt(med('own_cores')):>5s} "
            f"{fmt(med('server_cores')):>6s} {fmt(med('other_cores')):>6s} "
            f"{sum(len(r['redone']) for r in runs):6d}")
    lines.append("")
    out = {}
    for label, top, bottom, target, *metric in TARGETS:
        by, span = (cold, cold_spread) if metric == [COLD] else (rates, spread)
        if top not in by or bottom not in by:
            continue
        value = by[top] / by[bottom]
        low = span[top][0] / span[bottom][1]
        high = span[top][1] / span[bottom][0]
        key = "cold_images_per_s" if metric == [COLD] else "images_per_s"
        # the runs of one round, one after the other: drift hits both alike
        rounds = [a[key] / b[key] for a, b in zip(results[top], results[bottom])]
        verdict = "" if target is None else (
            f"  {'PASS' if value >= target else 'MISS'} (target >= {target:g})")
        lines.append(f"  {label:<62s} {value:5.2f} [{low:4.2f}-{high:4.2f}]{verdict}")
        if len(rounds) > 1:
            lines.append(f"  {'':<62s} rounds: " + " ".join(f"{r:.2f}" for r in rounds))
        out[label] = {"value": value, "range": [low, high], "rounds": rounds,
                      "target": target}
    for kind, peers, ours in (("s3://", PEERS_S3, KG_S3), ("local", PEERS_LOCAL, KG_LOCALS)):
        peers = [p for p in peers if p in rates]
        ours = [k for k in ours if k in rates]
        if not (peers and ours):
            continue
        best_peer = max(peers, key=rates.get)
        for label, top in (("fastest", max(ours, key=rates.get)),
                           ("slowest (strict reading)", min(ours, key=rates.get))):
            value = rates[top] / rates[best_peer]
            text = f"{label} kerasgen {kind} feed / fastest {kind} peer"
            lines.append(f"  {text:<62s} {value:5.2f}{'':12s}  {'PASS' if value >= 1 else 'MISS'} "
                         f"(target >= 1; {top} / {best_peer})")
            out[f"{label} kerasgen {kind} / fastest {kind} peer"] = {
                "value": value, "target": 1.0, "rows": [top, best_peer]}
    lines.append("  [min-max]: the ratio over the slowest and fastest runs of the two rows; "
                 "rounds: the ratio of the two rows' runs in each round (with 2 rounds or "
                 "more)")
    print("\n".join(lines), flush=True)
    return out


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs per feed, interleaved (default 3; 1 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help=f"one round over {QUICK_FILES} files in {QUICK_SHARDS} shards")
    parser.add_argument("--num-files", type=int, default=None,
                        help=f"photos (default {DEFAULT_FILES}; {QUICK_FILES} with --quick)")
    parser.add_argument("--num-shards", type=int, default=None,
                        help=f"shards of each format (default {DEFAULT_SHARDS}; "
                             f"{QUICK_SHARDS} with --quick)")
    parser.add_argument("--image-size", type=int, nargs=2, default=[128, 128],
                        metavar=("HEIGHT", "WIDTH"), help="model input (default 128 128)")
    parser.add_argument("--model", choices=["cnn", "tiny"], default="cnn",
                        help="cnn (default): Keras's tutorial CNN; tiny: Rescaling, "
                             "global average pooling and Dense, a model that costs almost "
                             "nothing, so fit's rate is the feed's (its per-sample cost "
                             "inside fit, which the CNN's compute hides)")
    parser.add_argument("--photo-size", type=int, nargs=2, default=list(PHOTO_SIZE),
                        metavar=("WIDTH", "HEIGHT"),
                        help="the generated JPEGs' size (default %d %d); another size gets "
                             "its own photo folder (photos-WxH-N) and shard folder "
                             "(remote-N-S-WxH)" % PHOTO_SIZE)
    parser.add_argument("--latency", type=float, default=LATENCY,
                        help=f"seconds the proxy and the light GET front hold each request "
                             f"(default {LATENCY:g})")
    parser.add_argument("--feeds", nargs="+", choices=list(BY_SHORT), default=None,
                        metavar="FEED", help="feeds to run, by short name: "
                        + ", ".join(SHORT[f] for f in FEEDS) + " (default: all)")
    parser.add_argument("--data", default=None,
                        help="folder of the generated photos (default "
                             "benchmarks/.data/photos[-N], photos-WxH-N with --photo-size)")
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="also write every number to this JSON file")
    add_quiet_options(parser, quiet_wait=30.0)
    parser.add_argument("--peers-python", default=None, metavar="PYTHON",
                        help="a Python with torch and litdata (and this venv's packages) "
                             "that runs the litdata feed; without it that feed is skipped")
    parser.add_argument("--part", choices=list(BY_SHORT) + ["fill", "shards", "litdata-shards"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--part-out", help=argparse.SUPPRESS)
    parser.add_argument("--shards", help=argparse.SUPPRESS)
    parser.add_argument("--storage-options", help=argparse.SUPPRESS)
    parser.add_argument("--storage-options0", help=argparse.SUPPRESS)
    parser.add_argument("--storage-options-light", help=argparse.SUPPRESS)
    parser.add_argument("--remote-cache", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.num_files is None:
        args.num_files = QUICK_FILES if args.quick else DEFAULT_FILES
    if args.num_shards is None:
        args.num_shards = QUICK_SHARDS if args.quick else DEFAULT_SHARDS
    if args.data is None:
        args.data = os.fspath(default_folder(args.num_files, args.photo_size))
    if args.shards is None:
        args.shards = os.fspath(shard_folder(args.num_files, args.num_shards,
                                             args.photo_size))
    args.retries = max(0, args.retries)
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.part == "shards":
        return build_shards(args)
    if args.part == "litdata-shards":
        return build_litdata(args)
    if args.part == "fill":
        return fill(args)
    if args.part:
        return part(args)
    feeds = FEEDS if args.feeds is None else [BY_SHORT[f] for f in args.feeds]
    if args.peers_python is None:
        skipped = [f for f in feeds if f in TORCH_FEEDS]
        feeds = [f for f in feeds if f not in TORCH_FEEDS]
        if skipped:
            print(f"skipped (no --peers-python): {', '.join(skipped)}", flush=True)
    seconds, written = build_data(args.data, args.num_files, threads=usable_cores(),
                                  size=args.photo_size)
    print(f"built {written} files in {args.data} ({seconds:.1f} s)" if written
          else f"using the {args.num_files} files in {args.data}", flush=True)
    if not shards_done(args.shards):
        start = time.perf_counter()
        run_child(args, None, "shards")
        print(f"wrote {args.num_shards} WebDataset, TFRecord and ArrayRecord shards to "
              f"{args.shards} "
              f"({time.perf_counter() - start:.1f} s)", flush=True)
    if any(f in TORCH_FEEDS for f in feeds) and not (
            litdata_folder(args) / "index.json").exists():
        start = time.perf_counter()
        run_child(args, None, "litdata-shards", python=args.peers_python)
        print(f"wrote the LitData chunks to {litdata_folder(args)} "
              f"({time.perf_counter() - start:.1f} s)", flush=True)
    warm_page_cache(sorted(str(p) for p in Path(args.data).rglob("img_*")))
    commit, dirty = git_state()
    print(f"commit {commit}{' (kerasgen/ modified)' if dirty else ''}; "
          f"{usable_cores()} usable cores; load average {os.getloadavg()}", flush=True)
    remote = Remote(args.data, args.shards, args.latency)
    cache_dir = tempfile.mkdtemp(prefix="kerasgen-remote-cache-")
    args.remote_cache = cache_dir
    results, filled = {name: [] for name in feeds}, None
    try:
        print(f"S3 server on port {remote.server.port}, proxy {remote.proxy.endpoint}, "
              f"light GET front {remote.light.endpoint} ({len(remote.light.objects)} "
              f"photos in memory; latency {args.latency * 1000:g} ms); uploaded "
              f"{remote.objects} objects in {remote.upload_s:.1f} s", flush=True)
        if {KG_WARM, KG_WDS_WARM, KG_TFR_WARM} & set(feeds):
            filled = run_child(args, remote, "fill")
            print(f"filled the remote cache: one kerasgen pass over s3:// "
                  f"({args.num_files / filled['seconds']:.1f} images/s standalone, "
                  f"{filled['own_cores']:.2f} cores, server {fmt(filled['server_cores'])})",
                  flush=True)
        busy = machine_busy_seconds()
        started = time.perf_counter()
        for rep in range(args.repeats):
            for name in feeds:
                if isinstance(results[name], str):
                    continue
                try:
                    run = measure(args, remote, name)
                except RuntimeError as error:
                    results[name] = str(error)
                    print(f"  round {rep + 1}: {name}: {error}", flush=True)
                    continue
                results[name].append(run)
                fit = run["fit"]
                print(f"  round {rep + 1}: {name:<41s} {run['images_per_s']:7.1f} images/s "
                      f"(epoch 1: {args.num_files / run['epoch_seconds'][0]:.1f}; bare "
                      f"{run['bare_images_per_s']:.1f}; build {run['build']['seconds']:.2f} "
                      f"s, cold {run['cold_images_per_s']:.1f}/s; cores "
                      f"{fmt(fit['own_cores'])}, server "
                      f"{fmt(fit['server_cores'])}, others {fmt(fit['other_cores'])})",
                      flush=True)
        wall = time.perf_counter() - started
        load = (None if busy is None or machine_busy_seconds() is None
                else (machine_busy_seconds() - busy) / wall)
        print(f"rounds took {wall:.0f} s; all processes used {fmt(load)} cores on average "
              f"over them; load average now {os.getloadavg()}", flush=True)
    finally:
        remote.stop()
        shutil.rmtree(cache_dir, ignore_errors=True)
    ratios = report(args, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "ratios": ratios, "fill": filled,
                       "commit": commit, "kerasgen_dirty": dirty,
                       "args": {k: v for k, v in vars(args).items()
                                if not k.startswith("part")}}, f, indent=2)
    return ratios


if __name__ == "__main__":
    main()
