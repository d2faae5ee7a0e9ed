"""Command-line entry point ``evidence-select``."""

import argparse
import sys
import time

import numpy as np

__all__ = ["main"]


def _demo(args):
    """Stream the paper's linear data set through SGAIS beside the exact evidence."""
    from .datasets import make_linear_regression
    from .estimators import BayesianLinearRegressor
    from .models import LinearEvidenceStats

    data = make_linear_regression(args.n_samples, random_state=args.random_state)
    reg = BayesianLinearRegressor(batch_size=args.chunk_size, random_state=args.random_state)
    print(f"SGAIS online log evidence on the paper's linear data (N={args.n_samples}, d={data.X.shape[1]}), "
          f"chunks of {args.chunk_size}")
    print(f"{'samples':>9} {'SGAIS log Z':>14} {'+/- std':>8} {'exact log Z':>14} {'error':>8} "
          f"{'anneal':>6} {'ms/chunk':>9}")
    stats = None
    n_chunks = -(-args.n_samples // args.chunk_size)
    report_every = max(1, n_chunks // args.n_lines)
    tic = time.perf_counter()
    for index, start in enumerate(range(0, args.n_samples, args.chunk_size)):
        stop = min(start + args.chunk_size, args.n_samples)
        reg.partial_fit(data.X[start:stop], data.y[start:stop])
        model = reg.model_
        stats = (stats or LinearEvidenceStats.empty(model)).update(model, data.X[start:stop], data.y[start:stop])
        if (index + 1) % report_every == 0 or stop == args.n_samples:
            record = reg.evidence_history_[-1]
            exact = stats.log_evidence(model)
            print(f"{stop:>9} {record.log_evidence:>14.3f} {record.log_evidence_std:>8.3f} {exact:>14.3f} "
                  f"{record.log_evidence - exact:>8.3f} {record.n_annealing_steps:>6} {1e3 * record.seconds:>9.2f}")
    seconds = time.perf_counter() - tic
    print(f"streamed {args.n_samples} rows in {seconds:.2f} s ({1e3 * seconds / n_chunks:.2f} ms per chunk, "
          "including the exact reference)")
    return 0


def main(argv=None):
    """Run the ``evidence-select`` command line."""
    parser = argparse.ArgumentParser(prog="evidence-select", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="stream built-in simulated data and print the running log evidence")
    demo.add_argument("--n-samples", type=int, default=100_000)
    demo.add_argument("--chunk-size", type=int, default=500)
    demo.add_argument("--random-state", type=int, default=0)
    demo.add_argument("--n-lines", type=int, default=12, help="rows of the printed table")
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    np.set_printoptions(precision=4)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
