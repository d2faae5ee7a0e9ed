"""The benchmark scripts import only names that their helper modules (``benchmarks/_*.py``) define, and record
their command with the script's name.

A static check (the scripts are not run: several need the ``bench`` extra and minutes of work), so that a
helper renamed or removed in one place cannot leave a benchmark that fails at its first line.
"""

import ast
import pathlib

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def _top_level_names(path):
    """The names a module defines at its top level: functions, classes, assignments and imports."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def _helper_imports(path):
    """``(helper module, name)`` for each ``from _helper import name`` anywhere in the script."""
    return [(node.module, alias.name) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("_")
            for alias in node.names]


SCRIPTS = sorted(BENCHMARKS.glob("*.py")) if BENCHMARKS.is_dir() else []


@pytest.mark.skipif(not SCRIPTS, reason="run from a checkout: the benchmarks are not installed with the package")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_benchmark_imports_names_its_helpers_define(script):
    missing = [f"{module}.{name}" for module, name in _helper_imports(script)
               if name not in _top_level_names(BENCHMARKS / f"{module}.py")]
    assert not missing, f"{script.name} imports names its helpers do not define: {missing}"


def _argv_without_the_script(path):
    """Line numbers of ``run_metadata(sys.argv[1:])`` calls: the recorded command would lack the script's name."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "run_metadata" and node.args
            and ast.unparse(node.args[0]) == "sys.argv[1:]"]


@pytest.mark.skipif(not SCRIPTS, reason="run from a checkout: the benchmarks are not installed with the package")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_benchmark_records_the_command_with_its_script(script):
    """``run_metadata(argv)`` takes the whole argv (it keeps the script's base name and the arguments)."""
    assert not _argv_without_the_script(script), f"{script.name}: run_metadata(sys.argv[1:]) drops the script's name"
