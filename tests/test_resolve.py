"""Engine discovery and selection: directory -> registry -> builtin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ctxengine
from ctxengine._kernel import resolve as resolve_module
from ctxengine._kernel.kernel import EngineNotFoundError, EngineNotFoundWarning
from ctxengine._kernel.resolve import discover, register_engine
from ctxengine.testing import samples
from tests.plugin_fixtures import install_fake_distribution, write_directory_plugin

ENGINE_BODY = """
from ctxengine import hookimpl
from ctxengine import CompressResult

CALLS = []

@hookimpl
def compress(ctx, conversation, stage, force, focus):
    CALLS.append(ctx.session_id)
    return CompressResult.unchanged(
        "noop", "{label} engine never compacts", conversation, engine=ctx.engine, tokens=0
    )

@hookimpl
def should_compress(ctx, prompt_tokens):
    CALLS.append("should")
    return False
"""


def engine_body(label: str) -> str:
    return ENGINE_BODY.replace("{label}", label)


def test_builtin_compressor_is_listed_as_builtin(isolated_home: Path) -> None:
    entry = discover(isolated_home).winner("compressor")
    assert entry is not None
    assert entry.source == "builtin"
    assert entry.kind == "engine"
    assert entry.distribution == "ctxengine"
    assert entry.error is None


def test_builtin_cache_strategy_and_hygiene_kinds(isolated_home: Path) -> None:
    catalog = discover(isolated_home)
    strategy = catalog.winner("system_and_3")
    hygiene = catalog.winner("hygiene")
    assert strategy is not None and strategy.kind == "cache_strategy"
    assert hygiene is not None and hygiene.kind == "extension"


def test_lcm_comes_from_the_registry_when_installed(isolated_home: Path) -> None:
    entry = discover(isolated_home).winner("lcm")
    assert entry is not None, "ctxengine-lcm is part of the workspace and must be installed"
    assert entry.source == "registry"
    assert entry.distribution == "ctxengine-lcm"
    assert entry.version


def test_directory_plugin_wins_over_the_registry(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_distribution(
        tmp_path / "site",
        monkeypatch,
        dist="acme-engine",
        version="1.2.3",
        entry_points={"acme": "acme_engine"},
        modules={"acme_engine": engine_body("registry")},
    )
    write_directory_plugin(isolated_home / "plugins" / "context_engine", "acme", engine_body("dir"))
    catalog = discover(isolated_home)
    winner = catalog.winner("acme")
    assert winner is not None
    assert winner.source == "directory"
    shadowed = [e for e in catalog.load_all() if e.name == "acme" and e.source == "registry"]
    assert len(shadowed) == 1
    assert shadowed[0].shadowed_by is not None
    assert shadowed[0].shadowed_by.startswith("directory ")

    kernel = ctxengine.load({"context": {"engine": "acme"}})
    _, messages = samples.short_conversation("openai")
    result = kernel.session("s").compress(messages)
    assert result.reason == "dir engine never compacts"


def test_plugin_dirs_from_config_are_searched(isolated_home: Path, tmp_path: Path) -> None:
    extra = tmp_path / "my-plugins"
    write_directory_plugin(extra, "mine", engine_body("mine"))
    kernel = ctxengine.load({"context": {"engine": "mine", "plugin_dirs": [str(extra)]}})
    assert kernel.engine == "mine"
    assert kernel.engine_entry.source == "directory"


def test_broken_distribution_is_listed_with_its_error_and_the_rest_works(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_distribution(
        tmp_path / "site",
        monkeypatch,
        dist="broken-engine",
        version="0.0.1",
        entry_points={"broken": "broken_engine"},
        modules={"broken_engine": "raise RuntimeError('boom at import')\n"},
    )
    catalog = discover(isolated_home)
    broken = catalog.winner("broken")
    assert broken is not None
    assert broken.error == "RuntimeError: boom at import"
    assert broken.plugin is None
    assert broken.distribution == "broken-engine"
    # Everything else still loads and works.
    kernel = ctxengine.load()
    assert kernel.engine == "compressor"
    assert kernel.notices == []


def test_broken_directory_plugin_is_isolated(isolated_home: Path) -> None:
    root = isolated_home / "plugins" / "context_engine"
    write_directory_plugin(root, "crashy", "import this_module_does_not_exist\n")
    write_directory_plugin(root, "fine", engine_body("fine"))
    catalog = discover(isolated_home)
    crashy = catalog.winner("crashy")
    assert crashy is not None
    assert crashy.error == "ModuleNotFoundError: No module named 'this_module_does_not_exist'"
    fine = catalog.winner("fine")
    assert fine is not None and fine.ok


def test_unknown_kind_is_a_load_error(isolated_home: Path) -> None:
    root = isolated_home / "plugins" / "context_engine"
    write_directory_plugin(root, "odd", "CTXENGINE_KIND = 'teapot'\n")
    entry = discover(isolated_home).winner("odd")
    assert entry is not None
    assert entry.error == (
        "CTXENGINE_KIND must be one of engine, cache_strategy, extension, not 'teapot'"
    )


def test_unknown_engine_warns_and_falls_back(isolated_home: Path) -> None:
    with pytest.warns(EngineNotFoundWarning) as caught:
        kernel = ctxengine.load({"context": {"engine": "nosuch"}})
    message = str(caught[0].message)
    assert message.startswith("context engine 'nosuch' was not found. Searched: directory ")
    assert str(isolated_home / "plugins" / "context_engine") in message
    assert "entry points of groups 'ctxengine.engines'" in message
    assert "To install it: pip install ctxengine-nosuch" in message
    assert message.endswith("Using the built-in 'compressor' engine instead.")
    assert kernel.engine == "compressor"
    assert kernel.notices == [message]


def test_unknown_lcm_like_engine_gets_the_extra_install_hint(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxengine._kernel import resolve

    installed = resolve._entry_point_candidates
    # As if ctxengine-lcm were not installed.
    monkeypatch.setattr(
        resolve,
        "_entry_point_candidates",
        lambda: [entry for entry in installed() if entry.name != "lcm"],
    )
    with pytest.warns(EngineNotFoundWarning, match=re.escape("pip install 'ctxengine[lcm]'")):
        ctxengine.load({"context": {"engine": "lcm"}})


def test_unknown_engine_is_an_error_when_strict(isolated_home: Path) -> None:
    with pytest.raises(EngineNotFoundError, match="context engine 'nosuch' was not found"):
        ctxengine.load({"context": {"engine": "nosuch", "strict": True}})


def test_engine_that_failed_to_load_is_reported_on_selection(isolated_home: Path) -> None:
    write_directory_plugin(
        isolated_home / "plugins" / "context_engine", "crashy", "raise ValueError('bad')\n"
    )
    with pytest.raises(EngineNotFoundError) as raised:
        ctxengine.load({"context": {"engine": "crashy", "strict": True}})
    assert "failed to load from directory" in str(raised.value)
    assert "ValueError: bad" in str(raised.value)


def test_register_engine_is_selectable_but_never_active_by_itself(isolated_home: Path) -> None:
    import types

    module = types.ModuleType("runtime_engine")
    exec(engine_body("runtime"), module.__dict__)  # a test engine built in memory
    with register_engine("runtime", module):
        default = ctxengine.load()
        _, messages = samples.short_conversation("openai")
        default.session("s").compress(messages, force=True)
        assert module.CALLS == []  # installed but not selected: never called
        chosen = ctxengine.load({"context": {"engine": "runtime"}})
        assert chosen.engine_entry.source == "registry"
        assert chosen.engine_entry.location == "register_engine()"
        chosen.session("s1").compress(messages)
        assert module.CALLS == ["s1"]


def test_register_engine_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="the engine name must be a non-empty string"):
        register_engine(" ", object())
    with pytest.raises(ValueError, match="kind must be one of engine, cache_strategy, extension"):
        register_engine("x", object(), kind="nope")  # type: ignore[arg-type]


def test_non_engine_plugin_cannot_be_selected_as_engine(isolated_home: Path) -> None:
    with pytest.raises(
        EngineNotFoundError, match="'hygiene' is a plugin of kind 'extension', not a context engine"
    ):
        ctxengine.load({"context": {"engine": "hygiene", "strict": True}})


def test_a_plugin_with_a_bad_hook_is_isolated_and_listed(isolated_home: Path) -> None:
    root = isolated_home / "plugins" / "context_engine"
    write_directory_plugin(
        root,
        "badext",
        """
        from ctxengine import hookimpl
        CTXENGINE_KIND = "extension"

        @hookimpl
        def update_usage(ctx, usage, bogus_arg):
            pass
        """,
    )
    write_directory_plugin(
        root,
        "typo",
        """
        from ctxengine import hookimpl

        @hookimpl
        def should_compres(ctx):
            return True
        """,
    )
    catalog = discover(isolated_home)
    badext, typo = catalog.winner("badext"), catalog.winner("typo")
    assert badext is not None and badext.error is not None
    assert badext.error.startswith("PluginValidationError: ")
    assert "bogus_arg" in badext.error
    assert typo is not None and typo.error is not None
    assert "should_compres" in typo.error
    # The host still loads, with the built-in engine; selecting the broken one warns.
    assert ctxengine.load().engine == "compressor"
    with pytest.warns(EngineNotFoundWarning, match="failed to load from directory"):
        assert ctxengine.load({"context": {"engine": "typo"}}).engine == "compressor"


def test_closing_a_registration_forgets_only_its_own_plugin() -> None:
    first = register_engine("runtime", object())
    with register_engine("runtime", replacement := object()):
        first.close()  # replaced since: the newer registration stays
        assert resolve_module._runtime["runtime"][0] is replacement
    assert "runtime" not in resolve_module._runtime
    first.close()  # closing twice is harmless
