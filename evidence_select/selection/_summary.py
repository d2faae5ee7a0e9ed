"""The selector's results by candidate name: a table of arrays and its text rendering.

``selection_results`` builds a dict of equal-length arrays keyed by column
name, in the manner of scikit-learn's ``cv_results_`` (``pandas.DataFrame``
takes it as is). ``format_summary`` renders it as aligned text, printing a
probability as an upper bound wherever its value is not meaningful: below
1e-300 (where the linear scale has no precision left) or when its error exceeds
the value (the linear delta-method error then no longer describes it; the log
evidences' errors are Gaussian on the log scale, so the bound is computed there).
"""

import math

import numpy as np

__all__ = ["BOUND_SIGMAS", "ERROR_FLOOR", "PROBABILITY_FLOOR", "format_probability", "format_summary", "log_probability_std",
           "selection_results"]

# Below this a float64 probability is (nearly) subnormal: print a bound computed in log space instead.
PROBABILITY_FLOOR = 1e-300
# Upper bounds are the log-space estimate plus this many standard errors (one-sided, ~98% coverage).
BOUND_SIGMAS = 2.0
# A relative error below this is not printed: the value's four significant digits could not show it.
ERROR_FLOOR = 5e-5


def log_probability_std(probabilities, log_evidence_stds):
    """Standard error of each log model probability from independent log-evidence errors.

    ``log p_k = log Z_k - logsumexp_j log Z_j`` (plus priors), so
    ``d log p_k / d log Z_j = delta_kj - p_j`` and
    ``var log p_k = sum_j (delta_kj - p_j)^2 sigma_j^2``. Unlike the
    delta-method error of ``p_k`` itself, this stays valid for tiny ``p_k``,
    because the log evidences' errors are (nearly) Gaussian on the log scale.

    Parameters
    ----------
    probabilities : ndarray of shape (n_candidates,)
    log_evidence_stds : ndarray of shape (n_candidates,)

    Returns
    -------
    std : ndarray of shape (n_candidates,)

    Examples
    --------
    >>> import numpy as np
    >>> log_probability_std(np.array([1.0, 0.0]), np.array([0.3, 0.4])).round(6).tolist()
    [0.0, 0.5]
    """
    p = np.asarray(probabilities, dtype=float)
    sigma = np.asarray(log_evidence_stds, dtype=float)
    jacobian = np.eye(len(p)) - p[None, :]  # (k, j)
    return np.sqrt(np.sum((jacobian * sigma[None, :]) ** 2, axis=1))


def selection_results(names, log_evidences, log_evidence_stds, log_model_probabilities, model_probability_std,
                      n_samples_seen, backend, checks=None):
    """The table of a selector's results, one row per candidate in the candidates' order.

    Parameters
    ----------
    names : list of str
    log_evidences, log_evidence_stds : ndarray of shape (n_candidates,)
    log_model_probabilities : ndarray of shape (n_candidates,)
    model_probability_std : ndarray of shape (n_candidates,)
        Delta-method standard errors of the probabilities.
    n_samples_seen : int
    backend : str
    checks : list of tuple of str, optional
        Each candidate's failed checks (none when omitted).

    Returns
    -------
    results : dict of str -> ndarray of shape (n_candidates,)
        ``name``, ``log_evidence``, ``log_evidence_std``,
        ``log_evidence_per_datum``, ``log_model_probability``,
        ``log_model_probability_std``, ``model_probability``,
        ``model_probability_std``, ``backend``, ``rank`` (1 for the most
        probable candidate; ties share the smaller rank, as in ``cv_results_``)
        and ``checks`` (the failed checks joined by ", ", or "").
    """
    checks = [()] * len(names) if checks is None else checks
    log_p = np.asarray(log_model_probabilities, dtype=float)
    probabilities = np.exp(log_p)
    # Competition ranking ("1224"), like scikit-learn's rank_test_score.
    rank = np.array([1 + int(np.sum(log_p > value)) for value in log_p])
    log_evidences = np.asarray(log_evidences, dtype=float)
    return {
        "name": np.array(names, dtype=object),
        "log_evidence": log_evidences,
        "log_evidence_std": np.asarray(log_evidence_stds, dtype=float),
        "log_evidence_per_datum": log_evidences / max(int(n_samples_seen), 1),
        "log_model_probability": log_p,
        "log_model_probability_std": log_probability_std(probabilities, log_evidence_stds),
        "model_probability": probabilities,
        "model_probability_std": np.asarray(model_probability_std, dtype=float),
        "backend": np.array([backend] * len(names), dtype=object),
        "rank": rank,
        "checks": np.array([", ".join(names_failed) for names_failed in checks], dtype=object),
    }


def _bound_text(log_bound):
    """``"< x"`` for an upper bound given by its log, rounded up; no underflow at any size.

    Above 1e-3 one significant digit (``"< 0.4"``), below it a power of ten
    (``"< 1e-92"``), and ``"< 1"`` when the bound says nothing.
    """
    if log_bound >= 0.0:
        return "< 1"
    log10_bound = log_bound / math.log(10.0)
    if log10_bound >= -3.0:
        exponent = math.floor(log10_bound)
        digit = math.ceil(10.0 ** (log10_bound - exponent) - 1e-9)
        return "< 1" if digit >= 10 and exponent == -1 else f"< {digit * 10.0**exponent:.{-exponent}f}"
    return f"< 1e{math.ceil(log10_bound - 1e-12)}"


