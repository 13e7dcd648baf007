# SPDX-License-Identifier: MIT
"""elector.aio: the same elections on an asyncio event loop, with no thread.

libelector runs embedded in the loop: the loop watches the library's one file
descriptor (add_reader) and lets the library do what is due; the library arms
that descriptor's timer for its keepalives and deadlines.

    client = elector.aio.Client(["127.0.0.1:2379"])
    async with client.session(ttl=5) as session:
        async with session.campaign("my-service", b"host-a") as lead:
            async with lead.guard():      # cancelled the moment leadership is lost
                await work(lead.token)
    await client.close()

Keepalives run only when the loop runs: a coroutine that blocks the loop for
longer than the TTL loses the lease (is_leader() then says so). Use the sync
API (elector.Client) where the loop may be blocked.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Callable, Iterable, List, Optional, Set, Union

from . import (_IDLE, _CAMPAIGNING, _LEADING, _LOST, _FAILED, _RESIGNED,  # noqa: F401
               _EV_LEADER, _EV_NO_LEADER, Busy, Error, ForkError, InvalidArgument, Leader,
               LeadershipLost, NotLeader, Timeout, _REVOKE_AGAIN, _bytes, _check, _elector,
               _error, _name, _seconds)

__all__ = ["Client", "Session", "Leadership", "Lock", "Observer"]


def __dir__() -> List[str]:
    """The public names (PEP 562): __all__ and the module's dunders."""
    return sorted(set(__all__) | {n for n in globals()
                                  if n.startswith("__") and n.endswith("__")})


