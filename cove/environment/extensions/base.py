"""The extension spec: what an extension declares and what its functions receive.

An ``Extension`` is a named bundle of ``ExtensionFunction``s (callable from sandbox code through a
proxy), read-only ``ExtensionConstant``s, an optional ``activate`` predicate and an optional
``nudge``. Every function implementation receives a ``CallContext`` first, then the sandbox's
arguments. Per-function hooks wrap a call::

    before(ctx, call)            -> None (proceed) | Call (rewritten args) | Return (short-circuit)
    implementation(ctx, *args, **kwargs)
    after(ctx, call, result)     -> the (possibly rewritten) result
    on_error(ctx, call, exc, n)  -> None (re-raise) | Return (fall back) | Retry (bounded)

Implementations and hooks may be sync or async. The engine implements ``TurnHooks``; outside a
turn ``CallContext.hooks`` is None and ``CallContext.turn()`` raises a clear error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from cove.config import SandboxSettings
    from cove.environment.extensions.approval import ApprovalRequest, Ruling, Verdict
    from cove.environment.extensions.quota import WorkspaceQuota
    from cove.events import Event
    from cove.persistence.store import Store


class EnvironmentView(Protocol):
    """The part of the environment extensions use (``Environment`` provides it).

    Declared here so the extension spec does not depend on the environment that binds it.
    """

    def forget_after_block(self, names: Sequence[str]) -> None:
        """Schedule ``names`` for deletion when the running block finishes."""
        ...


class TurnHooks(Protocol):
    """What the engine offers extensions while a turn runs."""

    @property
    def request(self) -> str:
        """The user's request of this turn."""
        ...

    @property
    def last_answer(self) -> str | None:
        """The previous turn's answer, if any."""
        ...

    async def request_more_iterations(self, n: int) -> int:
        """Ask for ``n`` more iterations; returns the new budget (bounded by settings)."""
        ...

    async def set_title(self, text: str) -> None:
        """Set the conversation title (persisted and announced by the engine)."""
        ...

    async def llm_query(self, prompt: str) -> str:
        """One bounded, one-shot LLM call; returns the reply text."""
        ...

    async def llm_query_batch(self, prompts: Sequence[str]) -> list[str]:
        """Several one-shot LLM calls run concurrently; replies in prompt order."""
        ...

    async def approve(self, request: ApprovalRequest, ruling: Ruling, call: int) -> Verdict:
        """Decide a call the policy did not simply allow (asking the person when the ruling is
        ``ask``), record the verdict with its place (the running block, ``call``: its order
        among the block's extension calls) and return it."""
        ...


@dataclass(frozen=True)
class CallContext:
    """What an extension function (or constant, or hook) sees besides the sandbox's arguments."""

    environment: EnvironmentView
    conversation_id: str
    workspace: Path
    store: Store
    settings: SandboxSettings
    hooks: TurnHooks | None
    block_position: int | None = None
    quota: WorkspaceQuota | None = None
    """The workspace's running usage (the environment keeps one); without it a write measures
    the workspace itself."""

    def turn(self, function: str) -> TurnHooks:
        """The current turn's hooks.

        Args:
            function: The calling function's name, for the error message.

        Raises:
            RuntimeError: Outside a turn (no hooks bound).
        """
        if self.hooks is None:
            raise RuntimeError(f"{function}() is only available while a turn is running")
        return self.hooks


@dataclass(frozen=True)
class NudgeContext:
    """What an extension's ``nudge`` sees between iterations."""

    environment: EnvironmentView
    conversation_id: str
    hooks: TurnHooks | None
    iteration: int | None = None
    budget: int | None = None


@dataclass(frozen=True)
class Call:
    """The arguments of one extension call, as the sandbox passed them or a hook rewrote them."""

    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Return:
    """Returned by ``before`` to short-circuit, or by ``on_error`` to fall back to ``value``."""

    value: Any


@dataclass(frozen=True)
class Retry:
    """Returned by ``on_error`` to call the implementation again (optionally with new args)."""

    call: Call | None = None


BeforeHook = Callable[[CallContext, Call], Call | Return | Awaitable[Call | Return | None] | None]
AfterHook = Callable[[CallContext, Call, Any], Any]
ErrorHook = Callable[
    [CallContext, Call, Exception, int], Return | Retry | Awaitable[Return | Retry | None] | None
]


@dataclass(frozen=True)
class ExtensionFunction:
    """One function the sandbox can call.

    Attributes:
        name: The name bound in the sandbox.
        implementation: ``(ctx, *args, **kwargs)``, sync or async.
        doc: Docstring shown to the model (first paragraph goes into the system prompt).
        signature: The signature as the model sees it, e.g. ``read_file(path, *, binary=False)``.
        examples: Short code examples for the system prompt.
        before: Hook run before the call (may rewrite args or short-circuit).
        after: Hook run on the result (may rewrite it).
        on_error: Hook run on an exception (may fall back or ask for a retry).
        max_retries: Upper bound on ``Retry`` answers per call.
        effect: What a call does beyond reading (``write``, ``network``, ``spend``, …); None:
            the extension's ``effect``. Approval policies (``approval.py``) are keyed on it.
    """

    name: str
    implementation: Callable[..., Any]
    doc: str
    signature: str
    examples: tuple[str, ...] = ()
    before: BeforeHook | None = None
    after: AfterHook | None = None
    on_error: ErrorHook | None = None
    max_retries: int = 2
    effect: str | None = None


@dataclass(frozen=True)
class ExtensionConstant:
    """A read-only name bound in the sandbox: a fixed ``value`` or one ``compute``d per turn."""

    name: str
    doc: str
    value: Any = None
    compute: Callable[[CallContext], Any] | None = None

    def resolve(self, ctx: CallContext) -> Any:
        """The constant's value for the current turn (``ctx.hooks`` may be None)."""
        return self.compute(ctx) if self.compute is not None else self.value


#: ``observe(event)``: sees an event of a turn (sync or async; ``observers.py``).
Observer = Callable[["Event"], "Awaitable[None] | None"]


@dataclass(frozen=True)
class Extension:
    """A named capability bundle; the only way to add capabilities to the sandbox.

    Attributes:
        name: Short identifier (``core``, ``files``...).
        doc: One line saying what the extension is for.
        prompt: Extra documentation for the system prompt (may be empty).
        functions: The functions bound in the sandbox.
        constants: The read-only names bound in the sandbox.
        activate: ``activate(env) -> bool``; inactive extensions are not bound or documented.
        nudge: ``nudge(ctx) -> str | None``; a hint for the model's next context message.
        effect: What its functions do beyond reading, unless a function says otherwise:
            ``read`` (nothing), ``write``, ``network``, ``spend`` or another short word.
        observe: ``observe(event)``, sync or async: sees every event of the turns this
            process runs in a conversation that has the extension (but the streamed
            ``ModelDelta``s: ``ModelReply`` has the whole reply), in order, after it is
            published, never holding the turn up (``observers.py``).
    """

    name: str
    doc: str
    prompt: str = ""
    functions: tuple[ExtensionFunction, ...] = ()
    constants: tuple[ExtensionConstant, ...] = ()
    activate: Callable[[EnvironmentView], bool] | None = None
    nudge: Callable[[NudgeContext], str | None] | None = None
    effect: str = "read"
    observe: Observer | None = None

    def effect_of(self, function: ExtensionFunction) -> str:
        """The effect of one of its functions: the function's own, else the extension's."""
        return function.effect or self.effect


def function_names(extensions: Sequence[Extension]) -> list[str]:
    """Every function name the given extensions bind, in declaration order."""
    return [f.name for ext in extensions for f in ext.functions]
