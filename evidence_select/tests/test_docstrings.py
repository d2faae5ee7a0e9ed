"""Every public name is documented with a runnable example; the user guide's examples run.

The examples themselves run as doctests through ``--doctest-modules`` (see
``pyproject.toml``); this module checks that they exist, so a new public name
without one fails here, and runs the ``>>>`` examples of the user guide
(``doc/user_guide/*.rst``), which pytest's doctest collection does not see.
"""

import doctest
import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

import evidence_select

PUBLIC_MODULES = ("evidence_select", "evidence_select.models", "evidence_select.datasets")
# Sub-packages whose exported helpers are documented to the same standard.
INTERNAL_MODULES = ("evidence_select.evidence", "evidence_select.selection", "evidence_select.utils")

# Names whose docstrings still lack an ``Examples`` section, with who owes them. strict=True makes
# the test fail as soon as one is added, so the entry must then be removed here.
OWED = {}  # public names whose example is still owed (xfail strict): none

_EXAMPLES = re.compile(r"^Examples\n-{8,}\n(?P<body>.*?)(?=^\S[^\n]*\n-{3,}\n|\Z)", re.MULTILINE | re.DOTALL)
DOC_DIR = Path(__file__).resolve().parents[2] / "doc"


def _public(module_names):
    """``(module name, name, object)`` for every name in the modules' ``__all__``."""
    for module_name in module_names:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            yield module_name, name, getattr(module, name)


def _is_code(obj):
    return inspect.isclass(obj) or inspect.isfunction(obj)


def _documented_objects(module_names):
    """``(qualified name, object)`` for every public class and function."""
    return [(f"{module_name}.{name}", obj) for module_name, name, obj in _public(module_names) if _is_code(obj)]


def _data_names(module_names):
    """``(module, name)`` of every public constant (neither class, function, module nor dunder)."""
    return [(module_name, name) for module_name, name, obj in _public(module_names)
            if not (_is_code(obj) or inspect.ismodule(obj) or name.startswith("__"))]


def _params(objects):
    return [pytest.param(obj, id=qualified, marks=[pytest.mark.xfail(strict=True, reason=OWED[qualified])]
                         if qualified in OWED else []) for qualified, obj in objects]


def examples_section(obj):
    """The body of the numpydoc ``Examples`` section of ``obj``'s own docstring, or None."""
    doc = inspect.getdoc(obj) if obj.__doc__ else None
    if not doc:
        return None
    match = _EXAMPLES.search(doc)
    return match.group("body") if match else None


def check_documented(obj):
    """Assert a docstring with a summary line and an ``Examples`` section that has a doctest."""
    name = getattr(obj, "__qualname__", repr(obj))
    doc = inspect.getdoc(obj) if obj.__doc__ else None
    assert doc and doc.splitlines()[0].strip(), f"{name} has no docstring"
    body = examples_section(obj)
    assert body is not None, f"{name}'s docstring has no numpydoc 'Examples' section"
    assert ">>>" in body, f"{name}'s 'Examples' section has no doctest (>>> line)"


@pytest.mark.parametrize("obj", _params(_documented_objects(PUBLIC_MODULES)))
def test_public_name_has_examples(obj):
    check_documented(obj)


@pytest.mark.parametrize("obj", _params(_documented_objects(INTERNAL_MODULES)))
def test_exported_helper_has_examples(obj):
    check_documented(obj)


def test_every_public_name_is_a_class_function_constant_or_subpackage():
    # Anything else (an instance of a class, say) would slip through both checks below.
    constants = set(_data_names(PUBLIC_MODULES))
    for module_name, name, obj in _public(PUBLIC_MODULES):
        assert (_is_code(obj) or inspect.ismodule(obj) or name.startswith("__")
                or ((module_name, name) in constants and not callable(obj))), f"{module_name}.{name}"


@pytest.mark.parametrize("module_name, name", _data_names(PUBLIC_MODULES))
def test_public_constant_has_doc_comment(module_name, name):
    # Constants cannot carry a docstring; Sphinx documents them from a ``#:`` comment above their
    # definition in the module that defines them.
    obj = getattr(importlib.import_module(module_name), name)
    for candidate in [m for m_name, m in sorted(sys.modules.items())
                      if m_name.startswith("evidence_select") and getattr(m, name, None) is obj]:
        try:
            lines = inspect.getsource(candidate).splitlines()
        except (OSError, TypeError):
            continue
        for i, line in enumerate(lines):
            if re.match(rf"{re.escape(name)}\s*(:[^=]*)?=", line):
                assert i > 0 and lines[i - 1].lstrip().startswith("#:"), \
                    f"{module_name}.{name} has no '#:' doc comment above its definition in {candidate.__name__}"
                return
    pytest.fail(f"definition of {module_name}.{name} not found")


def test_checker_rejects_missing_examples():
    def documented():
        """Summary.

        Examples
        --------
        >>> 1 + 1
        2
        """

    def no_examples():
        """Summary.

        Notes
        -----
        >>> 1 + 1
        2
        """

    def examples_without_doctest():
        """Summary.

        Examples
        --------
        Prose only.

        Notes
        -----
        >>> 1 + 1
        2
        """

    check_documented(documented)
    for broken in (no_examples, examples_without_doctest, lambda: None):
        with pytest.raises(AssertionError):
            check_documented(broken)


GUIDE_PAGES = sorted((DOC_DIR / "user_guide").glob("*.rst")) if DOC_DIR.is_dir() else []


@pytest.mark.skipif(not DOC_DIR.is_dir(), reason="run from a checkout: doc/ is not installed with the package")
def test_user_guide_has_pages():
    assert len(GUIDE_PAGES) >= 8


#: Pages whose examples run reference backends or long streams (several seconds each): the full suite only.
SLOW_GUIDE_PAGES = {"backends", "custom_models", "history"}


@pytest.mark.parametrize("page", [pytest.param(page, id=page.stem,
                                               marks=[pytest.mark.slow] if page.stem in SLOW_GUIDE_PAGES else [])
                                  for page in GUIDE_PAGES])
def test_user_guide_examples_run(page):
    failures, _ = doctest.testfile(str(page), module_relative=False, verbose=False, report=True,
                                   optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                                   globs={"__name__": "__guide__"})
    assert failures == 0, f"{failures} example(s) in {page.name} failed (see the output above)"
