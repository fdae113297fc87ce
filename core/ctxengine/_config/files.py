"""Finding and reading ``config.yaml``: the home folder, the lookup order, YAML errors.

Lookup: an explicit path, else ``$CTXENGINE_CONFIG``, else ``<home>/config.yaml`` (home =
``$CTXENGINE_HOME`` or ``~/.ctxengine``), else defaults only. A named file must exist; a missing
home file or an empty file means defaults. ``yaml`` is imported only when a file is read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxengine._config.fields import ConfigError, ConfigProblem, format_value

TOP_SECTIONS = (
    "context",
    "model",
    "auxiliary",
    "prompt_caching",
    "context_editing",
    "coordination",
    "models",
    "engines",
    "strategies",
    "gateways",
    "compression",
)
"""The sections a config file may have, in documentation order (``compression`` holds only
deprecated former paths)."""


def ctxengine_home(env: Mapping[str, str] | None = None) -> Path:
    """``$CTXENGINE_HOME`` (``~`` expanded) when set and non-empty, else ``~/.ctxengine``."""
    env = os.environ if env is None else env
    home = env.get("CTXENGINE_HOME", "").strip()
    return Path(home).expanduser() if home else Path("~/.ctxengine").expanduser()


def read_yaml(path: Path) -> tuple[Mapping[Any, Any], list[ConfigProblem]]:
    import yaml

    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return {}, [ConfigProblem("", None, "file is not valid UTF-8 text", source)]
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        return {}, [ConfigProblem("", None, f"cannot read file: {reason}", source)]
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = exc.problem or exc.context or "syntax error"
        return {}, [ConfigProblem("", None, f"invalid YAML{where}: {what}", source)]
    except yaml.YAMLError as exc:
        return {}, [ConfigProblem("", None, f"invalid YAML: {exc}", source)]
    if data is None:  # empty file, or only comments
        return {}, []
    if not isinstance(data, Mapping):
        text = (
            f"the top level must be a mapping of sections ({', '.join(TOP_SECTIONS)}), "
            f"not {type(data).__name__} {format_value(data)}"
        )
        return {}, [ConfigProblem("", data, text, source)]
    return data, []


def find_file(path: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
    """The config file to read, or ``None`` for defaults; a named but missing file raises."""
    if path is not None:
        origin = "path given explicitly"
        candidate = Path(os.fspath(path)).expanduser()
    elif env.get("CTXENGINE_CONFIG", "").strip():
        origin = "path named by $CTXENGINE_CONFIG"
        candidate = Path(env["CTXENGINE_CONFIG"].strip()).expanduser()
    else:
        home_file = ctxengine_home(env) / "config.yaml"
        if not home_file.exists():
            return None
        origin = "default location <home>/config.yaml"
        candidate = home_file
    candidate = candidate.absolute()
    if not candidate.exists():
        problem = f"config file does not exist ({origin})"
    elif candidate.is_dir():
        problem = f"config path is a directory, not a file ({origin})"
    else:
        return candidate
    raise ConfigError([ConfigProblem("", str(candidate), problem, str(candidate))])
