"""Command-line entry point ``evidence-select``.

``demo`` streams the paper's distribution-shift data (3 -> 5 -> 7 clusters)
through 3-, 5- and 7-component online mixtures, shows the running model
probabilities, reports the detected change points and, with matplotlib,
writes a figure like the paper's Fig. 5. ``compare`` streams a CSV file through
default candidates and prints them ranked by evidence.
"""

import argparse
import os
import sys
import time
import warnings
from typing import NamedTuple

import numpy as np

from ._demo import DEMO_PHASES, run_demo
from ._terminal import held_warnings, progress_bar_rows, show_warning_line
from .exceptions import FeatureScaleWarning, StreamOrderWarning
from .utils._order import OrderTest
from .utils._shuffle import rechunk, shuffled_chunks
from .utils._tabular import RunningMoments, file_format, import_pandas, iter_frames

__all__ = ["main"]

class CLIError(Exception):
    """A user error: printed without a traceback, exit status 2."""


# -- compare ------------------------------------------------------------------------------------------
class _Scan(NamedTuple):
    """What the first pass over a data file learned (memory independent of its length)."""

    n_rows: int
    features: list
    x_moments: RunningMoments
    y_moments: RunningMoments  # regression only
    classes: np.ndarray        # classification only (sorted labels)
    label_codes: dict          # label -> code in ``classes``
    order: object              # OrderVerdict or None


def _frames(args, fmt):
    """The file's rows as DataFrames of ``--read-rows`` rows, with read errors as CLIError."""
    try:
        pd = import_pandas("evidence-select compare")
    except ImportError as exc:
        raise CLIError(str(exc)) from exc
    try:
        yield from iter_frames(args.data, args.read_rows, fmt)
    except ImportError as exc:
        raise CLIError(str(exc)) from exc
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError, ValueError) as exc:
        raise CLIError(f"cannot read {args.data} as {fmt}: {exc}") from exc


def _numbers_read_as_text(frame):
    """``frame`` with its text columns whose every value is a number as floats: pandas 2 reads a number beyond
    float range (``1e400``) as text, where Python's float gives the ``inf`` the non-finite check then names."""
    import pandas as pd

    converted = {}
    for column in frame.columns:
        if pd.api.types.is_object_dtype(frame[column]):
            try:
                converted[column] = frame[column].astype(float)
            except (TypeError, ValueError):
                pass
    return frame.assign(**converted) if converted else frame


def _check_frame(frame, args, first):
    """Split one chunk into features and target, with the errors a user can act on."""
    import pandas as pd

    if first and args.target is not None and args.target not in frame.columns:
        raise CLIError(f"column {args.target!r} not found in {args.data}; columns are {list(frame.columns)}")
    frame = _numbers_read_as_text(frame)
    y = frame.pop(args.target) if args.target is not None else None
    if frame.shape[1] == 0:
        raise CLIError(f"{args.data} has no feature columns besides the target")
    non_numeric = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    if non_numeric:
        raise CLIError(f"non-numeric feature column(s) {non_numeric} in {args.data}; encode them numerically first")
    missing = [c for c in frame.columns if frame[c].isna().any()]
    if missing:
        raise CLIError(f"missing values in column(s) {missing} of {args.data}")
    if args.task == "regression" and (not pd.api.types.is_numeric_dtype(y.dtype) or y.isna().any()):
        raise CLIError(f"target column {args.target!r} must be numeric without missing values for regression")
    if args.task == "classification" and y.isna().any():
        raise CLIError(f"target column {args.target!r} has missing values")
    numeric = frame if args.task != "regression" else frame.assign(**{args.target: y})
    infinite = [c for c in numeric.columns if not np.isfinite(numeric[c].to_numpy(dtype=float)).all()]
    if infinite:
        raise CLIError(f"non-finite values (inf, or numbers too large for a float) in column(s) {infinite} of "
                       f"{args.data}; remove or replace them")
    return frame, (None if args.task == "density" else y)


