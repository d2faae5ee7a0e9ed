"""Optional tqdm progress bars (the ``progress`` extra)."""

__all__ = ["progress_bar"]


def progress_bar(verbose, total, desc, *, leave=True):
    """A tqdm bar when ``verbose`` and tqdm is installed, else None (tqdm is optional)."""
    if not verbose:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # the progress bar is an optional extra
        return None
    return tqdm(total=total, desc=desc, leave=leave)
