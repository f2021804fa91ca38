"""WebDatasetGenerator: images and labels in WebDataset tar shards, by random access.

A WebDataset shard is a plain tar file; a *sample* is the group of consecutive members
sharing a key (the member path up to the first dot of its file name), each member a
field named by the rest of its name, lowercased ("cls", "jpg", "seg.png"). The shards
are read as the webdataset package reads them (`base_plus_ext`, `group_by_keys`,
`tar_file_iterator`'s metadata rule, `to_tuple("jpg;png")`'s alternatives), without
importing it, by `kerasgen.formats` (`formats.tar`, `formats.webdataset.TarSamples`,
`formats.labels`): an index of every sample's image member (shard, byte offset, size)
is built once, the labels read then, and images are read by offset when a batch asks
for them. Shuffling across shards, samplers, worker threads or processes and
get_state/set_state then work as for image files, and batch b of epoch e is the same
whatever the workers.

The shards are `formats.shards.Shards`: paths, lists, glob patterns and URLs (remote
shards copied once into a local cache, copied again if another process's size bound
removed the copy), with WebDataset's brace notation (`formats.names`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from kerasgen import _budget
from kerasgen import _checks
from kerasgen.loading import images
from kerasgen.loading.options import ImageOptions
from kerasgen._typing import (Cache, ColorMode, Decoder, ImageSize, Interpolation, OnError,
                              StrPath)
from kerasgen.formats.base import SampleVersions
from kerasgen.formats.labels import INT_FIELDS, JSON_FIELDS, TEXT_FIELDS  # noqa: F401
from kerasgen.formats.names import brace_names, expand_braces  # noqa: F401
from kerasgen.formats.shards import Shards
from kerasgen.formats.tar import (base_plus_ext, fields_of, is_meta,  # noqa: F401
                                  list_samples, tarfile_members)
from kerasgen.formats.tar_headers import tar_members  # noqa: F401
from kerasgen.formats.webdataset import WHAT, TarSamples
from kerasgen.builders.common import check_common
from kerasgen.builders.image_files import ImageFileGenerator, image_source
from kerasgen.storage import remote as _remote
from kerasgen.storage.remote_cache import RemoteCache

LABEL_MODES = ("int", "categorical", "binary", "raw", None)
WebDatasetLabelMode = Literal["int", "categorical", "binary", "raw"]  # LABEL_MODES less None


def shard_names(shards: Any) -> list[str]:
    """The paths, URLs and glob patterns `shards` names (one, WebDataset's brace
    notation, or a list of them), in order, braces expanded (in braceexpand's order);
    `Shards` then expands the glob patterns. A local path that exists is that file,
    braces or not."""
    return brace_names(shards, WHAT)




# ------------------------------------------------------------------ the generator
class WebDatasetGenerator(ImageFileGenerator):
    """Images (and their labels) from WebDataset tar shards, with random access.

    A sample is the group of consecutive tar members sharing a key, as webdataset reads
    it ("n02085620_7.jpg" and "n02085620_7.cls" are the fields "jpg" and "cls" of sample
    "n02085620_7"); members named "__...__" (metadata) and file names without a dot are
    left out, as webdataset leaves them. When the generator is made, every shard is
    indexed once (its tar headers: no image is read) and the label members are read;
    images are read by their byte offset when a batch needs them, and decoded by the
    same `ImageLoader` as image files (a thread pool, the cache, the bad-file policy).
    Shuffling is then global across shards, samplers see every label, and batch b of
    epoch e is the same with any workers, threads or processes. Shards must be
    uncompressed tar files (what webdataset writes by default).

    Remote shards (URLs) are downloaded once, when the generator is made, into
    `remote_cache` (checked; a copy another process's size bound removed is downloaded
    again when next opened); worker processes read the same local copies.

    Args:
        shards: a shard (path or URL), a glob pattern ("data/train-*.tar", its matches
            sorted), WebDataset's brace notation ("data/train-{000000..000099}.tar",
            expanded as webdataset expands it), or a list of them, read in that order.
            URLs: s3://, gs://, https://, memory://, any protocol fsspec reads (the
            [remote] extra). A shard that does not exist, a pattern matching nothing, a
            shard that is not an uncompressed tar file, or that is truncated or corrupt,
            is an error naming it.
        image_key: the field of the image ("jpg"), or alternatives separated by ";",
            the first one a sample holds being read, as webdataset's
            `to_tuple("jpg;png;jpeg")` (the default). A sample holding none is an error
            naming the shard and the key.
        label_key: the field of the label (alternatives as for `image_key`): "cls"
            (default; also "cls2", "index", "inx", "id") holds an integer class id as
            text; "txt" ("text", "transcript") a class name (surrounding whitespace
            dropped), class ids then following the sorted names, or `class_names`;
            "json" a JSON class id or class name. A sample without it, or a label that
            is not what its field holds, is an error naming the shard and the key.
            Unused with label_mode=None.
        label_mode: "int" (default, as Keras), "categorical", "binary", "raw" (class
            ids) or None (batches are x alone; no label is read).
        class_names: the classes in class-id order: names for the ids of a "cls" field
            (default "0", "1", ...: every id below the largest is a class), or the class
            names of a "txt" field in the order to number them (default: sorted).
        on_error: as for ImageFolderGenerator. With "skip" an image that cannot be
            decoded is replaced by another sample of its class, with a warning, and
            `gen.skipped` names it "shard#key", as `gen.file_paths` names every sample.
        max_record_bytes: the most bytes an image or label member may have (default
            268_435_456, 256 MiB; None: no limit), read from the tar headers when the
            shards are indexed, before anything is read, as `max_pixels` guards
            decoding; a larger member (or a pax header or GNU long name declaring more)
            is a ValueError naming the shard, the member, its sample and byte offset.
        storage_options: options of fsspec's filesystem for URLs (credentials,
            `client_kwargs={"endpoint_url": ...}`, ...).
        remote_cache: a folder (or `kg.RemoteCache(folder, max_bytes=...)`) keeping the
            local copies of remote shards between runs, checked and shared by
            processes; None (default): a temporary folder of this process.
        **common: see `kg.Generator`.

    `image_size`, `color_mode`, `interpolation`, `crop_to_aspect_ratio`,
    `pad_to_aspect_ratio`, `rescale`, `cache`, `max_pixels`, `bit_depth`, `decode_threads`,
    `decoder` and `verbose` are as for ImageFolderGenerator (one `ImageOptions`).

    Example:

    ```python
    import keras
    import kerasgen as kg

    train = kg.WebDatasetGenerator("s3://bucket/train-{000000..000127}.tar",
                                   image_key="jpg;png", label_key="cls",
                                   image_size=(224, 224), batch_size=64, seed=0,
                                   remote_cache="/data/shards")
    model.fit(train, epochs=10)   # gen.class_names, gen.labels, samplers as usual
    ```
    """

    def __init__(self, shards: StrPath | Iterable[StrPath], *,
                 image_key: str = "jpg;png;jpeg", label_key: str | None = "cls",
                 image_size: ImageSize = (256, 256), color_mode: ColorMode = "rgb",
                 class_names: Sequence[str] | None = None,
                 label_mode: WebDatasetLabelMode | None = "int",
                 interpolation: Interpolation = "bilinear",
                 crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
                 rescale: float | None = None, cache: Cache = "auto",
                 on_error: OnError = "raise", decode_threads: int | None = None,
                 decoder: Decoder = "opencv", verbose: int = 1,
                 max_pixels: int | None = images.MAX_PIXELS, bit_depth: int | None = 8,
                 max_record_bytes: int | None = _budget.MAX_RECORD_BYTES,
                 storage_options: Mapping[str, Any] | None = None,
                 remote_cache: StrPath | RemoteCache | None = None,
                 **common: Any) -> None:
        _checks.labels_come_from(self, common, "the `label_key` field of each sample")
        self.max_record_bytes = _budget.check_max_record_bytes(max_record_bytes)
        check_common(self, common)  # before any shard is fetched
        _checks.one_of("label_mode", label_mode, LABEL_MODES)
        options = ImageOptions.of(locals()).for_dtype(common.get("dtype", "float32"))
        fields_of(image_key, "image_key")
        if label_mode is not None:
            if label_key is None:
                _checks.fail("label_key", "a field name ('cls') with label_mode="
                             f"{label_mode!r}", label_key, ValueError,
                             "Pass label_mode=None to read the images without labels")
            fields_of(label_key, "label_key")
        store = _remote.Store(storage_options, _remote.check_cache(remote_cache))
        files = Shards(shard_names(shards), WHAT, store, "", verbose)
        self.samples = TarSamples(files, image_key,
                                  None if label_mode is None else label_key, verbose,
                                  self.max_record_bytes)
        self.image_key, self.label_key = image_key, label_key
        self.crop_to_aspect_ratio = bool(crop_to_aspect_ratio)
        self.pad_to_aspect_ratio = bool(pad_to_aspect_ratio)
        source = image_source(
            [self.samples.describe(k) for k in range(len(self.samples))],
            self.samples.labels, class_names, common, options,
            describe=self.samples.describe, read=self.samples.read,
            store=SampleVersions(self.samples))
        super().__init__(source=source, label_mode=label_mode, **common)

    # what users read, kept on the generator (the samples hold them)
    @property
    def paths(self) -> list[str]:
        """The shards, as given (patterns expanded; URLs, not their local copies)."""
        return list(self.samples.shards.names)

    @property
    def local_paths(self) -> list[str]:
        """The local file read for each of `paths`: the shard itself, or its copy."""
        return list(self.samples.shards.paths)

    @property
    def keys(self) -> list[str]:
        """The key of each sample ("__key__" in webdataset), in sample order."""
        return self.samples.keys

    @property
    def index(self) -> list[tuple[int, int, int]]:
        """(shard number, byte offset, size) of each sample's image member."""
        return list(zip(self.samples.shard.tolist(), self.samples.offsets.tolist(),
                        self.samples.sizes.tolist()))