class Client:
    """An etcd client embedded in the running asyncio loop."""

    def __init__(self, endpoints: Union[str, Iterable[str]] = ("127.0.0.1:2379",), *,
                 user: Optional[str] = None, password: Optional[str] = None,
                 cacert: Optional[str] = None, cert: Optional[str] = None,
                 key: Optional[str] = None, dial_timeout: Optional[float] = None,
                 request_timeout: Optional[float] = None) -> None:
        eps = endpoints if isinstance(endpoints, str) else ",".join(endpoints)
        if not eps:
            raise InvalidArgument("no endpoints")
        try:
            self._handle = _elector.Client(
                eps, user, password, cacert, cert, key,
                int((_seconds(dial_timeout, "dial_timeout") or 0) * 1000),
                int((_seconds(request_timeout, "request_timeout") or 0) * 1000),
                own_thread=False)
        except OSError as e:
            if len(e.args) == 2 and isinstance(e.args[0], int):
                raise _error(e.args[0], e.args[1], "client") from None
            raise
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._waiters: Set["asyncio.Future[None]"] = set()
        self._leads: "weakref.WeakSet[Leadership]" = weakref.WeakSet()
        self._sessions: "weakref.WeakSet[Session]" = weakref.WeakSet()
        self._scheduled = False
        self._closed = False
        # a session's close() makes a failed revoke again for up to this long
        # when given no timeout (libelector's request timeout, 5 s by default)
        self._request_timeout = _seconds(request_timeout, "request_timeout") or 5.0

    def _attach(self) -> asyncio.AbstractEventLoop:
        if self._closed:
            raise Error("client is closed")
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
            loop.add_reader(self._handle.fd(), self._ready)
            self._kick()
        elif self._loop is not loop:
            raise Error("elector.aio.Client used from another event loop")
        return loop

    def _kick(self) -> None:
        """Lets the library send what an API call queued (next loop round)."""
        if self._loop is not None and not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._ready)

    def _ready(self) -> None:
        self._scheduled = False
        if self._closed:
            return
        self._handle.process()  # also arms the fd's timer for the next due time
        waiters, self._waiters = self._waiters, set()
        for f in waiters:
            if not f.done():
                f.set_result(None)
        for lead in list(self._leads):
            lead._check()

    async def _wait(self, cond: Callable[[], Any], timeout: Optional[float],
                    what: str) -> Any:
        loop = self._attach()
        t = _seconds(timeout)
        deadline = None if t is None else loop.time() + t
        while True:
            r = cond()
            if r is not None:
                return r
            f: "asyncio.Future[None]" = loop.create_future()
            self._waiters.add(f)
            rem = None if deadline is None else deadline - loop.time()
            if rem is not None and rem <= 0:
                raise Timeout(f"{what}: deadline exceeded")
            try:
                await asyncio.wait_for(f, rem)
            except asyncio.TimeoutError:
                raise Timeout(f"{what}: deadline exceeded") from None

    def session(self, ttl: int = 10, *, release_on_exit: bool = False,
                timeout: Optional[float] = None) -> "Session":
        """A lease of ttl seconds: ``async with client.session(ttl=5) as s``, or
        ``s = await client.session(...)``."""
        if ttl < 1:
            raise InvalidArgument("ttl must be at least 1 second")
        return Session(self, ttl, release_on_exit, timeout)

    def lock(self, name: Union[str, bytes], ttl: int = 10,
             timeout: Optional[float] = None, *, release_on_exit: bool = False) -> "Lock":
        """A lock on the keys of ``etcdctl lock name``: ``async with``."""
        return Lock(self, _name(name), ttl, timeout, release_on_exit)

    def observe(self, name: Union[str, bytes]) -> "Observer":
        """``async for leader in client.observe(name)``: Leader, or None when
        nobody leads, in order."""
        return Observer(self, _name(name))

    async def leader(self, name: Union[str, bytes],
                     timeout: Optional[float] = None) -> Optional[Leader]:
        """The current leader of ``name``, or None (the observer's first state)."""
        async with self.observe(name) as obs:
            return await obs.next(timeout)

    async def close(self, timeout: float = 1.0) -> None:
        """Resigns, revokes the open sessions' leases and waits for etcd's
        answers (up to ``timeout`` seconds in all), frees."""
        if self._closed:
            return
        for lead in list(self._leads):
            await lead._cancel()
        if self._loop is None:
            for s in list(self._sessions):
                s._close_now()
        else:
            due = [s for s in list(self._sessions) if s._close_start(timeout) == 1]
            waits: List[Any] = [s._revoked(timeout) for s in due]
            # and the revokes of sessions dropped without close()
            waits.append(self._wait(lambda: True if self._handle.revokes() == 0 else None,
                                    timeout, "client close"))
            await asyncio.gather(*waits, return_exceptions=True)
            self._loop.remove_reader(self._handle.fd())
        self._closed = True
        self._handle.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class Session:
    """A lease kept alive by the client's loop, made by Client.session():
    ``async with client.session(ttl=5) as s`` (revoked on exit), or
    ``s = await client.session(...)`` and ``await s.close()``."""

    def __init__(self, client: Client, ttl: int, release_on_exit: bool,
                 timeout: Optional[float]) -> None:
        self.client = client
        self._timeout = timeout
        self._s: Any = _elector.Session(client._handle, int(ttl), bool(release_on_exit))
        self._closing: Any = None  # the revoke's Op, after _close_start()
        self._closing_lease = 0  # its lease, to revoke again
        client._sessions.add(self)
        client._kick()

    async def _granted(self) -> "Session":
        def cond() -> Optional[bool]:
            lost = self._s.lost()
            if lost:
                raise _error(lost[0], lost[1], "session")
            return True if self._s.lease() and self._s.alive() else None
        try:
            await self.client._wait(cond, self._timeout, "session")
        except BaseException:
            self._close_now()
            raise
        return self

    def __await__(self) -> Any:
        return self._granted().__await__()

    async def __aenter__(self) -> "Session":
        return await self._granted()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def lease(self) -> int:
        """The lease ID (0 until granted)."""
        return int(self._s.lease())

    def alive(self) -> bool:
        """The lease is provably alive now (its validity deadline has not
        passed). Deadline check, no I/O."""
        return bool(self._s.alive())

    def campaign(self, name: Union[str, bytes], value: Union[str, bytes] = b"",
                 timeout: Optional[float] = None) -> "Leadership":
        """``async with session.campaign(name, value) as lead`` (resigns on exit)
        or ``lead = await session.campaign(...)``."""
        return Leadership(self, _name(name), _bytes(value, "value"), timeout)

    def _close_now(self) -> None:
        self._s.close()
        self.client._kick()

    def _close_start(self, timeout: Optional[float]) -> int:
        """Closes the session and sends the revoke: 1 while its answer is due, 0
        when there was nothing to revoke, < 0 when it could not be sent."""
        t = _seconds(timeout)
        ms = 0 if t is None else max(1, int(t * 1000))
        try:
            self._closing_lease = int(self._s.lease())
        except ValueError:  # closed already
            self._closing_lease = 0
        op = self._s.close_start(ms)
        self.client._kick()
        if isinstance(op, int):
            return op
        self._closing = op
        return 1

    async def close(self, timeout: Optional[float] = 5.0) -> bool:
        """Revokes the lease and waits (on the loop, up to ``timeout`` seconds;
        None: the client's request timeout) until etcd answered, so that the
        lease and its keys are gone when close() returns. True then; False when
        etcd did not answer in time (unreachable, say): the lease then expires
        after its TTL. A revoke that failed on the way (the connection, etcd's
        leader) is made again until then. A second close() returns True at
        once."""
        t = _seconds(timeout)
        if t is not None and t <= 0:
            try:
                had = self._s.lease() != 0
            except ValueError:  # closed already
                had = False
            self._close_now()
            return not had
        rc = self._close_start(timeout)
        if rc != 1:
            return rc == 0
        return await self._revoked(timeout)

    async def _revoked(self, timeout: Optional[float]) -> bool:
        """Waits for the revoke's answer; one that failed on the way (the
        connection, etcd's leader) is made again until the time is up, as
        elector_session_close_sync() does: the keys go now, not at the TTL."""
        loop = asyncio.get_running_loop()
        t = _seconds(timeout)
        end = loop.time() + (self.client._request_timeout if t is None else t)
        op, attempt = self._closing, 0
        while True:
            if op is None:
                return True
            if isinstance(op, int):
                return op == 0
            try:
                rc = await self.client._wait(op.result, max(0.0, end - loop.time()),
                                             "session close")
            except Timeout:
                return False
            attempt += 1
            if (rc not in _REVOKE_AGAIN or rc == _elector.ETIMEDOUT and attempt == 1
                    or not self._closing_lease or end - loop.time() <= 0.1):
                return bool(rc == 0)
            await asyncio.sleep(0.1)
            try:
                op = self.client._handle.revoke_start(
                    self._closing_lease, max(100, int((end - loop.time()) * 1000)))
            except ValueError:  # the client was closed meanwhile: not confirmed
                return False
            self.client._kick()


