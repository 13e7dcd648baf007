# SPDX-License-Identifier: MIT
"""elector: leader election and locks on etcd v3, over libelector.

    import elector
    client = elector.Client(["127.0.0.1:2379"])
    with client.session(ttl=5) as session:
        with session.campaign("my-service", b"host-a") as lead:
            while lead.is_leader():
                work(fencing_token=lead.token)

The lease is kept alive by libelector's driver thread, which never needs the
GIL. Every blocking call waits on a file descriptor through the ``select``
module, so it is interruptible by Ctrl-C and cooperative under gevent and
eventlet once they have monkey-patched ``select``.
"""

from __future__ import annotations

import os
import select
import sys
import threading
import time
import weakref
from typing import (TYPE_CHECKING, Any, Callable, Iterable, Iterator, List, NamedTuple,
                    Optional, Union)

from . import _elector
from ._version import __version__

if TYPE_CHECKING:
    import logging

__all__ = [
    "Client", "Session", "Leadership", "Lock", "Observer", "Leader",
    "Error", "InvalidArgument", "Unavailable", "ConnectError", "Timeout",
    "Canceled", "TLSError", "ProtocolError", "NoClusterLeader", "Compacted",
    "LeaseExpired", "SessionExpired", "AuthError", "PermissionDenied",
    "TooLarge", "Closed", "NotLeader", "Busy", "ForkError", "DatabaseFull", "Alarm",
    "Restored", "Blocked", "LeadershipLost",
]


def __dir__() -> List[str]:
    """The public names (PEP 562): __all__, __version__, the submodule aio and
    the module's own dunders; not the modules and typing names used inside
    (``aio`` once imported)."""
    g = globals()
    return sorted(set(__all__) | {"__version__"} | {"aio"} & set(g)
                  | {n for n in g if n.startswith("__") and n.endswith("__")})

# ---------------------------------------------------------------- errors


class Error(Exception):
    """Base of every elector error. ``code`` is libelector's ELECTOR_E* value
    (negative), ``name`` its symbolic name ("ETIMEDOUT")."""

    code: int = 0

    def __init__(self, message: str = "", code: Optional[int] = None) -> None:
        if code is not None:
            self.code = code
        self.name = _elector.err_name(self.code) if self.code else ""
        super().__init__(message or _elector.strerror(self.code))


class InvalidArgument(Error, ValueError):
    """An invalid argument (EINVAL): an empty name, a key under the
    election's own prefix, a call on the wrong state."""

    code = _elector.EINVAL


class Unavailable(Error):
    """etcd is unavailable (EUNAVAILABLE): no endpoint answered, or it refused
    the request for now ("too many requests", the connection lost)."""

    code = _elector.EUNAVAILABLE


class ConnectError(Unavailable):
    """No connection to etcd could be made (ECONNECT)."""

    code = _elector.ECONNECT


class NoClusterLeader(Unavailable):
    """The etcd cluster has no Raft leader (ENOLEADER)."""

    code = _elector.ENOLEADER


class Timeout(Error, TimeoutError):
    """The deadline passed before etcd answered (ETIMEDOUT)."""

    code = _elector.ETIMEDOUT


class Canceled(Error):
    """The operation was canceled (ECANCELED): a resign during a campaign, a
    client closed first."""

    code = _elector.ECANCELED


class TLSError(Error):
    """The TLS setup or handshake failed (ETLS)."""

    code = _elector.ETLS


class ProtocolError(Error):
    """The server sent what etcd never sends (EPROTO): a malformed or
    oversized reply."""

    code = _elector.EPROTO


class Compacted(Error):
    """The revision asked for has been compacted (ECOMPACTED)."""

    code = _elector.ECOMPACTED


class LeaseExpired(Error):
    """etcd says the lease is not found or has expired (ELEASE)."""

    code = _elector.ELEASE


class SessionExpired(Error):
    """The session ended (ESESSION): no renewal was proven before its
    validity deadline."""

    code = _elector.ESESSION


