"""No import cycles: among the kiln package's Python modules, and among Kiln's C++ libraries.

Why: a module that imports another which imports it back works only in one import order and hides which of
the two owns what; a library that links another which links it back cannot be built or reasoned about alone.
The Python graph counts every import of a package module (at the top or inside a function); the C++ graph is
the Kiln targets that each CMakeLists.txt links (target_link_libraries, LINK_LIBS).
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "python" / "kiln"


def cycle_in(graph):
    """A cycle of ``graph`` (node -> set of nodes) as a list of nodes, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state:
                found = visit(target, path + [target])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def module_name(path):
    """kiln.x.y for python/kiln/x/y.py (the package's __init__ is kiln.x)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def python_imports():
    """Each package module's imports of other package modules."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")
                if node.level:
                    base = base[:len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    for candidate in (f"{source}.{alias.name}", source):
                        if candidate in modules:
                            targets.add(candidate)
                            break
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name in modules)
        # A package's modules import it (its __init__) implicitly; that edge is no cycle of theirs.
        graph[name] = {target for target in targets if target != name and not name.startswith(target + ".")}
    return graph


def cmake_links():
    """Each Kiln library's links to other Kiln libraries, from every CMakeLists.txt outside build folders."""
    graph = {}
    for path in ROOT.rglob("CMakeLists.txt"):
        if any(part.startswith("build") for part in path.relative_to(ROOT).parts):
            continue
        text = re.sub(r"#.*", "", path.read_text())
        for library, body in re.findall(r"add_mlir_(?:library|conversion_library|dialect_library)\((\w+)(.*?)\)",
                                        text, re.S):
            links = body.split("LINK_LIBS", 1)[1] if "LINK_LIBS" in body else ""
            graph.setdefault(library, set()).update(re.findall(r"\b(Kiln\w+|kiln_\w+)\b", links))
        for library, body in re.findall(r"target_link_libraries\((\w+)(.*?)\)", text, re.S):
            graph.setdefault(library, set()).update(re.findall(r"\b(Kiln\w+|kiln_\w+)\b", body))
    return {name: targets - {name} for name, targets in graph.items()}


def test_python_modules_import_no_cycle():
    graph = python_imports()
    assert {"kiln.compiler", "kiln.gpu", "kiln.extensions"} <= set(graph)
    assert "kiln.gpu" in graph["kiln.compiler"]  # the parser sees relative imports
    assert cycle_in(graph) is None, " -> ".join(cycle_in(graph))


def test_cpp_libraries_link_no_cycle():
    graph = cmake_links()
    assert "KilnDriver" in graph.get("KilnApi", set()), "the CMake parser missed KilnApi's links"
    assert cycle_in(graph) is None, " -> ".join(cycle_in(graph))


def test_the_cycle_finder_finds_cycles():
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
