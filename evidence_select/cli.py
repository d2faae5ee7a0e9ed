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

import numpy as np

__all__ = ["main"]

DEMO_PHASES = (1000, 1500, 1500)


class CLIError(Exception):
    """A user error: printed without a traceback, exit status 2."""


# -- demo ---------------------------------------------------------------------------------------------
def _progress_bar(total, enabled):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # optional extra "progress"; fall back to printed lines
        return None
    return tqdm(total=total, unit="row", desc="streaming", dynamic_ncols=True)


def _run_stream(X, chunk_size, n_jobs, random_state, n_replicates, label, show_progress, n_lines):
    from .estimators import BayesianMixture
    from .selection import EvidenceModelSelector

    selector = EvidenceModelSelector(
        [(f"K={k}", BayesianMixture(k, batch_size=chunk_size, n_replicates=n_replicates)) for k in (3, 5, 7)],
        n_jobs=n_jobs, random_state=random_state)
    n_chunks = -(-len(X) // chunk_size)
    report_every = max(1, n_chunks // max(n_lines, 1))
    bar = _progress_bar(len(X), show_progress)
    print(f"\n{label}: {len(X)} rows in chunks of {chunk_size}")
    header = f"{'samples':>8} " + " ".join(f"{'log Z/n ' + name:>14}" for name, _ in selector.estimators) + \
        " " + " ".join(f"{'P(' + name + ')':>9}" for name, _ in selector.estimators) + f" {'anneal':>12}"
    (bar.write if bar is not None else print)(header)
    for index, start in enumerate(range(0, len(X), chunk_size)):
        selector.partial_fit(X[start:start + chunk_size])
        record = selector.evidence_history_[-1]
        if bar is not None:
            bar.update(min(chunk_size, len(X) - start))
            bar.set_postfix({name: f"{p:.3f}" for (name, _), p in zip(selector.estimators, record.model_probabilities)},
                            refresh=False)
        if (index + 1) % report_every == 0 or start + chunk_size >= len(X):
            line = f"{record.n_samples_seen:>8} " + " ".join(
                f"{z / record.n_samples_seen:>14.4f}" for z in record.log_evidences) + " " + " ".join(
                f"{p:>9.3f}" for p in record.model_probabilities) + " " + f"{'/'.join(str(c.n_annealing_steps) for c in record.candidate_records):>12}"
            (bar.write if bar is not None else print)(line)
    if bar is not None:
        bar.close()
    return selector


def _print_probabilities(selector, title):
    print(f"\n{title}")
    print(f"{'model':>6} {'log evidence':>14} {'+/- std':>8} {'probability':>12} {'+/- std':>8}")
    for k, (name, _) in enumerate(selector.estimators):
        print(f"{name:>6} {selector.log_evidences_[k]:>14.2f} {selector.log_evidence_stds_[k]:>8.2f} "
              f"{selector.model_probabilities_[k]:>12.4g} {selector.model_probabilities_std_[k]:>8.2g}")


def _plot_demo(selector, change_points, true_change_points, path, shuffled=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    history = selector.evidence_history_
    n = np.array([r.n_samples_seen for r in history])
    names = [name for name, _ in selector.estimators]
    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True, constrained_layout=True)
    for k, name in enumerate(names):
        line, = axes[0].plot(n, [r.log_evidences[k] / r.n_samples_seen for r in history], label=f"{name} in order")
        if shuffled is not None:
            sh = shuffled.evidence_history_
            axes[0].plot([r.n_samples_seen for r in sh], [r.log_evidences[k] / r.n_samples_seen for r in sh], "--",
                         color=line.get_color(), label=f"{name} shuffled")
        axes[1].plot(n, [r.candidate_records[k].n_annealing_steps for r in history], label=name)
        axes[2].plot(n, [r.model_probabilities[k] for r in history], label=name)
    for ax in axes:
        for c in true_change_points:
            ax.axvline(c, color="grey", linestyle=":", linewidth=1)
        for c in change_points:
            ax.axvline(c, color="red", linestyle="--", linewidth=1, alpha=0.7)
    axes[0].set_ylabel("log evidence per datum")
    axes[1].set_ylabel("annealing steps per chunk")
    axes[2].set_ylabel("model probability")
    axes[2].set_xlabel("samples seen")
    axes[0].set_title("SGAIS on the distribution-shift stream (dotted: true shifts, dashed red: detected)")
    for ax in axes:
        ax.legend(fontsize=8, ncol=2)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _demo(args):
    from .evidence._changepoints import detect_change_points
    from .selection._shift import PAPER_PHASES, shift_stream

    phases = PAPER_PHASES if args.full else tuple(args.phases)
    data = shift_stream(phases, random_state=args.random_state)
    print("evidence-select demo: online Bayesian model selection on the paper's distribution-shift stream "
          f"(Sec. 6.2): 3 -> 5 -> 7 clusters, shifts at samples {data.change_points}"
          + ("" if args.full else f" (phases shortened to {list(phases)} rows; --full for the paper's size)"))
    tic = time.perf_counter()
    selector = _run_stream(data.X, args.chunk_size, args.n_jobs, args.random_state, args.n_replicates,
                           "in-order stream", not args.no_progress, args.n_lines)
    shuffled = None
    if args.shuffled:
        shuffled_data = shift_stream(phases, shuffle=True, random_state=args.random_state)
        shuffled = _run_stream(shuffled_data.X, args.chunk_size, args.n_jobs, args.random_state, args.n_replicates,
                               "shuffled (stationary) control", not args.no_progress, args.n_lines)
    seconds = time.perf_counter() - tic
    _print_probabilities(selector, "final model probabilities (in-order stream)")
    if shuffled is not None:
        _print_probabilities(shuffled, "final model probabilities (shuffled stream)")
    found = detect_change_points(selector)
    print(f"\ndetected change points: {found.tolist()}  (true: {data.change_points}; "
          f"chunks of {args.chunk_size})")
    if shuffled is not None:
        print(f"detected change points on the shuffled stream: {detect_change_points(shuffled).tolist()} (true: [])")
    print(f"streamed in {seconds:.1f} s")
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("matplotlib is not installed: no figure (pip install 'evidence-select[plot]')")
        else:
            _plot_demo(selector, found, data.change_points, args.plot, shuffled)
            print(f"figure written to {os.path.abspath(args.plot)}")
    return 0


# -- compare ------------------------------------------------------------------------------------------
def _read_csv(path, target, task):
    """Numeric feature matrix and target (None for density) from a CSV, with clear errors."""
    if not os.path.isfile(path):
        raise CLIError(f"no such file: {path}")
    try:
        import pandas as pd
    except ImportError as exc:
        raise CLIError("compare reads CSV files with pandas: pip install pandas") from exc
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {path} as CSV: {exc}") from exc
    if task != "density" and target is None:
        raise CLIError(f"--target is required for --task {task}")
    if target is not None and target not in frame.columns:
        raise CLIError(f"column {target!r} not found in {path}; columns are {list(frame.columns)}")
    y = None
    if target is not None:
        y = frame.pop(target).to_numpy()
    if frame.shape[1] == 0:
        raise CLIError(f"{path} has no feature columns besides the target")
    non_numeric = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    if non_numeric:
        raise CLIError(f"non-numeric feature column(s) {non_numeric} in {path}; encode them numerically first")
    X = frame.to_numpy(dtype=float)
    missing = [c for c in frame.columns if frame[c].isna().any()]
    if missing:
        raise CLIError(f"missing values in column(s) {missing} of {path}")
    if task == "regression":
        if not pd.api.types.is_numeric_dtype(y.dtype) or pd.isna(y).any():
            raise CLIError(f"target column {target!r} must be numeric without missing values for regression")
        y = y.astype(float)
    elif task == "classification" and pd.isna(y).any():
        raise CLIError(f"target column {target!r} has missing values")
    if task == "density" and y is not None:
        y = None  # a --target given for density is simply left out of X
    return X, y, list(frame.columns)


def _default_candidates(task, n_features, n_classes, chunk_size):
    """Sensible default candidates for standardised data."""
    from .estimators import BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture

    if task == "regression":  # noise variance relative to var(y) = 1
        return [(f"linear noise={v:g}", BayesianLinearRegressor(noise_variance=v, batch_size=chunk_size))
                for v in (0.01, 0.05, 0.2, 0.5, 1.0)]
    if task == "classification":
        return [(f"softmax prior={s:g}", BayesianLogisticClassifier(prior_scale=s, batch_size=chunk_size))
                for s in (0.3, 1.0, 3.0)]
    return [(f"mixture K={k}", BayesianMixture(k, batch_size=chunk_size)) for k in (1, 2, 3, 4, 5)]


def _compare(args):
    from sklearn.preprocessing import StandardScaler

    from .selection import EvidenceModelSelector

    X, y, features = _read_csv(args.data, args.target, args.task)
    if len(X) < 2:
        raise CLIError(f"{args.data} needs at least 2 rows; got {len(X)}")
    # Standardising with statistics of the whole file shifts every candidate's log evidence by the same
    # log-Jacobian, so the ranking and the probabilities are those of the raw data.
    X = StandardScaler().fit_transform(X)
    if args.task == "regression":
        y = (y - y.mean()) / (y.std() or 1.0)
    classes = np.unique(y) if args.task == "classification" else None
    if classes is not None and len(classes) < 2:
        raise CLIError(f"target column {args.target!r} has a single class; classification needs at least 2")
    candidates = _default_candidates(args.task, X.shape[1], None if classes is None else len(classes), args.chunk_size)
    selector = EvidenceModelSelector(candidates, n_jobs=args.n_jobs, random_state=args.random_state)
    print(f"streaming {len(X)} rows x {len(features)} features of {args.data} through {len(candidates)} "
          f"{args.task} candidates in chunks of {args.chunk_size}")
    bar = _progress_bar(len(X), not args.no_progress)
    tic = time.perf_counter()
    for i, start in enumerate(range(0, len(X), args.chunk_size)):
        stop = start + args.chunk_size
        kwargs = {"classes": classes} if i == 0 and classes is not None else {}
        selector.partial_fit(X[start:stop], None if y is None else y[start:stop], **kwargs)
        if bar is not None:
            bar.update(min(args.chunk_size, len(X) - start))
    if bar is not None:
        bar.close()
    order = np.argsort(-selector.log_model_probabilities_)
    print(f"\n{'rank':>4}  {'candidate':<22} {'log evidence':>14} {'+/- std':>8} {'per datum':>10} {'probability':>12}")
    for rank, k in enumerate(order, start=1):
        name = candidates[k][0]
        print(f"{rank:>4}  {name:<22} {selector.log_evidences_[k]:>14.2f} {selector.log_evidence_stds_[k]:>8.2f} "
              f"{selector.log_evidences_[k] / len(X):>10.4f} {selector.model_probabilities_[k]:>12.4g}")
    print(f"({time.perf_counter() - tic:.1f} s; evidences of the standardised data)")
    return 0


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
    streaming 200 rows x 2 features of ... through 5 regression candidates in chunks of 500
    <BLANKLINE>
    rank  candidate ...
       1  linear noise=0.2 ...
    ...
    >>> status
    0

    A user error is reported without a traceback:

    >>> with np.printoptions():
    ...     main(["compare", "no-such-file.csv", "--task", "density"])
    2
    """
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
    demo.add_argument("--n-jobs", type=int, default=-1, help="candidates in parallel (joblib; default: all cores)")
    demo.add_argument("--random-state", type=int, default=0)
    demo.add_argument("--n-lines", type=int, default=8, help="rows of the printed table per stream")
    demo.add_argument("--plot", default="evidence_select_demo.png", help="figure path (needs matplotlib)")
    demo.add_argument("--no-plot", dest="plot", action="store_const", const=None)
    demo.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    demo.set_defaults(func=_demo)
    compare = sub.add_parser("compare", help="rank default candidates on a CSV file by evidence")
    compare.add_argument("data", help="CSV file with a header row")
    compare.add_argument("--target", help="target column (required for regression and classification)")
    compare.add_argument("--task", choices=["regression", "classification", "density"], required=True)
    compare.add_argument("--chunk-size", type=int, default=500)
    compare.add_argument("--n-jobs", type=int, default=None)
    compare.add_argument("--random-state", type=int, default=0)
    compare.add_argument("--no-progress", action="store_true")
    compare.set_defaults(func=_compare)
    args = parser.parse_args(argv)
    if getattr(args, "chunk_size", 1) < 1:
        parser.error("--chunk-size must be >= 1")
    try:
        with np.printoptions(precision=4):  # scoped: main() is also called in-process (tests, notebooks)
            return args.func(args)
    except CLIError as exc:
        print(f"evidence-select {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
