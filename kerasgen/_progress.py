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
