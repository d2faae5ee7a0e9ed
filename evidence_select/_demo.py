"""``evidence-select demo``: online model selection and change points on the paper's distribution-shift stream.

The stream (3 -> 5 -> 7 clusters) goes through 3-, 5- and 7-component online
mixtures in an :class:`~evidence_select.EvidenceModelSelector`, in the order the
rows arrive (``fit``'s shuffle would hide the shifts). A table shows the running
log evidence per row, the model probabilities and the annealing steps per
chunk; the detected change points and, with matplotlib, a figure like the
paper's Fig. 5 follow.

Time: the demo's cost per row is far from constant (the first chunks, every
shift and every restart cost more), so its estimates come from the cumulative
cost curve of a reference run of the same stream (:data:`REFERENCE_RUNS`), scaled by how fast this
machine runs the mixture's gradient kernel just now (:func:`speed_probe`) before
the stream, and by the run's own elapsed time after each phase.
"""

import os
import statistics
import time
from typing import NamedTuple

import numpy as np

from ._terminal import held_warnings, progress_bar_rows

__all__ = ["DEMO_COMPONENTS", "DEMO_PHASES", "REFERENCE_RUNS", "PhaseClock", "ReferenceRun", "demo_estimate",
           "run_demo", "speed_probe", "warm_workers"]

DEMO_PHASES = (1000, 1500, 1500)
DEMO_COMPONENTS = (3, 5, 7)  # the candidate mixtures' numbers of components


class ReferenceRun(NamedTuple):
    """A reference run of the demo, its 3 candidates one after another in one process: ``(rows seen, cumulative
    seconds)`` at its phase ends, and the seconds :func:`speed_probe` took in the same process. Only the
    seconds' ratio to the probe matters, which the machine's load leaves alone (both run on one core's share)."""

    curve: tuple
    probe_seconds: float


#: The reference runs of the default (shortened) phases and of the paper's (``--full``), each stream's cost
#: having its own shape (its shifts come at different rows): ``benchmarks/bench_user_data.py --only demo``
#: measures and prints them; re-measure when the engine's speed changes.
REFERENCE_RUNS = {"shortened": ReferenceRun(((1000, 3.23), (2500, 9.21), (4000, 14.62)), 0.00437),
                  "paper": ReferenceRun(((1000, 3.30), (10_000, 14.81), (100_000, 53.04)), 0.00431)}


# -- time ----------------------------------------------------------------------------------------------
def speed_probe(n_batches=5, n_calls=20):
    """Seconds of one fixed batch of the mixture gradient kernel the demo spends its time in, on this machine now.

    The median of ``n_batches`` batches of ``n_calls`` likelihood-and-gradient
    evaluations (40 particles of a 5-component mixture, 250 rows); slowed down
    by other programs as much as the demo will be, if their load stays.
    """
    from .models import GaussianMixtureModel

    rng = np.random.default_rng(0)
    model = GaussianMixtureModel(5, 2)
    theta, X, weights = model.sample_prior(rng, 40), 3.0 * rng.standard_normal((250, 2)), np.ones(250)
    seconds = []
    for _ in range(n_batches):
        tic = time.perf_counter()
        for _ in range(n_calls):
            model.log_likelihood_and_grad(theta, X, None, weights)
        seconds.append(time.perf_counter() - tic)
    return statistics.median(seconds)


def warm_workers(n_jobs, n_candidates=len(DEMO_COMPONENTS)):
    """Start the joblib workers the selector's calls will run ``n_candidates`` candidates on (``n_jobs`` as the
    selector's), load the package and the mixtures' kernels in each, and take :func:`speed_probe` there.

    Run before the stream, whose clock then leaves the workers' start-up out: the first phase's time, and the
    time to go estimated from it, are the stream's own. Returns the median of the workers' probes (each worker
    on its own core, as the candidates will be), or None where the candidates run in this process.
    """
    from joblib import delayed

    from .selection._distributed import candidate_pool

    pool = candidate_pool(n_candidates, n_jobs)  # the selector's calls' own
    if pool.n_jobs <= 1:
        return None
    return statistics.median(pool.run([delayed(speed_probe)() for _ in range(n_candidates)]))


