"""Write the validation page's tables from the saved benchmark results.

Usage (from the repository root)::

    python benchmarks/make_tables.py            # doc/user_guide/generated/<table>.rst from benchmarks/saved/*.json
    python benchmarks/make_tables.py --print    # the same tables as markdown, on the terminal
    python benchmarks/make_tables.py --commands # the commands that write the saved files, one per line

Every table of ``doc/user_guide/validation.rst`` is made from one canonical result file,
``benchmarks/saved/<name>.json``, that one benchmark command wrote with ``--save`` at a clean commit; the
sentence above each table names the file, the command and the commit (:data:`_tables.TABLES` lists them).
The documentation build (``doc/conf.py``) runs this script, so the published tables always match the saved
files. Needs numpy only (not the package).
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _tables import (SAVED_COMMANDS, SAVED_DIR, SAVED_RESULTS, TABLES, load_saved, markdown_lines, render,  # noqa: E402
                     rst_lines)

#: Committed inputs of the benchmarks (reference evidences that take hours), not results.
SAVED_INPUTS = ("real_references", "paper_mixture_reference")
DOC_DIR = os.path.join(os.path.dirname(HERE), "doc", "user_guide", "generated")


def check_saved_dir(directory=SAVED_DIR):
    """Refuse files in ``benchmarks/saved/`` that are neither a published result nor a benchmark input."""
    known = set(SAVED_RESULTS) | set(SAVED_INPUTS)
    stray = sorted(f for f in os.listdir(directory) if not (f.endswith(".json") and f[:-5] in known))
    if stray:
        raise ValueError(f"{directory} holds files no table or benchmark reads: {stray}; "
                         "keep one canonical result per published table (see benchmarks/_tables.py)")


def saved_results_table(saved_dir=SAVED_DIR):
    """reStructuredText of the saved result files: each file's tables, the command that wrote it (or writes it,
    where it is missing) and the commit of the saved run."""
    cells = []
    for name, command in SAVED_COMMANDS.items():
        if os.path.exists(os.path.join(saved_dir, f"{name}.json")):
            meta = load_saved(name, saved_dir)["meta"]
            command, commit = meta["command"], meta["git_commit"][:12]
        else:
            commit = "(missing)"
        tables = ", ".join(table for table, (source, _) in TABLES.items() if source == name)
        cells.append((f"``{name}.json``", tables, f"``{command}``", commit))
    return "\n".join(rst_lines(("saved file", "tables", "command", "commit"), cells)) + "\n"


def write_tables(out_dir=DOC_DIR, saved_dir=SAVED_DIR):
    """Write every table of :data:`TABLES` as ``out_dir/<table>.rst``, and the list of saved files as
    ``out_dir/saved_results.rst``; return the paths written."""
    check_saved_dir(saved_dir)
    os.makedirs(out_dir, exist_ok=True)
    texts = {table: render(table, saved_dir) for table in TABLES}
    texts["saved_results"] = saved_results_table(saved_dir)
    paths = []
    for table, text in texts.items():
        path = os.path.join(out_dir, f"{table}.rst")
        if not os.path.exists(path) or open(path).read() != text:  # leave unchanged files alone (Sphinx rebuilds)
            with open(path, "w") as fh:
                fh.write(text)
        paths.append(path)
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print", action="store_true", help="print the tables as markdown instead of writing them")
    parser.add_argument("--commands", action="store_true",
                        help="print the command that writes each saved file (run them at a clean commit) and exit")
    parser.add_argument("--out-dir", default=DOC_DIR, help="where to write the tables (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.commands:
        print("\n".join(SAVED_COMMANDS.values()))
        return
    if args.print:
        for table, (name, renderer) in TABLES.items():
            if not os.path.exists(os.path.join(SAVED_DIR, f"{name}.json")):
                print(f"\n{table}: benchmarks/saved/{name}.json is missing")
                continue
            saved = load_saved(name)
            print(f"\n{table} ({saved['meta']['command']}, commit {saved['meta']['git_commit'][:12]}):\n")
            print("\n".join(markdown_lines(*renderer(saved))))
        return
    for path in write_tables(args.out_dir):
        print(f"wrote {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
