"""Run every fidelity scenario and print the report (``nox -s fidelity``).

Scenarios, each with the local digest (provider ``extractive``) and with the scripted lossy
model summary (:mod:`.lossy`, served by the local fake API to the real anthropic SDK):

- one forced compaction at 32K, 64K and 200K windows, per fact kind and per agent style;
- three successive compactions of a growing session at 32K: what the third still holds of
  what the first kept;
- lcm: a sample of facts lost from the prompt, searched with ``lcm_grep`` (literal) and
  expanded with ``lcm_expand``;
- the unseen sessions (:mod:`.unseen`), each half separately, at 64K and 32K and three
  successive compactions, scored by the benchmark rules and the independent ones
  (:mod:`.facts_independent`).

Usage: ``python -m benchmarks.fidelity [--quick] [--unseen | --no-unseen] [--json FILE]
[--no-lcm] [--no-model] [--lost N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs
from benchmarks.fidelity.facts import KINDS, Fact, Haystack
from benchmarks.fidelity.facts_independent import INDEPENDENT_RULES
from benchmarks.fidelity.generate import generated_sessions
from benchmarks.fidelity.harness import (
    BENCHMARK_RULES,
    COUNTER,
    Compaction,
    KindRetention,
    RuleSet,
    Session,
    compact_at_window,
    compact_successively,
    describe,
    present_anywhere,
    retention,
    span_facts,
    total_of,
)
from benchmarks.fidelity.lcm_recall import RecallReport, measure_recall
from benchmarks.fidelity.lossy import serve
from benchmarks.fidelity.sessions import bundled_sessions
from benchmarks.fidelity.unseen import split, unseen_sessions

from ctxengine_compressor.summary import summary_budget

__all__ = ["FLOORS", "Figures", "main", "measure"]

WINDOWS = (32_000, 64_000, 200_000)
SUCCESSIVE_WINDOW = 32_000
SUCCESSIVE_TIMES = 3
PROVIDERS = ("digest", "model")

FLOORS: dict[str, dict[str, float]] = {
    "64K": {"path": 0.98, "command": 0.98, "error": 0.90, "ask": 1.0, "identifier": 0.90},
    "32K": dict.fromkeys(KINDS, 0.85),
    "successive": dict.fromkeys(KINDS, 0.90),
}
"""The promised floors: one compaction at 64K and at 32K, and three successive compactions."""

Table = dict[str, KindRetention]


@attrs.frozen
class SizeFigures:
    """Summary size of a scenario: median and aggregate summary/span token ratio, and the
    largest summary relative to the compressor's summary budget for its span, in tokens
    (``worst_of_budget``) and in the compressor's own estimate, characters / 4
    (``worst_estimated``)."""

    compactions: int
    median_ratio: float | None
    total_ratio: float | None
    worst_of_budget: float | None
    worst_estimated: float | None = None


@attrs.frozen
class Successive:
    """Three successive compactions: of the facts the first kept (``kept_first``), how many the
    conversation still holds after the third (``table``), and the resolved errors that were
    let go with the summary saying so (``excused``)."""

    sessions: int
    table: Table
    excused: int
    by_style: dict[str, Table] = attrs.field(factory=dict)
    bundled: Table = attrs.field(factory=dict)


@attrs.frozen
class Figures:
    """Everything the report prints (see :func:`measure`)."""

    single: dict[tuple[str, int], Table]
    by_style: dict[tuple[str, int, str], Table]
    sizes: dict[tuple[str, int], SizeFigures]
    model_alone: dict[int, Table]
    successive: dict[str, Successive]
    recall: RecallReport | None
    sessions: dict[str, int]


def _label(window: int) -> str:
    return f"{window // 1000}K"


def _sizes(compactions: Sequence[Compaction], window: int) -> SizeFigures:
    done = [c for c in compactions if c.status == "compacted" and c.span_tokens]
    if not done:
        return SizeFigures(0, None, None, None)
    ratios = [c.summary_tokens / c.span_tokens for c in done]
    limit = min(int(window * 0.05), 12_000)
    worst = max(c.summary_tokens / summary_budget(c.span_tokens, limit) for c in done)
    estimated = max(len(c.summary) / 4 / summary_budget(c.span_tokens, limit) for c in done)
    total = sum(c.summary_tokens for c in done) / sum(c.span_tokens for c in done)
    return SizeFigures(len(done), statistics.median(ratios), total, worst, estimated)


def _run_single(
    sessions: Sequence[Session], window: int, provider: str
) -> tuple[list[Compaction], list[str | None]]:
    """One compaction per session at ``window``, and for each the scripted model's own reply
    (``None`` with the local digest, or when the model was not asked)."""
    if provider == "digest":
        done = [compact_at_window(s, window) for s in sessions]
        return done, [None] * len(done)
    done = []
    replies: list[str | None] = []
    with serve() as (model, summary_provider):
        for session in sessions:
            asked = len(model.replies)
            compaction = compact_at_window(
                session, window, provider=summary_provider, replier=model.for_session(session)
            )
            done.append(compaction)
            fresh = compaction.status == "compacted" and len(model.replies) > asked
            replies.append(model.replies[-1] if fresh else None)
    return done, replies


def _model_alone(
    done: Sequence[Compaction], replies: Sequence[str | None], rules: RuleSet = BENCHMARK_RULES
) -> Table:
    """Retention of the scripted model's replies before the compressor added anything."""
    tables = [
        retention(attrs.evolve(c, summary=reply), span_facts(c, rules), rules)
        for c, reply in zip(done, replies, strict=True)
        if reply is not None
    ]
    return total_of(tables)


