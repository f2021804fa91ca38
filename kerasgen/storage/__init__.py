"""Storage: where bytes come from. Which paths are URLs and the fsspec filesystems that
read them (`urls`), the retry budget and breakers (`retry`), what a store knows of its
objects by epoch (`catalog`), the store that reads, fetches ahead, streams and copies
(`remote`), the checked local copies of remote objects (`remote_cache`) and the one
confinement rule for paths read from data (`paths`). This package is internal: the
generators take `storage_options=` and `remote_cache=` (kg.RemoteCache)."""
