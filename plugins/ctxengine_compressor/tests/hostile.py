"""Generated conversations for the property-based suite, and the checks every compaction of them
must pass.

A conversation is built from a *recipe*: a byte string that decides each choice (hypothesis
generates and shrinks recipes, so a failing case shrinks to a short conversation). Conversations
hold parallel tool calls, ids reused across turns, orphan results (a truncated history's leading
results, an extra result for no call), reasoning (``reasoning_content`` / thinking blocks),
images, empty and huge messages, and a trailing call still waiting for its result.

:func:`check_round` is the contract of one compaction: the input is not mutated; the output
passes the **strict** route profile except for problems the input itself had in messages it
kept; the system prompt and the tail are kept byte for byte; nothing is dropped without a summary
in its place; the prompt never grows.

:func:`compact_rounds` compacts one generated conversation up to four times as it grows;
:func:`generated_run` and :func:`bundled_run` are the batches the property suite hands to its
worker processes (this module is importable as ``ctxengine_compressor.tests.hostile``, so a
worker finds them by name). A failure names the recipe and how to replay it.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Sequence
from typing import Any

import attrs

from ctxengine import (
    CompressResult,
    EngineContext,
    Format,
    Message,
    SystemPrompt,
    TokenCounter,
    estimate_tokens,
)
from ctxengine.messages import Problem, to_anthropic, validate
from ctxengine.testing.transcripts import load_sessions, transcript_files
from ctxengine_compressor.assemble import (
    SYSTEM_NOTE,
    is_pure_summary_message,
    is_summary_message,
)
from ctxengine_compressor.engine import boundaries_for

from .helpers import GOOD_SUMMARY, ScriptedProvider, make_ctx, run

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 24).decode()
IMAGE = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
WORDS = [
    "fix",
    "lib/app.py",
    "pytest",
    "-q",
    "error:",
    "boom",
    "ok",
    "the",
    "build",
    "src/main.c",
    "exit",
    "code:",
    "1",
    "Traceback",
    "ValueError",
    "cd",
    "/srv/app",
    "&&",
    "make",
    "test",
    "reading",
    "config.yaml",
]
TEXT = " ".join(WORDS * 8)
ROUNDS = 4
"""Compactions of one conversation: the first and three more as it grows."""
REPAIRED = frozenset(
    {"tool-result-orphan", "tool-message-position", "tool-call-unanswered", "tool-result-duplicate"}
)
"""Problems the compaction's tool-pair repair removes by dropping the message or block."""


class Recipe:
    """Choices read from a byte string, over and over (a short recipe repeats its pattern, so
    hypothesis shrinks a failure to a short, regular conversation)."""

    def __init__(self, data: bytes) -> None:
        self.data = data or b"\0"
        self.at = 0

    def pick(self, n: int) -> int:
        """A number in ``range(n)``."""
        value = self.data[self.at % len(self.data)] % max(1, n)
        self.at += 1
        return value

    def chance(self, percent: int) -> bool:
        # Two bytes, so that a short recipe does not make every chance the same.
        return (self.pick(256) * 256 + self.pick(256)) % 100 < percent