def reference_seconds(n_rows, reference):
    """Wall seconds of the :class:`ReferenceRun` ``reference`` up to ``n_rows`` rows: log-log interpolation of its
    curve (through the origin below its first point, its last slope beyond its last)."""
    rows, seconds = np.log(np.array(reference.curve, dtype=float)).T
    x = np.log(max(n_rows, 1))
    if x <= rows[0]:
        return float(np.exp(seconds[0] + (x - rows[0])))  # cost proportional to rows at the start
    if x >= rows[-1]:
        slope = (seconds[-1] - seconds[-2]) / (rows[-1] - rows[-2])
        return float(np.exp(seconds[-1] + slope * (x - rows[-1])))
    return float(np.exp(np.interp(x, rows, seconds)))


def workers_for(n_jobs, n_candidates):
    """Candidates that run at once: ``n_jobs`` (all cores for None or -1), at most the candidates and cores."""
    cores = os.cpu_count() or 1
    workers = cores if n_jobs is None or n_jobs < 0 else n_jobs
    return max(1, min(workers, n_candidates, cores))


def demo_estimate(n_rows, n_streams, workers, probe_seconds, reference, n_candidates=len(DEMO_COMPONENTS)):
    """Estimated wall seconds of ``n_streams`` streams of ``n_rows`` rows, ``n_candidates`` candidates on
    ``workers`` workers (each at most a core), on a machine whose :func:`speed_probe` took ``probe_seconds``, from
    the :class:`ReferenceRun` ``reference`` (its candidates one after another).

    Each call's candidates run side by side, and the wall waits for the worker with the most of them: the
    candidates per worker rounded up, so three candidates on two workers take about two candidates' time.

    Examples
    --------
    >>> run = REFERENCE_RUNS["shortened"]
    >>> demo_estimate(4000, 1, 1, run.probe_seconds, run) == reference_seconds(4000, run)
    True
    >>> demo_estimate(4000, 2, 1, 2 * run.probe_seconds, run) == 4 * reference_seconds(4000, run)
    True
    >>> round(demo_estimate(4000, 1, 2, run.probe_seconds, run) / reference_seconds(4000, run), 3)
    0.667
    """
    speed = probe_seconds / reference.probe_seconds
    rounds = -(-n_candidates // workers)
    return reference_seconds(n_rows, reference) * speed * n_streams * (rounds / n_candidates)


def reference_run(args):
    """The :class:`ReferenceRun` of the demo's stream: the paper's phases with ``--full``, else the shortened
    ones (also for phases of the user's choice, whose cost has the shortened stream's shape)."""
    return REFERENCE_RUNS["paper" if args.full else "shortened"]


def duration_text(seconds):
    """``"40 s"``, or minutes from 2 minutes on."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


class PhaseClock:
    """Elapsed time per phase of a stream, and an estimate of the time to go after each.

    The time to go is the elapsed time times the reference run's ratio of the
    cost still ahead to the cost behind (:func:`reference_seconds`): this run's
    own speed, with the demo's growing cost per row.
    """

    def __init__(self, boundaries, total_rows, print_fn, reference):
        self.boundaries, self.total_rows, self.print_fn = list(boundaries), total_rows, print_fn
        self.reference = reference
        self.start = self.phase_start = time.perf_counter()
        self.phase, self.phase_first_row = 0, 0

    def update(self, n_seen):
        """Report each phase that ends at or before ``n_seen`` rows."""
        while self.phase < len(self.boundaries) and n_seen >= self.boundaries[self.phase]:
            now = time.perf_counter()
            end = self.boundaries[self.phase]
            tail = ""
            if n_seen < self.total_rows:
                ahead = (reference_seconds(self.total_rows, self.reference)
                         / reference_seconds(n_seen, self.reference) - 1.0)
                tail = f"; about {duration_text((now - self.start) * ahead)} to go (estimate)"
            self.print_fn(f"  phase {self.phase + 1} (rows {self.phase_first_row}-{end}): "
                          f"{now - self.phase_start:.1f} s{tail}")
            self.phase, self.phase_first_row, self.phase_start = self.phase + 1, end, now


# -- the stream ----------------------------------------------------------------------------------------
#: Most rows in one selector call of the demo: a phase longer than this is split, so the progress bar and the phase
#: clock move every few seconds on the paper's 90 000-row last phase.
MAX_CALL_ROWS = 10_000


def call_bounds(n_rows, chunk_size, phase_ends, max_rows=MAX_CALL_ROWS):
    """``(start, stop)`` rows of the selector's calls: one per phase, split into calls of at most ``max_rows`` rows.

    The candidates split a call into the same chunks as any other calls would, and the records of every chunk
    are in the selector's history, so the printed lines do not need calls of their own. Fewer calls cost less:
    each call's last chunk is checked against the posterior's best mode (the evidence a call reports is a
    checked one), which may restart a run at that mode, and each call waits for its slowest candidate, where
    chunks of unequal cost even out within a longer call. The results thus depend on the phases, not on the
    printed lines. The bounds stay on the chunk grid (a phase ending inside a chunk is reported after that
    chunk, as the phase clock reads it).
    """
    grid = {min(-(-end // chunk_size) * chunk_size, n_rows) for end in phase_ends if end < n_rows}
    step = max(chunk_size, max_rows // chunk_size * chunk_size)
    stops = sorted(grid | set(range(step, n_rows, step)) | {n_rows})
    return list(zip([0] + stops[:-1], stops))


class _Table:
    """The printed table: rows seen, log evidence per row, model probabilities, annealing steps per candidate."""

    def __init__(self, names):
        self.names = names

    def legend(self):
        return ("columns: log evidence per row so far (logZ/n), model probability (P) and, under 'anneal steps', "
                "the annealing steps each candidate's last chunk took (" + "/".join(self.names) + "): a chunk "
                "that surprises the particles, as at a shift, takes many")

    def header(self):
        return (f"{'rows':>6}  " + "  ".join(f"{'logZ/n ' + name:>12}" for name in self.names) + "  "
                + "  ".join(f"{'P(' + name + ')':>8}" for name in self.names) + f"  {'anneal steps':>12}")

    def line(self, record):
        n = record.n_samples_seen
        steps = "/".join(str(c.n_annealing_steps) for c in record.candidate_records)
        return (f"{n:>6}  " + "  ".join(f"{z / n:>12.4f}" for z in record.log_evidences) + "  "
                + "  ".join(f"{p:>8.3f}" for p in record.model_probabilities) + f"  {steps:>12}")

    def postfix(self, record):
        """The progress bar's postfix: ``P(K=3)=0.960 P(K=5)=0.040 ...``."""
        return " ".join(f"P({name})={p:.3f}" for name, p in zip(self.names, record.model_probabilities))


def run_stream(X, args, label, phase_ends):
    """Stream ``X`` through the demo's candidates in order, printing the table and each phase's time.

    Warnings raised while streaming are shown once each after the table, so
    they do not cut the bar or the table's lines.
    """
    from .estimators import BayesianMixture
    from .selection import EvidenceModelSelector

    selector = EvidenceModelSelector(
        [(f"K={k}", BayesianMixture(k, batch_size=args.chunk_size, n_replicates=args.n_replicates))
         for k in DEMO_COMPONENTS], n_jobs=args.n_jobs, shuffle=False, random_state=args.random_state)
    table = _Table([name for name, _ in selector.estimators])
    report_rows = max(1, -(-len(X) // args.chunk_size) // max(args.n_lines, 1)) * args.chunk_size
    print(f"\n{label}: {len(X)} rows in chunks of {args.chunk_size}\n{table.legend()}")
    with held_warnings():
        bar = progress_bar_rows(len(X), not args.no_progress, eta=False)  # the clock prints its own
        write = bar.write if bar is not None else print
        write(table.header())
        clock = PhaseClock(phase_ends, len(X), write, reference_run(args))
        for start, stop in call_bounds(len(X), args.chunk_size, phase_ends):
            n_records = len(getattr(selector, "evidence_history_", ()))
            selector.partial_fit(X[start:stop])
            for record in selector.evidence_history_[n_records:]:  # the call's chunks
                if record.n_samples_seen % report_rows == 0 or record.n_samples_seen == len(X):
                    write(table.line(record))
            record = selector.evidence_history_[-1]
            if bar is not None:
                bar.update(stop - start)
                bar.set_postfix_str(table.postfix(record), refresh=False)
            clock.update(record.n_samples_seen)
        if bar is not None:
            bar.close()
    return selector


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
    # True shifts as wide pale bands underneath, detected ones as thin red lines on top: where they coincide
    # both stay visible (a thin line style for each would hide one under the other).
    for ax in axes:
        for c in true_change_points:
            ax.axvline(c, color="0.6", linewidth=6, alpha=0.4, zorder=0)
        for c in change_points:
            ax.axvline(c, color="red", linestyle="--", linewidth=1, zorder=3)
    axes[0].set_ylabel("log evidence per datum")
    axes[1].set_ylabel("annealing steps per chunk")
    axes[2].set_ylabel("model probability")
    axes[2].set_xlabel("samples seen")
    axes[0].set_title("SGAIS on the distribution-shift stream")
    markers = [plt.Line2D([], [], color="0.6", linewidth=6, alpha=0.4, label="true shift"),
               plt.Line2D([], [], color="red", linestyle="--", linewidth=1, label="detected shift")]
    for ax in axes:
        handles, _ = ax.get_legend_handles_labels()
        ax.legend(handles=handles + markers, fontsize=8, ncol=2)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _announce(data, phases, args):
    """The opening lines: what the demo streams, and the estimate of its time on this machine now (the speed probe
    taken in the candidates' workers as they start, :func:`warm_workers`, or here where the candidates run here)."""
    print("evidence-select demo: online Bayesian model selection on the paper's distribution-shift stream "
          f"(Sec. 6.2): 3 -> 5 -> 7 clusters, shifts at samples {data.change_points}"
          + ("" if args.full else f" (phases shortened to {list(phases)} rows; --full for the paper's size)"))
    n_streams = 2 if args.shuffled else 1
    workers = workers_for(args.n_jobs, len(DEMO_COMPONENTS))
    probe = warm_workers(args.n_jobs)
    estimate = demo_estimate(len(data.X), n_streams, workers, speed_probe() if probe is None else probe,
                             reference_run(args))
    print(f"estimated time: about {duration_text(estimate)} ({n_streams} stream(s) of {len(data.X)} rows, "
          f"{len(DEMO_COMPONENTS)} candidates on {workers} worker(s); an estimate from reference runs and this "
          "machine's speed just now, which other programs change); the elapsed time, with the time to go, is "
          "printed after each phase")


def run_demo(args):
    """The ``demo`` command (see the module docstring); returns the exit status."""
    from .evidence._changepoints import detect_change_points
    from .datasets._shift import PAPER_PHASES, shift_stream

    phases = PAPER_PHASES if args.full else tuple(args.phases)
    data = shift_stream(phases, random_state=args.random_state)
    _announce(data, phases, args)
    phase_ends = np.cumsum(phases).tolist()
    tic = time.perf_counter()
    selector = run_stream(data.X, args, "in-order stream", phase_ends)
    shuffled = None
    if args.shuffled:
        shuffled_data = shift_stream(phases, shuffle=True, random_state=args.random_state)
        shuffled = run_stream(shuffled_data.X, args, "shuffled (stationary) control", phase_ends)
    seconds = time.perf_counter() - tic
    print("\nfinal model probabilities (in-order stream), best first")
    print(selector.summary())
    if shuffled is not None:
        print("\nfinal model probabilities (shuffled stream), best first")
        print(shuffled.summary())
    found = detect_change_points(selector)
    print(f"\ndetected change points: {found.tolist()}  (true: {data.change_points}; chunks of {args.chunk_size})")
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
