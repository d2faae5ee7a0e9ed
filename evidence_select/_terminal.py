"""What the command line shows while it streams: a progress bar, and the warnings held until the bar is done.

A warning printed while a tqdm bar redraws itself, or between the lines of a
table, cuts them in two. :func:`held_warnings` records the warnings raised
inside it and shows each distinct one once at the end, through whatever
:func:`warnings.showwarning` is in force there (the command line's one-line
format in a terminal, pytest's recorder in tests). Filters still act when a
warning is raised: an ``"error"`` filter raises at once.
"""

import sys
import warnings
from contextlib import contextmanager

__all__ = ["held_warnings", "progress_bar_rows", "show_warning_line"]


#: A bar without tqdm's time to go, which assumes a constant cost per row.
_NO_ETA_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} rows [{elapsed}{postfix}]"


def progress_bar_rows(total, enabled, desc="streaming", eta=True):
    """A tqdm bar counting rows, or None when disabled or tqdm (the extra ``progress``) is missing.

    ``eta=False`` drops tqdm's time to go, for streams whose cost per row changes along the way.
    """
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # optional extra "progress"; the caller prints lines instead
        return None
    return tqdm(total=total, unit="row", desc=desc, dynamic_ncols=True, bar_format=None if eta else _NO_ETA_FORMAT)


def show_warning_line(message, category, filename, lineno, file=None, line=None):
    """:func:`warnings.showwarning` for a terminal: one line naming the category, no Python source location."""
    print(f"evidence-select: {category.__name__}: {message}", file=sys.stderr if file is None else file)


@contextmanager
def held_warnings():
    """Hold the warnings raised inside the block; show each distinct ``(category, message)`` once at its end.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as shown:
    ...     warnings.simplefilter("always")
    ...     with held_warnings():
    ...         warnings.warn("first", UserWarning)
    ...         print("a line that stays whole")
    ...         warnings.warn("first", UserWarning)
    a line that stays whole
    >>> [str(w.message) for w in shown]
    ['first']
    """
    with warnings.catch_warnings(record=True) as caught:  # the filters in force still decide (and raise)
        try:
            yield caught
        finally:
            held = list(caught)
    seen = set()
    for item in held:
        key = (item.category, str(item.message))
        if key not in seen:
            seen.add(key)
            warnings.showwarning(item.message, item.category, item.filename, item.lineno)