def _run_successive(sessions: Sequence[Session], provider: str) -> list[list[Compaction]]:
    def run(session: Session, **kw: object) -> list[Compaction]:
        return compact_successively(session, SUCCESSIVE_WINDOW, SUCCESSIVE_TIMES, **kw)  # type: ignore[arg-type]

    if provider == "digest":
        return [run(s) for s in sessions]
    runs = []
    with serve() as (model, summary_provider):
        for session in sessions:
            runs.append(run(session, provider=summary_provider, replier=model.for_session(session)))
    return runs


def _successive(
    runs: Sequence[Sequence[Compaction]], rules: RuleSet = BENCHMARK_RULES
) -> Successive:
    """Of the facts the first compaction of each run kept, what its last still holds."""
    tables: list[Table] = []
    styles: dict[str, list[Table]] = defaultdict(list)
    bundled: list[Table] = []
    excused = 0
    measured = 0
    for steps in runs:
        if len(steps) < SUCCESSIVE_TIMES:
            continue
        measured += 1
        first, last = steps[0], steps[-1]
        kept_first = [
            f for f in span_facts(first, rules) if rules.contains(Haystack.of(first.summary), f)
        ]
        later = {(f.kind, f.key): f for f in last.session.facts(last.upto, rules)}
        says_resolved = "resolved" in last.summary.lower()
        facts: list[Fact] = []
        for fact in kept_first:
            now = later.get((fact.kind, fact.key), fact)
            if (
                now.kind == "error"
                and now.resolved_at is not None
                and says_resolved
                and not rules.contains(Haystack.of(last.summary + "\n" + last.kept), now)
            ):
                excused += 1
                continue
            facts.append(now)
        table = present_anywhere(last, facts, rules)
        tables.append(table)
        styles[last.session.style].append(table)
        if not last.session.name.startswith(("generated", "unseen")):
            bundled.append(table)
    return Successive(
        measured,
        total_of(tables),
        excused,
        {style: total_of(ts) for style, ts in styles.items()},
        total_of(bundled),
    )


def measure(
    sessions: Sequence[Session],
    *,
    windows: Iterable[int] = WINDOWS,
    providers: Iterable[str] = PROVIDERS,
    successive: bool = True,
    recall_sessions: Sequence[Session] = (),
    log: bool = False,
) -> Figures:
    """Run the scenarios over ``sessions`` (lcm recall over ``recall_sessions`` when given)."""
    single: dict[tuple[str, int], Table] = {}
    by_style: dict[tuple[str, int, str], Table] = {}
    sizes: dict[tuple[str, int], SizeFigures] = {}
    alone: dict[int, Table] = {}
    succ: dict[str, Successive] = {}
    started = time.perf_counter()

    def note(what: str) -> None:
        if log:
            print(f"  [{time.perf_counter() - started:6.1f} s] {what}", file=sys.stderr)

    for provider in providers:
        for window in windows:
            done, replies = _run_single(sessions, window, provider)
            tables: dict[str, list[Table]] = defaultdict(list)
            for c in done:
                if c.status == "compacted":
                    tables[c.session.style].append(retention(c))
            single[(provider, window)] = total_of([t for ts in tables.values() for t in ts])
            for style, ts in tables.items():
                by_style[(provider, window, style)] = total_of(ts)
            sizes[(provider, window)] = _sizes(done, window)
            if provider == "model":
                alone[window] = _model_alone(done, replies)
            note(f"{provider} at {_label(window)}")
        if successive:
            succ[provider] = _successive(_run_successive(sessions, provider))
            note(f"{provider}, {SUCCESSIVE_TIMES} successive compactions")
    recall = measure_recall(recall_sessions) if recall_sessions else None
    if recall_sessions:
        note("lcm recall")
    styles: dict[str, int] = defaultdict(int)
    for s in sessions:
        styles[s.style] += 1
    return Figures(single, by_style, sizes, alone, succ, recall, dict(styles))


