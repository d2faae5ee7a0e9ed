"""Helpers shared by the benchmark scripts (benchmarks only, not part of the package).

- :func:`paper_problem` / :func:`paper_estimator`: the paper's three models on the
  same simulated data (seed 0; the simulators are prefix-stable, so the first ``N``
  rows of a long stream are exactly the data set of size ``N``).
- dynesty with default settings, cached per problem in ``results/`` (it is slow).
- :func:`pairwise_agreement`: every pair of estimates within
  ``max(3 x combined error, 0.5)`` nats.
- run metadata (command, git commit, load, versions) and atomic JSON saving: every run to
  ``results/`` (not committed), a published result also to ``saved/`` (``--save``, from a clean commit only).
"""

import hashlib
import itertools
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(HERE)  # the repository whose package the benchmarks run
sys.path.insert(0, CHECKOUT)

from evidence_select.datasets import make_linear_regression, make_mixture, make_softmax_classification  # noqa: E402
from evidence_select.models import GaussianMixtureModel, LinearGaussianModel, SoftmaxRegressionModel  # noqa: E402

RESULTS_DIR = os.path.join(HERE, "results")
#: Committed runs and references (``results/`` is not committed).
SAVED_DIR = os.path.join(HERE, "saved")
FIGURES_DIR = os.path.join(RESULTS_DIR, "figures")
PAPER_MODELS = ("linear", "softmax", "mixture")


# -- the paper's problems ------------------------------------------------------------------
def paper_data(name, n):
    """``(X, y)`` of the paper's model ``name`` with ``n`` rows (seed 0; ``y`` is None for the mixture)."""
    if name == "linear":
        d = make_linear_regression(n, n_features=5, random_state=0)
        return d.X, d.y
    if name == "softmax":
        d = make_softmax_classification(n, n_features=10, n_classes=4, random_state=0)
        return d.X, d.y
    if name == "mixture":
        return make_mixture(n, random_state=0).X, None
    raise ValueError(f"unknown paper model {name!r}")


def paper_model(name):
    """The protocol model of the paper's model ``name`` (linear d=5, softmax d=10 K=4, mixture K=5 d=2)."""
    return {"linear": lambda: LinearGaussianModel(5), "softmax": lambda: SoftmaxRegressionModel(10, 4),
            "mixture": lambda: GaussianMixtureModel(5, 2)}[name]()


def paper_problem(name, n):
    """``(model, X, y)`` for the reference backends."""
    X, y = paper_data(name, n)
    return paper_model(name), X, y


#: The paper's linear model (Appendix B.1): known noise and fixed priors. ``BayesianLinearRegressor()`` learns both.
PAPER_LINEAR = dict(noise_variance=1.0, prior_scale=1.0)


def paper_estimator(name, **params):
    """The online estimator whose ``model_`` is :func:`paper_model` ``(name)`` (default parameters otherwise)."""
    from evidence_select import BayesianLinearRegressor, BayesianLogisticClassifier, BayesianMixture

    if name == "linear":
        return BayesianLinearRegressor(**{**PAPER_LINEAR, **params})
    if name == "softmax":
        return BayesianLogisticClassifier(**params)
    return BayesianMixture(5, **params)


def partial_fit_chunk(estimator, name, X, y, first):
    """One ``partial_fit`` call (the classifier needs ``classes`` on the first)."""
    if name == "softmax":
        return estimator.partial_fit(X, y, **({"classes": [0, 1, 2, 3]} if first else {}))
    return estimator.partial_fit(X) if y is None else estimator.partial_fit(X, y)


# -- dynesty (optional extra "bench") ------------------------------------------------------
def _prior_transform(model):
    """Unit cube -> the model's parameters, one point at a time (dynesty's ``prior_transform``): the model's own
    ``prior_transform``, the one our nested sampling bounds its live points with."""
    return lambda u: model.prior_transform(u[None])[0]


def dynesty_cache_path(name, n, seed):
    return os.path.join(RESULTS_DIR, f"dynesty_{name}_N{n}_seed{seed}.json")


def cached_dynesty(name, n, seed):
    """The cached dynesty result of this problem, or None."""
    path = dynesty_cache_path(name, n, seed)
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        out = json.load(fh)
    out["cached"] = True
    return out


def run_dynesty_cached(name, n, model, X, y, seed, use_cache):
    """dynesty on the same data; with ``use_cache`` a previous run of this exact problem is reused.

    The cache records dynesty's version and the date of the run.
    """
    if use_cache:
        out = cached_dynesty(name, n, seed)
        if out is not None:
            return out
    out = run_dynesty(model, X, y, seed)
    save_json(dynesty_cache_path(name, n, seed), out)
    return out


