"""Package layout rules, checked on the source (parsed with ``ast``, nothing imported):

* ``lakesink/objects/`` is pure: no Spark, boto3, Kafka/registry client, config, wiring, store, driver or
  executor imports (``lakesink.wiring`` builds objects from a config and hands them their settings);
* no module imports a private (underscore) name from another module.
"""
from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lakesink"

FORBIDDEN_IN_OBJECTS = ("pyspark", "boto3", "botocore", "confluent_kafka", "lakesink.config", "lakesink.wiring",
                        "lakesink.store", "lakesink.driver", "lakesink.executor")


def _modules(*dirs: Path) -> list[Path]:
    return sorted(p for d in dirs if d.is_dir() for p in d.rglob("*.py") if ".venv" not in p.parts)


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (relative imports resolved against ``path``)."""
    if not node.level:
        return node.module or ""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path`` — also ``from pkg import mod`` as ``pkg.mod``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(path, node)
            out.append((node.lineno, mod))
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names if a.name != "*"]
    return out


def _hits(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


OBJECTS = _modules(PACKAGE / "objects")


def test_objects_package_is_found() -> None:
    names = {p.name for p in OBJECTS}
    assert {"naming.py", "partitioners.py", "rotation.py", "timeformat.py", "records.py"} <= names


@pytest.mark.parametrize("path", OBJECTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_objects_are_pure(path: Path) -> None:
    bad = [f"{path.relative_to(ROOT)}:{line}: imports {mod}" for line, mod in _imported_modules(path)
           if any(_hits(mod, f) for f in FORBIDDEN_IN_OBJECTS)]
    assert not bad, "\n".join(bad)


def test_no_private_names_imported_across_modules() -> None:
    bad = []
    for path in _modules(PACKAGE, ROOT / "tests", ROOT / "bench"):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            mod = _resolve(path, node)
            if not _hits(mod, "lakesink"):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {mod} import {alias.name}")
    assert not bad, "\n".join(bad)


def test_the_rules_catch_violations(tmp_path: Path) -> None:
    """The checks themselves: a forbidden import and a private import are both seen."""
    fake = ROOT / "lakesink" / "objects" / "_layout_probe.py"  # never written: parsed from a string
    tree_src = "from lakesink.config import SinkConfig\nimport pyspark.sql\nfrom lakesink import wiring\n"
    probe = tmp_path / "probe.py"
    probe.write_text(tree_src)
    mods = [m for _, m in _imported_modules(probe)]
    assert any(_hits(m, "lakesink.config") for m in mods)
    assert any(_hits(m, "pyspark") for m in mods)
    assert any(_hits(m, "lakesink.wiring") for m in mods)
    assert _module_name(fake) == "lakesink.objects._layout_probe"


def test_every_exception_class_is_defined_in_errors_under_lakesinkerror():
    """One module holds every exception; each derives from LakesinkError (the CLI's one-line errors)."""
    import inspect

    import lakesink.errors as errors

    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b) for b in node.bases}
                assert not any(b.endswith(("Error", "Exception")) or b in ("Exception", "BaseException")
                               for b in bases), f"{path}: exception class {node.name} outside lakesink/errors.py"
    for name, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, BaseException) and cls.__module__ == errors.__name__:
            assert issubclass(cls, errors.LakesinkError), name


def test_argument_errors_of_pure_objects_are_lakesink_errors():
    from lakesink.errors import InvalidArgumentError, LakesinkError
    from lakesink.objects import formats
    from lakesink.objects.rotation import RotationPolicy

    for bad in (lambda: RotationPolicy(flush_size=0), lambda: formats.create("nope"),
                lambda: formats.create("json", compression_level=42)):
        with pytest.raises(InvalidArgumentError) as ei:
            bad()
        assert isinstance(ei.value, LakesinkError)


