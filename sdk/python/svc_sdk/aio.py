"""AsyncClient: the Client's methods as coroutines, without other dependencies.

Each HTTP exchange runs in a worker thread (``asyncio.to_thread``) over the
synchronous client. ``wait_for_approval`` is cancellable: cancelling the
awaiting task stops the wait at once (the long-poll's socket is shut down, so
the worker thread ends promptly too).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any, Callable, Mapping, Optional, Union

from ._http import Cancel
from .client import Approval, Client, Decision, _bind
from .errors import InvalidRequest
from .redaction import _NO_MASK

__all__ = ["AsyncClient"]


class AsyncClient:
    """Same constructor and methods as :class:`svc_sdk.Client`, awaitable."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sync = Client(*args, **kwargs)

    @property
    def fail_open_count(self) -> int:
        return self.sync.fail_open_count

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def authorize(self, *args: Any, **kwargs: Any) -> Decision:
        return await asyncio.to_thread(self.sync.authorize, *args, **kwargs)

    async def wait_for_approval(self, decision_or_approval_id: Union[Decision, str, Approval], timeout: Optional[float] = None) -> Approval:
        cancel = Cancel()
        fut = asyncio.ensure_future(asyncio.to_thread(self.sync._wait_for_approval, decision_or_approval_id, timeout, cancel))
        # After a cancellation the worker ends with Cancelled: consume it quietly.
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancel.cancel()
            fut.cancel()
            raise

    async def get_receipt(self, receipt_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.get_receipt, receipt_id)

    async def get_receipt_public_key(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.get_receipt_public_key)

    async def verify_receipt(self, d: Decision, call: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.verify_receipt, d, call)

    async def get_checkpoint(self) -> str:
        return await asyncio.to_thread(self.sync.get_checkpoint)

    async def get_inclusion_proof(self, receipt_id: str, tree_size: Optional[int] = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.get_inclusion_proof, receipt_id, tree_size)

    async def verify_inclusion(self, receipt: Any) -> Any:
        """:meth:`Client.verify_inclusion` (a ``receiptlog.InclusionResult``)."""
        return await asyncio.to_thread(self.sync.verify_inclusion, receipt)

    async def run(
        self,
        tool_call: Mapping[str, Any],
        fn: Callable[..., Any],
        *,
        wait: bool = True,
        approval_timeout: Optional[float] = None,
        mask: Any = _NO_MASK,
        **authorize_opts: Any,
    ) -> Any:
        """As :meth:`Client.run`; ``fn`` may be a coroutine function."""
        s = self.sync
        if authorize_opts.get("dry_run"):
            raise InvalidRequest("run() never runs a tool on a dry run", error_code="dry_run")
        call, d = await asyncio.to_thread(s._start, tool_call, authorize_opts)
        if d.decision == "require_approval":
            s._pre_wait(d, wait)
            a = await self.wait_for_approval(d, timeout=approval_timeout)
            call, d = await asyncio.to_thread(s._present, a, d, authorize_opts)
        params = await asyncio.to_thread(s._finish, call, d, mask)
        result = fn(**params)
        if inspect.isawaitable(result):
            result = await result
        return result

    def guard(
        self,
        tool: str,
        action: str,
        resource: Union[None, str, Callable[[dict[str, Any]], Optional[str]]] = None,
        mutates_state: bool = False,
        *,
        wait: bool = True,
        approval_timeout: Optional[float] = None,
        mask: Any = _NO_MASK,
        **authorize_opts: Any,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator for sync or async functions; the wrapper is a coroutine function."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            sig = inspect.signature(fn)

            @functools.wraps(fn)
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                params = _bind(sig, args, kwargs)
                res = resource(dict(params)) if callable(resource) else resource
                call = {"tool": tool, "action": action, "resource": res, "parameters": params}
                return await self.run(call, fn, wait=wait, approval_timeout=approval_timeout, mask=mask,
                                      mutates_state=mutates_state, **authorize_opts)

            return wrapper

        return deco
