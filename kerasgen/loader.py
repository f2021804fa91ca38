"""The loader stage: encoded images -> resized arrays, on a thread pool, with caches.

This public module is a thin face over `kerasgen.loading` (internal), where each concept
is a module: `loading.image_loader` (`ImageLoader`), `loading.options` (`ImageOptions`,
the options checked once), `loading.cache_choice` (which cache `cache=` makes),
`loading.bad_files` (the bad-file policy: an error naming the file, or skipped with a
report), `loading.decode_pool` (the decode threads and their sizing), `loading.nv_batch` (a
batch's JPEGs through nvImageCodec) and `loading.scan` (validation, thumbnails).
"""

from __future__ import annotations

from kerasgen.loading.bad_files import Substitutes as Substitutes
from kerasgen.loading.decode_pool import usable_cores as usable_cores
from kerasgen.loading.image_loader import ImageLoader as ImageLoader
from kerasgen.loading.options import DECODERS as DECODERS
from kerasgen.loading.options import ImageOptions as ImageOptions

__all__ = ["DECODERS", "ImageLoader", "ImageOptions", "Substitutes", "usable_cores"]
