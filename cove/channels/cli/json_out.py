"""The JSON shapes of the ``cove`` command.

Transcripts and variable versions are numbered as ``cove.channels.export`` documents (by
position, from 1; no database row ids). In event streams ``turn_id`` becomes ``turn``, the turn's
position (events already number iterations and blocks from 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cove.channels.export import transcript_json, versions_json
from cove.conversation import SearchHit
from cove.events import Event, TurnStarted

__all__ = ["EventNumbering", "search_json", "transcript_json", "versions_json"]


class EventNumbering:
    """Shapes a stream's events: ``turn_id`` (a row id) becomes ``turn`` (its position)."""

    def __init__(self, known: Mapping[int, int] | None = None) -> None:
        self._positions: dict[int, int] = dict(known or {})  # turn row id → position

    def shape(self, event: Event) -> dict[str, Any]:
        """The event's JSON with the turn named by its position."""
        data = event.to_json()
        if isinstance(event, TurnStarted):
            self._positions[event.turn_id] = event.position
        if "turn_id" in data:
            turn_id = data.pop("turn_id")
            data["turn"] = self._positions.get(turn_id)
        return data


def search_json(hits: list[SearchHit]) -> list[dict[str, Any]]:
    """Search hits as JSON: the snippet as plain text with the matches as offsets into it."""
    return [
        {
            "conversation_id": hit.conversation_id,
            "label": hit.label,
            "turn": hit.turn_position,
            "kind": hit.kind,
            "text": hit.text,
            "matches": [list(span) for span in hit.matches],
        }
        for hit in hits
    ]
