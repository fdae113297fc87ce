"""A third-party engine written only against the SDK, installed as a distribution.

The engine is the example in ``examples/third_party_engine`` (distribution ``ctxengine-trim``,
entry point ``trim`` in group ``ctxengine.engines``). Each test installs it the way pip lays a
distribution out — its module plus a ``.dist-info`` folder with METADATA and entry_points.txt on
``sys.path`` — and drives it through ``ctxengine.load``, the CLI and the conformance suite.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxengine
from ctxengine.testing import samples
from ctxengine.testing.conformance import EngineConformance
from ctxengine_cli.main import main

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "third_party_engine"


def install_trim(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = site / "ctxengine_trim"
    package.mkdir(parents=True)
    source = (EXAMPLE / "ctxengine_trim" / "__init__.py").read_text(encoding="utf-8")
    (package / "__init__.py").write_text(source, encoding="utf-8")
    info = site / "ctxengine_trim-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ctxengine-trim\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[ctxengine.engines]\ntrim = ctxengine_trim\n")
    monkeypatch.syspath_prepend(str(site))


@pytest.fixture
def trim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    install_trim(tmp_path / "site", monkeypatch)
    yield
    for name in [m for m in sys.modules if m.startswith("ctxengine_trim")]:
        del sys.modules[name]


def test_the_example_imports_only_the_sdk() -> None:
    from tests.test_sdk import kernel_imports, sdk_problem

    path = EXAMPLE / "ctxengine_trim" / "__init__.py"
    assert [sdk_problem(m, n) for _, m, n in kernel_imports(path) if sdk_problem(m, n)] == []


def test_it_is_selected_validated_and_compacts(trim: None) -> None:
    kernel = ctxengine.load({"context": {"engine": "trim"}, "engines": {"trim": {"keep_last": 4}}})
    assert kernel.engine_entry.distribution == "ctxengine-trim"
    assert kernel.loaded.owners["engines.trim.keep_last"] == "trim"
    system, messages = samples.conversation("anthropic")
    result = kernel.session("s").compress(messages, system, force=True)
    assert result.status == "compacted", result.reason
    assert [t.tool.name for t in kernel.session("s").tools()] == ["trim_dropped"]


def test_a_typo_in_its_section_fails_the_load(trim: None) -> None:
    with pytest.raises(ctxengine.ConfigError) as error:
        ctxengine.load({"context": {"engine": "trim"}, "engines": {"trim": {"keep_lst": 4}}})
    assert "engines.trim.keep_lst: unknown key; did you mean 'keep_last'?" in str(error.value)
    with pytest.raises(ctxengine.ConfigError, match=r"engines.trim.threshold = 0.99: must be"):
        ctxengine.load({"context": {"engine": "trim"}, "engines": {"trim": {"threshold": 0.99}}})
    # Not selected: the same section is unused, not an error.
    kernel = ctxengine.load({"engines": {"trim": {"keep_lst": 4}}})
    assert [u.key for u in kernel.loaded.unused] == ["engines.trim.keep_lst"]


def test_hygiene_is_checked_against_its_trigger(trim: None) -> None:
    with pytest.raises(ctxengine.ConfigError) as error:
        ctxengine.load({"context": {"engine": "trim"}, "engines": {"trim": {"threshold": 0.9}}})
    assert str(error.value) == (
        "config error in <mapping>: engines.trim.threshold = 0.9: must be <= "
        "gateways.hygiene.threshold (0.85, the default); raise "
        "gateways.hygiene.threshold as well"
    )


def test_engines_and_config_list_it(
    trim: None, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["engines"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["trim", "engine", "registry", "ctxengine-trim==0.1.0", "available"] in rows
    (isolated_home / "config.yaml").write_text("context:\n  engine: trim\n")
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    assert lines["engines.trim.threshold"].split()[-2:] == ["default;", "trim"]
    assert lines["engines.trim.keep_last"].split()[-2:] == ["default;", "trim"]


class TestTrimConformance(EngineConformance):
    engine = "trim"

    @pytest.fixture(autouse=True)
    def _installed(self, trim: None) -> None:
        """The distribution is on sys.path for every check."""