def _label_codes(y, codes):
    """Integer codes of the labels ``y``, extending ``codes`` (label -> code) with new labels."""
    for label in y.unique():
        codes.setdefault(label, len(codes))
    return y.map(codes).to_numpy(dtype=np.int64)


def _scan(args, fmt):
    """First pass: validate every chunk, count rows, column moments, classes and the order test."""
    x_moments, y_moments, seen_codes, features, order = RunningMoments(), RunningMoments(), {}, None, None
    for i, frame in enumerate(_frames(args, fmt)):
        if len(frame) == 0:  # a header without rows reads as one empty chunk of text columns
            continue
        frame, y = _check_frame(frame, args, first=features is None)
        if features is None:
            features = list(frame.columns)
            names = {"regression": [args.target], "classification": [], "density": features}[args.task]
            order = OrderTest(names, labels=args.target if args.task == "classification" else None)
        x_moments.update(frame.to_numpy(dtype=float))
        if args.task == "regression":
            y_moments.update(y.to_numpy(dtype=float)[:, None])
            order.update(y.to_numpy(dtype=float)[:, None])
        elif args.task == "classification":
            order.update(np.empty((len(y), 0)), _label_codes(y, seen_codes))
        else:
            order.update(frame.to_numpy(dtype=float))
    if features is None:
        raise CLIError(f"{args.data} has no data rows (a header at most)")
    classes = None
    if seen_codes:
        try:
            classes = np.array(sorted(seen_codes), dtype=object)
        except TypeError:  # labels of mixed types: any fixed order will do
            classes = np.array(sorted(seen_codes, key=str), dtype=object)
    label_codes = {label: code for code, label in enumerate(classes)} if classes is not None else {}
    return _Scan(x_moments.count, features, x_moments, y_moments, classes, label_codes, order.verdict())


def _numeric_blocks(args, fmt, scan):
    """Second pass: standardised features with the (standardised or encoded) target as the last column."""
    for frame in _frames(args, fmt):
        if len(frame) == 0:
            continue
        frame, y = _check_frame(frame, args, first=False)
        X = (frame.to_numpy(dtype=float) - scan.x_moments.mean) / scan.x_moments.std
        if args.task == "regression":
            y = (y.to_numpy(dtype=float) - scan.y_moments.mean[0]) / scan.y_moments.std[0]
        elif args.task == "classification":
            y = y.map(scan.label_codes).to_numpy(dtype=float)
        yield X if y is None else np.column_stack([X, y])


def _stream_chunks(args, fmt, scan, rng):
    """Chunks of ``--chunk-size`` rows, shuffled in bounded memory unless ``--no-shuffle``."""
    n_columns = len(scan.features) + (args.task != "density")
    blocks = _numeric_blocks(args, fmt, scan)
    if not args.shuffle:
        return rechunk(blocks, args.chunk_size)
    return shuffled_chunks(blocks, scan.n_rows, n_columns, args.chunk_size, rng,
                           max_bytes=int(args.shuffle_memory * 2**20), tmp_dir=args.tmp_dir)


def _default_candidates(task, chunk_size):
    """Sensible default candidates for standardised data."""
    from .estimators import BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture

    if task == "regression":  # the noise variance learned; the weights' scale learned, or fixed in noise units
        return [(f"linear scale={'learned' if s is None else f'{s:g}'}",
                 BayesianLinearRegressor(prior_scale=s, batch_size=chunk_size)) for s in (None, 0.1, 1.0, 10.0)]
    if task == "classification":
        return [(f"softmax prior={s:g}", BayesianLogisticClassifier(prior_scale=s, batch_size=chunk_size))
                for s in (0.3, 1.0, 3.0)]
    return [(f"mixture K={k}", BayesianMixture(k, batch_size=chunk_size)) for k in (1, 2, 3, 4, 5)]


