# SPDX-License-Identifier: MIT
"""A tooz backend on elector: ``tooz.coordination.get_coordinator(
"elector://127.0.0.1:2379?ttl=10", member_id)``.

Implemented: leader election (watch_elected_as_leader + run_watchers,
get_leader, stand_down_group_leader), locks (get_lock: the keys of
``etcdctl lock``), heartbeat (the driver thread keeps the leases alive: it only
reports whether they still are), groups (create_group, get_groups,
join_group, leave_group, get_members, get_member_capabilities,
get_member_info, update_capabilities, delete_group: members are keys on the coordinator's
session lease, so a member that dies leaves its groups within the TTL, or at
once with release_on_exit), group watchers (watch_join_group,
watch_leave_group, unwatch_*: tooz's CoordinationDriverCachedRunWatchers, as
its redis and memcached drivers: each run_watchers() reads the watched groups'
members and fires the hooks for the difference from the previous run).

URL: elector://host:port[,host:port...]?ttl=10&user=..&password=..&cacert=..
&cert=..&key=..&release_on_exit=1 (release_on_exit: off by default, as
everywhere in elector; with 1 a helper process revokes the session's lease the
moment this process dies, so its locks and memberships go at once)
"""

from __future__ import annotations

import datetime
import select
import threading
import time
import urllib.parse
from concurrent import futures
from typing import Any, Callable, Dict, Optional

import tooz
from tooz import coordination, locking, utils

import elector
from elector import _CAMPAIGNING, _FAILED, _LEADING, _LOST, _RESIGNED, _elector


def _done(value: Any) -> coordination.CoordinatorResult:
    f: "futures.Future[Any]" = futures.Future()
    f.set_result(value)
    return coordination.CoordinatorResult(f)


def _failed(exc: BaseException) -> coordination.CoordinatorResult:
    f: "futures.Future[Any]" = futures.Future()
    f.set_exception(exc)
    return coordination.CoordinatorResult(f)


def _member(m: Any) -> bytes:
    return m if isinstance(m, bytes) else str(m).encode()


def _quote(x: Any) -> bytes:
    return urllib.parse.quote_from_bytes(_member(x), safe="").encode()


def _unquote(b: bytes) -> bytes:
    return urllib.parse.unquote_to_bytes(b)


# A bound on waits that tooz gives no timeout for (a lease grant, the outcome
# of a campaign that does not wait behind another candidate, a resignation).
_BOUND = 30.0


def _campaign(session: elector.Session, name: str, value: bytes,
              deadline: Optional[float], behind: bool) -> Optional[Any]:
    """Campaigns for ``name``; the election handle once it leads. With
    behind=False it gives up as soon as another candidate is ahead (etcd's
    answer to our key: a WAITING event), withdraws its key and returns None, as
    tooz's non-blocking acquire does; with behind=True it waits in line until
    the deadline (None: forever), then withdraws and returns None."""
    el = _elector.Election(session._s, name)
    what = f"campaign {name!r}"
    try:
        events0 = el.state()[5]
        rc = el.campaign(value)
        if rc:
            raise elector._error(rc, what=what)

        def outcome() -> Optional[bool]:
            phase, reason, detail, _tok, _lease, events = el.state()
            if phase == _LEADING:
                return True
            if phase in (_FAILED, _LOST):
                raise elector._error(reason or _elector.ECANCELED, detail, what)
            if not behind and events > events0:
                return False  # WAITING: another candidate is ahead of us
            return None
        try:
            led = elector._wait_on(el, outcome, deadline, what)
        except elector.Timeout:
            if not behind:
                raise
            led = False
    except BaseException:
        _withdraw(el)
        raise
    if not led:
        _withdraw(el)
        return None
    return el


def _withdraw(el: Any) -> None:
    """Resigns (a campaign or a leadership), waits (bounded) until etcd deleted
    our key, frees the handle."""
    try:
        if el.state()[0] in (_CAMPAIGNING, _LEADING, _LOST) and el.resign() == 0:
            elector._wait_on(
                el, lambda: True if el.state()[0] in (_FAILED, _RESIGNED) else None,
                elector._deadline(_BOUND), "resign")
    except elector.Error:
        pass
    finally:
        el.free()


