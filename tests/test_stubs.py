"""`_core.pyi` stays true: every name it declares exists in the extension with the same
kind (class, function, exception), every public name of the extension is declared, and
declared class attributes exist on instances the extension makes."""

import ast
import inspect
from pathlib import Path

import tierscope
from tierscope import _core

STUB = Path(tierscope.__file__).parent / "_core.pyi"


def stub_names() -> dict[str, ast.stmt]:
    tree = ast.parse(STUB.read_text())
    out: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
    return out


def test_stub_and_module_declare_the_same_names() -> None:
    declared = stub_names()
    public = {n for n in dir(_core) if not n.startswith("_")} | {"__version__"}
    # The module's own bookkeeping, not part of the API.
    public -= {"_core"}
    assert set(declared) == public, set(declared) ^ public
    for name, node in declared.items():
        obj = getattr(_core, name)
        if isinstance(node, ast.ClassDef):
            assert inspect.isclass(obj), name
        elif isinstance(node, ast.FunctionDef):
            assert callable(obj) and not inspect.isclass(obj), name


def test_declared_attributes_exist() -> None:
    classes = {n: node for n, node in stub_names().items() if isinstance(node, ast.ClassDef)}

    def fields(cls: str) -> list[str]:
        return [
            s.target.id
            for s in classes[cls].body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
        ] + [s.name for s in classes[cls].body if isinstance(s, ast.FunctionDef)]

    text = (
        '[workload]\nregions = [{ name = "a", size = "64MiB" }]\n'
        'phases = [{ name = "p", duration = "1s",\n'
        '  patterns = [{ region = "a", kind = "random" }] }]\n'
        '[[monitors]]\npreset = "damon-mod"\n'
    )
    exp = _core.parse_experiment(text, "t.toml", ".", "toml")
    for f in fields("Experiment"):
        assert hasattr(exp, f), f"Experiment.{f}"
    sweep = "seeds = [1, 2]\n[base]\n" + text.replace("[workload]", "[base.workload]").replace(
        "[[monitors]]", "[[base.monitors]]"
    )
    runs = _core.expand_sweep(sweep, "s.toml", ".", "toml")
    for f in fields("SweepRun"):
        assert hasattr(runs[0], f), f"SweepRun.{f}"
    handle = _core.start_run(exp)
    for f in fields("RunHandle"):
        assert hasattr(handle, f), f"RunHandle.{f}"
    handle.result()
    try:
        _core.parse_experiment("seed = 'x'\n", "bad.toml", ".", "toml")
    except _core.ConfigError as e:
        for f in fields("ConfigError"):
            assert hasattr(e, f), f"ConfigError.{f}"
    else:
        raise AssertionError("a bad experiment parsed")