class Leadership:
    """Our campaign for, then leadership of, an election, made by
    Session.campaign(): ``async with session.campaign(name, value) as lead``
    (resigns on exit) or ``lead = await session.campaign(...)``. ``lost`` is
    an asyncio.Event set when leadership is lost."""

    def __init__(self, session: Session, name: str, value: bytes,
                 timeout: Optional[float]) -> None:
        self.session = session
        self.client = session.client
        self.name = name
        self._value = value
        self._timeout = timeout
        self._el: Any = _elector.Election(session._s, name)
        self.lost = asyncio.Event()
        self._callbacks: List[Callable[["Leadership"], Any]] = []
        self._guards: List["asyncio.Task[Any]"] = []
        self._fired = False
        self._elected = False

    async def _run(self) -> "Leadership":
        if self._elected:
            return self
        try:
            _check(self._el.campaign(self._value), f"campaign {self.name!r}")
            self.client._kick()

            def outcome() -> Optional[bool]:
                phase, reason, detail, *_ = self._el.state()
                if phase == _LEADING:
                    return True
                if phase in (_FAILED, _LOST):
                    raise _error(reason, detail, f"campaign {self.name!r}")
                return None
            await self.client._wait(outcome, self._timeout, f"campaign {self.name!r}")
        except BaseException:
            await asyncio.shield(self._cancel())
            raise
        self._elected = True
        self.client._leads.add(self)
        return self

    def __await__(self) -> Any:
        return self._run().__await__()

    async def __aenter__(self) -> "Leadership":
        return await self._run()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        lost = self._is_lost()
        reason = self._el.state()[1] if self._el is not None else 0
        await self._cancel()
        if lost and exc_type is None:
            raise LeadershipLost(f"leadership of {self.name!r} was lost during the block",
                                 reason or _elector.ESESSION)

    async def _cancel(self) -> None:
        el = self._el
        if el is None:
            return
        self.client._leads.discard(self)
        try:
            if el.state()[0] in (_CAMPAIGNING, _LEADING, _LOST) and el.resign() == 0:
                self.client._kick()
                await self.client._wait(
                    lambda: True if el.state()[0] in (_FAILED, _RESIGNED) else None,
                    10.0, "resign")
        except (Error, asyncio.CancelledError):
            pass
        finally:
            self._el = None
            el.free()
            self.client._kick()

    def _is_lost(self) -> bool:
        el = self._el
        if el is None:
            return False
        phase = el.state()[0]
        return phase == _LOST or (phase == _LEADING and not el.is_leader())

    def _check(self) -> None:
        if self._fired or not self._is_lost():
            return
        self._fired = True
        self.lost.set()
        for t in self._guards:
            t.cancel()
        for cb in self._callbacks:
            try:
                cb(self)
            except BaseException as e:  # noqa: B902
                from . import _unraisable
                _unraisable(e, cb)

    def is_leader(self) -> bool:
        """Deadline check, no I/O."""
        return self._el is not None and bool(self._el.is_leader())

    @property
    def token(self) -> int:
        """The fencing token: our key's create revision (0 once resigned)."""
        return 0 if self._el is None else int(self._el.state()[3])

    def on_lost(self, cb: Callable[["Leadership"], Any]) -> None:
        """cb(leadership) once, on the loop, when leadership is lost."""
        self._callbacks.append(cb)
        if self._fired:
            self.client._loop and self.client._loop.call_soon(cb, self)

    def guard(self) -> "_Guard":
        """``async with lead.guard():`` cancels the body's task the moment
        leadership is lost; the block then raises LeadershipLost."""
        return _Guard(self)

    async def _guarded(self, key: bytes, value: Optional[bytes], timeout: Optional[float],
                       what: str) -> None:
        if self._el is None:
            raise NotLeader(f"{what}: leadership ended")
        op = self._el.guarded(key, value)
        if isinstance(op, int):
            raise _error(op, what=what)
        self.client._kick()
        await self.client._wait(op.result, timeout, what)
        rc = op.result()
        if rc:
            raise _error(rc, op.detail(), what)

    async def put(self, key: Union[str, bytes], value: Union[str, bytes],
                  timeout: Optional[float] = None) -> None:
        """Guarded put: raises NotLeader, writing nothing, once leadership is gone."""
        k = _bytes(key, "key")
        await self._guarded(k, _bytes(value, "value"), timeout, f"put {k!r}")

    async def delete(self, key: Union[str, bytes], timeout: Optional[float] = None) -> None:
        """Guarded delete: raises NotLeader, deleting nothing, once leadership
        is gone."""
        k = _bytes(key, "key")
        await self._guarded(k, None, timeout, f"delete {k!r}")

    async def resign(self) -> None:
        """Gives up leadership, or stops the campaign, and waits (up to 10 s)
        until our key is deleted. Does nothing once resigned."""
        await self._cancel()


