"""The selector's results by candidate name: a table of arrays and its text rendering.

``selection_results`` builds a dict of equal-length arrays keyed by column
name, in the manner of scikit-learn's ``cv_results_`` (``pandas.DataFrame``
takes it as is). ``format_summary`` renders it as aligned text, printing a
probability as an upper bound wherever its value is not meaningful: below
1e-300 (where the linear scale has no precision left) or when its error exceeds
the value (the linear delta-method error then no longer describes it; the log
evidences' errors are Gaussian on the log scale, so the bound is computed there).

Each candidate's log Bayes factor against the candidate of highest evidence comes
with its error (the two log evidences' errors are independent) and a verdict on
Kass & Raftery's scale (:func:`bayes_factor_verdict`): "undecided" when the
factor lies within ``UNDECIDED_SIGMAS`` combined standard errors of 1.
"""

import math

import numpy as np

__all__ = ["BOUND_SIGMAS", "ERROR_FLOOR", "KASS_RAFTERY_SCALE", "PROBABILITY_FLOOR", "UNDECIDED_SIGMAS",
           "bayes_factor_strength", "bayes_factor_verdict", "format_probability", "format_summary", "log_bayes_factors",
           "log_probability_std", "selection_results"]

# Below this a float64 probability is (nearly) subnormal: print a bound computed in log space instead.
PROBABILITY_FLOOR = 1e-300
# Upper bounds are the log-space estimate plus this many standard errors (one-sided, ~98% coverage).
BOUND_SIGMAS = 2.0
#: Kass & Raftery (1995), Sec. 3.2: the strength of the evidence for one model over another by the natural log
#: of their Bayes factor, ``(upper end, words)`` (their table halves: 2 ln B of 2, 6 and 10).
KASS_RAFTERY_SCALE = ((1.0, "bare mention"), (3.0, "positive"), (5.0, "strong"), (math.inf, "very strong"))
#: A log Bayes factor within this many combined standard errors of 0 leaves the two candidates' order undecided:
#: about 95% of the errors of a difference of independent Gaussian estimates lie within it.
UNDECIDED_SIGMAS = 2.0
# An error below this fraction of the value is not printed: the value's four significant digits could not show it.
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


def log_bayes_factors(log_evidences, log_evidence_stds):
    """Each candidate's log Bayes factor against the candidate of highest evidence, and its standard error.

    ``log B_k = log Z_k - log Z_best`` (at most 0) with error
    ``sqrt(sigma_k^2 + sigma_best^2)``: the candidates' evidences are estimated
    independently. The best candidate's own factor is 0 with error 0; an
    unusable (NaN) evidence has a NaN factor.

    Parameters
    ----------
    log_evidences, log_evidence_stds : ndarray of shape (n_candidates,)

    Returns
    -------
    log_bayes_factor, log_bayes_factor_std : ndarray of shape (n_candidates,)

    Examples
    --------
    >>> import numpy as np
    >>> factors, stds = log_bayes_factors(np.array([-100.0, -104.0]), np.array([0.3, 0.4]))
    >>> factors.tolist(), stds.round(6).tolist()
    ([0.0, -4.0], [0.0, 0.5])
    """
    log_evidences = np.asarray(log_evidences, dtype=float)
    stds = np.asarray(log_evidence_stds, dtype=float)
    best = int(np.nanargmax(log_evidences))
    factors = log_evidences - log_evidences[best]
    errors = np.where(np.isnan(factors), np.nan, np.sqrt(stds**2 + stds[best] ** 2))
    errors[best] = 0.0
    return factors, errors


def bayes_factor_strength(log_bayes_factor):
    """The words of Kass & Raftery's scale for a Bayes factor's natural log, whichever way it points.

    Examples
    --------
    >>> [bayes_factor_strength(x) for x in (0.4, -2.0, 4.0, -12.0)]
    ['bare mention', 'positive', 'strong', 'very strong']
    """
    size = abs(float(log_bayes_factor))
    return next(words for upper, words in KASS_RAFTERY_SCALE if size <= upper)


