"""The worker's interpreter state: one namespace, and the operations the host asks for.

``Runtime`` knows nothing about pipes: the worker hands it a ``request`` function for extension
calls and feeds it decoded frames (``handle``), getting reply frames back.
"""

from __future__ import annotations

import base64
import contextlib
import math
import os
import re
import sys
import traceback
from collections.abc import Callable
from types import CodeType, ModuleType, TracebackType
from typing import Any

from cove import codec
from cove.codec.shapes import Definition
from cove.environment.sandbox.names import name_problem
from cove.environment.sandbox.worker.data.support import DataSupport
from cove.environment.sandbox.worker.guards import SANDBOX_MODULE, BlockClock, Guards
from cove.environment.sandbox.worker.modules import BlockRandom, ModuleTable
from cove.environment.sandbox.worker.output import BlockOutput, PrintScope
from cove.environment.sandbox.worker.policy import (
    BLOCK_FILENAME,
    DEFINE_HOOK,
    BlockSyntaxError,
    compile_block,
    compile_definition,
    defined_name,
    make_builtins,
)
from cove.environment.sandbox.worker.provenance import NotRestorable, Provenance
from cove.environment.sandbox.worker.statements import StatementReads
from cove.environment.sandbox.worker.tracking import VariableTracker
from cove.environment.sandbox.worker.witness import Witness
from cove.errors import CodecError

Frame = dict[str, Any]
Request = Callable[[Frame], Frame]

_MESSAGE_LIMIT = 2_000
HOST_CALL_LIMIT = 24 * 1024 * 1024
"""The largest encoded arguments of a call the worker makes itself (a file written by a library:
base64 inside a frame of at most 64 MiB)."""
CALL_LIMIT = 1_000_000
"""The largest encoded arguments of an extension call made by sandbox code."""
RESULT_LIMIT = 1_000_000
"""The largest encoding of a block's value kept with the block (a larger one keeps its preview)."""
CHUNK_FRAME_BYTES = 16 * 1024 * 1024
"""Chunk data per frame (base64 inside a frame of at most 64 MiB)."""
DEFAULT_VALUE_LIMIT = 256 * 1024 * 1024
"""The default cap on one variable's encoding (``value_limit_mb``)."""
_RESTORE_PASSES = 3
# Absolute paths of host files (site-packages, the cove package...) never reach an error message.
_HOST_PATH = re.compile(r"(?:/[\w.+-]+)+\.py[cd]?\b")


class ExtensionError(Exception):
    """Raised inside a block when an extension function failed on the host."""


def describe(exc: BaseException) -> tuple[str, str]:
    """``(type name, "Type: message (line N)")`` for an exception raised by sandbox code."""
    name = type(exc).__name__
    try:
        message = str(exc)
    except BaseException:
        message = "<message unavailable>"
    message = _HOST_PATH.sub("<host>", message)
    if len(message) > _MESSAGE_LIMIT:
        message = message[:_MESSAGE_LIMIT] + "…"
    if not message and isinstance(exc, MemoryError):
        message = "the block ran out of memory"
    line = block_line(exc.__traceback__)
    text = f"{name}: {message}" if message else name
    return name, text + (f" (line {line})" if line is not None else "")


def block_line(tb: TracebackType | None) -> int | None:
    """The line of the innermost sandbox frame of a traceback."""
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == BLOCK_FILENAME:
            line = lineno
    return line


