"""The package layers: c4fast -> nets -> selfplay, imports only downward.

Every import statement of every module (at any depth, lazy ones included) is read from
the source with ``ast``; a real interpreter then imports every c4fast module and checks
that torch never got loaded.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {"c4fast": 0, "nets": 1, "selfplay": 2}
#: third-party packages a layer must never import (at any depth)
FORBIDDEN = {"c4fast": {"torch", "ray", "h5py", "starlette", "fastapi", "uvicorn"},
             "nets": {"ray", "starlette", "fastapi", "uvicorn"}}


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def imported_roots(path: Path) -> set[str]:
    """Top-level package names of every import in the file (relative imports resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: within the same package
                out.add(path.relative_to(ROOT).parts[0])
            elif node.module:
                out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("package", list(LAYERS))
def test_imports_point_only_downward(package):
    bad = []
    for path in modules(package):
        for root in imported_roots(path):
            if root in LAYERS and LAYERS[root] > LAYERS[package]:
                bad.append(f"{path.relative_to(ROOT)} imports {root} (a higher layer)")
            if root in FORBIDDEN.get(package, ()):
                bad.append(f"{path.relative_to(ROOT)} imports {root} (not allowed in {package})")
    assert not bad, "\n".join(bad)


def test_the_checker_sees_a_violation(tmp_path):
    """The AST walk finds lazy imports inside functions too (a check that can fail)."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    import torch\n    from selfplay import run\n")
    assert {"torch", "selfplay"} <= imported_roots(f)


def test_no_module_of_c4fast_loads_torch():
    names = sorted({".".join(p.relative_to(ROOT).with_suffix("").parts) for p in modules("c4fast")}
                   - {"c4fast.__main__"})
    names = [n[:-9] if n.endswith(".__init__") else n for n in names]
    code = ("import importlib, sys\n"
            f"for n in {names!r}:\n    importlib.import_module(n)\n"
            "print('torch' in sys.modules, len(sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "False", "a c4fast module imported torch"