class AuthError(Error):
    """Authentication failed (EAUTH): wrong user or password, or an invalid
    token."""

    code = _elector.EAUTH


class PermissionDenied(AuthError):
    """The etcd user may not do this (EPERM)."""

    code = _elector.EPERM


class TooLarge(Error, ValueError):
    """The request is too large for etcd (ETOOLARGE)."""

    code = _elector.ETOOLARGE


class Closed(Error):
    """The handle was closed (ECLOSED)."""

    code = _elector.ECLOSED


class NotLeader(Error):
    """A guarded write found that we no longer lead: nothing was written."""

    code = _elector.ENOTLEADER


class Busy(Error):
    """An operation of the same kind is already in progress (EBUSY): a
    campaign of this name on this session, a proclaim in flight."""

    code = _elector.EBUSY


class ForkError(Error):
    """An object made before fork() was used in the child. The parent's
    sessions belong to the parent; make a new Client in the child."""

    code = _elector.EFORKED


class DatabaseFull(Error):
    """etcd's NOSPACE alarm: its database is full. Compact and defragment, then
    ``etcdctl alarm disarm``."""

    code = _elector.ENOSPACE


class Alarm(Error):
    """Another etcd alarm is raised (``etcdctl alarm list``)."""

    code = _elector.EALARM


class Restored(Error):
    """etcd's revision went back or its cluster ID changed: restored from a
    snapshot? Fencing tokens may be handed out again."""

    code = _elector.ERESTORED


class Blocked(Error):
    """A key without a lease under the election's prefix (NAME/...) comes
    first: it is no candidate's, never goes by itself, and nobody can lead
    until it is deleted (``etcdctl del KEY``). ``key`` names it."""

    code = _elector.EBLOCKED

    def __init__(self, message: str, key: bytes = b"") -> None:
        super().__init__(message)
        self.key = key


def _blocked(name: Union[str, bytes], key: bytes, what: str) -> Blocked:
    k = key.decode("utf-8", "backslashreplace")
    n = name.decode("utf-8", "backslashreplace") if isinstance(name, bytes) else name
    return Blocked(f"{what}: a key without a lease, {k}, blocks election {n}: no "
                   f"candidate can lead until it is deleted (etcdctl del {k})", key)


class LeadershipLost(Error):
    """A campaign block was left after leadership was lost during it: the body's
    work may not have been exclusive. ``code`` is the loss's reason."""


_classes: "tuple[type[Error], ...]" = (
    InvalidArgument, Unavailable, ConnectError, NoClusterLeader, Timeout, Canceled,
    TLSError, ProtocolError, Compacted, LeaseExpired, SessionExpired, AuthError,
    PermissionDenied, TooLarge, Closed, NotLeader, Busy, ForkError, DatabaseFull, Alarm,
    Restored, Blocked)
_by_code: "dict[int, type[Error]]" = {c.code: c for c in _classes}
_by_code[_elector.ETOKEN] = AuthError
_elector._set_fork_error(ForkError)


def _error(code: int, detail: str = "", what: str = "") -> Error:
    cls = _by_code.get(code, Error)
    text = _elector.strerror(code)
    if detail and detail != text:
        text = f"{text}: {detail}"
    if what:
        text = f"{what}: {text}"
    return cls(text, code) if cls is Error else cls(text)


def _check(code: int, what: str = "") -> None:
    if code:
        raise _error(code, what=what)


# ---------------------------------------------------------------- waiting


