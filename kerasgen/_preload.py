"""What the fork server imports before it forks kerasgen's worker processes (see
worker_start.context): kerasgen's generator, so Keras and its backend, once, with
TensorFlow's start-up log lines dropped as the level the parent set says
(kerasgen._quiet; the command line sets 3, a user's own level is kept)."""

from kerasgen._quiet import tensorflow_quiet

with tensorflow_quiet(default_level=None):
    import kerasgen.base  # noqa: F401
