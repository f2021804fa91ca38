"""kerasgen's benchmark scripts (standalone; never part of the test suite).

Run each one as a module from the repository root, e.g.

    KERAS_BACKEND=tensorflow .venv/bin/python -m benchmarks.images --quick

`-m` from the root puts the root on `sys.path`, so the scripts import each other as
`benchmarks.<module>` and import this checkout's `kerasgen`, installed or not. Shared
modules: `machine` (CPU load, waiting for a quiet machine), `data` (the generated photo
folder) and `pipelines` (the image pipelines `images` times). See benchmarks/README.md.
"""
