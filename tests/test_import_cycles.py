"""No two modules of src/ import each other, directly or through others (no Spark: `ast` only).

A module's imports are every `import` and `from ... import` in it, at the top or inside a
function, resolved to a module of src/ (`from pkg import mod` is pkg.mod when that is a
module, else pkg). Imports under `if TYPE_CHECKING:` never run, so they cannot break an import
order; they are counted too, so that the layout does not loop even for the type checker (the
parser's syntax modules name it by `tasks.parser_protocol`, the AST names `tasks.strata`,
which does not import it).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def _modules(src: Path) -> dict[str, Path]:
    """Return module name -> file for every module under `src`."""
    out = {}
    for path in src.rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, typing_too: bool):
    """Yield the Import and ImportFrom nodes of a tree, skipping `if TYPE_CHECKING:` bodies
    unless `typing_too`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.If) and _is_type_checking(node) and not typing_too:
            children = node.orelse  # the body runs only under a type checker
        stack.extend(children)


def import_graph(src: Path, typing_too: bool) -> dict[str, set[str]]:
    """Return module -> the modules of `src` it imports."""
    mods = _modules(src)
    graph = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in _imports(ast.parse(path.read_text()), typing_too):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in mods}
                continue
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                deps.add(sub if sub in mods else base)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_a_cycle_and_only_it(tmp_path):
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from p import b\n")
    (pkg / "b.py").write_text("def f():\n    from p.a import x\n")  # a function-local import
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from p import d\n")
    (pkg / "d.py").write_text("import p.c\nfrom . import a\n")
    assert cycles(import_graph(tmp_path, typing_too=False)) == [["p.a", "p.b"]]
    assert sorted(cycles(import_graph(tmp_path, typing_too=True))) == [["p.a", "p.b"],
                                                                       ["p.c", "p.d"]]


def test_no_import_cycle_in_src():
    assert cycles(import_graph(SRC, typing_too=False)) == []


def test_no_import_cycle_in_src_even_for_the_type_checker():
    assert cycles(import_graph(SRC, typing_too=True)) == []


def private_imports(src: Path) -> list[tuple[str, str, str]]:
    """Return (module, imported module, name) for every `from levelflow... import _name`
    in `src`: a module reaching into another's private name."""
    mods = _modules(src)
    found = []
    for name, path in sorted(mods.items()):
        for node in _imports(ast.parse(path.read_text()), typing_too=True):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("levelflow"):
                found += [(name, node.module, a.name) for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_the_private_import_finder_finds_one(tmp_path):
    pkg = tmp_path / "levelflow"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def _spec():\n    pass\n")
    (pkg / "b.py").write_text("from levelflow.a import _spec\nfrom levelflow import a\n")
    assert private_imports(tmp_path) == [("levelflow.b", "levelflow.a", "_spec")]


def test_no_module_of_src_imports_another_modules_private_name():
    assert private_imports(SRC) == []
