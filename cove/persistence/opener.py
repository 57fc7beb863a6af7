"""``Opener``: a coroutine that is also an async context manager.

What ``Store.open`` and ``Conversations.open`` return: ``await`` it for the opened object, or
``async with`` it to have it closed at the end too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Generator
from types import TracebackType
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Opener(Coroutine[Any, Any, T], Generic[T]):
    """``await opener`` gives the opened object; ``async with opener as x`` also closes it.

    It is a real coroutine (``asyncio.run(opener)`` works); the opening coroutine is made only
    when it is awaited or entered, so an unused opener leaves no never-awaited warning.
    """

    def __init__(
        self, open_: Callable[[], Coroutine[Any, Any, T]], close: Callable[[T], Awaitable[None]]
    ) -> None:
        self._open = open_
        self._close = close
        self._inner: Coroutine[Any, Any, T] | None = None
        self._opened: T | None = None

    def _coroutine(self) -> Coroutine[Any, Any, T]:
        if self._inner is None:
            self._inner = self._open()
        return self._inner

    def send(self, value: Any) -> Any:
        """Coroutine protocol: advance the opening."""
        return self._coroutine().send(value)

    def throw(self, *args: Any) -> Any:
        """Coroutine protocol: raise into the opening."""
        return self._coroutine().throw(*args)

    def close(self) -> None:
        """Coroutine protocol: abandon the opening."""
        if self._inner is not None:
            self._inner.close()

    def __await__(self) -> Generator[Any, None, T]:
        return self._coroutine().__await__()

    async def __aenter__(self) -> T:
        self._opened = await self._coroutine()
        return self._opened

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._opened is not None:
            await self._close(self._opened)
