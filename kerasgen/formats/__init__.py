"""Formats: one reader per shard or record format (tar/WebDataset, TFRecord, ArrayRecord),
each byte rule written once. This package is internal: the public generators are built on them."""