def _conn_error(e: BaseException, endpoints: str) -> coordination.ToozConnectionError:
    return coordination.ToozConnectionError(f"elector: etcd at {endpoints}: {e}")


class ElectorLock(locking.Lock):
    """A tooz lock on the keys of ``etcdctl lock NAME`` (NAME/<lease>): each
    acquisition campaigns with a session (lease) of its own, so that two lock
    objects of one name exclude each other even in one coordinator. One object
    is held at most once: a second acquire() on it, from any thread, waits for
    its release (blocking) or returns False."""

    def __init__(self, driver: "ElectorDriver", name: Any) -> None:
        super().__init__(name)
        self._driver = driver
        self._key = name.decode() if isinstance(name, bytes) else str(name)
        self._cond = threading.Condition()
        self._busy = False  # held, or being acquired, by this object
        self._session: Optional[elector.Session] = None
        self._el: Any = None

    def acquire(self, blocking: Any = True, shared: bool = False) -> bool:
        if shared:
            raise tooz.NotImplemented
        blocking, timeout = utils.convert_blocking(blocking)
        deadline = None if timeout is None else elector._deadline(max(0.0, timeout))
        with self._cond:
            while self._busy:
                if not blocking:
                    return False
                rem = elector._remaining(deadline)
                if rem is not None and rem <= 0:
                    return False
                self._cond.wait(rem)
            self._busy = True
        ok = False
        try:
            client = self._driver._started_client()
            grant = elector._deadline(_BOUND) if deadline is None else deadline
            try:
                s = client.session(self._driver._ttl,
                                   release_on_exit=self._driver._release_on_exit,
                                   timeout=elector._remaining(grant))
            except elector.Timeout:
                if deadline is not None and blocking:
                    return False
                raise
            try:
                el = _campaign(s, self._key, b"", deadline if blocking else
                               elector._deadline(_BOUND), behind=blocking)
            except BaseException:
                s.close()
                raise
            if el is None:
                s.close()
                return False
            self._session, self._el = s, el
            self._driver._locks.add(self)
            ok = True
            return True
        except elector.Error as e:
            raise _conn_error(e, self._driver._endpoints) from e
        finally:
            if not ok:
                with self._cond:
                    self._busy = False
                    self._cond.notify()

    def _owns(self, el: Any) -> bool:
        """Whether etcd still shows our key (of election handle el) as the
        holder's (a linearizable read): false once the lock was broken."""
        if el is None:
            return False
        _phase, _r, _d, token, lease, _ev = el.state()
        try:
            ldr = self._driver._started_client().leader(self._key)
        except elector.Blocked:
            return False
        except elector.Error as e:
            raise _conn_error(e, self._driver._endpoints) from e
        return ldr is not None and ldr.lease == lease and ldr.token == token

    def release(self) -> bool:
        with self._cond:
            el, s = self._el, self._session
            if el is None:
                return False
            self._el = self._session = None
        try:
            owned = self._owns(el)
        except tooz.ToozError:
            owned = el.is_leader()
        finally:
            self._driver._locks.discard(self)
            _withdraw(el)  # deletes only our key (NAME/<our lease>)
            if s is not None:
                s.close()
            with self._cond:
                self._busy = False
                self._cond.notify()
        return owned

    def break_(self) -> bool:
        """Deletes the holder's key (whoever holds it): the next in line, or
        the next acquire(), gets the lock; the holder's release() says False."""
        client = self._driver._started_client()
        try:
            ldr = client.leader(self._key)
            key = None if ldr is None else ldr.key
        except elector.Blocked as e:
            key = e.key
        except elector.Error as e:
            raise _conn_error(e, self._driver._endpoints) from e
        if key is None:
            return False
        return bool(self._driver._kv(client._handle.delete_start, key, False))

    def is_still_owner(self) -> bool:
        return self._owns(self._el)

    def heartbeat(self) -> bool:
        """The driver thread keeps the lease alive: this only says whether we
        hold the lock (a deadline check, no I/O)."""
        el = self._el
        return el is not None and bool(el.is_leader())


