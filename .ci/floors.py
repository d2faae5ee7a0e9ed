"""Print pip constraints that pin every runtime dependency of pyproject.toml to its declared lower bound.

Then :data:`COMPANION_PINS`, the constraints that keep the test extra's packages importable at those floors.

``name>=X`` becomes ``name==X``, so that CI tests the oldest versions the package claims to support and the pins
cannot drift from what ``pyproject.toml`` declares. A dependency without a ``>=`` bound is an error: its floor
would go untested. (The ``[project] dependencies`` array is read with a regular expression rather than tomllib,
which Python 3.10 lacks.)
"""

import re
import sys
from pathlib import Path

#: Constraints on test and optional packages that need a newer runtime dependency than the floors without declaring
#: it, so that pip cannot see the conflict: pyarrow 26 imports only with numpy >= 2 (its wheels declare no numpy).
COMPANION_PINS = ["pyarrow<26"]


def floor_pins(pyproject):
    """``["name==X", ...]`` from ``[project] dependencies`` of the given ``pyproject.toml`` path."""
    text = Path(pyproject).read_text()
    block = re.search(r"^dependencies\s*=\s*\[(.*?)\]", text, flags=re.MULTILINE | re.DOTALL)
    if block is None:
        raise ValueError(f"no [project] dependencies array in {pyproject}")
    pins = []
    for requirement in re.findall(r"\"([^\"]+)\"", block.group(1)):
        match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][A-Za-z0-9.]*)\s*(,.*)?", requirement)
        if match is None:
            raise ValueError(f"runtime dependency {requirement!r} has no '>=' lower bound to test")
        pins.append(f"{match.group(1)}=={match.group(2)}")
    return pins


if __name__ == "__main__":
    print("\n".join(floor_pins(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml") + COMPANION_PINS))
