"""The kernel's boundary: the declared SDK, no import cycles, lazy and metadata-free loading."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import ctxengine
import ctxengine.coordination
import ctxengine.messages
from ctxengine._kernel.kernel import EngineNotFoundWarning

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core" / "ctxengine"
SDK_MODULES = {"ctxengine", "ctxengine.messages", "ctxengine.hookspecs", "ctxengine.coordination"}
"""Modules a plugin may import names from (plus ``ctxengine.testing`` and its modules)."""


PLUGIN_SOURCES = [
    (ROOT / "plugins", sorted((ROOT / "plugins").glob("ctxengine_*"))),
    *((src, sorted(src.glob("ctxengine_*"))) for src in sorted((ROOT / "packages").glob("*/src"))),
]
"""``(directory module names are relative to, package directories)`` of every built-in plugin
and every package under ``packages/``."""


def python_files(*roots: Path, tests: bool = False) -> Iterator[Path]:
    """The Python files under ``roots``; those in a ``tests`` directory only with ``tests``."""
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if ".nox" not in path.parts and (tests or "tests" not in path.parts):
                yield path


def _guarded_by_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def imports(path: Path, *, type_checking: bool = True) -> Iterator[tuple[int, str, str | None]]:
    """``(line, module, name)`` for every import in ``path``, at module level or inside a
    function (``name`` is None for ``import module``); without ``type_checking``, not those under
    ``if TYPE_CHECKING:`` (they never run, so they make no cycle)."""
    pending: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                yield node.lineno, node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        if isinstance(node, ast.If) and not type_checking and _guarded_by_type_checking(node):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))


def kernel_imports(path: Path) -> Iterator[tuple[int, str, str | None]]:
    """``(line, module, name)`` for every import of a ctxengine module in ``path``."""
    for line, module, name in imports(path):
        if module == "ctxengine" or module.startswith("ctxengine."):
            yield line, module, name


def sdk_problem(module: str, name: str | None) -> str | None:
    if module == "ctxengine.testing" or module.startswith("ctxengine.testing."):
        return None
    if module not in SDK_MODULES:
        return f"imports the private module {module}"
    if name is None:
        return None
    public = {
        "ctxengine": set(ctxengine.__all__) | {"coordination", "hookspecs", "messages", "testing"},
        "ctxengine.messages": set(ctxengine.messages.__all__),
        "ctxengine.coordination": set(ctxengine.coordination.__all__),
        "ctxengine.hookspecs": {"hookimpl", "hookspec", "PROJECT"},
    }[module]
    if name not in public:
        return f"imports {name!r} from {module}, which is not part of the SDK"
    return None


def test_plugins_and_packages_import_only_the_sdk() -> None:
    # Their tests too: a test that needs a private kernel name tests the kernel and lives in
    # the kernel's tests/.
    packages = sorted((ROOT / "packages").iterdir())
    roots = [
        ROOT / "plugins",
        *(p / d for p in packages for d in ("src", "tests") if (p / d).is_dir()),
    ]
    problems = [
        f"{path.relative_to(ROOT)}:{line}: {problem}"
        for path in python_files(*roots, tests=True)
        for line, module, name in kernel_imports(path)
        if (problem := sdk_problem(module, name)) is not None
    ]
    assert problems == []


def test_plugins_and_packages_reach_the_cli_only_through_their_commands() -> None:
    # A plugin adds commands through register_commands; only tests drive the ctxengine command
    # in process, through its entry point ctxengine_cli.main.main.
    packages = sorted((ROOT / "packages").iterdir())
    roots = [ROOT / "plugins", *(p / "src" for p in packages if (p / "src").is_dir())]
    problems = [
        f"{path.relative_to(ROOT)}:{line}: imports {module}"
        for path in python_files(*roots)
        for line, module, _ in imports(path)
        if module.split(".")[0] == "ctxengine_cli"
    ]
    assert problems == []


CLI = ROOT / "core" / "ctxengine_cli"
CLI_PRIVATE_IMPORTS = {
    "ctxengine._config.core",  # the core settings, for the configuration reference
    "ctxengine._config.fields",
    "ctxengine._config.spec",
    "ctxengine._kernel.coordination_setup",  # which plugin a coordination.backend selects
    "ctxengine._kernel.hooks",  # plugin discovery for `engines` and the plugins' commands
    "ctxengine._kernel.kernel",
    "ctxengine._kernel.resolve",
    "ctxengine._plugin.commands",  # which registration failures are name clashes
}
"""The private kernel modules the CLI may import: it ships and is released with the kernel, and
lists every plugin with its load error (which no host needs). Everything else comes from the SDK."""


def test_the_cli_uses_the_sdk_and_a_few_listed_private_modules() -> None:
    private = {
        module
        for path in python_files(CLI)
        for _, module, name in kernel_imports(path)
        if sdk_problem(module, name) is not None
    }
    assert private <= CLI_PRIVATE_IMPORTS, private - CLI_PRIVATE_IMPORTS


def test_the_testing_helpers_use_only_the_sdk_or_their_own_modules() -> None:
    # The conformance suite and samples are what third parties run; they must not depend on
    # anything an engine author cannot see.
    for name in ("conformance.py", "samples.py"):
        path = CORE / "testing" / name
        problems = [
            f"{name}:{line}: {problem}"
            for line, module, imported in kernel_imports(path)
            if (problem := sdk_problem(module, imported)) is not None
        ]
        assert problems == []


def test_no_kernel_module_imports_a_plugin_or_the_cli() -> None:
    # The built-in tier of resolution imports the built-ins by module name (a string), never
    # with an import statement; everything else reaches plugins only through hooks. The CLI
    # (ctxengine_cli) is an application of the kernel: only the `python -m ctxengine` entry
    # point runs it, and no module imports that one.
    offenders = []
    for path in CORE.rglob("*.py"):
        if path == CORE / "__main__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("ctxengine_")]
    assert offenders == []


def test_every_sdk_name_resolves_and_private_modules_are_underscored() -> None:
    for name in ctxengine.__all__:
        assert getattr(ctxengine, name) is not None, name
    for name in ctxengine.messages.__all__:
        assert getattr(ctxengine.messages, name) is not None, name
    for name in ctxengine.coordination.__all__:
        assert getattr(ctxengine.coordination, name) is not None, name
    public = {p.stem for p in CORE.iterdir() if not p.name.startswith("_")}
    assert public == {"coordination", "hookspecs", "messages", "testing", "py"}, public


def test_the_type_checkers_import_block_repeats_the_sdk_table() -> None:
    # ``_SDK`` gives ``__all__`` and the lazy imports; type checkers read the imports under
    # TYPE_CHECKING instead, so the two must name the same things.
    tree = ast.parse((CORE / "__init__.py").read_text(encoding="utf-8"))
    (block,) = [node for node in tree.body if _guarded_by_type_checking(node)]
    imported = {
        (node.module, alias.name, alias.asname)
        for node in ast.walk(block)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    table = ctxengine._SDK
    assert imported == {(module, name, name) for module, names in table.items() for name in names}
    assert sorted(ctxengine.__all__) == sorted({*ctxengine._LAZY, "__version__", "hookimpl"})


def test_no_name_is_exported_twice() -> None:
    # The message types live in ``ctxengine``; ``ctxengine.messages`` holds the functions on them.
    assert set(ctxengine.__all__) & set(ctxengine.messages.__all__) == set()


def _module_name(path: Path, base: Path = CORE.parent) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(
    base: Path = CORE.parent, packages: Sequence[Path] = (CORE,)
) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports, lazily (inside a function) too; imports
    under ``if TYPE_CHECKING:`` do not count. Module names are relative to ``base``."""
    modules = {_module_name(p, base): p for p in python_files(*packages)}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for _, module, imported in imports(path, type_checking=False):
            target = module
            if imported is not None and f"{module}.{imported}" in modules:
                target = f"{module}.{imported}"  # `from ctxengine import hookspecs`
            if target in modules and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_kernel_has_no_import_cycle() -> None:
    graph = import_graph()
    # The SDK facade only re-exports; nothing inside the kernel may import it back.
    importers = sorted(m for m, deps in graph.items() if "ctxengine" in deps and m != "ctxengine")
    assert [m for m in importers if not m.startswith("ctxengine.testing")] == []
    assert cycles(graph) == []