def _seconds(value: Optional[float], what: str = "timeout") -> Optional[float]:
    """value itself, once known to be None or a number of seconds."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds or None, "
                        f"not {type(value).__name__}")
    if value != value:
        raise InvalidArgument(f"{what} must be a number of seconds, not NaN")
    return value


def _deadline(timeout: Optional[float]) -> Optional[float]:
    t = _seconds(timeout)
    if t is None or t < 0:
        return None
    return time.monotonic() + t


def _remaining(deadline: Optional[float]) -> Optional[float]:
    if deadline is None:
        return None
    return max(0.0, deadline - time.monotonic())


# A revoke's failures that a later attempt may not see: the connection, etcd's
# leader, a deadline, etcd busy (as libelector's elector_session_close_sync()).
_REVOKE_AGAIN = frozenset((_elector.ECONNECT, _elector.EUNAVAILABLE, _elector.ETIMEDOUT,
                           _elector.ENOLEADER, _elector.ETOKEN, _elector.EGRPC))


def _drain(fd: int) -> None:
    try:
        os.read(fd, 8)
    except BlockingIOError:
        pass


def _wait_on(h: Any, cond: Callable[[], Any], deadline: Optional[float],
             what: str) -> Any:
    """Waits until cond() returns something other than None, on an eventfd the
    handle h wakes at each of its events, through select.select (patched by
    gevent and eventlet). Raises Timeout at the deadline."""
    r = cond()
    if r is not None:
        return r
    fd = h.add_waiter()
    try:
        while True:
            r = cond()
            if r is not None:
                return r
            rem = _remaining(deadline)
            if rem is not None and rem <= 0:
                raise Timeout(f"{what}: deadline exceeded")
            if select.select([fd], [], [], rem)[0]:
                _drain(fd)  # only when readable: eventlet's os.read waits otherwise
    finally:
        h.remove_waiter(fd)


def _logger() -> logging.Logger:
    """The "elector" logger. logging is imported on the first message, not
    with the package: a candidate that never logs does without it (0.65-0.8
    MB of RSS, bench/RESULTS.md section 7a)."""
    import logging
    return logging.getLogger("elector")


def _unraisable(exc: BaseException, obj: Any) -> None:
    hook = getattr(sys, "unraisablehook", None)
    if hook is None:  # pragma: no cover
        return

    class _U:
        exc_type = type(exc)
        exc_value = exc
        exc_traceback = exc.__traceback__
        err_msg = "Exception ignored in elector callback"
        object = obj

    hook(_U)


# ---------------------------------------------------------------- values


class Leader(NamedTuple):
    """The leader of an election as read from etcd."""

    key: bytes
    value: bytes
    token: int  # fencing token: the key's create revision
    lease: int


def _name(name: Union[str, bytes]) -> str:
    if not isinstance(name, (str, bytes)):
        raise TypeError(f"election name must be str or bytes, not {type(name).__name__}")
    if isinstance(name, bytes):
        name = name.decode()
    if not name:
        raise InvalidArgument("election name must not be empty")
    if "\0" in name:
        raise InvalidArgument("election name must not contain NUL")
    return name


def _bytes(v: Union[str, bytes, bytearray, memoryview], what: str) -> bytes:
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    raise TypeError(f"{what} must be bytes or str, not {type(v).__name__}")


# ---------------------------------------------------------------- client


class Client:
    """An etcd client with libelector's driver thread.

    endpoints: "host:port" strings (or one comma-separated string); TLS with
    cacert/cert/key (PEM file paths); user/password for etcd's auth."""

    def __init__(self, endpoints: Union[str, Iterable[str]] = ("127.0.0.1:2379",), *,
                 user: Optional[str] = None, password: Optional[str] = None,
                 cacert: Optional[str] = None, cert: Optional[str] = None,
                 key: Optional[str] = None, dial_timeout: Optional[float] = None,
                 request_timeout: Optional[float] = None) -> None:
        if isinstance(endpoints, str):
            eps = endpoints
        else:
            eps = ",".join(endpoints)
        if not eps:
            raise InvalidArgument("no endpoints")
        try:
            self._handle = _elector.Client(
                eps, user, password, cacert, cert, key,
                int((_seconds(dial_timeout, "dial_timeout") or 0) * 1000),
                int((_seconds(request_timeout, "request_timeout") or 0) * 1000),
                own_thread=True)
        except OSError as e:
            if len(e.args) == 2 and isinstance(e.args[0], int):
                raise _error(e.args[0], what="client") from None
            raise
        # a session's close() makes a failed revoke again for up to this long
        # when given no timeout (libelector's request timeout, 5 s by default)
        self._request_timeout = _seconds(request_timeout, "request_timeout") or 5.0
        self._lock = threading.Lock()
        self._watched: "weakref.WeakSet[Leadership]" = weakref.WeakSet()
        self._sessions: "weakref.WeakSet[Session]" = weakref.WeakSet()
        self._pid = os.getpid()
        self._dispatcher: Optional[threading.Thread] = None
        self._stop_r = self._stop_w = -1
        self._closed = False

    # -- lifetime
    def close(self) -> None:
        """Stops the driver: elections resign, sessions revoke their leases. The
        open sessions are closed first as Session.close(timeout=1) does, waiting
        through ``select`` (so a green thread's hub keeps running)."""
        if self._closed:
            return
        if os.getpid() == self._pid:  # a forked child leaves the parent's leases
            for s in list(self._sessions):
                try:
                    s.close(timeout=1.0)
                except Error:
                    pass
        self._closed = True
        t = self._dispatcher
        if t is not None:
            os.write(self._stop_w, b"x")
            if t is not threading.current_thread():
                t.join()
            os.close(self._stop_r)
            os.close(self._stop_w)
        self._handle.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- API
    def session(self, ttl: int = 10, *, release_on_exit: bool = False,
                timeout: Optional[float] = None) -> "Session":
        """A lease of ``ttl`` seconds kept alive by the driver thread; waits for
        the grant. With ``release_on_exit=True`` a helper process revokes the
        lease as soon as this process dies (crash, kill -9), so a successor leads
        at once instead of after the TTL. Off by default, as in C and C++ (the
        library starts no process unless asked); leave it off if the leader's
        work lives on in other processes."""
        return Session(self, ttl, release_on_exit, timeout)

    def leader(self, name: Union[str, bytes], timeout: Optional[float] = None
               ) -> Optional[Leader]:
        """The current leader of ``name``, or None. Waits on a file descriptor
        through ``select`` (cooperative under gevent and eventlet, interrupted
        by Ctrl-C); Timeout after ``timeout`` seconds (None: the client's
        request timeout)."""
        what = f"leader of {name!r}"
        t = _seconds(timeout)
        ms = -1 if t is None else max(1, int(t * 1000))
        op = self._handle.leader_start(_name(name), ms)
        if isinstance(op, int):
            raise _error(op, what=what)
        deadline = _deadline(timeout)
        fd = op.fd()
        r = op.result()
        while r is ...:
            rem = _remaining(deadline)
            if rem is not None and rem <= 0:
                raise Timeout(f"{what}: deadline exceeded")
            select.select([fd], [], [], rem)
            r = op.result()
        if r is None:
            return None
        if isinstance(r, int):
            raise _error(r, op.detail(), what)
        if len(r) == 2:
            raise _blocked(name, r[1], what)
        return Leader(*r)

    def observe(self, name: Union[str, bytes]) -> "Observer":
        """An iterator of the leaders of ``name`` (None: nobody leads), in order."""
        return Observer(self, _name(name))

    def lock(self, name: Union[str, bytes], ttl: int = 10,
             timeout: Optional[float] = None, *, release_on_exit: bool = False) -> "Lock":
        """A lock on the keys of ``etcdctl lock name``; use with ``with``."""
        return Lock(self, _name(name), ttl, timeout, release_on_exit)

    # -- callbacks: one thread per client, started by the first on_lost()
    def _watch(self, lead: "Leadership") -> None:
        with self._lock:
            self._watched.add(lead)
            if self._dispatcher is None and not self._closed:
                self._stop_r, self._stop_w = os.pipe()
                fd = self._handle.add_waiter()
                t = threading.Thread(target=self._dispatch, args=(fd,),
                                     name="elector-callbacks", daemon=True)
                self._dispatcher = t
                t.start()
            elif self._dispatcher is not None:
                self._poke()

    def _poke(self) -> None:
        # wake the dispatcher through a fresh event: a no-op election state
        # check happens on every wake-up anyway
        os.write(self._stop_w, b"p")

    def _dispatch(self, fd: int) -> None:
        try:
            while True:
                for lead in list(self._watched):
                    lead._fire()
                r, _, _ = select.select([fd, self._stop_r], [], [])
                if fd in r:
                    _drain(fd)
                if self._stop_r in r:
                    data = os.read(self._stop_r, 64)
                    if b"x" in data:
                        return
        finally:
            try:
                self._handle.remove_waiter(fd)
            except Exception:
                pass