@attrs.define
class Builder:
    """Grows one OpenAI-format conversation from a recipe; turn by turn, so a compacted
    conversation can be continued."""

    recipe: Recipe
    counter: int = 0
    reuse_ids: bool = False

    def text(self, low: int = 1, high: int = 16) -> str:
        start = self.recipe.pick(len(TEXT) // 2)
        words = TEXT[start:].split(" ", low + self.recipe.pick(high))[:-1] or ["ok"]
        if self.recipe.chance(1):  # a huge message (more than a small window holds)
            return " ".join(words) + " " + "lorem ipsum dolor " * (500 + 300 * self.recipe.pick(4))
        if self.recipe.chance(4):
            return ""  # an empty one
        return " ".join(words)

    def user(self) -> Message:
        kind = self.recipe.pick(4)
        body = self.text()
        if kind == 1:
            return {"role": "user", "content": [{"type": "text", "text": body or "look"}]}
        if kind == 2:
            return {"role": "user", "content": [{"type": "text", "text": body or "see"}, IMAGE]}
        return {"role": "user", "content": body}

    def tool_step(self) -> list[Message]:
        calls = []
        for k in range(1 + self.recipe.pick(3)):  # parallel calls
            self.counter += 1
            call_id = f"call_{k}" if self.reuse_ids else f"call_{self.counter}"
            if self.recipe.chance(50):
                args: dict[str, Any] = {"command": self.text(1, 6) or "ls"}
            else:
                args = {"path": "lib/" + "a" * (5 if self.recipe.chance(90) else 900) + ".py"}
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "terminal", "arguments": json.dumps(args)},
                }
            )
        content = (None, "", "calling tools")[self.recipe.pick(3)]
        call_msg: Message = {"role": "assistant", "content": content, "tool_calls": calls}
        if self.recipe.chance(20):
            call_msg["reasoning_content"] = "thinking about " + self.text(1, 8)
        out = [call_msg]
        for call in calls:
            size = (0, 40, 300, 1_500)[self.recipe.pick(4)] if not self.recipe.chance(1) else 30_000
            output: Any = ("output line of the tool\n" * (size // 24 + 1))[:size]
            if self.recipe.chance(30):
                output = [{"type": "text", "text": output or "(no output)"}]
            out.append({"role": "tool", "tool_call_id": call["id"], "content": output})
        if self.recipe.chance(4):  # an orphan: a result for a call that never was
            out.append({"role": "tool", "tool_call_id": "ghost", "content": "stray output"})
        return out

    def exchange(self) -> list[Message]:
        """A user ask, some tool steps, a visible answer."""
        out = [self.user()]
        for _ in range(self.recipe.pick(4)):
            out += self.tool_step()
        answer: Message = {"role": "assistant", "content": self.text()}
        if self.recipe.chance(10):
            answer["reasoning_content"] = "so the answer is " + self.text(1, 6)
        out.append(answer)
        return out

    def conversation(self) -> list[Message]:
        self.reuse_ids = self.recipe.chance(40)
        messages: list[Message] = []
        if self.recipe.chance(70):
            messages.append({"role": "system", "content": "You are an agent. " + self.text(3, 9)})
        if self.recipe.chance(5):  # a truncated history: results whose calls are gone
            messages.append({"role": "tool", "tool_call_id": "lost_1", "content": "old output"})
        for _ in range(2 + self.recipe.pick(4)):
            messages += self.exchange()
        return self.pending(messages)

    def pending(self, messages: list[Message]) -> list[Message]:
        if self.recipe.chance(10):  # the agent is about to run a tool
            messages = [*messages, self.user()]
            step = self.tool_step()
            messages.append(step[0])
        return messages

    def more(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` continued by a few exchanges (answering a pending call first)."""
        out = list(messages)
        last = out[-1] if out else None
        if last is not None and last.get("role") == "assistant" and last.get("tool_calls"):
            out += [
                {"role": "tool", "tool_call_id": c["id"], "content": "done"}
                for c in last["tool_calls"]
                if isinstance(c, dict)
            ]
            out.append({"role": "assistant", "content": "That ran."})
        elif last is not None and last.get("role") == "user":
            out.append({"role": "assistant", "content": "Understood."})
        for _ in range(1 + self.recipe.pick(2)):
            out += self.exchange()
        return self.pending(out)


def as_anthropic(
    messages: list[Message], recipe: Recipe
) -> tuple[SystemPrompt | None, list[Message]]:
    """The OpenAI conversation converted, plus Anthropic-only shapes: thinking blocks come from
    ``reasoning_content``; sometimes an orphan ``tool_result`` opens the list."""
    system, converted = to_anthropic(messages)
    if recipe.chance(5) and converted and converted[0].get("role") == "user":
        orphan = {"type": "tool_result", "tool_use_id": "lost_2", "content": "old output"}
        first = converted[0]
        content = first["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        converted[0] = {"role": "user", "content": [orphan, *blocks]}
    return system, converted


# -- the checks -----------------------------------------------------------------------------------


@attrs.define
class Tally:
    """Counts over a property run (printed by the suite, stated in reports). The three failure
    counts are counted, not asserted one by one, so a run that breaks says how often."""

    conversations: int = 0
    hostile_inputs: int = 0
    """Conversations that did not pass the strict profile before any compaction."""
    rounds: int = 0
    compactions: int = 0
    noops: int = 0
    invalid_outputs: int = 0
    mutated_inputs: int = 0
    lost_without_summary: int = 0
    other_failures: int = 0
    """The prompt grew, the system prompt changed, a noop changed the conversation."""
    by_compactions: list[int] = attrs.field(factory=lambda: [0] * (ROUNDS + 1))
    """How many conversations were compacted 0, 1, 2, 3 and 4 times."""
    examples: list[str] = attrs.field(factory=list)
    """The first few failures, each with what replays it."""

    def count(self, wrong: Sequence[str], where: str) -> None:
        """Count the failures of one round (``wrong``, from :func:`check_round`)."""
        for problem in wrong:
            if problem.startswith("invalid output"):
                self.invalid_outputs += 1
            elif problem == "mutated input":
                self.mutated_inputs += 1
            elif problem.startswith(LOSSES):
                self.lost_without_summary += 1
            else:
                self.other_failures += 1
        if wrong and len(self.examples) < 5:
            self.examples.append(f"{where}: {'; '.join(wrong)}")

    @property
    def failures(self) -> int:
        return (
            self.invalid_outputs
            + self.mutated_inputs
            + self.lost_without_summary
            + self.other_failures
        )

    def add(self, other: Tally) -> None:
        """Add ``other``'s counts (another worker's batch) to these."""
        for field in attrs.fields(Tally):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            if field.name == "by_compactions":
                self.by_compactions = [a + b for a, b in zip(mine, theirs, strict=True)]
            elif field.name == "examples":
                self.examples = [*mine, *theirs][:5]
            else:
                setattr(self, field.name, mine + theirs)

    def line(self) -> str:
        """The counts on one line."""
        return (
            f"{self.conversations:,} conversations ({self.hostile_inputs:,} not strict-valid "
            f"as given), {self.rounds:,} compactions tried, {self.compactions:,} compacted, "
            f"compacted 0/1/2/3/4 times: {'/'.join(f'{n:,}' for n in self.by_compactions)}; "
            f"invalid outputs {self.invalid_outputs}, mutated inputs {self.mutated_inputs}, "
            f"lost without a summary {self.lost_without_summary}, other {self.other_failures}"
        )


LOSSES = (
    "compacted without a summary",
    "output message",
    "head message",
    "the head holds",
)
"""How :func:`check_round` words a message lost (or invented) outside the summarised span."""


def problems(messages: Sequence[Message], fmt: Format, system: Any) -> list[Problem]:
    """The strict-profile problems of a conversation."""
    return _problems(messages, fmt, system)


def _problems(messages: Sequence[Message], fmt: Format, system: Any) -> list[Problem]:
    return validate(messages, fmt, system=system, profile="strict")


@attrs.define
class InputProblems:
    """The strict-profile problems of a compaction's input, found on first use: an output
    without problems and with its tail in place needs none of them."""

    messages: Sequence[Message]
    fmt: Format
    system: Any
    known: Sequence[Problem] | None = None
    _repaired: frozenset[int] | None = None

    @property
    def problems(self) -> Sequence[Problem]:
        if self.known is None:
            self.known = _problems(self.messages, self.fmt, self.system)
        return self.known

    @property
    def repaired(self) -> frozenset[int]:
        """The messages the tool-pair repair may drop (or merge with a neighbour)."""
        if self._repaired is None:
            dropped = {p.index for p in self.problems if p.index is not None and p.rule in REPAIRED}
            self._repaired = frozenset(dropped | {i + d for i in dropped for d in (-1, 1)})
        return self._repaired


def new_problems(had: InputProblems, after: Sequence[Message], after_system: Any) -> list[Problem]:
    """The strict-profile problems of ``after`` that the input did not have in the same
    (identical) message: what the compaction broke."""
    found = _problems(after, had.fmt, after_system)
    if not found:
        return []
    before = had.messages
    known = {(id(before[p.index]), p.rule) for p in had.problems if p.index is not None}
    known_request = {p.rule for p in had.problems if p.index is None}
    fresh = []
    for problem in found:
        if problem.index is None:
            if problem.rule not in known_request:
                fresh.append(problem)
        elif (id(after[problem.index]), problem.rule) not in known:
            fresh.append(problem)
    return fresh


def _system_text(messages: Sequence[Message], system: Any, fmt: Format) -> Any:
    if fmt == "anthropic":
        return system
    return messages[0]["content"] if messages and messages[0]["role"] == "system" else None


def check_round(
    before: list[Message],
    fmt: Format,
    system: Any,
    result: CompressResult,
    snapshot: str | None,
    had: Sequence[Problem] | None = None,
) -> list[str]:
    """Everything wrong with one compaction of ``before`` (empty when it kept the contract).

    :param snapshot: ``json.dumps([system, before], default=str)`` taken before the
        compaction, or ``None`` when the caller checks for mutation itself.
    :param had: ``before``'s strict-profile problems, when the caller already has them
        (otherwise they are found when needed).
    """
    wrong: list[str] = []
    if snapshot is not None and json.dumps([system, before], default=str) != snapshot:
        wrong.append("mutated input")
    if result.status != "compacted":
        if result.messages != before or result.system != system:
            wrong.append(f"{result.status} changed the conversation")
        return wrong
    out = result.messages
    problems = InputProblems(before, fmt, system, had)
    broken = new_problems(problems, out, result.system)
    if broken:
        wrong.append("invalid output: " + "; ".join(str(p) for p in broken[:3]))
    if result.tokens_after > result.tokens_before:
        wrong.append("the prompt grew")
    old, new = _system_text(before, system, fmt), _system_text(out, result.system, fmt)
    if old is not None and not (
        new in (old, f"{old}\n\n{SYSTEM_NOTE}")
        or (isinstance(old, list) and new[: len(old)] == old)
    ):
        wrong.append("the system prompt changed")
    # The new summary: a message holding one that is not the input's (an older summary may stay
    # in the kept head or tail).
    inputs = {id(m) for m in before}
    summaries = [i for i, m in enumerate(out) if id(m) not in inputs and is_summary_message(m)]
    if not summaries or not result.summary:
        wrong.append("compacted without a summary")
        return wrong
    if summaries[0] == len(out) - 1 and is_pure_summary_message(out[-1]):
        wrong.append("compacted without a summary: nothing follows it (the tail is gone)")
        return wrong
    wrong += _lost(before, problems, out, summaries[0])
    return wrong


def _lost(
    before: list[Message], had: InputProblems, out: list[Message], summary_at: int
) -> list[str]:
    """Whether ``out`` is the input's head (kept, or rewritten in place), one summary and the
    input's tail (the same objects), so that everything missing is the one span the summary
    replaced. The tool-pair repair may drop an orphan or an unanswered call of the input, and
    merge the two messages around it (Anthropic roles must alternate): those are excused.
    """
    inputs = {id(m) for m in before}
    # The tail, from the end: the input's own messages, or copies the repair made of them.
    i, j = len(before) - 1, len(out) - 1
    while j > summary_at:
        if i < 0:
            return [f"output message {j} comes from nowhere"]
        copy = id(out[j]) not in inputs
        if out[j] is before[i] or (
            copy and i in had.repaired and out[j].get("role") == before[i].get("role")
        ):
            i, j = i - 1, j - 1
        elif i in had.repaired:
            i -= 1
        else:
            return [f"output message {j} is not the input's message {i}: the tail changed"]
    tail_start = i + 1
    # The head, from the start: kept or rewritten in place (pruned, the system note, the summary
    # merged into its last message).
    head_out = summary_at if is_pure_summary_message(out[summary_at]) else summary_at + 1
    i = j = 0
    while j < head_out:
        if i >= tail_start:
            return ["the head holds more than the input before its tail"]
        copy = id(out[j]) not in inputs
        if out[j] is before[i] or (copy and out[j].get("role") == before[i].get("role")):
            i, j = i + 1, j + 1
        elif i in had.repaired:
            i += 1
        else:
            return [f"head message {j} stands for no input message"]
    return []


# -- the runs -------------------------------------------------------------------------------------


class RoughTokens(TokenCounter):
    """Counts characters / 4 instead of tokenizing: the properties hold whatever the counts, and
    tens of thousands of compactions should not wait for a tokenizer."""

    def count_text(self, text: str) -> int:
        return estimate_tokens(text)


def generated_context(recipe: Recipe) -> EngineContext:
    """A compressor context with random settings and a small window; one in twenty has a
    summary model with a small window (so the map-then-merge path runs), the rest the local
    digest."""
    provider = None
    compression: dict[str, Any] = {
        "protect_first_n": recipe.pick(6),
        "protect_last_n": 1 + recipe.pick(6),
        "threshold": (0.3, 0.5, 0.7, 0.9)[recipe.pick(4)],
        "target_ratio": (0.1, 0.2, 0.4, 0.8)[recipe.pick(4)],
    }
    if recipe.chance(5):
        provider = ScriptedProvider(*[GOOD_SUMMARY] * 40, context_length=4_096)
        # Only a summary model makes calls (the digest's settings repeat, so contexts are cached).
        compression["summary_max_calls"] = 1 + recipe.pick(8)
    context_length = (1_024, 2_048, 3_072, 4_096)[recipe.pick(4)]
    ctx = make_ctx(provider, context_length=context_length, **compression)
    # A counter per conversation: one shared by thousands would hold every message it counted
    # (it remembers them by identity), and the garbage collector would walk them all, often.
    ctx.tokens = RoughTokens()
    return ctx


def compact_rounds(data: bytes, fmt: Format, tally: Tally) -> list[str]:
    """Generate the conversation of recipe ``data`` in ``fmt``, compact it, continue it from the
    output and compact again, up to :data:`ROUNDS` times (one context throughout, as a session
    would); every round is checked with :func:`check_round` and counted in ``tally``.

    :returns: what was wrong, round by round (empty when every round kept the contract).
    """
    recipe = Recipe(data)
    builder = Builder(recipe)
    messages = builder.conversation()
    system: Any = None
    if fmt == "anthropic":
        system, messages = as_anthropic(messages, recipe)
    ctx = generated_context(recipe)
    tally.conversations += 1
    had: list[Problem] | None = _problems(messages, fmt, system)
    if had:
        tally.hostile_inputs += 1
    failures: list[str] = []
    compacted = 0
    for round_ in range(ROUNDS):
        snapshot = json.dumps([system, messages], default=str)
        result = run(ctx, messages, fmt, system)
        tally.rounds += 1
        wrong = check_round(messages, fmt, system, result, snapshot, had)
        replay = f"compact_rounds(bytes.fromhex({data.hex()!r}), {fmt!r}, Tally())"
        tally.count(wrong, f"round {round_} of {replay}")
        failures += [f"round {round_}: {problem}" for problem in wrong]
        if not result.compacted:
            tally.noops += 1
            break
        tally.compactions += 1
        compacted += 1
        # The conversation goes on from what the compaction returned.
        if fmt == "anthropic":
            system = result.system
            messages = [*result.messages, *anthropic_turns(builder.more([]), result.messages)]
        else:
            messages = builder.more(result.messages)
        had = None  # found by check_round when it needs them
    tally.by_compactions[compacted] += 1
    return failures


def anthropic_turns(new: list[Message], before: list[Message]) -> list[Message]:
    """New OpenAI-format turns as Anthropic messages that follow ``before`` validly (a call
    still waiting at its end gets its results first; roles keep alternating)."""
    _, converted = to_anthropic(new)
    last = before[-1] if before else None
    content = last["content"] if last is not None else None
    pending = [
        b["id"]
        for b in (content if isinstance(content, list) else [])
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    if pending and last is not None and last["role"] == "assistant":
        results = [{"type": "tool_result", "tool_use_id": i, "content": "done"} for i in pending]
        ran: Message = {"role": "assistant", "content": "That ran."}
        return [{"role": "user", "content": results}, ran, *anthropic_turns(new, [ran])]
    role = last["role"] if last is not None else None
    if converted and converted[0]["role"] == role:
        filler = "Understood." if role == "user" else "Go on."
        converted.insert(0, {"role": "assistant" if role == "user" else "user", "content": filler})
    return converted


def generated_run(fmt: Format, first: int, count: int) -> Tally:
    """Compact the conversations of seeds ``first .. first + count - 1`` (a worker's batch):
    each seed gives a recipe of 16-400 random bytes, the same on every run and machine."""
    tally = Tally()
    for seed in range(first, first + count):
        rng = random.Random(f"{fmt}:{seed}")
        compact_rounds(rng.randbytes(rng.randint(16, 400)), fmt, tally)
    return tally


def bundled_sessions() -> list[tuple[str, Format, Any, list[Message]]]:
    """Every bundled session in its format, and the OpenAI-only ones converted to Anthropic's
    too: ``(label, format, system, messages)``."""
    sessions: list[tuple[str, Format, Any, list[Message]]] = []
    for path in transcript_files():
        fmt: Format = "anthropic" if ".anthropic." in path.name else "openai"
        for row in load_sessions(path.name):
            label = f"{path.name.split('.')[0]}/{row['id']}"
            sessions.append((label, fmt, row.get("system"), row["messages"]))
            if fmt == "openai" and not path.name.startswith("claude_code"):
                system, converted = to_anthropic(row["messages"])
                sessions.append((f"{label} (converted)", "anthropic", system, converted))
    return sessions


HEADS = range(6)
TAILS = range(1, 7)


def bundled_run(part: int, parts: int) -> tuple[Tally, int]:
    """Every ``parts``-th bundled session from ``part`` with every ``protect_first_n`` in
    :data:`HEADS` and ``protect_last_n`` in :data:`TAILS`: at a window the session fills (so
    it compacts), then its output compacted up to three more times at half the window each
    time. The compressor's result depends on the two settings only through its boundaries, so
    settings that cut a conversation alike share one compaction (and one check).

    :returns: the tally (one conversation per session and setting) and the settings checked.
    """
    tally = Tally()
    settings_checked = 0
    for label, fmt, system, messages in bundled_sessions()[part::parts]:
        snapshot = json.dumps([system, messages], default=str)
        counter = RoughTokens()  # per session (see generated_context)
        window0 = max(counter.count(messages, system), 1_024)
        done: dict[tuple[int, int, int, int], CompressResult] = {}
        had = {id(messages): _problems(messages, fmt, system)}
        outcome: dict[tuple[int, int, int, int], list[str]] = {}
        for first in HEADS:
            for last in TAILS:
                settings_checked += 1
                tally.conversations += 1
                tally.hostile_inputs += bool(had[id(messages)])
                current, current_system, window = messages, system, window0
                compacted = 0
                for round_ in range(ROUNDS):
                    ctx = make_ctx(
                        None, context_length=window, protect_first_n=first, protect_last_n=last
                    )
                    ctx.tokens = counter
                    cut = boundaries_for(ctx, current, fmt)
                    key = (id(current), cut.head_end, cut.tail_start, window)
                    if key not in done:
                        result = done[key] = run(ctx, current, fmt, current_system)
                        tally.rounds += 1
                        wrong = outcome[key] = check_round(
                            current, fmt, current_system, result, None, had.get(id(current))
                        )
                        where = f"{label} protect_first_n={first} protect_last_n={last}"
                        tally.count(wrong, f"{where} round {round_}")
                        tally.compactions += result.compacted
                        tally.noops += not result.compacted
                    result = done[key]
                    if not result.compacted or outcome[key]:
                        break
                    compacted += 1
                    current, current_system = result.messages, result.system
                    window = max(1_024, window // 2)
                tally.by_compactions[compacted] += 1
        if json.dumps([system, messages], default=str) != snapshot:
            tally.count(["mutated input"], label)
    return tally, settings_checked
