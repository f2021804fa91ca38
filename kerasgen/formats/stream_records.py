"""The streamed readers of shards, under the names `kerasgen.stream` imports: each now
lives with its format (`formats.base`, `formats.tar`, `formats.tfrecord`,
`formats.webdataset`, `formats.names`); this module only gathers them.

`Records` is the old name of `formats.base.ShardReader` (kept while stream.py uses it;
`tfrecord.Records` is another thing: the Example records of the indexed generators)."""

from __future__ import annotations

from kerasgen.formats.base import (KEYS, Broken, CallableRecords, Item, ReadShard,
                                   ShardReader, TooLarge, open_shard)
from kerasgen.formats.compression import ShardStream
from kerasgen.formats.labels import INTEGER, field_label
from kerasgen.formats.names import check_exists, shard_names
from kerasgen.formats.tar import tar_samples
from kerasgen.formats.tfrecord import TFRecordRecords, tfrecord_records
from kerasgen.formats.webdataset import WebDatasetRecords

Records = ShardReader  # the old name
_INTEGER = INTEGER  # the old names, as stream.py imports them
_check_exists = check_exists

__all__ = ["KEYS", "Broken", "CallableRecords", "INTEGER", "Item", "ReadShard", "Records",
           "ShardReader", "ShardStream", "TFRecordRecords", "TooLarge", "WebDatasetRecords",
           "_INTEGER", "_check_exists", "check_exists", "field_label", "open_shard",
           "shard_names", "tar_samples", "tfrecord_records"]
