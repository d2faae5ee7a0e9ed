"""Sphinx configuration of the evidence_select documentation.

Build with ``sphinx-build -W --keep-going -b html doc doc/_build/html`` from the
repository root (needs ``pip install ".[doc]"``). sphinx-gallery runs every
``examples/plot_*.py`` script and renders it with its figures and output; the
validation page's tables are written from ``benchmarks/saved/`` first
(``benchmarks/make_tables.py``).
"""

import importlib.util
import os
import re
import sys
import warnings

# Document the working tree, also when an older copy of the package is installed.
sys.path.insert(0, os.path.abspath(".."))

import evidence_select  # noqa: E402

project = "evidence_select"
author = "evidence_select developers"
copyright = "evidence_select developers, BSD 3-Clause"
version = release = evidence_select.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py", "**.codeobj.json",
                    "auto_examples/*.zip"]
default_role = "code"

# -- API reference: autosummary stubs from the numpydoc docstrings --------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"
autodoc_default_options = {"member-order": "groupwise"}
numpydoc_show_class_members = False  # the class template lists the members itself
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

# -- The validation page's tables, from the saved benchmark results (benchmarks/make_tables.py) -------------
# Written at every build, so the published tables cannot drift from benchmarks/saved/*.json.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("make_tables", os.path.join(_ROOT, "benchmarks", "make_tables.py"))
_make_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_make_tables)
_make_tables.write_tables()

# -- Gallery: the scripts in examples/ are run and rendered --------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "doc_module": ("evidence_select",),
    "backreferences_dir": "gen_modules/backreferences",
    "reference_url": {"evidence_select": None},
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    # The examples are independent scripts: run them two at a time (joblib), as CI has two cores.
    "parallel": 2,
}

# Examples must not fail silently; a non-interactive backend for the runs.
os.environ.setdefault("MPLBACKEND", "Agg")
warnings.filterwarnings("ignore", category=UserWarning, message="Matplotlib is currently using agg")

# -- Docstring fixes at build time ------------------------------------------------------------------


def _skip_member(app, what, name, obj, skip, options):
    """Leave out members that scikit-learn defines (metadata routing, get/set_params, mixin scores).

    They are documented by scikit-learn, and their docstrings refer to its glossary.
    """
    module = getattr(obj, "__module__", None) or ""
    return True if module.startswith("sklearn") else skip


def _attribute_doc(name, obj):
    """The ``#:`` comment of a public constant, from the (private) module that defines it."""
    from sphinx.pycode import ModuleAnalyzer

    short = name.rsplit(".", 1)[-1]
    for module_name, module in sorted(sys.modules.items()):
        if not module_name.startswith("evidence_select") or getattr(module, short, None) is not obj:
            continue
        try:
            docs = ModuleAnalyzer.for_module(module_name).find_attr_docs()
        except Exception:  # compiled or source-less modules have no comments
            continue
        if ("", short) in docs:
            return [line for line in docs[("", short)]]
    return None


# ``(n_features_in_,)`` in a numpydoc type would be read as a reST reference to ``n_features_in``.
_TYPE_LINE = re.compile(r"^(\s*[\w, ]+ : )(.*)$")
_TRAILING_UNDERSCORE = re.compile(r"\b([A-Za-z]\w*)_(?=[\s,)\]]|$)")


def _process_docstring(app, what, name, obj, options, lines):
    if what == "data" and name.startswith("evidence_select."):
        doc = _attribute_doc(name, obj)
        if doc is not None:
            lines[:] = doc
    for i, line in enumerate(lines):
        match = _TYPE_LINE.match(line)
        if match:
            lines[i] = match.group(1) + _TRAILING_UNDERSCORE.sub(r"\1\\_", match.group(2))


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
    # Before numpydoc (priority 500) turns the sections into reST.
    app.connect("autodoc-process-docstring", _process_docstring, priority=100)


# -- HTML -------------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"evidence_select {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path = []
html_show_sourcelink = False
