"""selection subpackage."""
