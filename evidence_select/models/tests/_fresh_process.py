"""Fresh Python processes for the compiled kernels' cache tests, each first process run once per test session.

A process that compiles the softmax's or the mixture's kernels into an empty numba cache takes 15-25 s. Three slow
tests need such processes: a second process loads the softmax's kernels from the cache a first one wrote
(test_compiled_softmax), the same for the mixture (test_compiled_mixture), and the softmax log-likelihood has the
same bits whether a mixture kernel compiled first in its process or none did (test_compiled_softmax). Each used to
start its own: four processes compiling from empty caches and two loading from them, about 75 s. Now two first
processes serve all three:

- :data:`SOFTMAX_PROCESS` (an empty cache): the softmax log-likelihood, first and alone in the process (the
  cache-order test's "alone" bits), then every softmax kernel (the second-process test's cache statistics and
  values);
- :data:`MIXTURE_PROCESS` (another empty cache): a mixture log-likelihood, then the softmax log-likelihood (the
  cache-order test's "mixture first" bits, in the order that test always ran them), then every mixture kernel
  (the mixture's second-process test).

Each test still asserts only its own property, from the outputs it needs; the second processes (cache loads) run
in the tests that check them. The first processes come from a session fixture (``conftest.py``,
:class:`FirstProcesses`); under pytest-xdist the first worker to ask for one runs it and writes its output to the
run's shared temporary directory, and the other workers read it there, so that the compiling happens once
whichever workers the three tests land on.
"""

import json
import os
import subprocess
import sys
import textwrap
import time
from typing import NamedTuple

import pytest

#: How long a worker waits for another worker's first process (one takes 20-30 s, longer on a loaded machine)
#: before it runs its own.
WAIT_SECONDS = 900.0


def run_python(code, env):
    """The standard output of ``code`` run by a fresh Python process with environment ``env``."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          check=True)
    return done.stdout


_MIXTURE_LOG_LIKELIHOOD_FIRST = """
mixture, other = GaussianMixtureModel(3, 2), np.random.default_rng(1)
mixture.log_likelihood(mixture.sample_prior(other, 4), other.normal(size=(50, 2)))
"""
_SOFTMAX_LOG_LIKELIHOOD = """
model, rng = SoftmaxRegressionModel(3, 4), np.random.default_rng(0)
theta, X, y = model.sample_prior(rng, 4), rng.normal(size=(500, 3)), rng.integers(0, 4, size=500)
out = {"log_likelihood": model.log_likelihood(theta, X, y).tobytes().hex()}
"""
_SOFTMAX_KERNELS = """
model = SoftmaxRegressionModel(3, 4)
rng = np.random.default_rng(0)
theta, X, y = model.sample_prior(rng, 4), rng.normal(size=(50, 3)), rng.integers(0, 4, size=50)
values = [model.grad_log_likelihood(theta, X, y, np.full(50, 2.0)), model.log_likelihood(theta, X, y),
          *model.log_likelihood_and_grad(theta, X, y, 0.5)]
stats = [getattr(kernels, name).stats for name in kernels.__all__]
"""
_MIXTURE_KERNELS = """
model = GaussianMixtureModel(3, 2)
rng = np.random.default_rng(0)
theta, X = model.sample_prior(rng, 4), rng.normal(size=(50, 2))
values = [model.grad_log_joint(theta, X, None, np.full(50, 2.0)), model.log_likelihood_sum(theta, X),
          model.log_likelihood(theta, X), model.grad_log_prior(theta),
          *model.log_likelihood_and_grad(theta, X, None, 0.5), model.approximate_log_likelihood_sum(theta, X)]
stats = [getattr(kernels, name).stats for name in ("mixture_gradient", "mixture_log_likelihood",
                                                   "mixture_prior_gradient", "mixture_log_likelihood_and_gradient",
                                                   "mixture_log_likelihood_sum_single")]
