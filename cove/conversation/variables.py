"""A conversation's variables as channels read them: a version's value in full and the diff
of two versions (the versions themselves are read by ``reading.Reading``)."""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING

from cove.environment.extensions.core import version_diff, version_text
from cove.errors import NotFound
from cove.persistence.records import ConversationRecord, VarVersionRecord

if TYPE_CHECKING:
    from cove.persistence.store import Store


class VariablesAPI:
    """``var_text`` and ``var_diff``, mixed into ``Conversations`` (which reads the versions
    themselves as a ``Reading``: ``variables``, ``var_history``)."""

    _store: Store

    @abstractmethod
    async def get(self, id_or_prefix: str, *, owner: str | None = None) -> ConversationRecord: ...

    async def var_text(
        self,
        conversation_id: str,
        name: str,
        version: int | None = None,
        *,
        owner: str | None = None,
    ) -> tuple[VarVersionRecord, str]:
        """One version of a variable (the current one by default) and its value in full as
        text: pretty-printed, a function's source, a table's rows; a deleted, opaque or
        thinned version reads as its preview.

        Raises:
            NotFound: Unknown conversation (or not ``owner``'s), variable or version.
        """
        record = await self.get(conversation_id, owner=owner)
        if version is None:
            current = (await self._store.vars_as_of(record.id)).get(name)
            if current is None:
                message = f"conversation {record.id} has no variable {name!r}"
                raise NotFound("variable", name, message)
            stored = current
        else:
            try:
                stored = await self._store.var_version(record.id, name, version)
            except NotFound as exc:
                message = f"variable {name!r} has no version {version}"
                raise NotFound("version", str(version), message) from exc
        return stored, await version_text(self._store, stored)

    async def var_diff(
        self, conversation_id: str, name: str, v1: int, v2: int, *, owner: str | None = None
    ) -> str:
        """A unified diff between two versions of a variable, as ``var_diff`` gives the model
        (values in full, one item per line; long lists compared run by run).

        Raises:
            NotFound: Unknown conversation (or not ``owner``'s), or no such version.
        """
        record = await self.get(conversation_id, owner=owner)
        return await version_diff(self._store, record.id, name, v1, v2)
