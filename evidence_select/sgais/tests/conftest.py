"""Fixtures shared by the engine's tests."""

import numpy as np
import pytest
from sklearn import datasets


@pytest.fixture(scope="session")
def sorted_iris():
    """Iris, standardised, its rows sorted by sepal length: a stream on which three components' particles settle
    in poorer configurations."""
    X = datasets.load_iris().data
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X[np.argsort(X[:, 0], kind="stable")]
