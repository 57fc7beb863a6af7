"""The JSON shapes of the ``cove`` command.

Numbering is by position and starts at 1 everywhere: a turn is ``position`` 1, 2, … in its
conversation (a fork's first own turn continues its parent's count), an iteration is
``position`` 1, 2, … in its turn, a block ``position`` 1, 2, … in its iteration; a variable
version names where it was written by ``turn_position``, ``iteration_position`` and
``block_position``, counted the same way. Database row ids (``id``, ``turn_id``,
``iteration_id``) are not part of the output; in event streams ``turn_id`` becomes ``turn``, the
turn's position (events already number iterations and blocks from 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cove.conversation import SearchHit, Transcript, VarVersionRecord
from cove.events import Event, TurnStarted, jsonable

ROW_IDS = ("id", "turn_id", "iteration_id")


def transcript_json(transcript: Transcript) -> dict[str, Any]:
    """A transcript as JSON, numbered by position from 1."""
    data: dict[str, Any] = jsonable(transcript)
    data["turns"] = [_turn(turn) for turn in data["turns"]]
    data["var_versions"] = [_version(v) for v in data["var_versions"]]
    return data


def versions_json(versions: Sequence[VarVersionRecord]) -> list[dict[str, Any]]:
    """Variable versions as JSON, with where each was written counted from 1."""
    return [_version(jsonable(v)) for v in versions]


def _version(version: dict[str, Any]) -> dict[str, Any]:
    return {
        **version,
        "iteration_position": version["iteration_position"] + 1,
        "block_position": version["block_position"] + 1,
    }


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


def _turn(turn: dict[str, Any]) -> dict[str, Any]:
    out = _without_row_ids(turn)
    out["iterations"] = [_iteration(it) for it in turn.get("iterations", [])]
    return out


def _iteration(it: dict[str, Any]) -> dict[str, Any]:
    out = _without_row_ids(it)
    out["position"] = it["position"] + 1
    out["blocks"] = [_counted(b) for b in it.get("blocks", [])]
    out["subqueries"] = [_counted(s) for s in it.get("subqueries", [])]
    return out


def _counted(item: dict[str, Any]) -> dict[str, Any]:
    out = _without_row_ids(item)
    for key in ("position", "block_position"):
        if isinstance(out.get(key), int):
            out[key] += 1
    return out


def _without_row_ids(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in ROW_IDS}


def search_json(hits: list[SearchHit]) -> list[dict[str, Any]]:
    """Search hits as JSON: the snippet as plain text with the matches as offsets into it."""
    return [
        {
            "conversation_id": hit.conversation_id,
            "turn": hit.turn_position,
            "kind": hit.kind,
            "text": hit.text,
            "matches": [list(span) for span in hit.matches],
        }
        for hit in hits
    ]
