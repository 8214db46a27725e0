"""The Python package's modules import one another without a circle, as the Rust files of
each folder do (driver/tests/layers.rs): read from ``python/nums_cloud/**/*.py`` with
``ast``, every import counts wherever it is written (at the top, or inside a function:
an import put in a function to dodge a circle is still one).

An import is an edge to the package's module it names: ``from . import _x`` and
``from .numpy import _array`` name the submodule, ``from . import name`` and
``from .numpy import get`` name the package (its ``__init__.py``), ``import
nums_cloud.x.y`` names ``nums_cloud.x.y``. A package's ``__init__`` is a module like the
others (importing a submodule runs its package's ``__init__`` first, but that is
Python's order of loading, not what the code uses). ``_native`` is the Rust extension,
no module of this package's source."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "nums_cloud"
ROOT = "nums_cloud"


def module_names(package=PACKAGE, root=ROOT, suffix="*.py"):
    """Each ``.py`` file of the package by its module name (a package by its own name)."""
    out = {}
    for f in sorted(package.rglob(suffix)):
        parts = [root, *f.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def extensions(package=PACKAGE, root=ROOT):
    """The compiled modules: a ``.pyi`` stub without a ``.py`` (``_native``)."""
    return set(module_names(package, root, "*.pyi")) - set(module_names(package, root))


def imports_of(name, source, is_package, modules, compiled=()):
    """The package's modules that the module ``name`` (of text ``source``) imports."""
    # The package a relative import starts from: the module's own for a package.
    here = name.split(".") if is_package else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in compiled:
                    continue
                if sub in modules:
                    found.add(sub)
                elif target in modules:
                    found.add(target)
    found.discard(name)
    return found


def graph(package=PACKAGE, root=ROOT):
    """Every module's imports of the package's other modules."""
    modules, compiled = module_names(package, root), extensions(package, root)
    return {name: imports_of(name, f.read_text(), f.name == "__init__.py", modules, compiled)
            for name, f in modules.items()}


def circles(g):
    """The strongly connected parts of two modules or more."""
    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for n in g.get(todo.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen

    reached = {n: reach(n) for n in g}
    out = []
    for n in sorted(g):
        if n in reached[n] and not any(n in c for c in out):
            out.append({m for m in g if m in reached[n] and n in reached[m]})
    return out


def test_the_package_has_no_import_circle():
    g = graph()
    assert "nums_cloud.numpy._array" in g and "nums_cloud" in g
    found = circles(g)
    text = "\n".join(
        "  " + ", ".join(f"{a} -> {b}" for a in sorted(c) for b in sorted(g[a]) if b in c)
        for c in found)
    assert not found, f"import circles among the package's modules:\n{text}"


def test_the_check_finds_a_circle(tmp_path):
    """The check itself can fail: a function-level import closes a circle, and the
    relative forms map to the modules they name."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from ._a import f\nfrom . import _ext\n")
    (pkg / "_ext.pyi").write_text("def g() -> None: ...\n")
    (pkg / "_a.py").write_text("def f():\n    from .sub import _b\n    return _b\n")
    (pkg / "sub" / "__init__.py").write_text("X = 1\n")
    (pkg / "sub" / "_b.py").write_text("from .. import _a\nfrom . import X\n")
    g = graph(pkg, "pkg")
    assert g == {"pkg": {"pkg._a"}, "pkg._a": {"pkg.sub._b"}, "pkg.sub": set(),
                 "pkg.sub._b": {"pkg._a", "pkg.sub"}}
    assert circles(g) == [{"pkg._a", "pkg.sub._b"}]
    (pkg / "sub" / "_b.py").write_text("import pkg.sub\n")
    assert circles(graph(pkg, "pkg")) == []
