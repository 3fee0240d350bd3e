"""vitviz as a package: its metadata agrees with the requirements files, its commands answer --help, and its
layers import one way."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "vitviz"
# the layers, lowest first, each by its modules' prefixes: a module may import from its own layer and the ones
# before it, never after; the package's own __init__ modules that re-export the app sit with the app's top
LAYERS = [
    ["vitviz.runtime"],
    ["vitviz.data"],
    ["vitviz.models"],
    ["vitviz.explain"],
    ["vitviz.training"],
    ["vitviz.pictures"],
    ["vitviz.app.serving"],
    ["vitviz.app"],
    ["vitviz.app.tabs"],
    ["vitviz.app.shell", "vitviz.app.serve", "vitviz.app.tools", "vitviz.app.__init__"],
    ["vitviz"],
]


def requirement_lines(path: Path) -> list[str]:
    lines = [ln.split("#")[0].strip() for ln in path.read_text().splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("-r")]


def test_pyproject_and_the_requirements_files_agree():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == requirement_lines(ROOT / "requirements.txt")
    assert project["optional-dependencies"]["dev"] == requirement_lines(ROOT / "requirements-dev.txt")
    assert project["scripts"]["vitviz"] == "vitviz.cli:main"


def test_the_tests_import_the_installed_package():
    import vitviz

    assert Path(vitviz.__file__).resolve().parent == PACKAGE
    assert "sys.path" not in (ROOT / "tests" / "conftest.py").read_text()
    for test in (ROOT / "tests").glob("*.py"):  # one helpers module; no test module imports another
        for node in ast.walk(ast.parse(test.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(("test_", "conftest")), (test.name, node.module)


@pytest.mark.parametrize("command", ["app", "train", "evaluate", "average", "space"])
def test_every_command_answers_help(command):
    out = subprocess.run(["vitviz", command, "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith(f"usage: vitviz {command}"), out.stderr[-800:]


def test_the_command_lists_its_subcommands_and_the_older_forms_still_work():
    top = subprocess.run(["vitviz", "--help"], capture_output=True, text=True, timeout=60)
    assert top.returncode == 0 and all(c in top.stdout for c in ("app", "train", "evaluate", "average", "space"))
    wrong = subprocess.run(["vitviz", "trian"], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "no command 'trian'" in wrong.stderr
    for module in ("vitviz", "vitviz.train", "vitviz.evaluate", "vitviz.average", "vitviz.space"):
        out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.startswith("usage: vitviz"), (module, out.stderr[-800:])


def layer_of(module: str) -> int:
    """The index in LAYERS of the layer `module` belongs to: its longest prefix there (the package itself: top)."""
    best = (-1, len(LAYERS) - 1)
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), i)
    return best[1]


def module_name(path: Path) -> str:
    """The module's dotted name; a package's own file keeps its `__init__`, so that it has a layer of its own."""
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def resolve(dotted: str) -> str | None:
    """The module a dotted name is: a file's, a package's own `__init__`, or None (a name inside a module)."""
    where = ROOT / Path(*dotted.split("."))
    if where.with_suffix(".py").exists():
        return dotted
    return f"{dotted}.__init__" if (where / "__init__.py").exists() else None


def imports_of(path: Path) -> set[str]:
    """Every vitviz module `path` imports, wherever the import is written: at the top, inside a function, or
    under `if TYPE_CHECKING:` (an import for type checkers still ties the two modules)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        assert not (isinstance(node, ast.ImportFrom) and node.level), f"{path.name}: relative import"
        if isinstance(node, ast.Import):
            found |= {resolve(a.name) for a in node.names if a.name.startswith("vitviz")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vitviz"):
            for a in node.names:  # `from vitviz.app import menu`: the module vitviz.app.menu
                sub = f"{node.module}.{a.name}"
                is_module = (ROOT / Path(*sub.split("."))).with_suffix(".py").exists() or (
                    ROOT / Path(*sub.split("."))
                ).is_dir()
                found.add(sub if is_module else node.module)
    return found


def import_graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}


def test_imports_run_one_way():
    graph = import_graph()
    assert "vitviz.app.tabs.explore" in graph and "vitviz.app.serving.limits" in graph  # the layout it checks
    upward = [f"{m} imports {n}" for m, names in graph.items() for n in names if layer_of(n) > layer_of(m)]
    assert not upward, upward


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of `graph` with more than one module: its import circles."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.add(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(part)

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def test_strongly_connected_finds_a_circle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_type_checking_imports_included():
    circles = strongly_connected(import_graph())
    assert not circles, circles


def test_no_module_is_past_400_lines_and_no_function_past_80():
    long_files, long_functions = [], []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        if text.count("\n") > 400:
            long_files.append(path.name)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno > 80:
                long_functions.append(f"{path.name}:{node.name}")
    assert not long_files and not long_functions, (long_files, long_functions)


GRADIO_INTERNALS = re.compile(  # a submodule imported, an internal attribute read, a step overridden, a private name
    r"from gradio\.|import gradio\.|gr\.utils\.|\bblock_fn\.|\.postprocess\s*=|"
    r"(?<!internals)\.(temp_file_sets|upload_file_set|keep_in_cache|skip_api|data_model|GRADIO_CACHE|allowed_paths|fns)\b|"
    r"def (validate_inputs|preprocess_data|postprocess_data)\(|\b(demo|blocks|app|queue)\._[a-z]"
)


def test_gradio_internals_are_used_in_one_module_only():
    """vitviz.app.serving.gradio_internals is the one module that reaches into Gradio (its test names each use);
    every other module uses Gradio's public API, or that module."""
    assert GRADIO_INTERNALS.search("from gradio.blocks import BlockFunction") and GRADIO_INTERNALS.search("demo._queue")
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "gradio_internals.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if GRADIO_INTERNALS.search(code):
                found.append(f"{path.name}:{n}: {line.strip()}")
    assert not found, found


def test_gradio_can_read_every_handlers_annotations():
    """Gradio passes gr.SelectData and gr.Request by a parameter's annotation; an annotation it cannot resolve
    (a name imported only for type checkers) would silently give that handler None."""
    import inspect
    import typing

    import vitviz.app.shell  # noqa: F401  every tab imported
    from vitviz.app import choices, handlers, menu
    from vitviz.app.tabs import compare as compare_tab
    from vitviz.app.tabs import explore as explore_tab
    from vitviz.app.tabs import model as model_tab
    from vitviz.app.tabs import removal as removal_tab
    from vitviz.app.tabs import steps as steps_tab
    from vitviz.app.tabs import train as train_tab

    unresolved = []
    for mod in (choices, compare_tab, explore_tab, handlers, menu, model_tab, removal_tab, steps_tab, train_tab):
        for name, fn in vars(mod).items():
            wiring = inspect.isfunction(fn) and "shell" in inspect.signature(fn).parameters  # not a handler
            if inspect.isfunction(fn) and fn.__module__ == mod.__name__ and not wiring:
                try:
                    typing.get_type_hints(fn)
                except NameError as e:
                    unresolved.append(f"{mod.__name__}.{name}: {e}")
    assert not unresolved, unresolved


def test_every_public_function_is_annotated():
    missing = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                args = [a for a in node.args.args + node.args.kwonlyargs if a.arg not in ("self", "cls")]
                missing += [f"{path.name}:{node.name}({a.arg})" for a in args if a.annotation is None]
                if node.returns is None and node.name != "__init__":
                    missing.append(f"{path.name}:{node.name} -> ?")
    assert not missing, missing
