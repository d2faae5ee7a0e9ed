"""Warnings that say an evidence may not be right, and what to do about it.

Every evidence method checks its own convergence. A failed check never only
logs: it raises one of these warnings and marks the result (for
:func:`~evidence_select.log_evidence`, ``EvidenceResult.converged`` is False and
``EvidenceResult.diagnostics`` names the checks that failed). Two more say,
before any particle moves, that the data are not what the defaults assume:
:class:`FeatureScaleWarning` (columns on a scale the priors cannot hold) and
:class:`StreamOrderWarning` (rows sorted or autocorrelated along the stream).
Each message names its cure. Escalate them to errors with
:func:`warnings.simplefilter` where a doubtful number must stop a pipeline.
:class:`~evidence_select.SamplerDegeneracyWarning` (a collapsed particle
system) is exported at the package's top level.
"""

__all__ = ["EvidenceConvergenceWarning", "FeatureScaleWarning", "StreamOrderWarning"]


class EvidenceConvergenceWarning(RuntimeWarning):
    """An evidence estimate failed one of its method's convergence checks.

    Raised by the reference backends (R-hat or effective sample size of the
    posterior chains, bridge iterations, ESS per temperature, the nested
    sampling insertion test) and by the online engine when a degradation makes
    its error bar doubtful. The message names the failed checks; the result
    carries them in its diagnostics and its error bar is widened or flagged.

    Examples
    --------
    >>> import warnings
    >>> from evidence_select.exceptions import EvidenceConvergenceWarning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", EvidenceConvergenceWarning)  # stop instead of a doubtful number
    ...     issubclass(EvidenceConvergenceWarning, RuntimeWarning)
    True
    """


class FeatureScaleWarning(UserWarning):
    """The data's scale contradicts the priors: the evidence can be slow or inaccurate to estimate.

    The default priors of the built-in models assume standardised columns. Each
    estimator checks, from the data and before the first chunk is annealed in,
    whether its prior can hold the data's scale: the features' root-mean-squares,
    how much more one row informs a parameter than its prior (linear and softmax
    models), a regression target's residual scale against ``noise_variance``,
    and a mixture's column means and spreads against its prior's (see
    :class:`~evidence_select.BayesianMixture`). The message names the columns
    and the cure: standardise (e.g. :class:`sklearn.preprocessing.StandardScaler`)
    or set the prior scales to the data's. Where the scale is far outside what
    the prior holds, the estimator's ``evidence_checks_`` also lists
    ``"feature_scale"``: a low evidence is then the scale's fault, not the
    sampler's.

    The checks run on the first ``fit``/``partial_fit`` call and on every later
    call whose columns' root-mean-squares (the features', and a regression
    target's) moved by more than a factor 2 from those of the last checked call.

    Examples
    --------
    >>> import warnings
    >>> from evidence_select import BayesianLinearRegressor
    >>> from evidence_select.datasets import make_linear_regression
    >>> from evidence_select.exceptions import FeatureScaleWarning
    >>> data = make_linear_regression(200, random_state=0)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     reg = BayesianLinearRegressor(n_particles=4, random_state=0).fit(data.X * 1e6, data.y)
    >>> any(issubclass(w.category, FeatureScaleWarning) for w in caught)
    True
    """


class StreamOrderWarning(UserWarning):
    """The rows arrive sorted or autocorrelated: an online evidence may depend on their order.

    The models treat rows as exchangeable, so their evidence does not depend on
    the row order; the online sampler's estimate does: a stream sorted by its
    target is a sequence of distribution shifts, harder for it than the same
    rows shuffled. ``fit`` therefore streams the rows in a seeded random order
    (``shuffle=True``, the default). ``partial_fit`` keeps the order it is
    given, and warns once per stream when a call's target is sorted or
    strongly autocorrelated along its rows (a runs test on class labels, the
    lag-1 autocorrelation of a regression target). The cure: pass the rows to
    ``fit``, or shuffle them before ``partial_fit``
    (:func:`sklearn.utils.shuffle`); when the order is the stream's true order
    (a time series), the warning only says that the estimate may differ from
    that of the same rows shuffled, and can be silenced with
    :func:`warnings.filterwarnings`. The command line's ``compare`` raises it
    with ``--no-shuffle``.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from evidence_select import BayesianLogisticClassifier
    >>> from evidence_select.datasets import make_softmax_classification
    >>> from evidence_select.exceptions import StreamOrderWarning
    >>> data = make_softmax_classification(300, n_features=2, n_classes=2, random_state=0)
    >>> order = np.argsort(data.y, kind="stable")  # a file sorted by its labels
    >>> clf = BayesianLogisticClassifier(n_particles=4, random_state=0)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     clf = clf.partial_fit(data.X[order], data.y[order], classes=[0, 1])
    >>> [w.category.__name__ for w in caught if issubclass(w.category, StreamOrderWarning)]
    ['StreamOrderWarning']
    """
