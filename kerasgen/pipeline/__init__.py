"""How batches are made, below the public API (internal: import what `kerasgen.__all__`
names). One module per step of a batch's way down (docs/architecture.md):

- `order`: the epochs' order and where a run stands (`EpochOrder`, its `BatchSlice`);
- `making`: `BatchMaker`, the recipe of a batch; `augmenting`: the per-sample
  augmentation stage; `batching`: batch arrays, dtype conversion, SMOTE blending;
- `feeding`: where batches are made (`Placement`, `Feeding`, `Recipe`); `ahead`: batches
  made before they are asked for; `workers`: kerasgen's worker processes; `shm`: their
  shared memory; `malloc`: glibc's allocator inside Keras's epochs;
- `cache`: the decoded-image caches (memory, shared memory, file).
"""