# ---------------------------------------------------------------- session


class Session:
    """A lease kept alive by the driver thread. Use with ``with`` (revoked on
    exit) or call close()."""

    def __init__(self, client: Client, ttl: int, release_on_exit: bool,
                 timeout: Optional[float]) -> None:
        if ttl < 1:
            raise InvalidArgument("ttl must be at least 1 second")
        self.client = client
        self._s = _elector.Session(client._handle, int(ttl), bool(release_on_exit))
        deadline = _deadline(timeout)
        # The grant is not an event of the driver: check it between waits on
        # the session's waiter fd through select (patched by gevent and
        # eventlet; woken at once if the session is lost), the waits growing
        # from 0.5 ms to 50 ms.
        pause = 0.0005
        fd = -1
        try:
            while True:
                rc = self._s.poll()
                if rc == 0:
                    break
                if rc != _elector.ETIMEDOUT:
                    raise _error(rc, self._lost_detail(), "session")
                rem = _remaining(deadline)
                if rem is not None and rem <= 0:
                    raise Timeout("session: lease not granted in time")
                if fd < 0:
                    fd = self._s.add_waiter()
                if select.select([fd], [], [], pause if rem is None else min(pause, rem))[0]:
                    _drain(fd)
                pause = min(pause * 2, 0.05)
        except BaseException:
            self._s.close()
            raise
        finally:
            if fd >= 0:
                self._s.remove_waiter(fd)
        client._sessions.add(self)
        helper = self._s.helper()
        if release_on_exit and helper < 0:
            _logger().warning(
                "session: no release helper (%s): none at $ELECTOR_RELEASE_HELPER nor "
                "beside libelector nor where it was installed; after a crash the next "
                "candidate waits for the TTL (%d s)", _elector.strerror(helper), ttl)

    def _lost_detail(self) -> str:
        """Why the grant failed ("cannot grant lease: endpoint H:P: connect:
        Connection refused"): the text of the session's SESSION_LOST event,
        which the driver's callback thread delivers right after the failure
        poll() saw; waited for up to 1 s through ``select``."""
        try:
            lost = _wait_on(self._s, self._s.lost, _deadline(1.0), "session")
        except Timeout:
            return ""
        return str(lost[1])

    @property
    def lease(self) -> int:
        """The lease ID."""
        return int(self._s.lease())

    @property
    def release_helper(self) -> int:
        """The release helper's pid while it runs (release_on_exit: it revokes
        the lease as soon as this process is gone); 0 when none was asked for
        or it has stopped; a negative ELECTOR_E* code when it could not start
        (said on the ``elector`` logger when the session starts)."""
        return int(self._s.helper())

    def alive(self) -> bool:
        """True while the lease is provably alive (deadline check, no I/O)."""
        return bool(self._s.alive())

    def campaign(self, name: Union[str, bytes], value: Union[str, bytes] = b"",
                 timeout: Optional[float] = None) -> "Leadership":
        """Campaigns for ``name`` and waits until elected (a Leadership, to use
        with ``with``: resigns on exit). Raises Timeout after ``timeout``
        seconds, leaving no key behind."""
        return Leadership(self, _name(name), _bytes(value, "value"), timeout)

    def close(self, timeout: Optional[float] = 5.0) -> bool:
        """Revokes the lease and waits (through ``select``, up to ``timeout``
        seconds; None: the client's request timeout) until etcd answered, so
        that the lease and its keys are gone when close() returns. True then;
        False when etcd did not answer in time (unreachable, say): the lease
        then expires after its TTL. A revoke that failed on the way (the
        connection, etcd's leader) is made again until then. A second close()
        returns True at once."""
        t = _seconds(timeout)  # a wrong type is refused before anything is closed
        s = self._s
        try:
            lease = s.lease() if s.poll() == 0 else 0
        except ForkError:
            raise
        except (Error, ValueError):  # closed already, or the grant failed
            lease = 0
        if not lease or t is not None and t <= 0:
            s.close()
            return not lease
        ms = 0 if t is None else max(1, int(t * 1000))
        deadline = _deadline(self.client._request_timeout if t is None else t)
        op = s.close_start(ms)  # 0 when the client is closed: it revoked the lease
        # A revoke that failed on the way (the connection, etcd's leader) is
        # made again until the time is up, as elector_session_close_sync()
        # does: the keys go now, not at the end of the TTL.
        attempt = 0
        while True:
            if isinstance(op, int):
                return op == 0
            fd = op.fd()
            while op.result() is None:
                rem = _remaining(deadline)
                if rem is not None and rem <= 0:
                    return False
                select.select([fd], [], [], rem)
            rc = op.result()
            attempt += 1
            if rc not in _REVOKE_AGAIN or rc == _elector.ETIMEDOUT and attempt == 1:
                return rc == 0
            rem = _remaining(deadline)
            if rem is not None and rem <= 0.1:
                return False
            time.sleep(0.1)
            rem = _remaining(deadline)
            try:
                op = self.client._handle.revoke_start(lease,
                                                      max(100, int((rem or 0) * 1000)))
            except ValueError:  # the client was closed meanwhile: not confirmed
                return False

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------- leadership