@pytest.mark.parametrize(
    ("base", "package"),
    [(base, package) for base, packages in PLUGIN_SOURCES for package in packages],
    ids=lambda value: value.name,
)
def test_no_plugin_or_package_has_an_import_cycle(base: Path, package: Path) -> None:
    assert cycles(import_graph(base, [package])) == []


def test_cycle_detection_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_session_does_not_depend_on_the_kernel() -> None:
    graph = import_graph()
    assert "ctxengine._kernel.kernel" not in graph["ctxengine._kernel.session"]
    assert "ctxengine._kernel.session" not in graph["ctxengine._kernel.hygiene"]


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_kernel_runs_without_importing_the_cli(isolated_home: Path) -> None:
    # Every kernel module, the `python -m ctxengine` entry point included (its import of the CLI
    # runs only as __main__), and a kernel at work.
    out = run_python(
        """
        import importlib, pathlib, sys, ctxengine
        core = pathlib.Path(ctxengine.__file__).parent
        for path in sorted(core.rglob("*.py")):
            parts = list(path.relative_to(core.parent).with_suffix("").parts)
            importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        ctxengine.load().session("s").prepare({"model": "m", "messages": []})
        print(sorted(m for m in sys.modules if m.startswith("ctxengine_cli")))
        """
    )
    assert out == "[]"


