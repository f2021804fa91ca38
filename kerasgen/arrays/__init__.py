"""Arrays: batch arrays (a pool of 64-byte aligned buffers reused once nothing holds them,
dtype conversion and its checks, stacking, SMOTE blending) and the memory they live in
(anonymous shared memory, glibc's allocator inside Keras's epochs). This package is
internal, the lowest layer above the foundations' checks."""
