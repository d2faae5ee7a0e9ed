"""estimators subpackage."""
