"""The loader stage: encoded bytes to arrays (decode, resize, caches) and the image
options that say how (`ImageOptions`). This package is internal: users pass the options
as keywords, and import `ImageLoader` from `kerasgen.loader`.

`options` (ImageOptions), `image_loader` (ImageLoader), `cache_choice`, `bad_files`,
`decode_pool`, `nv_batch`, `scan` (validate, thumbnails)."""