#: A classification target with more distinct values than this fraction of its rows is refused: its classes
#: would average fewer than 2 rows each, which no classifier learns from (a continuous target, most likely).
MAX_CLASS_FRACTION = 0.5


def _check_classes(classes, n_rows, target):
    """Refuse a classification target that cannot be one: a single class, non-integer numbers, or more distinct
    values than ``MAX_CLASS_FRACTION`` of the rows (each softmax candidate would fit that many classes)."""
    if len(classes) < 2:
        raise CLIError(f"target column {target!r} has a single class; classification needs at least 2")
    numbers = [label for label in classes if isinstance(label, (int, float, np.number)) and not isinstance(label, bool)]
    fractional = [label for label in numbers if not float(label).is_integer()]
    if fractional or len(classes) > MAX_CLASS_FRACTION * n_rows:
        reason = (f"non-integer values such as {float(fractional[0]):g}" if fractional else
                  f"more than {MAX_CLASS_FRACTION:.0%} of the rows, so each class would have fewer than "
                  f"{1 / MAX_CLASS_FRACTION:g} rows")
        raise CLIError(f"target column {target!r} has {len(classes)} distinct values in {n_rows} rows ({reason}): "
                       "it looks continuous, not like class labels; for a numeric target use --task regression")


def _report_order(scan, shuffle):
    """Warn about a sorted or autocorrelated file when it is streamed as is; note it when shuffling."""
    if scan.order is None or not scan.order.flagged:
        return
    if shuffle:
        print(f"note: {scan.order.describe()}; the rows are shuffled before streaming (--shuffle)")
        return
    warnings.warn(f"{scan.order.describe()}. With --no-shuffle the rows stream in this order, a sequence of "
                  "distribution shifts for the online evidence, so the result may differ from that of the same "
                  "rows shuffled; drop --no-shuffle unless the file order is the stream's true order",
                  StreamOrderWarning, stacklevel=2)


def _compare(args):
    from .selection import EvidenceModelSelector

    if not os.path.isfile(args.data):
        raise CLIError(f"no such file: {args.data}")
    if args.task != "density" and args.target is None:
        raise CLIError(f"--target is required for --task {args.task}")
    try:
        fmt = file_format(args.data, args.format)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    scan = _scan(args, fmt)
    if scan.n_rows < 2:
        raise CLIError(f"{args.data} needs at least 2 rows; got {scan.n_rows}")
    if scan.classes is not None:
        _check_classes(scan.classes, scan.n_rows, args.target)
    _report_order(scan, args.shuffle)
    # Standardising with statistics of the whole file shifts every candidate's log evidence by the same
    # log-Jacobian, so the ranking and the probabilities are those of the raw data.
    candidates = _default_candidates(args.task, args.chunk_size)
    selector = EvidenceModelSelector(candidates, n_jobs=args.n_jobs, random_state=args.random_state)
    print(f"streaming {scan.n_rows} rows x {len(scan.features)} features of {args.data} through {len(candidates)} "
          f"{args.task} candidates in chunks of {args.chunk_size} "
          f"({'shuffled, seed ' + str(args.random_state) if args.shuffle else 'in file order'})")
    tic = time.perf_counter()
    with held_warnings(), warnings.catch_warnings():
        # The file's order was tested as a whole (above), and compare has no option for the priors: the
        # candidates' own order and scale warnings would repeat the one, or name cures compare does not offer
        # (the scale flags are reported after the table instead).
        warnings.filterwarnings("ignore", category=StreamOrderWarning)
        warnings.filterwarnings("ignore", category=FeatureScaleWarning)
        _stream_file(selector, args, fmt, scan)
    print()
    print(selector.summary())
    print(f"({time.perf_counter() - tic:.1f} s; evidences of the standardised data)")
    _report_scale_flags(selector)
    return 0


