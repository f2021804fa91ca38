"""The loader stage: encoded bytes to arrays (decode, resize, caches) and the image
options that say how (`ImageOptions`). This package is internal: users pass the options as keywords."""
