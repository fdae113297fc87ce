"""Writing conversation files back in the shape :func:`ctxengine.read_conversations` read them in
(``ctxengine compress --out``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxengine import ConversationRecord, Message, SystemPrompt


def record_json(
    record: ConversationRecord, messages: Sequence[Message], system: SystemPrompt | None
) -> Any:
    """``record`` with new messages, in the shape it was read in."""
    if record.shape == "list":
        return list(messages)
    data: dict[str, Any] = dict(record.extra)
    if system is not None or "system" in data or record.system is not None:
        data["system"] = system
    data["messages"] = list(messages)
    return data


def write_conversations(
    path: str | Path,
    records: Sequence[tuple[ConversationRecord, Sequence[Message], SystemPrompt | None]],
) -> None:
    """Write conversations back in the shape they were read in (JSONL for several)."""
    path = Path(path)
    if len(records) == 1 and records[0][0].shape != "jsonl":
        record, messages, system = records[0]
        text = json.dumps(record_json(record, messages, system), ensure_ascii=False, indent=1)
    else:
        text = "\n".join(
            json.dumps(record_json(r, m, s), ensure_ascii=False) for r, m, s in records
        )
    path.write_text(text + "\n", encoding="utf-8")