_IDLE, _CAMPAIGNING, _LEADING, _LOST, _FAILED, _RESIGNED = range(6)


class _LostEvent(threading.Event):
    """threading.Event set once leadership is lost; reads the live state."""

    def __init__(self, lead: "Leadership") -> None:
        super().__init__()
        self._lead = weakref.ref(lead)

    def is_set(self) -> bool:
        lead = self._lead()
        if lead is not None and lead._is_lost():
            if not super().is_set():
                super().set()
            return True
        return super().is_set()

    isSet = is_set

    def wait(self, timeout: Optional[float] = None) -> bool:
        lead = self._lead()
        if lead is None or lead._el is None:
            return self.is_set()
        try:
            _wait_on(lead._el, lambda: True if self.is_set() else None,
                     _deadline(timeout), "lost.wait")
        except Timeout:
            return False
        return True


class Leadership:
    """Our leadership of an election, made by Session.campaign()."""

    def __init__(self, session: Session, name: str, value: bytes,
                 timeout: Optional[float]) -> None:
        self.session = session
        self.name = name
        self._callbacks: List[Callable[["Leadership"], Any]] = []
        self._fired = False
        self._resigned = False
        self._el: Any = _elector.Election(session._s, name)
        self.lost = _LostEvent(self)
        try:
            _check(self._el.campaign(value), f"campaign {name!r}")

            def outcome() -> Optional[bool]:
                phase, reason, detail, *_ = self._el.state()
                if phase == _LEADING:
                    return True
                if phase in (_FAILED, _LOST):
                    raise _error(reason or _elector.ECANCELED, detail,
                                 f"campaign {name!r}")
                return None

            _wait_on(self._el, outcome, _deadline(timeout), f"campaign {name!r}")
        except BaseException:
            self._cancel()
            raise

    def _cancel(self) -> None:
        """Ends a campaign that did not lead (or a leadership): resigns, waits
        for etcd to delete our key (bounded), frees."""
        el = self._el
        if el is None:
            return
        try:
            phase = el.state()[0]
            if phase in (_CAMPAIGNING, _LEADING, _LOST) and el.resign() == 0:
                _wait_on(el, lambda: True if el.state()[0] in (_FAILED, _RESIGNED) else None,
                         _deadline(10.0), "resign")
        except ForkError:
            self._el = None
            raise
        except (Error, KeyboardInterrupt):
            pass
        finally:
            if self._el is not None:
                self._el.free()
                self._el = None

    # -- state
    def _is_lost(self) -> bool:
        el = self._el
        if el is None:
            return not self._resigned
        phase = el.state()[0]
        if phase == _LOST:
            return True
        return phase == _LEADING and not el.is_leader()

    def _fire(self) -> None:
        if self._fired or not self._callbacks or self._el is None:
            return
        try:
            lost = self._is_lost()
        except Error:
            return
        if not lost:
            return
        self._fired = True
        for cb in list(self._callbacks):
            try:
                cb(self)
            except BaseException as e:  # noqa: B902 - reported, never raised here
                _unraisable(e, cb)

    def is_leader(self) -> bool:
        """True while we lead and the lease is provably alive: a deadline check
        on the boot-time clock, no I/O."""
        el = self._el
        return el is not None and bool(el.is_leader())

    @property
    def token(self) -> int:
        """The fencing token: our key's create revision."""
        el = self._el
        if el is None:
            return 0
        return int(el.state()[3])

    @property
    def lease(self) -> int:
        """The lease of our key: the session's lease ID."""
        return self.session.lease

    def on_lost(self, cb: Callable[["Leadership"], Any]) -> None:
        """Calls cb(leadership) once, on the client's callback thread, when
        leadership is lost (not when we resign). An exception in cb goes to
        sys.unraisablehook."""
        self._callbacks.append(cb)
        self.session.client._watch(self)

    def _guarded(self, key: bytes, value: Optional[bytes], timeout: Optional[float],
                 what: str) -> None:
        el = self._el
        why = _elector.guarded_key_check(self.name, key)
        if why is not None:
            raise InvalidArgument(f"{what}: {why}")
        if el is None:
            raise NotLeader(f"{what}: leadership ended")
        op = el.guarded(key, value)
        if isinstance(op, int):
            raise _error(op, what=what)
        deadline = _deadline(timeout)
        fd = op.fd()
        while op.result() is None:
            rem = _remaining(deadline)
            if rem is not None and rem <= 0:
                raise Timeout(f"{what}: no answer in time (the write may be applied)")
            select.select([fd], [], [], rem)
        rc = op.result()
        if rc:
            raise _error(rc, op.detail(), what)

    def put(self, key: Union[str, bytes], value: Union[str, bytes],
            timeout: Optional[float] = None) -> None:
        """Writes key=value only while our key is still the one we were elected
        with (one etcd transaction). Raises NotLeader, writing nothing, once
        leadership is gone."""
        k = _bytes(key, "key")
        self._guarded(k, _bytes(value, "value"), timeout, f"put {k!r}")

    def delete(self, key: Union[str, bytes], timeout: Optional[float] = None) -> None:
        """Deletes key, guarded as put()."""
        k = _bytes(key, "key")
        self._guarded(k, None, timeout, f"delete {k!r}")

    def proclaim(self, value: Union[str, bytes]) -> None:
        """Stores a new value under our key (asynchronous)."""
        if self._el is None:
            raise NotLeader("proclaim: leadership ended")
        _check(self._el.proclaim(_bytes(value, "value")), "proclaim")

    def resign(self) -> None:
        """Gives up leadership and waits until our key is deleted."""
        lost = self._el is not None and self._is_lost()
        self._resigned = not lost
        self._cancel()

    def __enter__(self) -> "Leadership":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        el = self._el
        lost = False
        reason, detail = _elector.ESESSION, ""
        if el is not None:
            try:
                phase, reason, detail, *_ = el.state()
                lost = phase == _LOST or (phase == _LEADING and not el.is_leader())
                if lost and not reason:
                    reason = _elector.ESESSION
            except ForkError:
                self._el = None
                raise
        self._resigned = not lost
        self._cancel()
        if lost and exc_type is None:
            e = LeadershipLost(f"leadership of {self.name!r} was lost during the block: "
                               f"{_elector.strerror(reason)}"
                               + (f": {detail}" if detail else ""), reason)
            raise e