class _Guard:
    def __init__(self, lead: Leadership) -> None:
        self.lead = lead
        self.task: Optional["asyncio.Task[Any]"] = None

    async def __aenter__(self) -> Leadership:
        if not self.lead.is_leader():
            raise LeadershipLost(f"not leading {self.lead.name!r}", _elector.ESESSION)
        self.task = asyncio.current_task()
        assert self.task is not None
        self.lead._guards.append(self.task)
        return self.lead

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if self.task is not None and self.task in self.lead._guards:
            self.lead._guards.remove(self.task)
        if self.lead._fired:
            if exc_type is asyncio.CancelledError and self.task is not None:
                self.task.uncancel() if hasattr(self.task, "uncancel") else None
            raise LeadershipLost(f"leadership of {self.lead.name!r} was lost",
                                 _elector.ESESSION)
        return False


class Observer:
    """Iterates over the leaders of an election (None: nobody leads), in
    order, without duplicates: ``async for leader in client.observe(name)``.
    Close it (or use ``async with``) to stop."""

    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        self.name = name
        self._o: Any = _elector.Observer(client._handle, name)
        client._kick()

    async def next(self, timeout: Optional[float] = None) -> Optional[Leader]:
        """The next state; Timeout after ``timeout`` seconds."""
        if self._o is None:
            raise StopAsyncIteration
        ev = await self.client._wait(self._o.pop, timeout, f"observe {self.name!r}")
        typ, reason, key, value, token, lease = ev
        if typ == _EV_LEADER:
            return Leader(key, value, token, lease)
        if typ == _EV_NO_LEADER:
            return None
        raise _error(reason or _elector.EPROTO, what=f"observe {self.name!r}")

    def __aiter__(self) -> "Observer":
        return self

    async def __anext__(self) -> Optional[Leader]:
        return await self.next()

    def close(self) -> None:
        """Stops observing; iteration ends (StopAsyncIteration)."""
        if self._o is not None:
            self._o.close()
            self._o = None
            self.client._kick()

    async def __aenter__(self) -> "Observer":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


class Lock:
    """A mutex on the keys of ``etcdctl lock NAME``, with its own session,
    made by Client.lock(): ``async with client.lock("job") as held:`` (held is
    the Leadership; the session is closed on exit, so the next waiter gets the
    lock at once). Busy if this object already holds it."""

    def __init__(self, client: Client, name: str, ttl: int, timeout: Optional[float],
                 release_on_exit: bool) -> None:
        self.client, self.name, self.ttl = client, name, ttl
        self.timeout, self.release_on_exit = timeout, release_on_exit
        self._session: Optional[Session] = None
        self._lead: Optional[Leadership] = None

    async def __aenter__(self) -> Leadership:
        if self._lead is not None:
            raise Busy(f"lock {self.name!r} already held by this object")
        s = await self.client.session(self.ttl, release_on_exit=self.release_on_exit,
                                      timeout=self.timeout)
        try:
            self._lead = await s.campaign(self.name, b"", self.timeout)
        except BaseException:
            await s.close()
            raise
        self._session = s
        return self._lead

    async def __aexit__(self, *exc: Any) -> None:
        lead, s = self._lead, self._session
        self._lead = self._session = None
        try:
            if lead is not None:
                await lead.__aexit__(None, None, None)
        finally:
            if s is not None:
                await s.close()