def _stream_file(selector, args, fmt, scan):
    """Stream the file's chunks through the selector (classes on the first call), with a progress bar."""
    bar = progress_bar_rows(scan.n_rows, not args.no_progress)
    rng = np.random.default_rng(args.random_state)
    classes = None if scan.classes is None else np.arange(len(scan.classes))
    for i, chunk in enumerate(_stream_chunks(args, fmt, scan, rng)):
        kwargs = {"classes": classes} if i == 0 and classes is not None else {}
        if args.task == "density":
            selector.partial_fit(chunk, **kwargs)
        else:
            y = chunk[:, -1].astype(np.int64) if classes is not None else chunk[:, -1]
            selector.partial_fit(chunk[:, :-1], y, **kwargs)
        if bar is not None:
            bar.update(len(chunk))
    if bar is not None:
        bar.close()


def _report_scale_flags(selector):
    """Name the candidates whose evidence a scale check flagged, with the cure that fits the command line."""
    flagged = [name for (name, _), checks in zip(selector.estimators, selector.evidence_checks_)
               if "feature_scale" in checks]
    if flagged:
        print(f"note: {', '.join(flagged)} flagged 'feature_scale': the candidate's fixed priors (noise variance, "
              "prior scale) do not fit the standardised columns, so its evidence may read too low. compare "
              "standardises every column and has no option for the priors; to choose them, build the candidates "
              "in Python (evidence_select.EvidenceModelSelector)")


_COMPARE_HELP = """\
Rank default candidates on a data file by their evidence.

Regression: linear models whose noise variance is learned, with the weights'
prior scale learned (Zellner-Siow) or fixed at 0.1, 1 or 10 noise standard
deviations; classification: softmax regression with 3 prior scales; density:
Gaussian mixtures with 1-5 components. Features (and a regression target) are standardised with the
file's own means and standard deviations, which shifts every candidate's log
evidence by the same amount: the ranking is that of the raw data.

The file is read twice in chunks of --read-rows rows (pandas, pyarrow for
Parquet: the extra 'io'), so files larger than memory stream. The first pass
validates the columns, computes the statistics and tests the row order: the
target's lag-1 autocorrelation (class labels: their number of runs) against
its distribution under a random order; a sorted or strongly autocorrelated
file (z > 4 and an autocorrelation, or a shortfall of label changes, of at
least 0.1) gets a warning with --no-shuffle.

--shuffle (the default) streams the rows in a seeded uniformly random order:
the models treat rows as exchangeable, and a file sorted by the target would
otherwise arrive as a sequence of distribution shifts, which the online
sampler handles less well than the same rows shuffled. Files up to
--shuffle-memory MB are shuffled in memory; larger ones in two passes: each row
is written to one of several temporary files chosen at random (in --tmp-dir,
about half of --shuffle-memory each, disk use the size of the data), then each
file is read back, shuffled in memory and streamed; the result is still a
uniformly random order. --no-shuffle streams the rows in file order, for files
whose order is the stream's true order.
"""


