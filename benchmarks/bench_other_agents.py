"""The kernel's per-request cost and ``compress`` on sessions of agents the bundled data lacks.

The bundled transcripts are Claude Code and OpenHands sessions. The same figures as
``bench_kernel.py`` (one request in each of the four arrival modes, as a ratio to
``copy.deepcopy``) and ``bench_compressor.py`` (``compress`` cold and warm, as a ratio to
``json.dumps``) are measured here on the generated sessions of ``benchmarks/fidelity/generate.py``
(seeded, the same bytes every run): the two shorter OpenHands, mini-SWE-agent, SWE-agent and
Codex coding sessions (239-490 messages, 40K-100K tokens) and the shorter tau-bench airline and
retail sessions (626 and 836 messages), in their own OpenAI chat format, plus each coding
style's second session converted to the Anthropic format (the longest sessions, up to 1,644
messages, add minutes and no new shape). Figures are medians over those sessions, with the
lowest and highest beside them; the compress targets printed are those of the bundled-session
benchmark, for comparison.

Run: ``python benchmarks/bench_other_agents.py`` (about five minutes on a quiet machine). Prints
``name<TAB>value<TAB>target`` lines; exits non-zero only on a crash.
"""

from __future__ import annotations

import sys
from pathlib import Path

import ctxengine
from ctxengine._accounting.tokens import TokenCounter
from ctxengine.messages import to_anthropic

if not __package__:  # run as a script (nox -s bench): make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import bench_compressor, bench_kernel
from benchmarks.fidelity.generate import CODING_STYLES, generated_sessions
from benchmarks.harness import MIN_MESSAGES, BenchSession, line

CONVERTED = {f"generated_{style}#1" for style in CODING_STYLES}
"""The sessions also measured in the Anthropic format (one per coding style)."""
MEASURED = {f"generated_{style}#{n}" for style in CODING_STYLES for n in (0, 1)} | {
    "generated_tau_airline#0",
    "generated_tau_retail#0",
}
"""The generated sessions measured (the shorter ones of each style)."""


def other_sessions() -> list[BenchSession]:
    """Every generated session of at least ``MIN_MESSAGES`` messages, and the converted ones."""
    found: list[BenchSession] = []
    for session in generated_sessions():
        if len(session.messages) < MIN_MESSAGES or session.name not in MEASURED:
            continue
        found.append(BenchSession(f"{session.name}[openai]", "openai", None, session.messages))
        if session.name in CONVERTED:
            system, messages = to_anthropic(session.messages)
            found.append(BenchSession(f"{session.name}[anthropic]", "anthropic", system, messages))
    return found


def main() -> None:
    sessions = other_sessions()
    reference = TokenCounter()
    kernel = ctxengine.load(
        {
            "model": {"name": "claude-sonnet-4-6"},
            "auxiliary": {"compression": {"provider": "extractive"}},
        }
    )
    requests, compactions = [], []
    for data in sessions:
        best = bench_kernel.measure(data, reference)
        ratios = {mode: best[mode] / best["deepcopy"] for mode in bench_kernel.MODES}
        compressed, described = bench_compressor.measure(kernel, data)
        requests.append(ratios)
        compactions.append(compressed)
        figures = ", ".join(
            f"{mode} {best[mode] * 1e6:.0f} µs ({ratios[mode]:.3f}x)" for mode in bench_kernel.MODES
        )
        print(
            f"session\t{data.name}\t{len(data.messages)} messages, deepcopy "
            f"{best['deepcopy'] * 1e3:.2f} ms; {figures}; compress cold "
            f"{compressed['cold']:.2f}x, warm {compressed['warm']:.2f}x ({described})"
        )
    kernel.close()
    for mode in bench_kernel.MODES:
        values = [r[mode] for r in requests]
        name = f"other_agents_kernel_{mode}_vs_deepcopy"
        print(line(name, values, "-", len(values)))
    for mode, target in bench_compressor.TARGETS.items():
        values = [r[mode] for r in compactions]
        name = f"other_agents_compress_{mode}_vs_json_dumps"
        print(line(name, values, f"target<={target:g}x", len(values)))


if __name__ == "__main__":
    main()