class Runtime:
    """One worker's sandbox: namespace, builtins, curated modules and variable tracking."""

    def __init__(
        self,
        *,
        request: Request,
        output_limit: int,
        value_limit: int = DEFAULT_VALUE_LIMIT,
        libraries: bool = True,
        post: Callable[[Frame], None] | None = None,
    ) -> None:
        self._request = request
        self._post = post
        self.output_limit = output_limit
        self.value_limit = value_limit
        self.clock = BlockClock()
        self.chance = BlockRandom()
        self.output = BlockOutput(output_limit)
        self.data = (
            DataSupport.create(self.host_call, self._write_output, lambda: self.clock.now)
            if libraries
            else None
        )
        self.modules = ModuleTable(
            self.chance, self.clock, self.data.builders() if self.data is not None else None
        )
        self.witness = Witness()
        self.builtins = make_builtins(
            Guards(self.clock, self.data.surfaces if self.data is not None else None, self.witness),
            print_factory=self._print_scope,
            importer=self.modules.importer(self.witness),
            extras={"ExtensionError": ExtensionError, DEFINE_HOOK: self._define_hook},
        )
        self._block_sources: list[str] = []  # of the running block's definitions, in order
        self._block_reads: list[StatementReads] = []
        self._rebuilding = 0  # > 0 while a recorded definition runs again: no extension calls
        self._refused_calls = 0
        self._original = dict(self.builtins)
        self._configured: set[str] = set()
        self.namespace: dict[str, Any] = {"__builtins__": self.builtins}
        # Classes made in the sandbox live in module "sandbox"; dataclasses runs the code it
        # generates for them with that module's globals, which therefore hold the sandbox's
        # builtins (exec would otherwise put the real ones there).
        module = sys.modules.setdefault(SANDBOX_MODULE, ModuleType(SANDBOX_MODULE))
        vars(module)["__builtins__"] = self.builtins
        self._incoming: dict[str, bytes] = {}  # chunks the host sent for a restore
        self.tracker = VariableTracker(
            value_limit=value_limit,
            modules=self.modules,
            builtins=self.builtins,
            namespace=self.namespace,
            witness=self.witness,
        )
        self.provenance = Provenance(self.tracker, self.namespace, self.builtins)

    def handle(self, message: Frame) -> Frame:
        """Run one host request and return the reply frame."""
        op = message["op"]
        if op == "execute":
            return self.execute(str(message["code"]), int(message["seed"]), float(message["clock"]))
        if op == "configure":
            return self.configure(list(message["functions"]), dict(message["constants"]))
        if op == "restore":
            return self.restore(
                dict(message.get("imports", {})), list(message["snapshots"]), bool(message["reset"])
            )
        if op == "chunks":
            for name, data in message["chunks"]:
                self._incoming[str(name)] = base64.b64decode(data)
            return {"op": "ok"}
        if op == "chdir":
            os.chdir(str(message["path"]))
            return {"op": "ok"}
        if op == "ping":
            return {"op": "ok"}
        return {"op": "error", "error": f"unknown op {op!r}"}

    # -- blocks -----------------------------------------------------------------------------

    def execute(self, code: str, seed: int, clock: float) -> Frame:
        """Run one block and report its value, output, error and variable changes.

        The chunks the changes need and the host lacks go with the reply (``chunks``), those
        past ``CHUNK_FRAME_BYTES`` in ``chunks`` frames sent before it.
        """
        self._incoming.clear()
        self.chance.seed(seed)
        self.clock.now = clock
        self.output = BlockOutput(self.output_limit)
        self.namespace["_print"] = PrintScope(self.output)
        if self.data is not None:
            self.data.begin_block(seed)
        value, error, ran = self._run(code)
        figures: list[Frame] = []
        if self.data is not None:
            figures, notes = self.data.end_block()
            for note in notes:
                self.output.write(note + "\n")
        reply: Frame = {
            "op": "done",
            "ok": error is None,
            "error_type": error[0] if error else None,
            "error": error[1] if error else None,
            "stdout": self.output.text(),
            "fatal": bool(error and error[0] == "MemoryError"),
            "value_preview": None,
            "value_encoded": None,
            "changes": [],
            "figures": figures,
        }
        if reply["fatal"]:
            return reply  # the host replaces this worker: its heap is not to be trusted
        if value is not None:
            reply["value_preview"] = codec.display(value)
            reply["value_encoded"] = self._encoded(value)
        value = None
        reply["changes"] = self.tracker.changes(self.namespace, ran)
        reply["imports"] = self.tracker.imports
        reply["chunks"] = self._send_chunks(self.tracker.take_outbox())
        return reply

    def _send_chunks(self, chunks: dict[str, bytes]) -> list[list[str]]:
        """Send ``chunks`` in frames of their own while they exceed ``CHUNK_FRAME_BYTES``;
        the rest, for the reply, as ``[name, base64]`` pairs (in order: children first)."""
        batch: list[list[str]] = []
        size = 0
        for name, data in chunks.items():
            if size + len(data) > CHUNK_FRAME_BYTES and batch and self._post is not None:
                self._post({"op": "chunks", "chunks": batch})
                batch, size = [], 0
            batch.append([name, base64.b64encode(data).decode("ascii")])
            size += len(data)
        return batch

    def _run(self, code: str) -> tuple[Any, tuple[str, str] | None, list[CodeType]]:
        """Compile and run a block: its trailing value, its error (type, line) and what it ran
        (the tracker checks only what that code reaches)."""
        try:
            block = compile_block(code, reserved=self._configured)
        except BlockSyntaxError as exc:
            where = f" (line {exc.line})" if exc.line is not None else ""
            return None, ("SyntaxError", f"SyntaxError: {exc.message}{where}"), []
        except BaseException as exc:  # compile can hit RecursionError/MemoryError on deep nesting
            return None, describe(exc), []
        value: Any = None
        error: tuple[str, str] | None = None
        self._block_sources = [text for _, text in block.definitions]
        self._block_reads = block.reads
        try:
            if block.body is not None:
                exec(block.body, self.namespace)
            if block.tail is not None:
                value = eval(block.tail, self.namespace)
        except BaseException as exc:  # SystemExit and friends are block errors, too
            error = describe(exc)
        finally:
            self.provenance.stop()
            self._block_sources = []
        return value, error, [c for c in (block.body, block.tail) if c is not None]

    def _encoded(self, value: Any) -> str | None:
        """The codec's text of a block's value, or None when it cannot be encoded (or is over
        ``RESULT_LIMIT``)."""
        try:
            return self.tracker.encode(value, RESULT_LIMIT)
        except MemoryError:
            raise
        except Exception:
            return None

    def _define_hook(self, index: int) -> Callable[[Any], Any]:
        """``_define_(k)``: definition ``k`` of the running block starts (its outermost decorator
        is evaluated first of all); ``record(value)``: it made ``value``, whose source and reads
        the tracker then records.

        In between, ``provenance`` notes what the statement reads (``provenance.py``).
        """
        parts = self._block_reads
        self.provenance.begin(parts[index] if index < len(parts) else StatementReads())

        def record(value: Any) -> Any:
            reads = self.provenance.end()
            # At once: a later statement of the block may read it (``@deco`` right below).
            if index < len(self._block_sources) and self._block_sources[index]:
                self.tracker.remember([(value, self._block_sources[index], reads)])
            return value

        return record

    def _write_output(self, text: str) -> None:
        self.output.write(text)

    def _print_scope(self, _getattr_: Any = None) -> PrintScope:
        return PrintScope(self.output)

    # -- extensions -------------------------------------------------------------------------

    def configure(self, functions: list[str], constants: dict[str, str]) -> Frame:
        """Bind extension function proxies and read-only constants as builtins."""
        for name in self._configured:
            if name in self._original:
                self.builtins[name] = self._original[name]
            else:
                self.builtins.pop(name, None)
        bound: set[str] = set()
        for name in [*functions, *constants]:
            if not name.isidentifier() or name.startswith("_"):
                return {"op": "error", "error": f"invalid extension name {name!r}"}
        for name in functions:
            self.builtins[name] = self._proxy(name)
            bound.add(name)
        for name, encoded in constants.items():
            self.builtins[name] = codec.decode(encoded)
            bound.add(name)
        self._configured = bound
        return {"op": "configured"}

    def _proxy(self, name: str) -> Callable[..., Any]:
        call = self.call_extension

        def extension(*args: Any, **kwargs: Any) -> Any:
            return call(name, args, kwargs)

        extension.__name__ = extension.__qualname__ = name
        return extension

    def host_call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """An extension call made by the worker itself (a library reading or writing a workspace
        file): its arguments may be as large as a file (``HOST_CALL_LIMIT``)."""
        return self.call_extension(name, args, kwargs, limit=HOST_CALL_LIMIT)

    def call_extension(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], limit: int | None = None
    ) -> Any:
        """Send one extension call to the host and wait for its result.

        Args:
            name: The extension function.
            args: Its positional arguments.
            kwargs: Its keyword arguments.
            limit: The largest encoding of the arguments (default: ``CALL_LIMIT``).

        Refused while a recorded definition runs again: a restore does not call the host.
        """
        if self._rebuilding:
            self._refused_calls += 1
            raise ExtensionError(f"{name}() cannot be called while a definition is restored")
        self.provenance.extension_called()
        try:
            encoded_args = self._encode_argument(list(args), limit)
            encoded_kwargs = self._encode_argument(dict(kwargs), limit)
        except CodecError as exc:
            raise TypeError(
                f"the arguments of {name}() cannot be sent to the host: {exc}"
            ) from None
        reply = self._request(
            {"op": "call", "name": name, "args": encoded_args, "kwargs": encoded_kwargs}
        )
        if reply.get("ok"):
            return codec.decode(str(reply["value"]), make_definition=self._make_definition)
        raise ExtensionError(str(reply.get("error") or f"{name}() failed")) from None

    def _encode_argument(self, value: Any, limit: int | None) -> str:
        if limit is None:
            return self.tracker.encode(value, CALL_LIMIT)
        return codec.encode(value, max_bytes=limit)

    # -- restore ----------------------------------------------------------------------------

    def restore(self, imports: dict[str, Any], snapshots: list[Frame], reset: bool) -> Frame:
        """Rebuild variables from snapshots: values decoded (from the chunks the host sent
        before, in ``chunks`` frames), definitions run again."""
        if reset:
            for name in [n for n in self.namespace if not n.startswith("__")]:
                del self.namespace[name]
            self.tracker.forget_all()
        self.output = BlockOutput(self.output_limit)
        self.namespace["_print"] = PrintScope(self.output)
        self._restore_imports(imports)
        pending: list[Frame] = []
        lost: list[str] = []
        for snapshot in snapshots:
            if name_problem(snapshot["name"], self._configured) is not None:
                lost.append(str(snapshot["name"]))  # a name no block could bind (older data)
            elif snapshot.get("encoded") and snapshot["kind"] in ("value", "function"):
                pending.append(snapshot)
            elif snapshot["kind"] != "deleted":
                lost.append(str(snapshot["name"]))
        restored: list[str] = []
        for _ in range(_RESTORE_PASSES):
            done, failed = self._restore_pass(pending)
            restored += done
            progress = len(failed) < len(pending)
            pending = failed
            if not pending or not progress:
                break
        lost.extend(str(s["name"]) for s in pending)
        return {"op": "restored", "restored": restored, "lost": lost}

    def _restore_imports(self, imports: dict[str, Any]) -> None:
        for name, ref in imports.items():
            if name_problem(name, self._configured) is not None:
                continue
            try:
                self.namespace[name] = self.tracker.resolve((str(ref[0]), ref[1]))
                self.tracker.imports[name] = (str(ref[0]), ref[1])
            except Exception:
                pass

    def _restore_pass(self, pending: list[Frame]) -> tuple[list[str], list[Frame]]:
        """Decode what is pending, in order: the names restored, the snapshots that failed."""
        restored: list[str] = []
        failed: list[Frame] = []
        for snapshot in pending:
            name, encoded = str(snapshot["name"]), str(snapshot["encoded"])
            try:
                reached = codec.closure([encoded], self._incoming.__getitem__)
                value = codec.decode(
                    encoded, make_definition=self._make_definition, chunks=reached.__getitem__
                )
            except MemoryError:
                raise
            except Exception:  # a definition needing another one not restored yet, or junk
                failed.append(snapshot)
                continue
            self.namespace[name] = value
            self.tracker.adopt(name, value, encoded, frozenset(reached))
            restored.append(name)
        return restored, failed

    def _make_definition(self, definition: Definition) -> Any:
        """Run a recorded definition again, under the policy of live code (``compile_definition``).

        Only when every name its statement read holds what it held then (``provenance.py``);
        while it runs, extension calls are refused and the block clock reads NaN, so it cannot
        make something other than what it made live. The source is compiled without definition
        hooks, so a restore in the middle of a block (a ``restore_var`` result) leaves that
        block's own hook reports as they are.

        Raises:
            NotRestorable: The definition would not make what it made when it ran.
        """
        problem = self.provenance.problem(definition)
        if problem is not None:
            raise NotRestorable(problem)
        code = compile_definition(definition.source)
        scope: dict[str, Any] = {}
        refused, clock = self._refused_calls, self.clock.now
        self._rebuilding += 1
        self.clock.now = math.nan
        try:
            exec(code, self.namespace, scope)
        finally:
            self._rebuilding -= 1
            self.clock.now = clock
        if self._refused_calls != refused:  # even if the statement caught the refusal
            raise NotRestorable(
                f"{definition.name} cannot be rebuilt as it ran: it calls an extension function"
            )
        name = definition.name if definition.name in scope else defined_name(definition.source)
        value = scope[name or definition.name]
        with contextlib.suppress(TypeError):
            self.tracker.sources[value] = definition
        return value