# --- unseen sessions -----------------------------------------------------------------------------

RULE_SETS: tuple[RuleSet, ...] = (BENCHMARK_RULES, INDEPENDENT_RULES)
UNSEEN_WINDOWS = (64_000, 32_000)
UNSEEN_FLOORS: dict[str, dict[str, float]] = {
    "64K": FLOORS["64K"],
    "32K": dict.fromkeys(KINDS, 0.90),
    "successive": dict.fromkeys(KINDS, 0.90),
}
"""The floors the held-back half must reach by both rule sets, with either summary: one
compaction at 64K and at 32K; after three compactions, 90 % of what the first kept."""


@attrs.frozen
class UnseenFigures:
    """Figures of the unseen sessions, per half (``tune``, ``held_back``) and per rule set.

    ``single`` is keyed by (half, provider, window, rules), ``alone`` (the scripted model's
    reply alone) by (half, window, rules), ``by_style`` (local digest at 64K) by (half, rules,
    style), ``successive`` by (half, provider, rules); ``sizes`` gives each half's sessions,
    messages and tokens, ``compactions`` the compactions counted per (half, provider, window).
    """

    single: dict[tuple[str, str, int, str], Table]
    alone: dict[tuple[str, int, str], Table]
    by_style: dict[tuple[str, str, str], Table]
    successive: dict[tuple[str, str, str], Successive]
    sizes: dict[str, tuple[int, int, int]]
    compactions: dict[tuple[str, str, int], int]
    resolved_lost: dict[tuple[str, str, int, str], int] = attrs.field(factory=dict)
    """Of the lost errors (keyed like ``single``), how many a later run in the span resolved."""


def measure_unseen(
    halves: dict[str, list[Session]],
    *,
    windows: Iterable[int] = UNSEEN_WINDOWS,
    providers: Iterable[str] = PROVIDERS,
    log: bool = False,
) -> UnseenFigures:
    """Every scenario on each half, each compaction scored by every rule set of
    :data:`RULE_SETS` (the compactions themselves do not depend on the rules)."""
    single: dict[tuple[str, str, int, str], Table] = {}
    alone: dict[tuple[str, int, str], Table] = {}
    by_style: dict[tuple[str, str, str], Table] = {}
    succ: dict[tuple[str, str, str], Successive] = {}
    counts: dict[tuple[str, str, int], int] = {}
    resolved: dict[tuple[str, str, int, str], int] = {}
    started = time.perf_counter()
    for half, sessions in halves.items():
        for provider in providers:
            for window in windows:
                done, replies = _run_single(sessions, window, provider)
                compacted = [c for c in done if c.status == "compacted"]
                counts[(half, provider, window)] = len(compacted)
                for rules in RULE_SETS:
                    tables = [(c.session.style, retention(c, rules=rules)) for c in compacted]
                    key = (half, provider, window, rules.name)
                    single[key] = total_of([t for _, t in tables])
                    resolved[key] = sum(
                        1
                        for c, (_, t) in zip(compacted, tables, strict=True)
                        for f in t["error"].lost
                        if f.resolved_at is not None and f.resolved_at < c.upto
                    )
                    if provider == "model":
                        alone[(half, window, rules.name)] = _model_alone(done, replies, rules)
                    if provider == "digest" and window == 64_000:
                        for style in {s for s, _ in tables}:
                            parts = [t for s, t in tables if s == style]
                            by_style[(half, rules.name, style)] = total_of(parts)
            runs = _run_successive(sessions, provider)
            for rules in RULE_SETS:
                succ[(half, provider, rules.name)] = _successive(runs, rules)
            if log:
                elapsed = time.perf_counter() - started
                print(f"  [{elapsed:6.1f} s] unseen {half}, {provider}", file=sys.stderr)
    sizes = {
        half: (
            len(ss),
            sum(len(s.messages) for s in ss),
            sum(COUNTER.count_message(m) for s in ss for m in s.messages),
        )
        for half, ss in halves.items()
    }
    return UnseenFigures(single, alone, by_style, succ, sizes, counts, resolved)


