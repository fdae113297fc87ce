"""Meta-tests that keep the hookspecs, the README and the tests in step."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from ctxengine import hookspecs

ROOT = Path(__file__).resolve().parents[1]
DISPATCH = {
    "first result": "First result:",
    "broadcast": "Broadcast:",
    "collected": "Collected:",
}


def specs() -> dict[str, object]:
    return {
        name: function
        for name, function in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(function, "ctxengine_spec")
    }


def test_the_five_core_hooks_exist() -> None:
    assert {"should_compress", "compress", "expose_tools", "update_usage", "cache_strategy"} <= set(
        specs()
    )


def test_every_hookspec_docstring_starts_with_its_dispatch_rule() -> None:
    for name, function in specs().items():
        doc = inspect.getdoc(function) or ""
        assert doc.startswith(tuple(DISPATCH.values())), name
        firstresult = function.ctxengine_spec["firstresult"]  # type: ignore[attr-defined]
        assert doc.startswith("First result:") == firstresult, name


def test_every_hookspec_is_documented_with_its_signature() -> None:
    for page in ("README.md", "docs/architecture.md"):
        check_documented((ROOT / page).read_text(encoding="utf-8"), page)


def check_documented(readme: str, page: str) -> None:
    for name, function in specs().items():
        params = ", ".join(inspect.signature(function).parameters)  # type: ignore[arg-type]
        assert f"`{name}({params})" in readme, f"{page} lacks the signature of {name}"
        doc = inspect.getdoc(function) or ""
        row = re.search(rf"^\| `{name}` \| ([a-z ]+) \|", readme, re.MULTILINE)
        assert row is not None, name
        assert doc.startswith(DISPATCH[row.group(1)]), name


def test_every_hookspec_has_a_test_named_after_it() -> None:
    sources = "\n".join(
        path.read_text() for path in ROOT.glob("**/tests/**/test_*.py") if ".nox" not in path.parts
    )
    for name in specs():
        assert re.search(rf"def test_\w*{name}\w*\(", sources), f"no test named after {name}"


def test_public_names_are_exported() -> None:
    import ctxengine

    for name in ctxengine.__all__:
        assert getattr(ctxengine, name) is not None, name


def test_the_test_plugins_implement_every_hookspec() -> None:
    from tests.test_every_hook import TEST_PLUGINS, Wrappers

    implemented = {
        name
        for plugin in (*TEST_PLUGINS, Wrappers)
        for name, member in vars(plugin).items()
        if hasattr(member, "ctxengine_impl")
    }
    assert set(specs()) - implemented == set()