def test_load_with_the_compressor_selected_does_not_import_lcm(isolated_home: Path) -> None:
    out = run_python(
        """
        import sys, ctxengine
        from ctxengine.testing import samples
        kernel = ctxengine.load({"auxiliary": {"compression": {"provider": "extractive"}}})
        system, messages = samples.conversation("openai")
        result = kernel.session("s").compress(messages, system, force=True)
        print(result.status, "ctxengine_lcm" in sys.modules, kernel.plugin_names)
        """
    )
    assert out == "compacted False ['compressor', 'system_and_3', 'hygiene']"


def test_lcm_is_imported_only_when_selected(isolated_home: Path) -> None:
    out = run_python(
        """
        import sys, ctxengine
        kernel = ctxengine.load({"context": {"engine": "lcm"}})
        print(kernel.engine, "ctxengine_lcm" in sys.modules, "ctxengine_compressor" in sys.modules)
        """
    )
    assert out == "lcm True False"


def test_import_ctxengine_stays_light() -> None:
    out = run_python(
        """
        import sys, ctxengine
        heavy = ("anthropic", "openai", "tiktoken", "yaml", "ctxengine_compressor")
        print([m for m in heavy if m in sys.modules])
        """
    )
    assert out == "[]"


def test_builtins_load_without_any_entry_point_metadata(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib_metadata

    # A stale or broken install: no entry points at all. The built-ins are imported by name.
    monkeypatch.setattr(importlib_metadata, "entry_points", lambda **kw: [])
    kernel = ctxengine.load()
    assert kernel.plugin_names == ["compressor", "system_and_3", "hygiene"]
    assert kernel.engine_entry.source == "builtin"
    with pytest.warns(EngineNotFoundWarning):
        fallback = ctxengine.load({"context": {"engine": "lcm"}})
    assert fallback.engine == "compressor"


def test_sdk_names_are_documented() -> None:
    sdk = (ROOT / "docs" / "sdk.md").read_text(encoding="utf-8")
    missing = [n for n in ctxengine.__all__ if f"`{n}`" not in sdk]
    missing += [n for n in ctxengine.messages.__all__ if f"`{n}`" not in sdk]
    missing += [n for n in ctxengine.coordination.__all__ if f"`{n}`" not in sdk]
    assert missing == []


def test_every_private_module_imports() -> None:
    for path in CORE.rglob("*.py"):
        name = _module_name(path)
        if name.endswith("__main__"):
            continue
        importlib.import_module(name)