# --- report --------------------------------------------------------------------------------------


def _cell(value: KindRetention | None) -> str:
    if value is None or value.total == 0:
        return "-"
    return f"{describe(value.ratio)} ({value.kept}/{value.total})"


def _row(name: str, cells: Sequence[str], width: int = 22) -> str:
    return f"{name:<18}" + "".join(f"{c:>{width}}" for c in cells)


def report(figures: Figures) -> str:
    """The printed report."""
    out: list[str] = []
    total = sum(figures.sessions.values())
    out.append(
        f"Fidelity: facts of the compacted span still present after compaction, excluding facts "
        f"also in kept messages ({total} sessions: "
        + ", ".join(f"{style} {n}" for style, n in sorted(figures.sessions.items()))
        + ")"
    )
    windows = sorted({w for _, w in figures.single})
    for provider in PROVIDERS:
        if not any(p == provider for p, _ in figures.single):
            continue
        title = (
            "local digest (extractive)"
            if provider == "digest"
            else ("scripted lossy model summary (drops ~half the facts) + ledger addendum")
        )
        out += ["", f"== One compaction, {title}"]
        out.append(_row("kind", [_label(w) for w in windows]))
        for kind in KINDS:
            out.append(
                _row(kind, [_cell(figures.single[(provider, w)].get(kind)) for w in windows])
            )
        if provider == "model":
            out.append(
                _row(
                    "(model alone)", [_cell(_sum(figures.model_alone.get(w, {}))) for w in windows]
                )
            )
        out.append(
            _row("compactions", [str(figures.sizes[(provider, w)].compactions) for w in windows])
        )
        out.append(_row("summary/span", [_ratio(figures.sizes[(provider, w)]) for w in windows]))
        out.append(
            _row(
                "max of budget",
                [_pct(figures.sizes[(provider, w)].worst_of_budget) for w in windows],
            )
        )
        out.append(
            _row(
                "  (chars / 4)",
                [_pct(figures.sizes[(provider, w)].worst_estimated) for w in windows],
            )
        )
        for window in windows:
            if _label(window) not in FLOORS:
                continue
            floor = FLOORS[_label(window)]
            misses = [
                f"{k} {describe(v.ratio)} < {describe(floor[k])}"
                for k, v in figures.single[(provider, window)].items()
                if v.ratio is not None and v.ratio < floor[k]
            ]
            out.append(
                f"floors at {_label(window)}: "
                + ("met" if not misses else "MISSED: " + "; ".join(misses))
            )
    digest64 = [k for k in figures.by_style if k[0] == "digest" and k[1] == 64_000]
    if digest64:
        out += ["", "== Per agent style, local digest, 64K"]
        out.append(_row("style", list(KINDS), 18))
        for key in sorted(digest64, key=lambda k: k[2]):
            table = figures.by_style[key]
            out.append(
                _row(
                    key[2],
                    [
                        _cell(table.get(k)).split(" (")[0] + f" ({table[k].total})"
                        if table[k].total
                        else "-"
                        for k in KINDS
                    ],
                    18,
                )
            )
    if figures.successive:
        out += [
            "",
            f"== {SUCCESSIVE_TIMES} successive compactions at {_label(SUCCESSIVE_WINDOW)}: what "
            f"the last still holds of what the first kept",
        ]
        columns = [(p, "all") for p in figures.successive] + [
            (p, "bundled") for p in figures.successive
        ]
        out.append(_row("kind", [f"{p}, {which}" for p, which in columns]))
        for kind in KINDS:
            cells = []
            for p, which in columns:
                result = figures.successive[p]
                table = result.table if which == "all" else result.bundled
                cells.append(_cell(table.get(kind)))
            out.append(_row(kind, cells))
        out.append(_row("sessions", [str(s.sessions) for s in figures.successive.values()]))
        out.append(_row("resolved, dropped", [str(s.excused) for s in figures.successive.values()]))
        digest = figures.successive.get("digest")
        if digest is not None:
            out += ["", "(successive, local digest, per agent style)"]
            out.append(_row("style", list(KINDS), 18))
            for style, table in sorted(digest.by_style.items()):
                out.append(_row(style, [_short(table.get(k)) for k in KINDS], 18))
    if figures.recall is not None:
        r = figures.recall
        out += ["", "== lcm: facts lost from the prompt (32K replay through the lcm engine)"]
        out.append(
            f"{r.lost} lost facts over {r.sessions} sessions; sample of {r.sampled}: "
            f"lcm_grep (literal) found {r.found} ({describe(r.found / max(r.sampled, 1))}), "
            f"lcm_expand returned verbatim {r.expanded} "
            f"({describe(r.expanded / max(r.sampled, 1))})"
        )
        for miss in r.misses[:15]:
            out.append(f"  miss: {miss}")
    return "\n".join(out)


