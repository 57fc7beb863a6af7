"""A conversation's profile as channels read and change it: its instructions and its model.

Both are versioned in the store (``persistence/profiles.py``): a change applies from the
conversation's next turn, the turns that ran keep what they ran with, forks inherit it and
replay uses what each turn ran with.
"""

from __future__ import annotations

import builtins
from abc import abstractmethod
from typing import TYPE_CHECKING, Literal

from cove.engine.llm import LLMClient
from cove.engine.prompt import checked_instructions
from cove.errors import CoveError, ModelError
from cove.persistence.profiles import KEEP, Keep, Profile
from cove.persistence.records import ConversationRecord

if TYPE_CHECKING:
    from cove.config import Settings
    from cove.persistence.store import Store

__all__ = ["KEEP", "Profile", "ProfileAPI"]


class ProfileAPI:
    """``profile``, ``set_profile`` and ``models``, mixed into ``Conversations``."""

    _store: Store
    settings: Settings

    @abstractmethod
    async def get(self, id_or_prefix: str, *, owner: str | None = None) -> ConversationRecord: ...

    @abstractmethod
    def _client(self, model: str) -> LLMClient: ...

    async def profile(self, conversation_id: str, *, owner: str | None = None) -> Profile:
        """The instructions and model the conversation's next turn runs with.

        Raises:
            NotFound: Unknown conversation (or not ``owner``'s).
        """
        record = await self.get(conversation_id, owner=owner)
        return await self._store.profile(record.id)

    async def set_profile(
        self,
        conversation_id: str,
        *,
        instructions: str | Literal[Keep.KEEP] | None = KEEP,
        model: str | Literal[Keep.KEEP] | None = KEEP,
        owner: str | None = None,
    ) -> Profile:
        """Change the conversation's instructions and/or model from its next turn on.

        Args:
            conversation_id: The conversation (id or unique prefix).
            instructions: The new instructions; None or blank clears them; ``KEEP`` leaves
                them. At most ``budgets.INSTRUCTIONS_CHARS`` characters.
            model: The new model; None goes back to the configured one; ``KEEP`` leaves it.
                A model the settings do not name must be among those the endpoint lists.
            owner: The principal the conversation must belong to.

        Returns:
            The profile the next turn runs with.

        Raises:
            CoveError: The instructions are too long, or the model is not offered (the
                message lists what is). ModelError: The endpoint could not list its models
                to check one the settings do not name. NotFound: Unknown conversation.
                Nothing is changed when any of these is raised.
        """
        record = await self.get(conversation_id, owner=owner)
        if instructions is not KEEP:
            instructions = checked_instructions(instructions)
        if model is not KEEP and model is not None:
            model = await self.checked_model(model)
        return await self._store.change_profile(record.id, instructions=instructions, model=model)

    async def models(self) -> builtins.list[str]:
        """The models the configured endpoints offer, sorted (``GET /models`` on each).

        Raises:
            ModelError: No endpoint could list them (the first failure; an endpoint that
                fails while another lists is left out).
        """
        names: set[str] = set()
        failure: ModelError | None = None
        for model in self.settings.model.one_per_endpoint():
            try:
                names.update(await self._client(model).models())
            except ModelError as exc:
                failure = failure or exc
        if not names and failure is not None:
            raise failure
        return sorted(names)

    async def checked_model(self, model: str) -> str:
        """``model`` stripped, when the settings name it or an endpoint offers it.

        Raises:
            CoveError: It is empty or not offered (the message lists what is).
            ModelError: The endpoint could not list its models.
        """
        model = model.strip()
        if not model:
            raise CoveError("the model name is empty")
        if model in self.settings.model.configured():
            return model
        try:
            offered = await self.models()
        except ModelError as exc:
            raise ModelError(
                f"cannot check the model {model!r}: the endpoint did not list its models "
                f"({exc.message}); nothing was changed",
                status=exc.status,
            ) from exc
        if model not in offered:
            listed = ", ".join(offered[:20]) + (" …" if len(offered) > 20 else "")
            raise CoveError(
                f"the endpoint does not offer the model {model!r}; it offers: {listed or 'none'}"
            )
        return model