def bayes_factor_verdict(log_bayes_factor, std):
    """What a log Bayes factor with its standard error says: "undecided", or its strength on Kass & Raftery's scale.

    Within ``UNDECIDED_SIGMAS`` standard errors of 0 the order of the two
    candidates is undecided. Otherwise the strength at both ends of that
    interval: one word when they agree, ``"positive to strong"`` when the error
    straddles a boundary of the scale. With an unknown error (NaN) the strength
    of the estimate alone; ``"unusable"`` for a NaN factor (an unusable
    evidence).

    Parameters
    ----------
    log_bayes_factor : float
    std : float

    Returns
    -------
    verdict : str

    Examples
    --------
    >>> bayes_factor_verdict(-0.8, 0.5), bayes_factor_verdict(-4.0, 0.2), bayes_factor_verdict(-3.5, 0.4)
    ('undecided', 'strong', 'positive to strong')
    """
    size = abs(float(log_bayes_factor))
    if math.isnan(size):
        return "unusable"
    if math.isnan(std):
        return bayes_factor_strength(size)
    if size <= UNDECIDED_SIGMAS * std:
        return "undecided"
    low, high = (bayes_factor_strength(size - UNDECIDED_SIGMAS * std),
                 bayes_factor_strength(size + UNDECIDED_SIGMAS * std))
    return low if low == high else f"{low} to {high}"


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
        ``model_probability_std``, ``log_bayes_factor`` and
        ``log_bayes_factor_std`` (against the candidate of highest evidence,
        :func:`log_bayes_factors`), ``bayes_factor_verdict`` ("best" for that
        candidate, else :func:`bayes_factor_verdict`), ``backend``, ``rank`` (1
        for the most probable candidate; ties share the smaller rank, as in
        ``cv_results_``) and ``checks`` (the failed checks joined by ", ", or "").
    """
    checks = [()] * len(names) if checks is None else checks
    log_p = np.asarray(log_model_probabilities, dtype=float)
    probabilities = np.exp(log_p)
    # Competition ranking ("1224"), like scikit-learn's rank_test_score.
    # An unusable candidate (NaN) ranks after every usable one.
    rank = np.array([1 + int(np.sum(log_p > value)) if not np.isnan(value) else 1 + int(np.sum(~np.isnan(log_p)))
                     for value in log_p])
    log_evidences = np.asarray(log_evidences, dtype=float)
    factors, factor_stds = log_bayes_factors(log_evidences, log_evidence_stds)
    best = int(np.nanargmax(log_evidences))
    verdicts = ["best" if k == best else bayes_factor_verdict(factors[k], factor_stds[k]) for k in range(len(names))]
    return {
        "name": np.array(names, dtype=object),
        "log_evidence": log_evidences,
        "log_evidence_std": np.asarray(log_evidence_stds, dtype=float),
        "log_evidence_per_datum": log_evidences / max(int(n_samples_seen), 1),
        "log_model_probability": log_p,
        "log_model_probability_std": log_probability_std(probabilities, log_evidence_stds),
        "model_probability": probabilities,
        "model_probability_std": np.asarray(model_probability_std, dtype=float),
        "log_bayes_factor": factors,
        "log_bayes_factor_std": factor_stds,
        "bayes_factor_verdict": np.array(verdicts, dtype=object),
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
        the value alone (``"1"``) when the error is below ``ERROR_FLOOR`` times
        the value, which the value's four digits cannot show.
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
    # The error relative to the value is log_std: below ERROR_FLOOR four significant digits cannot show it.
    return value if math.isnan(log_std) or log_std < ERROR_FLOOR else f"{value} +/- {error}"


def _bayes_factor_text(results, k):
    """``"-3.20 +/- 0.71"`` (``"0"`` for the candidate of highest evidence, ``"-3.20"`` for an unknown error)."""
    if results["bayes_factor_verdict"][k] == "best":
        return "0"
    value, std = results["log_bayes_factor"][k], results["log_bayes_factor_std"][k]
    return f"{value:.2f}" if math.isnan(std) else f"{value:.2f} +/- {std:.2f}"


def format_summary(results, *, order="rank"):
    """Aligned text table of :func:`selection_results`, best candidate first.

    Besides the evidences and probabilities, each row has its log Bayes factor
    against the candidate of highest evidence (``log BF``, natural log, with its
    error) and what that says (``vs best``): the strength of the evidence for the
    best candidate over this one on Kass & Raftery's scale, or "undecided" when
    the factor lies within two combined standard errors of 1; a note under the
    table then says so.

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
    rank  candidate  log evidence  +/- std  per datum  probability      log BF            vs best      backend
       1  a               -100.00     0.50    -2.0000  0.731 +/- 0.14   0                 best         sgais
       2  b               -101.00     0.50    -2.0200  0.2689 +/- 0.14  -1.00 +/- 0.71    undecided    sgais
       3  c               -900.00     0.50   -18.0000  < 1e-347         -800.00 +/- 0.71  very strong  sgais
    undecided: |log BF| within 2 combined standard errors (more rows or particles may reorder these)

    Failed checks add a column:

    >>> results = selection_results(["a", "b"], np.array([-100.0, -104.0]), np.array([0.3, 0.3]),
    ...                             np.array([-0.0181, -4.0181]), np.array([0.0076, 0.0076]), 50, "sgais",
    ...                             [(), ("lineages",)])
    >>> print(format_summary(results))
    rank  candidate  log evidence  +/- std  per datum  probability         log BF          vs best  backend  checks
       1  a               -100.00     0.30    -2.0000  0.9821 +/- 0.0075   0               best     sgais
       2  b               -104.00     0.30    -2.0800  0.01799 +/- 0.0075  -4.00 +/- 0.42  strong   sgais    lineages
    """
    if order not in ("rank", "input"):
        raise ValueError(f"order must be 'rank' or 'input'; got {order!r}")
    rows = np.arange(len(results["name"]))
    if order == "rank":
        rows = sorted(rows, key=lambda k: (results["rank"][k], k))
    columns = {
        "probability": [format_probability(results["log_model_probability"][k],
                                           results["log_model_probability_std"][k]) for k in rows],
        "log BF": [_bayes_factor_text(results, k) for k in rows],
        "vs best": [str(results["bayes_factor_verdict"][k]) for k in rows],
        "backend": [str(results["backend"][k]) for k in rows],
    }
    widths = {title: max([len(title)] + [len(text) for text in texts]) for title, texts in columns.items()}
    width_name = max([len("candidate")] + [len(str(results["name"][k])) for k in rows])
    checks = results.get("checks", [""] * len(results["name"]))
    check_column = any(checks[k] for k in rows)
    lines = [f"{'rank':>4}  {'candidate':<{width_name}}  {'log evidence':>12}  {'+/- std':>7}  {'per datum':>9}  "
             + "  ".join(f"{title:<{widths[title]}}" for title in columns) + ("  checks" if check_column else "")]
    for i, k in enumerate(rows):
        lines.append(f"{results['rank'][k]:>4}  {str(results['name'][k]):<{width_name}}  "
                     f"{results['log_evidence'][k]:>12.2f}  {results['log_evidence_std'][k]:>7.2f}  "
                     f"{results['log_evidence_per_datum'][k]:>9.4f}  "
                     + "  ".join(f"{texts[i]:<{widths[title]}}" for title, texts in columns.items())
                     + (f"  {checks[k]}" if check_column else ""))
    if "undecided" in columns["vs best"]:
        lines.append(f"undecided: |log BF| within {UNDECIDED_SIGMAS:g} combined standard errors "
                     "(more rows or particles may reorder these)")
    return "\n".join(line.rstrip() for line in lines)
