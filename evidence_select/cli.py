"""Command-line entry point ``evidence-select``."""

import argparse
import sys
import time

import numpy as np

__all__ = ["main"]


def _demo(args):
    from .datasets import make_linear_regression
    from .models import LinearEvidenceStats, LinearGaussianModel

    data = make_linear_regression(args.n_samples, random_state=args.random_state)
    model = LinearGaussianModel(data.X.shape[1], noise_variance=data.noise_variance)
    stats = LinearEvidenceStats.empty(model)
    print(f"Exact log evidence of the paper's linear data set (N={args.n_samples}), streamed in chunks")
    print(f"{'samples':>10} {'log evidence':>16} {'per datum':>10} {'ms/chunk':>9}")
    for start in range(0, args.n_samples, args.chunk_size):
        tic = time.perf_counter()
        stop = min(start + args.chunk_size, args.n_samples)
        stats = stats.update(model, data.X[start:stop], data.y[start:stop])
        log_z = stats.log_evidence(model)
        if stop == args.n_samples or (stop // args.chunk_size) % max(1, args.n_samples // args.chunk_size // 10) == 0:
            print(f"{stop:>10} {log_z:>16.3f} {log_z / stop:>10.5f} {1e3 * (time.perf_counter() - tic):>9.3f}")
    return 0


def main(argv=None):
    """Run the ``evidence-select`` command line."""
    parser = argparse.ArgumentParser(prog="evidence-select", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="stream built-in simulated data and print the running log evidence")
    demo.add_argument("--n-samples", type=int, default=100_000)
    demo.add_argument("--chunk-size", type=int, default=500)
    demo.add_argument("--random-state", type=int, default=0)
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    np.set_printoptions(precision=4)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
