"""Formats: one reader per shard or record format, each byte rule written once. This
package is internal: the public generators (tfrecord.py, webdataset.py, arrayrecord.py,
stream.py) are built on it. It sits in the storage layer: it imports the foundations and
`storage.remote`/`storage.remote_cache` only.

  base.py         what every reader shares: `ShardReader` (a shard's records streamed,
                  errors naming shard and record), `OpenFiles` (shard files kept open per
                  thread, bounded), `SampleVersions` (a file cache's keys of records)
  compression.py  compression by magic bytes (`sniff`), `ShardStream` (decompressed as read)
  names.py        shard names: paths, URLs, globs, WebDataset braces
  labels.py       what a WebDataset label field means (`field_label`)
  tar_headers.py, tar.py    tar headers by offset, members grouped by key (indexed, streamed)
  webdataset.py   WebDataset shards: `TarSamples` (indexed), `WebDatasetRecords` (streamed)
  tfrecord.py     TFRecord framing, CRC32C, GZIP/ZLIB: `TFRecordFiles` (indexed),
                  `TFRecordRecords` (streamed)
  arrayrecord.py  ArrayRecord: `ArrayRecordFiles` (indexed), `ArrayRecordRecords` (streamed)
  example.py      tf.train.Example feature values and specs
  shards.py       `Shards`: the local files of an indexed reader (remote and compressed
                  files copied once)

A new format is one module here: an indexed reader where the format allows random access
(its count, `where(k)`, the bytes of record k, `version_at(k)`) and a `ShardReader`
subclass always (`records(name)` and `parse(raw, where)`), with a case in
tests/test_formats_contract.py showing both give the same records."""