def _short(value: KindRetention | None) -> str:
    if value is None or value.total == 0:
        return "-"
    return f"{describe(value.ratio)} ({value.total})"


def _sum(table: Table) -> KindRetention | None:
    if not table:
        return None
    return sum(table.values(), KindRetention())


def _ratio(size: SizeFigures) -> str:
    if size.median_ratio is None or size.total_ratio is None:
        return "-"
    return f"{100 * size.median_ratio:.1f} % (all {100 * size.total_ratio:.1f} %)"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f} %"


_SCENARIOS = (
    ("digest", "64K"),
    ("model", "64K"),
    ("digest", "32K"),
    ("model", "32K"),
    ("digest", "3x"),
    ("model", "3x"),
)


def _unseen_table(figures: UnseenFigures, half: str, rules: str) -> dict[tuple[str, str], Table]:
    out: dict[tuple[str, str], Table] = {}
    for provider, scenario in _SCENARIOS:
        if scenario == "3x":
            result = figures.successive.get((half, provider, rules))
            if result is not None:
                out[(provider, scenario)] = result.table
            continue
        table = figures.single.get((half, provider, int(scenario[:-1]) * 1000, rules))
        if table is not None:
            out[(provider, scenario)] = table
    return out


def _floor_gaps(table: dict[tuple[str, str], Table]) -> list[str]:
    """The floors each scenario misses, with the distance in points."""
    misses = []
    for (provider, scenario), values in table.items():
        floor = UNSEEN_FLOORS["successive" if scenario == "3x" else scenario]
        for kind, value in values.items():
            if value.ratio is not None and value.ratio < floor[kind]:
                gap = 100 * (floor[kind] - value.ratio)
                misses.append(
                    f"{scenario} {provider} {kind} {describe(value.ratio)} "
                    f"(floor {describe(floor[kind])}, {gap:.1f} short)"
                )
    return misses


def report_unseen(figures: UnseenFigures) -> str:
    """The printed report of the unseen sessions: each half, each rule set."""
    out = ["", "== Unseen sessions (docs/fidelity.md); the held-back half is not for tuning"]
    for half, (n, messages, tokens) in figures.sizes.items():
        counts = ", ".join(
            f"{_label(w)} {p} {c}" for (h, p, w), c in figures.compactions.items() if h == half
        )
        out.append(
            f"{half}: {n} sessions, {messages} messages, {tokens:,} tokens; compactions: {counts}"
        )
    for half in figures.sizes:
        for rules in (r.name for r in RULE_SETS):
            table = _unseen_table(figures, half, rules)
            if not table:
                continue
            out += ["", f"-- {half}, {rules} rules (3x: of what the first of three kept)"]
            out.append(_row("kind", [f"{s} {p}" for p, s in table], 16))
            for kind in KINDS:
                out.append(_row(kind, [_short(t.get(kind)) for t in table.values()], 16))
            alone = [
                _short(_sum(figures.alone.get((half, int(s[:-1]) * 1000, rules), {})))
                if p == "model" and s != "3x"
                else ""
                for p, s in table
            ]
            out.append(_row("(model alone)", alone, 16))
            resolved = [
                f"{s} {p} {figures.resolved_lost[key]} of {t['error'].total - t['error'].kept}"
                for (p, s), t in table.items()
                if (key := (half, p, int(s[:-1]) * 1000, rules)) in figures.resolved_lost
            ]
            out.append(
                "of the lost errors, resolved by a later run in the span: " + ", ".join(resolved)
            )
            gaps = _floor_gaps(table)
            out.append("floors: " + ("met" if not gaps else "MISSED: " + "; ".join(gaps)))
    out += ["", "-- per agent style, local digest, 64K: benchmark / independent rules (%)"]
    for half in figures.sizes:
        out.append(_row(half, list(KINDS), 16))
        for style in sorted({s for h, _, s in figures.by_style if h == half}):
            cells = []
            for kind in KINDS:
                pair = [
                    figures.by_style.get((half, r.name, style), {}).get(kind) for r in RULE_SETS
                ]
                cells.append(" / ".join(_pct_of(v) for v in pair))
            out.append(_row(f"  {style}", cells, 16))
    return "\n".join(out)