def format_probability(log_probability, log_std):
    """Text of one model probability with its error, or an upper bound where the value means nothing.

    Parameters
    ----------
    log_probability : float
        Log model probability.
    log_std : float
        Standard error of ``log_probability`` (NaN: unknown).

    Returns
    -------
    text : str
        ``"0.7312 +/- 0.022"``, the error being ``p * log_std`` (the delta
        method, equal to ``model_probability_std_`` but without its underflow);
        the value alone (``"1"``) when the relative error ``log_std`` is below
        ``ERROR_FLOOR``, which the value's four digits cannot show.
        An upper bound such as ``"< 1e-16"`` when ``p`` is below
        ``PROBABILITY_FLOOR`` or its error exceeds it: ``log p`` plus
        ``BOUND_SIGMAS`` standard errors, rounded up, computed in log space so
        that it exists for any evidence gap.

    Examples
    --------
    >>> import math
    >>> format_probability(math.log(0.7312), 0.03)
    '0.7312 +/- 0.022'
    >>> format_probability(math.log(1.801e-138), 52.7)   # rather than 1.801e-138 +/- 9.5e-137
    '< 1e-91'
    >>> format_probability(math.log(0.03), 1.2)
    '< 0.4'
    >>> format_probability(-1e5, 1.0)
    '< 1e-43428'
    >>> format_probability(-1.8e-138, 9.3e-137)   # the others' sum to 1.8e-138: rather than '1 +/- 9.3e-137'
    '1'
    """
    if math.isinf(log_probability) and log_probability < 0:
        return "0"  # excluded by a zero prior weight
    probability = math.exp(log_probability)
    value, error = f"{probability:.4g}", f"{probability * log_std:.2g}"
    # log_std > 1 means the error exceeds the value; compare the printed texts too, as they are rounded.
    if probability < PROBABILITY_FLOOR or log_std > 1.0 or float(error) > float(value):
        spread = 0.0 if math.isnan(log_std) else BOUND_SIGMAS * log_std
        return _bound_text(log_probability + spread)
    return value if math.isnan(log_std) or log_std < ERROR_FLOOR else f"{value} +/- {error}"


def format_summary(results, *, order="rank"):
    """Aligned text table of :func:`selection_results`, best candidate first.

    Parameters
    ----------
    results : dict of str -> ndarray
        As returned by :func:`selection_results` (or ``selector.results_``).
    order : {"rank", "input"}, default="rank"
        Rows by rank or in the candidates' order.

    Returns
    -------
    text : str
        One header line and one line per candidate; a last column ``checks``
        names the failed checks where any candidate has one.

    Examples
    --------
    >>> import numpy as np
    >>> results = selection_results(["a", "b", "c"], np.array([-100.0, -101.0, -900.0]), np.array([0.5, 0.5, 0.5]),
    ...                             np.array([-0.3133, -1.3133, -800.3133]), np.array([0.14, 0.14, 0.0]), 50, "sgais")
    >>> print(format_summary(results))
    rank  candidate  log evidence  +/- std  per datum  probability      backend
       1  a               -100.00     0.50    -2.0000  0.731 +/- 0.14   sgais
       2  b               -101.00     0.50    -2.0200  0.2689 +/- 0.14  sgais
       3  c               -900.00     0.50   -18.0000  < 1e-347         sgais

    Failed checks add a column:

    >>> results = selection_results(["a", "b"], np.array([-100.0, -101.0]), np.array([0.5, 0.5]),
    ...                             np.array([-0.3133, -1.3133]), np.array([0.14, 0.14]), 50, "sgais",
    ...                             [(), ("population_bias", "lineages")])
    >>> print(format_summary(results))
    rank  candidate  log evidence  +/- std  per datum  probability      backend  checks
       1  a               -100.00     0.50    -2.0000  0.731 +/- 0.14   sgais
       2  b               -101.00     0.50    -2.0200  0.2689 +/- 0.14  sgais    population_bias, lineages
    """
    if order not in ("rank", "input"):
        raise ValueError(f"order must be 'rank' or 'input'; got {order!r}")
    rows = np.arange(len(results["name"]))
    if order == "rank":
        rows = sorted(rows, key=lambda k: (results["rank"][k], k))
    probability_text = [format_probability(results["log_model_probability"][k], results["log_model_probability_std"][k])
                        for k in rows]
    width_name = max([len("candidate")] + [len(str(results["name"][k])) for k in rows])
    width_p = max([len("probability")] + [len(text) for text in probability_text])
    checks = results.get("checks", [""] * len(results["name"]))
    width_backend = max([len("backend")] + [len(str(results["backend"][k])) for k in rows])
    check_column = any(checks[k] for k in rows)
    lines = [f"{'rank':>4}  {'candidate':<{width_name}}  {'log evidence':>12}  {'+/- std':>7}  {'per datum':>9}  "
             f"{'probability':<{width_p}}  {'backend':<{width_backend}}" + ("  checks" if check_column else "")]
    for k, text in zip(rows, probability_text):
        lines.append(f"{results['rank'][k]:>4}  {str(results['name'][k]):<{width_name}}  "
                     f"{results['log_evidence'][k]:>12.2f}  {results['log_evidence_std'][k]:>7.2f}  "
                     f"{results['log_evidence_per_datum'][k]:>9.4f}  {text:<{width_p}}  "
                     f"{str(results['backend'][k]):<{width_backend}}" + (f"  {checks[k]}" if check_column else ""))
    return "\n".join(line.rstrip() for line in lines)