# ---------------------------------------------------------------- lock


class Lock:
    """A mutex on the keys of ``etcdctl lock NAME`` (NAME/<lease>), with its own
    session. ``with client.lock("job") as held:`` — held is the Leadership."""

    def __init__(self, client: Client, name: str, ttl: int, timeout: Optional[float],
                 release_on_exit: bool) -> None:
        self.client = client
        self.name = name
        self.ttl = ttl
        self.timeout = timeout
        self.release_on_exit = release_on_exit
        self._session: Optional[Session] = None
        self._lead: Optional[Leadership] = None

    def acquire(self, timeout: Optional[float] = None) -> Leadership:
        """Makes a session and waits until the lock is ours; returns the
        Leadership (its token fences what the holder writes). timeout in
        seconds (None: the Lock's own); Timeout when it passes, Busy when this
        object holds the lock already."""
        if self._lead is not None:
            raise Busy(f"lock {self.name!r} already held by this object")
        deadline = _deadline(self.timeout if timeout is None else timeout)
        s = self.client.session(self.ttl, release_on_exit=self.release_on_exit,
                                timeout=_remaining(deadline))
        try:
            self._lead = s.campaign(self.name, b"", _remaining(deadline))
        except BaseException:
            s.close()
            raise
        self._session = s
        return self._lead

    def release(self) -> None:
        """Resigns and closes the lock's session (revoking its lease), so the
        next waiter gets the lock at once. Does nothing if not held."""
        lead, s = self._lead, self._session
        self._lead = self._session = None
        try:
            if lead is not None:
                lead.__exit__(None, None, None)
        finally:
            if s is not None:
                s.close()

    def __enter__(self) -> Leadership:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


