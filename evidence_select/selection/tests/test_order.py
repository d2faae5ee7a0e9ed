"""The selector's row order: ``fit`` shuffles once for every candidate, ``partial_fit`` warns once per cause."""

import warnings

import numpy as np
import pytest
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from evidence_select import BayesianLogisticClassifier, EvidenceModelSelector, StreamOrderWarning
from evidence_select.datasets import make_softmax_classification
from evidence_select.selection._selector import _in_given_order
from evidence_select.utils import fit_order

FAST = dict(n_particles=5, n_mcmc_steps=2, batch_size=100)


def _sorted_classes(n=300):
    data = make_softmax_classification(n, n_features=2, n_classes=3, random_state=0)
    order = np.argsort(data.y, kind="stable")
    return data.X[order], data.y[order]


def _selector(**params):
    return EvidenceModelSelector([(f"prior={s}", BayesianLogisticClassifier(prior_scale=s, **FAST))
                                  for s in (0.5, 2.0)], random_state=0, **params)


def test_fit_equals_partial_fit_in_fit_order_and_candidates_share_it():
    X, y = _sorted_classes()
    fitted = _selector().fit(X, y)
    order = fit_order(0, len(y))
    streamed = _selector().partial_fit(X[order], y[order], classes=[0, 1, 2])
    np.testing.assert_array_equal(fitted.log_evidences_, streamed.log_evidences_)
    assert [r.n_samples_seen for r in fitted.evidence_history_] == [100, 200, 300]  # every candidate, same rows
    assert all(est.shuffle is False for est in fitted.estimators_)  # the selector ordered the rows for all
    in_file_order = _selector(shuffle=False).fit(X, y)
    assert not np.array_equal(in_file_order.log_evidences_, fitted.log_evidences_)


def test_pipeline_candidates_stream_in_the_selectors_order():
    pipe = _in_given_order(make_pipeline(StandardScaler(), BayesianLogisticClassifier(**FAST)))
    assert pipe.get_params()["bayesianlogisticclassifier__shuffle"] is False
    assert _in_given_order(StandardScaler()).get_params() == StandardScaler().get_params()  # nothing to turn off


def test_partial_fit_on_sorted_labels_warns_once_naming_every_candidate():
    X, y = _sorted_classes()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _selector().partial_fit(X, y, classes=[0, 1, 2])
    order_warnings = [w for w in caught if issubclass(w.category, StreamOrderWarning)]
    assert len(order_warnings) == 1
    assert str(order_warnings[0].message).endswith("[candidates 'prior=0.5', 'prior=2.0']")


def test_cross_val_score_on_sorted_rows_streams_each_fold_shuffled():
    """Each fold's training rows are sorted by class (stratified folds keep the file order); fit shuffles them, so
    no candidate sees a sorted stream (an order warning would be an error here) and the folds score as on
    shuffled rows would."""
    X, y = _sorted_classes()
    with warnings.catch_warnings():
        warnings.simplefilter("error", StreamOrderWarning)
        scores = cross_val_score(_selector(), X, y, cv=3)
    assert scores.min() > 0.6  # three classes: chance is 1/3


@pytest.mark.parametrize("shuffle", [True, False])
def test_fit_validates_shuffle(shuffle):
    X, y = _sorted_classes(60)
    assert _selector(shuffle=shuffle).fit(X, y).n_samples_seen_ == 60
    with pytest.raises(ValueError, match="shuffle"):
        _selector(shuffle="yes").fit(X, y)
