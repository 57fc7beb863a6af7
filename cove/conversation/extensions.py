"""Which extensions a conversation runs with, and its approval policy.

A new conversation gets the extensions the settings name (``[extensions] enabled``; all
installed ones by default) and that choice is recorded with it (migration 0021), so reopening,
forking and replaying it use the same set whatever is installed or configured later; a
conversation recorded before the choice was (or made straight in the store) ran with cove's
built-ins, and keeps them. Its policy is the settings' entries overlaid with its own (set at
creation, and the answers its person asked to remember).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cove.config import Settings
from cove.environment.extensions.approval import Rule, decide, parse_policy
from cove.environment.extensions.base import Extension
from cove.environment.extensions.installed import Catalog, builtin_catalog, discover
from cove.errors import ConfigError
from cove.persistence.store import Store


@dataclass(frozen=True)
class FunctionRule:
    """How a policy treats calls of one function (``cove extensions``, ``cove policy``).

    ``entry`` is the policy entry that gave the rule (a function, extension or effect name),
    or ``default`` when none did.
    """

    function: str
    extension: str
    effect: str
    rule: Rule
    entry: str = "default"


@dataclass(frozen=True)
class ConversationPolicy:
    """A conversation's approval policy as it stands (``cove policy``).

    Attributes:
        own: The conversation's own entries (set at creation or later, and the answers its
            person asked to remember); they win over the settings'.
        settings: The settings' entries (``[extensions] policy``).
        rules: What the two make of each function of the conversation's extensions.
    """

    own: Mapping[str, Rule]
    settings: Mapping[str, Rule]
    rules: tuple[FunctionRule, ...]


#: Effects a conversation's policy may name even when none of its functions has them yet.
KNOWN_EFFECTS = ("read", "write", "network", "spend")


def installed(settings: Settings) -> tuple[Catalog, list[FunctionRule]]:
    """What is installed, and the rule the settings' policy gives each function's calls.

    Raises:
        ConfigError: A policy entry of the settings is malformed.
    """
    catalog = discover()
    policy = parse_policy(settings.extensions.policy)
    rules = [
        FunctionRule(
            function.name,
            item.name,
            effect := item.extension.effect_of(function),
            decide(
                policy,
                function=function.name,
                extension=item.name,
                effect=effect,
                builtin=item.builtin,
            ).rule,
        )
        for item in catalog.installed
        for function in item.extension.functions
    ]
    return catalog, rules


@dataclass(frozen=True)
class ExtensionChoice:
    """A conversation's extensions and its approval policy, ready for its environment."""

    extensions: tuple[Extension, ...]
    policy: Mapping[str, Rule]


class ConversationExtensions:
    """Chooses, records and reads back the extensions of conversations.

    The installed extensions are discovered once, when first needed (importing plugins costs
    time a command that only reads the database does not need to spend).
    """

    def __init__(self, settings: Settings, store: Store, catalog: Catalog | None = None) -> None:
        self._settings = settings
        self._store = store
        self._catalog = catalog
        self._policy = parse_policy(settings.extensions.policy)

    @property
    def catalog(self) -> Catalog:
        """What is installed (discovered on first use)."""
        if self._catalog is None:
            self._catalog = discover()
        return self._catalog

    def names_for_new(self, names: Sequence[str] | None = None) -> tuple[str, ...]:
        """The extension names a new conversation gets: ``names``, else the settings' choice.

        Raises:
            ConfigError: A name is not installed.
        """
        wanted = self._settings.extensions.enabled if names is None else tuple(names)
        return tuple(e.name for e in self.catalog.select(wanted))

    async def record(
        self,
        conversation_id: str,
        names: Sequence[str],
        policy: Mapping[str, str] | None = None,
    ) -> None:
        """Record the extensions (and the policy entries) a conversation was given."""
        entries = parse_policy([f"{k}={v}" for k, v in (policy or {}).items()], setting="policy")
        await self._store.set_extension_use(conversation_id, names, entries)

    async def copy(self, parent_id: str, fork_id: str) -> None:
        """Give a fork its parent's extensions and policy."""
        use = await self._store.conversation_extensions(parent_id)
        if use is not None:
            await self._store.set_extension_use(fork_id, use.names, use.policy)

    async def policy(self, conversation_id: str) -> ConversationPolicy:
        """The conversation's policy: its own entries, the settings', and each function's rule.

        Raises:
            ConfigError: An extension it was created with is no longer installed.
        """
        choice = await self.choice(conversation_id, doing="shown")
        use = await self._store.conversation_extensions(conversation_id)
        own = parse_policy([f"{k}={v}" for k, v in (use.policy if use else {}).items()])
        builtins = set(builtin_catalog().names)
        rules = []
        for extension in choice.extensions:
            for function in extension.functions:
                effect = extension.effect_of(function)
                ruling = decide(
                    choice.policy,
                    function=function.name,
                    extension=extension.name,
                    effect=effect,
                    builtin=extension.name in builtins,
                )
                rules.append(
                    FunctionRule(function.name, extension.name, effect, ruling.rule, ruling.entry)
                )
        return ConversationPolicy(own, dict(self._policy), tuple(rules))

    async def set_rule(self, conversation_id: str, key: str, rule: str) -> ConversationPolicy:
        """Set the conversation's own entry ``key = rule``; its policy afterwards.

        A running environment takes it in at its next turn.

        Raises:
            ConfigError: ``rule`` is not allow, ask or deny, or ``key`` names no function,
                extension or effect of the conversation (nor a common effect); nothing changes.
        """
        [(key, checked)] = parse_policy([f"{key}={rule}"], setting="policy").items()
        before = await self.policy(conversation_id)
        names = {r.function for r in before.rules} | {r.extension for r in before.rules}
        effects = {r.effect for r in before.rules} | set(KNOWN_EFFECTS)
        if key not in names | effects:
            raise ConfigError(
                f"{key!r} is not a function, an extension or an effect of conversation "
                f"{conversation_id} (effects: {', '.join(sorted(effects))})"
            )
        await self._store.remember_rule(conversation_id, key, checked)
        return await self.policy(conversation_id)

    async def choice(self, conversation_id: str, *, doing: str) -> ExtensionChoice:
        """The extensions and policy a conversation's environment is opened with.

        Args:
            conversation_id: The conversation (its full id).
            doing: What is being done, for the error (``opened``, ``replayed``).

        Raises:
            ConfigError: An extension it was created with is no longer installed.
        """
        use = await self._store.conversation_extensions(conversation_id)
        names = builtin_catalog().names if use is None else use.names
        catalog = builtin_catalog() if use is None else self.catalog
        if use is None and not self._store.read_only:
            await self._store.set_extension_use(conversation_id, names, {})
        try:
            extensions = catalog.select(names)
        except ConfigError as exc:
            raise ConfigError(
                f"conversation {conversation_id} cannot be {doing}: it was created with {exc}"
            ) from None
        own = parse_policy([f"{k}={v}" for k, v in (use.policy if use else {}).items()])
        return ExtensionChoice(extensions, {**self._policy, **own})