def run_dynesty(model, X, y, seed):
    """dynesty 3 with default settings (500 live points, automatic sampler) on the full data."""
    import dynesty  # optional extra "bench"

    transform = _prior_transform(model)

    def log_lik(theta):
        return float(model.log_likelihood_sum(theta[None], X, y)[0])

    t0, c0 = time.perf_counter(), time.process_time()
    sampler = dynesty.NestedSampler(log_lik, transform, model.n_params, rstate=np.random.default_rng(seed))
    sampler.run_nested(print_progress=False)
    res = sampler.results
    return dict(log_evidence=float(res.logz[-1]), std=float(res.logzerr[-1]), calls=float(np.sum(res.ncall)),
                seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0, version=dynesty.__version__,
                date=time.strftime("%Y-%m-%d %H:%M"), git_commit=git_commit())


# -- agreement -----------------------------------------------------------------------------
def pairwise_agreement(estimates, min_tolerance=0.5, n_sigma=3.0):
    """Every pair of estimates checked against ``max(n_sigma x combined error, min_tolerance)``.

    Parameters
    ----------
    estimates : dict
        ``name -> (log_evidence, std)``.

    Returns
    -------
    pairs : list of dict
        ``a, b, difference (a - b), tolerance, agree`` for each pair.
    """
    pairs = []
    for (a, (za, sa)), (b, (zb, sb)) in itertools.combinations(estimates.items(), 2):
        tol = max(n_sigma * float(np.hypot(sa, sb)), min_tolerance)
        pairs.append(dict(a=a, b=b, difference=float(za - zb), tolerance=tol, agree=bool(abs(za - zb) <= tol)))
    return pairs


def format_disagreements(pairs):
    bad = [f"{p['a']} vs {p['b']}: {p['difference']:+.2f} (tol {p['tolerance']:.2f})" for p in pairs if not p["agree"]]
    return "; ".join(bad) if bad else "all pairs agree"


# -- metadata and saving -------------------------------------------------------------------
#: What a saved result depends on: the package, the benchmarks and the declared dependencies.
_TRACKED_FOR_RESULTS = ("evidence_select", "benchmarks", "pyproject.toml")


def _git(*args, timeout=30):
    return subprocess.run(["git", "-C", CHECKOUT, *args], capture_output=True, text=True, timeout=timeout)


def uncommitted_changes():
    """The paths under :data:`_TRACKED_FOR_RESULTS` with uncommitted changes (``git status --porcelain``)."""
    out = _git("status", "--porcelain", "--", *_TRACKED_FOR_RESULTS)
    if out.returncode != 0:
        return ["(not a git checkout)"]
    # A new saved result is the benchmarks' output, not their code: a run that saved one leaves the checkout clean.
    return [line[3:] for line in out.stdout.splitlines() if not line.startswith("?? benchmarks/saved/")]


def git_commit():
    """The checkout's commit, followed by a digest of any uncommitted change to the package (a run of
    ``benchmarks/results/`` may come from one; a saved result may not)."""
    try:
        commit = _git("rev-parse", "HEAD", timeout=10).stdout.strip()
        diff = _git("diff", "HEAD", "--", *_TRACKED_FOR_RESULTS).stdout
        digest = hashlib.sha1(diff.encode()).hexdigest()[:10]
        return commit + (f" + uncommitted diff {digest}" if diff else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run_metadata(argv):
    """The run's command (as typed from the repository root), commit, whether the checkout was clean, date,
    versions and the machine's load at the start."""
    import scipy

    command = " ".join(["python", f"benchmarks/{os.path.basename(argv[0])}", *argv[1:]])
    return dict(command=command, git_commit=git_commit(), clean_checkout=not uncommitted_changes(),
                date=time.strftime("%Y-%m-%d %H:%M:%S"), python=platform.python_version(), numpy=np.__version__,
                scipy=scipy.__version__, machine=platform.machine(), cpu_count=os.cpu_count(),
                load_average_start=os.getloadavg(),
                threads={k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})


def require_clean_checkout(parser, name):
    """Stop (through ``parser.error``) unless ``name`` is a published result and the checkout is committed.

    Call it before the run: a saved result must be reproducible by its command at its commit.
    """
    from _tables import SAVED_RESULTS

    if name not in SAVED_RESULTS:
        parser.error(f"--save writes the published results {SAVED_RESULTS}, not {name!r}")
    changed = uncommitted_changes()
    if changed:
        parser.error("--save needs a clean commit (saved results must be reproducible); uncommitted: "
                     + ", ".join(changed))


def save_result(name, result, save=False, trim=None):
    """Write ``result`` to ``benchmarks/results/<name>.json`` and, with ``save``, ``trim(result)`` (what the
    published tables read) to ``benchmarks/saved/<name>.json``. Returns the paths written."""
    paths = [os.path.join(RESULTS_DIR, f"{name}.json")]
    save_json(paths[0], result)
    if save:
        paths.append(os.path.join(SAVED_DIR, f"{name}.json"))
        save_json(paths[1], trim(result) if trim else result, indent=None)
    return paths


def save_json(path, obj, indent=1):
    """Write ``obj`` atomically (temporary file + rename), so a killed run leaves the last complete save."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(obj, fh, indent=indent, default=_json_default)
        fh.write("\n")
    os.replace(tmp, path)


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
