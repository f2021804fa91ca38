"""Progress bars that appear only for slow steps, and only when tqdm is installed."""


def progress(iterable, desc, total=None, verbose=1):
    """Wraps `iterable` in a tqdm bar shown after 2 seconds; plain iterable otherwise."""
    if not verbose:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, desc=desc, total=total, delay=2, leave=False)


class _NoBar:
    """What `bar` returns without tqdm or a terminal: the calls of a bar, doing nothing."""

    def update(self, n=1):
        pass

    def close(self):
        pass


def bar(total, desc, unit="batch", delay=1.0, verbose=1):
    """A tqdm bar of `total` steps to `update()` and `close()`, shown after `delay`
    seconds and only on a terminal (never in logs or captured output), erased when
    closed; a stand-in that does nothing without tqdm or with verbose=0."""
    if not verbose:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit=unit, delay=delay, leave=False, disable=None)