# ---------------------------------------------------------------- observe

_EV_LEADER, _EV_NO_LEADER, _EV_FAILED = 7, 8, 6


class Observer:
    """Iterates over the leaders of an election (None: nobody leads), in
    order, without duplicates. Close it (or use ``with``) to stop."""

    def __init__(self, client: Client, name: str) -> None:
        self.name = name
        self._o: Any = _elector.Observer(client._handle, name)

    def __iter__(self) -> Iterator[Optional[Leader]]:
        return self

    def next(self, timeout: Optional[float] = None) -> Optional[Leader]:
        """The next state; Timeout after ``timeout`` seconds."""
        if self._o is None:
            raise StopIteration
        ev = _wait_on(self._o, self._o.pop, _deadline(timeout), f"observe {self.name!r}")
        typ, reason, key, value, token, lease = ev
        if typ == _EV_LEADER and reason == _elector.EBLOCKED:
            # Nobody leads: a key without a lease is in the way. Said on the
            # "elector" logger (an iterator of leaders has no other channel);
            # it may be deleted, so observing goes on.
            _logger().error(
                "%s", _blocked(self.name, key, f"observe {self.name!r}"))
            return None
        if typ == _EV_LEADER:
            return Leader(key, value, token, lease)
        if typ == _EV_NO_LEADER:
            return None
        raise _error(reason or _elector.EPROTO, what=f"observe {self.name!r}")

    def __next__(self) -> Optional[Leader]:
        return self.next()

    def close(self) -> None:
        """Stops observing; iteration ends (StopIteration)."""
        if self._o is not None:
            self._o.close()
            self._o = None

    def __enter__(self) -> "Observer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