"""
# The cache statistics of the process's own model's kernels, and the bits of its values.
_REPORT = """
out["hits"] = sum(sum(s.cache_hits.values()) for s in stats)
out["misses"] = sum(sum(s.cache_misses.values()) for s in stats)
out["values"] = np.concatenate([np.ravel(v) for v in values]).tobytes().hex()
print(json.dumps(out))
"""
SOFTMAX_PROCESS = """
import json
import numpy as np
from evidence_select.models import SoftmaxRegressionModel
from evidence_select.models import _compiled_softmax as kernels
""" + _SOFTMAX_LOG_LIKELIHOOD + _SOFTMAX_KERNELS + _REPORT
MIXTURE_PROCESS = """
import json
import numpy as np
from evidence_select.models import GaussianMixtureModel, SoftmaxRegressionModel
from evidence_select.models import _compiled_mixture as kernels
""" + _MIXTURE_LOG_LIKELIHOOD_FIRST + _SOFTMAX_LOG_LIKELIHOOD + _MIXTURE_KERNELS + _REPORT


class FirstProcess(NamedTuple):
    """A process run on an empty cache: its code, the cache directory, the suffixes of the files it left there
    (read before any other process used the directory), and its output (:data:`_REPORT`'s keys)."""

    code: str
    cache: str
    files: list
    output: dict

    def run_again(self):
        """The output of a second process running the same code on the same cache."""
        return _output(self.code, self.cache)


def assert_a_second_process_loads_the_cache(first, n_kernels):
    """``first`` compiled at least ``n_kernels`` kernels (cache misses, no hit) and wrote index and code files; a
    second process running the same code loads every kernel from them (hits, no miss) and gets the same bits."""
    second = first.run_again()
    assert first.output["hits"] == 0 and first.output["misses"] >= n_kernels
    assert ".nbi" in first.files and ".nbc" in first.files
    assert second["hits"] >= n_kernels and second["misses"] == 0
    assert first.output["values"] == second["values"]


def _output(code, cache):
    return json.loads(run_python(code, dict(os.environ, NUMBA_CACHE_DIR=cache)).splitlines()[-1])


def _first_process(code, cache):
    cache.mkdir(parents=True)
    output = _output(code, str(cache))
    files = sorted(path.suffix for path in cache.rglob("*") if path.is_file())
    return FirstProcess(code, str(cache), files, output)


class FirstProcesses:
    """The first processes by name (``"softmax"``: :data:`SOFTMAX_PROCESS`, ``"mixture"``:
    :data:`MIXTURE_PROCESS`), each run once per test session: :meth:`get`.

    Without pytest-xdist the session has one of these and runs each process once, when a test first asks for it.
    Under pytest-xdist each worker has its own session; the first worker to create ``<name>.lock`` in the run's
    shared temporary directory (the parent of the workers' own) runs that process and writes the result there as
    ``<name>.json``, and the other workers read it (or its error). A worker whose test needs a process another
    worker is running runs meanwhile one that no worker has started and that a selected test will need
    (``needed``), instead of idling; with none left it waits, and after :data:`WAIT_SECONDS` runs its own.
    """

    CODES = {"softmax": SOFTMAX_PROCESS, "mixture": MIXTURE_PROCESS}

    def __init__(self, tmp_path_factory, needed):
        self.tmp_path_factory, self.needed, self.done = tmp_path_factory, list(needed), {}
        self.root = (None if os.environ.get("PYTEST_XDIST_WORKER") is None
                     else tmp_path_factory.getbasetemp().parent)  # one per run, shared by its workers

    def get(self, names):
        """The :class:`FirstProcess` of each name, in order."""
        deadline = time.monotonic() + WAIT_SECONDS
        while any(name not in self.done for name in names):
            missing = [name for name in names if name not in self.done]
            for name in missing:
                self._read(name)
            name = next((name for name in dict.fromkeys(missing + self.needed) if self._claim(name)), None)
            if name is not None:
                self.done[name] = self._run(name, shared=True)
            elif time.monotonic() < deadline:
                time.sleep(0.2)
            else:
                self.done.update((name, self._run(name, shared=False)) for name in missing if name not in self.done)
        return [self.done[name] for name in names]

    def _claim(self, name):
        """Whether this worker is to run ``name`` (no worker has claimed it before)."""
        if name in self.done:
            return False
        if self.root is None:
            return True
        try:
            (self.root / f"{name}.lock").mkdir()  # atomic: one worker gets it
        except FileExistsError:
            return False
        return True

    def _run(self, name, shared):
        """The process, in a new cache directory; ``shared`` (under pytest-xdist): its result, or its error, also
        written where the other workers read it."""
        if self.root is None or not shared:
            return _first_process(self.CODES[name], self.tmp_path_factory.mktemp(name) / "cache")
        try:
            first = _first_process(self.CODES[name], self.root / name)
        except Exception as error:
            message = f"{type(error).__name__}: {error} {getattr(error, 'stderr', '')}"
            _write(self.root / f"{name}.json", {"error": message})
            raise
        _write(self.root / f"{name}.json", first._asdict())
        return first

    def _read(self, name):
        """Take ``name``'s result if another worker has written it."""
        path = None if self.root is None else self.root / f"{name}.json"
        if path is None or not path.exists():
            return
        data = json.loads(path.read_text())
        if "error" in data:
            pytest.fail(f"the first process {name!r} failed in another worker: {data['error']}", pytrace=False)
        self.done[name] = FirstProcess(**data)


def _write(path, data):
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(data))
    os.replace(partial, path)  # atomic: a waiting worker reads all of it or nothing
