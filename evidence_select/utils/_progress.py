"""Optional tqdm progress bars (the ``progress`` extra)."""

__all__ = ["progress_bar"]


def progress_bar(verbose, total, desc, *, leave=True):
    """A tqdm bar when ``verbose`` and tqdm is installed, else None (tqdm is optional).

    Parameters
    ----------
    verbose : bool or int
        Show a bar when true.
    total : int
        Number of steps of the bar.
    desc : str
        Label in front of the bar.
    leave : bool, default=True
        Keep the finished bar on screen.

    Returns
    -------
    bar : tqdm.tqdm or None
        Callers update and close it when it is not None.

    Examples
    --------
    >>> from evidence_select.utils._progress import progress_bar
    >>> progress_bar(0, 10, "chunks") is None
    True
    """
    if not verbose:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # the progress bar is an optional extra
        return None
    return tqdm(total=total, desc=desc, leave=leave)