def _pct_of(value: KindRetention | None) -> str:
    if value is None or value.ratio is None:
        return "-"
    return f"{100 * value.ratio:.0f}"


def _table_json(t: Table) -> dict[str, object]:
    return {k: {"kept": v.kept, "total": v.total} for k, v in t.items()}


def _as_json(figures: Figures | None, unseen: UnseenFigures | None) -> dict[str, object]:
    out: dict[str, object] = {}
    if figures is not None:
        out.update(
            {
                "single": {f"{p}@{w}": _table_json(t) for (p, w), t in figures.single.items()},
                "by_style": {
                    f"{p}@{w}/{s}": _table_json(t) for (p, w, s), t in figures.by_style.items()
                },
                "sizes": {f"{p}@{w}": attrs.asdict(v) for (p, w), v in figures.sizes.items()},
                "model_alone": {str(w): _table_json(t) for w, t in figures.model_alone.items()},
                "successive": {
                    p: {"sessions": s.sessions, "excused": s.excused, "table": _table_json(s.table)}
                    for p, s in figures.successive.items()
                },
                "recall": None if figures.recall is None else attrs.asdict(figures.recall),
            }
        )
    if unseen is not None:
        out["unseen"] = {
            "single": {
                f"{h}/{p}@{w}/{r}": _table_json(t) for (h, p, w, r), t in unseen.single.items()
            },
            "model_alone": {
                f"{h}@{w}/{r}": _table_json(t) for (h, w, r), t in unseen.alone.items()
            },
            "successive": {
                f"{h}/{p}/{r}": {
                    "sessions": s.sessions,
                    "excused": s.excused,
                    "table": _table_json(s.table),
                }
                for (h, p, r), s in unseen.successive.items()
            },
            "sizes": unseen.sizes,
        }
    return out


def _print_lost(tables: dict[str, Table], limit: int) -> None:
    for where, table in tables.items():
        for kind, value in table.items():
            for fact in value.lost[:limit]:
                print(f"lost {where} {kind}: {fact.key[:140]!r}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fidelity", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="bundled sessions only, no lcm")
    parser.add_argument("--no-lcm", action="store_true", help="skip the lcm recall measurement")
    parser.add_argument("--no-model", action="store_true", help="skip the scripted model summary")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--lost",
        type=int,
        default=0,
        help="print up to N lost facts per scenario (of the unseen sessions, the tune half's)",
    )
    parser.add_argument(
        "--unseen", action="store_true", help="only the unseen sessions (both halves)"
    )
    parser.add_argument("--no-unseen", action="store_true", help="skip the unseen sessions")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    providers = ("digest",) if args.no_model else PROVIDERS
    figures = None
    if not args.unseen:
        sessions = list(bundled_sessions())
        if not args.quick:
            sessions += generated_sessions()
        recall = (
            []
            if args.quick or args.no_lcm
            else [s for s in sessions if s.style != "tau_bench" or s.name.startswith("generated")]
        )
        figures = measure(sessions, providers=providers, recall_sessions=recall, log=True)
        print(report(figures))
        if args.lost:
            _print_lost({f"{p}@{_label(w)}": t for (p, w), t in figures.single.items()}, args.lost)
    unseen = None
    if args.unseen or not (args.quick or args.no_unseen):
        unseen = measure_unseen(split(unseen_sessions()), providers=providers, log=True)
        print(report_unseen(unseen))
        if args.lost:
            # Only the tune half's: the held-back half is not for tuning.
            lost = {
                f"unseen tune/{p}@{_label(w)}/{r}": t
                for (h, p, w, r), t in unseen.single.items()
                if h == "tune"
            }
            _print_lost(lost, args.lost)
    print(f"\n(took {time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(_as_json(figures, unseen), indent=2), encoding="utf-8")
    return 0