def _build_parser():
    parser = argparse.ArgumentParser(prog="evidence-select", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="online model selection and change points on the paper's shift stream")
    demo.add_argument("--phases", type=int, nargs=3, default=list(DEMO_PHASES), metavar=("N3", "N5", "N7"),
                      help="rows with 3, 5 and 7 clusters (default: %(default)s)")
    demo.add_argument("--full", action="store_true", help="the paper's full stream (1000, 9000, 90000 rows; minutes)")
    demo.add_argument("--chunk-size", type=int, default=250)
    demo.add_argument("--n-replicates", type=int, default=2,
                      help="replicate particle groups per candidate (their spread gives the errors)")
    demo.add_argument("--shuffled", action="store_true", help="also run the shuffled (stationary) control")
    demo.add_argument("--n-jobs", type=int, default=-1,
                      help="candidates in parallel (joblib; default -1: a worker per core, at most one per "
                           "candidate)")
    demo.add_argument("--random-state", type=int, default=0)
    demo.add_argument("--n-lines", type=int, default=8, help="rows of the printed table per stream")
    demo.add_argument("--plot", default="evidence_select_demo.png", help="figure path (needs matplotlib)")
    demo.add_argument("--no-plot", dest="plot", action="store_const", const=None)
    demo.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    demo.set_defaults(func=run_demo)
    compare = sub.add_parser("compare", help="rank default candidates on a CSV or Parquet file by evidence",
                             description=_COMPARE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    compare.add_argument("data", help="CSV file with a header row (also compressed), or Parquet file")
    compare.add_argument("--target", help="target column (required for regression and classification)")
    compare.add_argument("--task", choices=["regression", "classification", "density"], required=True)
    compare.add_argument("--format", choices=["csv", "parquet"], default=None,
                         help="file format (default: from the extension, .csv or .parquet)")
    compare.add_argument("--shuffle", action=argparse.BooleanOptionalAction, default=True,
                         help="stream the rows in a seeded random order (default); --no-shuffle: in file order")
    compare.add_argument("--shuffle-memory", type=float, default=1024.0, metavar="MB",
                         help="memory for shuffling; larger files are shuffled through temporary files "
                              "(default: %(default)g)")
    compare.add_argument("--tmp-dir", default=None, help="directory of the shuffle's temporary files")
    compare.add_argument("--read-rows", type=int, default=100_000, help="rows read at a time (default: %(default)s)")
    compare.add_argument("--chunk-size", type=int, default=500, help="rows per partial_fit (default: %(default)s)")
    compare.add_argument("--n-jobs", type=int, default=None)
    compare.add_argument("--random-state", type=int, default=0, help="seeds the shuffle and the candidates")
    compare.add_argument("--no-progress", action="store_true")
    compare.set_defaults(func=_compare)
    return parser


def main(argv=None):
    """Run the ``evidence-select`` command line.

    Parameters
    ----------
    argv : list of str, default=None
        Arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    status : int
        0 on success, 2 on a user error (printed to stderr).

    Examples
    --------
    ``evidence-select compare data.csv --task regression --target y`` from Python:
    rank the default candidates on a CSV file by their evidence.

    >>> import os, tempfile
    >>> import numpy as np
    >>> from evidence_select.cli import main
    >>> from evidence_select.datasets import make_linear_regression
    >>> data = make_linear_regression(200, n_features=2, random_state=0)
    >>> path = os.path.join(tempfile.mkdtemp(), "data.csv")
    >>> np.savetxt(path, np.column_stack([data.X, data.y]), delimiter=",", header="a,b,y", comments="")
    >>> with np.printoptions():  # main() sets numpy's print precision; this restores it after
    ...     status = main(["compare", path, "--task", "regression", "--target", "y", "--no-progress"])
    ... # doctest: +ELLIPSIS
    streaming 200 rows x 2 features of ... through 4 regression candidates in chunks of 500 (shuffled, seed 0)
    <BLANKLINE>
    rank  candidate ...
       1  linear scale=... best ...
    ...
    >>> status
    0

    A user error is reported without a traceback:

    >>> with np.printoptions():
    ...     main(["compare", "no-such-file.csv", "--task", "density"])
    2
    """
    parser = _build_parser()
    args = parser.parse_args(argv)
    for option in ("chunk_size", "read_rows"):
        if getattr(args, option, 1) < 1:
            parser.error(f"--{option.replace('_', '-')} must be >= 1")
    if getattr(args, "shuffle_memory", 1.0) <= 0:
        parser.error("--shuffle-memory must be > 0")
    try:
        with np.printoptions(precision=4), warnings.catch_warnings():  # scoped: main() also runs in-process
            if argv is None:  # a terminal: warnings as plain lines, not Python source locations
                warnings.showwarning = show_warning_line
            return args.func(args)
    except CLIError as exc:
        print(f"evidence-select {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