class ElectorDriver(coordination.CoordinationDriverCachedRunWatchers):
    """tooz's CoordinationDriver over elector (entry point tooz.backends ->
    elector)."""

    CHARACTERISTICS = (
        coordination.Characteristics.NON_TIMEOUT_BASED,
        coordination.Characteristics.DISTRIBUTED_ACROSS_THREADS,
        coordination.Characteristics.DISTRIBUTED_ACROSS_PROCESSES,
        coordination.Characteristics.DISTRIBUTED_ACROSS_HOSTS,
        coordination.Characteristics.LINEARIZABLE,
    )

    def __init__(self, member_id: Any, parsed_url: Any, options: Dict[str, Any]) -> None:
        super().__init__(member_id, parsed_url, options)
        self._member = _member(member_id)
        self._endpoints = parsed_url.netloc or "127.0.0.1:2379"

        def opt(name: str, default: Any = None) -> Any:
            v = options.get(name, default)
            if isinstance(v, list):
                v = v[-1]
            return v
        self._ttl = int(opt("ttl", 10))
        self._release_on_exit = str(opt("release_on_exit", "0")) not in ("0", "false")
        self._auth = {k: opt(k) for k in ("user", "password", "cacert", "cert", "key")}
        self._client: Any = None
        self._session: Optional[elector.Session] = None
        self._elections: Dict[str, Any] = {}
        self._locks: set = set()  # type: ignore[type-arg]

    # -- lifetime
    def _start(self) -> None:
        client = None
        try:
            client = elector.Client(self._endpoints.split(","), **self._auth)
            self._session = client.session(self._ttl, release_on_exit=self._release_on_exit,
                                           timeout=_BOUND)
        except elector.Error as e:
            if client is not None:
                client.close()
            raise _conn_error(e, self._endpoints) from e
        self._client = client

    def _stop(self) -> None:
        for lk in list(self._locks):
            try:
                lk.release()
            except tooz.ToozError:
                pass
        for g in list(self._elections):
            self._stand_down(g)
        if self._session is not None:
            self._session.close()
            self._session = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def _started_client(self) -> Any:
        if self._client is None:
            raise tooz.ToozError("elector driver has not been started")
        return self._client

    def heartbeat(self) -> float:
        """The driver thread renews the leases: this only checks them and
        returns how often to call again."""
        if self._session is not None and not self._session.alive():
            raise coordination.ToozConnectionError(
                f"elector: etcd at {self._endpoints}: the session's lease is lost")
        return self._ttl / 3.0

    # -- locks
    def get_lock(self, name: Any) -> ElectorLock:
        return ElectorLock(self, name)

    # -- leader election
    # As tooz's ZooKeeper and Redis drivers: each run_watchers() tries to
    # become the leader of every watched group that it does not lead, without
    # waiting in line: when the seat is free it leads and fires the callbacks
    # before it returns; when another member is ahead, it withdraws.
    def run_elect_coordinator(self, timeout: Optional[float] = None) -> None:
        deadline = elector._deadline(_BOUND if timeout is None else timeout)
        for gid, hooks in list(self._hooks_elected_leader.items()):
            if not hooks:
                continue
            g = gid.decode() if isinstance(gid, bytes) else str(gid)
            el = self._elections.get(g)
            if el is not None:
                if el.state()[0] == _LEADING and el.is_leader():
                    continue  # still the leader: elected once, fired once
                self._stand_down(g)  # lost: try again now
            if self._session is None:
                raise tooz.ToozError("elector driver has not been started")
            try:
                el = _campaign(self._session, g, self._member, deadline, behind=False)
            except elector.Timeout as e:
                raise coordination.OperationTimedOut(str(e)) from e
            except elector.Error as e:
                raise _conn_error(e, self._endpoints) from e
            if el is None:
                continue
            self._elections[g] = el
            hooks.run(coordination.LeaderElected(gid, self._member_id))

    def run_watchers(self, timeout: Optional[float] = None) -> list:  # type: ignore[type-arg]
        """Fires the group watchers (members joined or left since the last
        run) and the leader-election hooks."""
        result: list = super().run_watchers(timeout)  # type: ignore[type-arg]
        self.run_elect_coordinator(timeout)
        return result

    def _stand_down(self, g: str) -> None:
        el = self._elections.pop(g, None)
        if el is not None:
            _withdraw(el)

    def stand_down_group_leader(self, group_id: Any) -> None:
        g = group_id.decode() if isinstance(group_id, bytes) else str(group_id)
        self._stand_down(g)

    def get_leader(self, group_id: Any) -> coordination.CoordinatorResult:
        g = group_id.decode() if isinstance(group_id, bytes) else str(group_id)
        try:
            ldr = self._started_client().leader(g)
        except elector.Blocked as e:
            return _failed(coordination.ToozError(str(e)))
        except elector.Error as e:
            return _failed(_conn_error(e, self._endpoints))
        except tooz.ToozError as e:
            return _failed(e)
        return _done(None if ldr is None else ldr.value)

    # -- groups
    # A group is a key without lease, PREFIX groups/<group>; its members are
    # keys on this coordinator's session lease, PREFIX members/<group>/<member>
    # (value: the capabilities, serialized as tooz's drivers do), so that a
    # member whose process dies leaves the group with its lease. Group and
    # member IDs are percent-encoded: a "/" in one cannot reach another's keys.
    PREFIX = b"tooz-elector/"

    def _gkey(self, group_id: Any) -> bytes:
        return self.PREFIX + b"groups/" + _quote(group_id)

    def _mprefix(self, group_id: Any) -> bytes:
        return self.PREFIX + b"members/" + _quote(group_id) + b"/"

    def _kv(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Runs a key operation (the client handle's put_start, get_start,
        delete_start) and waits for its answer on its fd through select:
        cooperative under eventlet and gevent, interrupted by Ctrl-C; the call
        ends by the client's request timeout."""
        if self._client is None:
            raise coordination.ToozConnectionError("not started")
        r = fn(*args, 0)  # 0: the client's request timeout
        if not isinstance(r, int):
            op, fd = r, r.fd()
            r = op.result()
            while r is ...:
                select.select([fd], [], [])
                r = op.result()
        if isinstance(r, int) and r < 0:
            e = elector._error(r, what="tooz group")
            if isinstance(e, (elector.LeaseExpired, elector.SessionExpired)):
                raise coordination.ToozConnectionError(str(e)) from e
            raise coordination.ToozError(str(e)) from e
        return r

    def _group_exists(self, group_id: Any) -> bool:
        return bool(self._kv(self._client._handle.get_start, self._gkey(group_id), False))

    def _result(self, fn: Callable[[], Any]) -> coordination.CoordinatorResult:
        try:
            return _done(fn())
        except tooz.ToozError as e:
            return _failed(e)

    def create_group(self, group_id: Any) -> coordination.CoordinatorResult:
        def create() -> None:
            if self._kv(self._client._handle.put_start, self._gkey(group_id), b"", 0, True) == 1:
                raise coordination.GroupAlreadyExist(group_id)
        return self._result(create)

    def get_groups(self) -> coordination.CoordinatorResult:
        def groups() -> list:  # type: ignore[type-arg]
            pre = self.PREFIX + b"groups/"
            kvs = self._kv(self._client._handle.get_start, pre, True)
            return [_unquote(k[len(pre):]) for k, *_ in kvs]
        return self._result(groups)

    def join_group(self, group_id: Any, capabilities: Any = b""
                   ) -> coordination.CoordinatorResult:
        def join() -> None:
            if self._session is None:
                raise coordination.ToozConnectionError("not started")
            if not self._group_exists(group_id):
                raise coordination.GroupNotCreated(group_id)
            key = self._mprefix(group_id) + _quote(self._member)
            if self._kv(self._client._handle.put_start, key, _pack(capabilities),
                        self._session.lease, True) == 1:
                raise coordination.MemberAlreadyExist(group_id, self._member_id)
            self._joined_groups.add(group_id)
        return self._result(join)

    def leave_group(self, group_id: Any) -> coordination.CoordinatorResult:
        def leave() -> None:
            key = self._mprefix(group_id) + _quote(self._member)
            if self._kv(self._client._handle.delete_start, key, False) == 0:
                if not self._group_exists(group_id):
                    raise coordination.GroupNotCreated(group_id)
                raise coordination.MemberNotJoined(group_id, self._member_id)
            self._joined_groups.discard(group_id)
        return self._result(leave)

    def delete_group(self, group_id: Any) -> coordination.CoordinatorResult:
        def delete() -> None:
            if self._kv(self._client._handle.get_start, self._mprefix(group_id), True):
                raise coordination.GroupNotEmpty(group_id)
            if self._kv(self._client._handle.delete_start, self._gkey(group_id), False) == 0:
                raise coordination.GroupNotCreated(group_id)
        return self._result(delete)

    def get_members(self, group_id: Any) -> coordination.CoordinatorResult:
        def members() -> set:  # type: ignore[type-arg]
            pre = self._mprefix(group_id)
            kvs = self._kv(self._client._handle.get_start, pre, True)
            if not kvs and not self._group_exists(group_id):
                raise coordination.GroupNotCreated(group_id)
            return {_unquote(k[len(pre):]) for k, *_ in kvs}
        return self._result(members)

    def _member_kv(self, group_id: Any, member_id: Any) -> Any:
        key = self._mprefix(group_id) + _quote(_member(member_id))
        kvs = self._kv(self._started_client()._handle.get_start, key, False)
        if not kvs:
            if not self._group_exists(group_id):
                raise coordination.GroupNotCreated(group_id)
            raise coordination.MemberNotJoined(group_id, member_id)
        return kvs[0]

    def get_member_capabilities(self, group_id: Any, member_id: Any
                                ) -> coordination.CoordinatorResult:
        return self._result(lambda: _unpack(self._member_kv(group_id, member_id)[1])[0])

    def get_member_info(self, group_id: Any, member_id: Any
                        ) -> coordination.CoordinatorResult:
        """As tooz's ZooKeeper driver: {"capabilities", "created_at",
        "updated_at"}, the times (naive local datetimes, as ZooKeeper's) when
        the member joined and last updated its capabilities, by the member's
        clock. A member written by an older driver has no times: only
        "capabilities" then."""
        def info() -> Dict[str, Any]:
            caps, created, updated = _unpack(self._member_kv(group_id, member_id)[1])
            r: Dict[str, Any] = {"capabilities": caps}
            if created is not None and updated is not None:
                r["created_at"] = datetime.datetime.fromtimestamp(created)
                r["updated_at"] = datetime.datetime.fromtimestamp(updated)
            return r
        return self._result(info)

    def update_capabilities(self, group_id: Any, capabilities: Any
                            ) -> coordination.CoordinatorResult:
        def update() -> None:
            if self._session is None:
                raise tooz.ToozError("elector driver has not been started")
            kv = self._member_kv(group_id, self._member)
            created = _unpack(kv[1])[1]
            self._kv(self._client._handle.put_start, kv[0], _pack(capabilities, created),
                     self._session.lease, False)
        return self._result(update)

    def _destroy_group(self, group_id: Any) -> None:
        """Deletes a group and its members at once (tooz's tests use it, as
        the etcd3gw driver's)."""
        h = self._started_client()._handle
        self._kv(h.delete_start, self._mprefix(group_id), True)
        self._kv(h.delete_start, self._gkey(group_id), False)


# A member's value: msgpack (tooz's utils.dumps) of {_ENVELOPE: 1,
# "capabilities": ..., "created_at": epoch s, "updated_at": epoch s}; a value
# that is not such a map is an older driver's: the capabilities alone.
_ENVELOPE = "tooz-elector-member"


def _pack(capabilities: Any, created: Optional[float] = None) -> bytes:
    now = time.time()
    return bytes(utils.dumps({_ENVELOPE: 1, "capabilities": capabilities,
                              "created_at": now if created is None else created,
                              "updated_at": now}))


def _unpack(value: bytes) -> "tuple[Any, Optional[float], Optional[float]]":
    v = utils.loads(value)
    if isinstance(v, dict) and v.get(_ENVELOPE) == 1 and "capabilities" in v:
        return v["capabilities"], v.get("created_at"), v.get("updated_at")
    return v, None, None
