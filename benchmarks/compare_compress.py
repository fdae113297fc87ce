"""Are two versions' compactions identical? For changes that should make ``compress`` faster
without changing what it returns.

``dump OUT`` compacts every bundled session (``tests/data/transcripts``, both formats, every
session, not only the long ones) with the local ``extractive`` digest (no network), under the
default model window and windows of 32K, 16K and 8K tokens, seven ways per session and window:

- ``cold``: forced, on a fresh session;
- ``warm``: forced, on a session that counted the conversation first;
- ``unforced``: not forced, on a fresh session;
- ``twice``: forced, then the result compacted again by the same session (the second result is
  recorded: it reads back the first summary and the ledger the session kept);
- ``again_new_dicts``: a warm session compacts, then compacts new dicts equal to the input (the
  memo finds them by content);
- ``chain_cold_1`` .. ``chain_cold_3`` and ``chain_warm_1`` .. ``chain_warm_3``: the compactions
  in a row of ``bench_compressor.py`` (the conversation without its last six turns, then each
  result with the next three turns appended), on a session that knows only what it returned
  (``cold``) or that counted each input first (``warm``); only for sessions with enough turns.

Each result is one JSON line: the case, every field of the result but its duration, and SHA-256
digests of the compacted messages and system prompt. The input is checked to be unchanged.

``diff A B`` compares two dumps line by line and prints how many results were compared and
which differ (exit status 1 when any does, or when the dumps do not hold the same cases).

Run ``dump`` once with the python of the reference checkout (its ``.nox/tests`` environment)
and once with the candidate's, then ``diff``::

    (cd ../main && .nox/tests/bin/python ../wt/benchmarks/compare_compress.py dump /tmp/ref.jsonl)
    .nox/tests/bin/python benchmarks/compare_compress.py dump /tmp/new.jsonl
    python benchmarks/compare_compress.py diff /tmp/ref.jsonl /tmp/new.jsonl
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

if not __package__:  # run as a script: make the repository's benchmarks importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if TYPE_CHECKING:
    import ctxengine
    from ctxengine import Format

WINDOWS: tuple[int | None, ...] = (None, 32_768, 16_384, 8_192)
"""Model windows compared (``None``: the model table's, 200K for the model below)."""


def _sessions() -> Iterator[tuple[str, Format, Any, list[dict[str, Any]]]]:
    from ctxengine.testing.transcripts import transcript_files

    for path in transcript_files():
        fmt: Format = "anthropic" if path.name.endswith(".anthropic.jsonl") else "openai"
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle):
                row = json.loads(line)
                yield f"{path.name}:{number}", fmt, row.get("system"), row["messages"]


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value: object) -> object:
    """Attrs records as dicts (without timings and the conversation), recursively."""
    if attrs.has(type(value)):
        fields = attrs.asdict(value, recurse=False)  # type: ignore[arg-type]
        return {
            key: _plain(item)
            for key, item in fields.items()
            if key not in ("duration_s", "conversation")
        }
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _record(case: list[object], result: Any) -> str:
    fields = _plain(result)
    assert isinstance(fields, dict)
    fields["messages_sha"] = _digest(result.conversation.messages)
    fields["system_sha"] = _digest(result.conversation.system)
    fields["format"] = result.conversation.format
    return json.dumps({"case": case, **fields}, sort_keys=True, ensure_ascii=False)


def dump(out_path: Path) -> int:
    """Write one line per result to ``out_path``; returns how many."""
    import ctxengine

    ids = itertools.count()
    written = 0
    with out_path.open("w", encoding="utf-8") as out:
        for window in WINDOWS:
            model: dict[str, Any] = {"name": "claude-sonnet-4-6"}
            if window is not None:
                model["context_length"] = window
            kernel = ctxengine.load(
                {"model": model, "auxiliary": {"compression": {"provider": "extractive"}}}
            )
            for name, fmt, system, messages in _sessions():
                snapshot = json.dumps(messages)
                opened = [f"compare-{next(ids)}" for _ in range(7)]
                results = _compact(kernel, opened, fmt, system, messages)
                if json.dumps(messages) != snapshot:
                    raise SystemExit(f"{name}: compress changed its input")
                for mode, result in results.items():
                    out.write(_record([name, window, mode], result) + "\n")
                    written += 1
                for old in opened:
                    kernel.close_session(old)
    return written


def _compact(
    kernel: ctxengine.Kernel,
    ids: list[str],
    fmt: Format,
    system: Any,
    messages: list[dict[str, Any]],
) -> dict[str, ctxengine.CompressResult]:
    """The results of one session and window (see the module docstring), each way on a new
    session named by the next of ``ids``."""
    # Imported here: ``diff`` runs without ctxengine installed.
    from benchmarks.bench_compressor import CHAIN_TURNS, chain_parts, turn_starts
    from benchmarks.harness import BenchSession

    names = iter(ids)
    results = {
        "cold": kernel.session(next(names)).compress(messages, system, force=True, format=fmt)
    }
    warm = kernel.session(next(names))
    warm.ctx.tokens.count(messages, system)
    results["warm"] = warm.compress(messages, system, force=True, format=fmt)
    results["unforced"] = kernel.session(next(names)).compress(messages, system, format=fmt)
    twice = kernel.session(next(names))
    first = twice.compress(messages, system, force=True, format=fmt)
    results["twice"] = twice.compress(
        first.messages, first.conversation.system, force=True, format=fmt
    )
    again = kernel.session(next(names))
    again.ctx.tokens.count(messages, system)
    again.compress(messages, system, force=True, format=fmt)
    equal = json.loads(json.dumps(messages))
    results["again_new_dicts"] = again.compress(equal, system, force=True, format=fmt)
    if len(turn_starts(messages)) > 2 * CHAIN_TURNS:
        parts = chain_parts(BenchSession("compare", fmt, system, messages))
        for mode in ("cold", "warm"):
            chained = kernel.session(next(names))
            conversation: tuple[list[dict[str, Any]], Any] = (parts[0], system)
            for index, part in enumerate(parts):
                if index:
                    previous = results[f"chain_{mode}_{index}"]
                    conversation = ([*previous.messages, *part], previous.conversation.system)
                if mode == "warm":
                    chained.ctx.tokens.count(*conversation)
                results[f"chain_{mode}_{index + 1}"] = chained.compress(
                    *conversation, force=True, format=fmt
                )
    return results


def diff(reference: Path, candidate: Path) -> int:
    """Print the comparison; returns the exit status (0: identical)."""
    old = reference.read_text(encoding="utf-8").splitlines()
    new = candidate.read_text(encoding="utf-8").splitlines()
    cases_old = [json.loads(line)["case"] for line in old]
    cases_new = [json.loads(line)["case"] for line in new]
    if cases_old != cases_new:
        print(f"the dumps hold different cases ({len(old)} and {len(new)} results)")
        return 1
    differing = [case for case, a, b in zip(cases_old, old, new, strict=True) if a != b]
    compacted = sum(json.loads(line)["status"] == "compacted" for line in old)
    print(
        f"{len(old)} results compared ({compacted} compacted, {len(old) - compacted} not): "
        f"{len(differing)} differ"
    )
    for case in differing[:20]:
        print("differs:", case)
    return 1 if differing else 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "dump":
        print(f"{dump(Path(argv[1]))} results written to {argv[1]}")
        return 0
    if len(argv) == 3 and argv[0] == "diff":
        return diff(Path(argv[1]), Path(argv[2]))
    print(__doc__)
    print("usage: compare_compress.py dump OUT | diff REFERENCE CANDIDATE")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