#: The package order CONTRIBUTING.md draws, lowest first: a module may import from its own layer and the layers
#: before it, never from a later one (imports inside functions and under TYPE_CHECKING count too). The longest
#: matching prefix places a module; ``lakesink`` itself (the version and the lazy notebook names) is the floor.
LAYERS: list[tuple[str, ...]] = [
    ("lakesink.errors", "lakesink.hooks", "lakesink.retry", "lakesink.objects.records", "lakesink.manifest.location"),
    ("lakesink.schemas", "lakesink.decoders", "lakesink.plugins", "lakesink.objects"),
    ("lakesink.transforms", "lakesink.credentials"),
    ("lakesink.config",),
    ("lakesink.store",),
    ("lakesink.manifest",),
    ("lakesink.wiring",),
    ("lakesink.executor",),
    ("lakesink.runners",),
    ("lakesink.driver",),
    ("lakesink.runtime", "lakesink.notebook"),
    ("lakesink.devstack",),
    ("lakesink.cli",),
]


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of ``module`` (longest matching prefix), 0 for the root; None: not placed."""
    if module == "lakesink":
        return 0
    best: tuple[int, int] | None = None
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if _hits(module, prefix) and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    return None if best is None else best[0]


def _lakesink_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in _modules(PACKAGE)}


def _target(module: str, known: dict[str, Path]) -> str:
    """The module of ``known`` an imported name lives in (``a.b.name`` -> ``a.b``)."""
    while module and module not in known:
        module = module.rpartition(".")[0]
    return module


def upward_imports(known: dict[str, Path]) -> list[str]:
    bad = []
    for name, path in sorted(known.items()):
        here = layer_of(name)
        for line, mod in _imported_modules(path):
            if not _hits(mod, "lakesink"):
                continue
            target = _target(mod, known)
            there = layer_of(target)
            if here is not None and there is not None and there > here:
                where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                bad.append(f"{where}:{line}: {name} (layer {here}) imports {target} (layer {there})")
    return sorted(set(bad))


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the ``lakesink`` modules it imports (anywhere in it, functions and TYPE_CHECKING included), less
    its own packages (``from lakesink.cli import output`` in ``lakesink.cli.main``: a module's packages are
    imported before it whatever it says)."""
    graph = {}
    for name, path in known.items():
        targets = {_target(mod, known) for _, mod in _imported_modules(path) if _hits(mod, "lakesink")}
        graph[name] = {t for t in targets if t and t != name and not name.startswith(t + ".")}
    return graph


def a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules, the first repeated at the end), or None."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        return e.args[1]
    return None


def test_no_import_cycle():
    """A cycle hidden in a function still ties the modules together: neither can be understood or moved alone."""
    graph = import_graph(_lakesink_modules())
    assert "lakesink.executor.results" in graph["lakesink.executor.progress"]  # the graph is read, not empty
    assert a_cycle(graph) is None


def test_the_cycle_check_sees_a_cycle():
    assert a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) in (["a", "c", "b", "a"], ["a", "b", "c", "a"],
                                                                       ["b", "a", "c", "b"], ["c", "b", "a", "c"],
                                                                       ["b", "c", "a", "b"], ["c", "a", "b", "c"])
    assert a_cycle({"a": {"b"}, "b": set()}) is None


def test_every_module_has_a_layer():
    unplaced = [m for m in _lakesink_modules() if layer_of(m) is None]
    assert not unplaced, f"add them to LAYERS (and CONTRIBUTING.md): {unplaced}"


def test_no_module_imports_from_a_later_layer():
    bad = upward_imports(_lakesink_modules())
    assert not bad, "\n".join(bad)


def test_the_layer_check_sees_an_upward_import(tmp_path: Path):
    """A store module importing the driver is caught."""
    probe = tmp_path / "lakesink" / "store" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("def f():\n    from lakesink.driver.sink import SinkJob\n")
    bad = upward_imports({**_lakesink_modules(), "lakesink.store.probe": probe})
    assert len(bad) == 1 and "lakesink.store.probe (layer 4) imports lakesink.driver.sink (layer 9)" in bad[0]


#: A module longer than this says why at its top (a ``Size:`` paragraph in its docstring)
LONG_MODULE_LINES = 500


def test_a_long_module_says_why_at_its_top():
    bad = []
    for path in _modules(PACKAGE):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > LONG_MODULE_LINES:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "Size:" not in doc:
                bad.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines, no 'Size:' reason in its docstring")
    assert not bad, "\n".join(bad)
