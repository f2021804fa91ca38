"""Formats: one reader per shard or record format (tar/WebDataset, TFRecord, ArrayRecord),
each byte rule written once. Internal: the public generators are built on them."""
