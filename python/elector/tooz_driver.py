# SPDX-License-Identifier: MIT
"""A tooz backend on elector: ``tooz.coordination.get_coordinator(
"elector://127.0.0.1:2379?ttl=10", member_id)``.

Implemented: leader election (watch_elected_as_leader + run_watchers,
get_leader, stand_down_group_leader), locks (get_lock: the keys of
``etcdctl lock``), heartbeat (the driver thread keeps the leases alive: it only
reports whether they still are), groups (create_group, get_groups,
join_group, leave_group, get_members, get_member_capabilities,
update_capabilities, delete_group: members are keys on the coordinator's
session lease, so a member that dies leaves its groups within the TTL, or at
once with release_on_exit), group watchers (watch_join_group,
watch_leave_group, unwatch_*: tooz's CoordinationDriverCachedRunWatchers, as
its redis and memcached drivers: each run_watchers() reads the watched groups'
members and fires the hooks for the difference from the previous run).

URL: elector://host:port[,host:port...]?ttl=10&user=..&password=..&cacert=..
&cert=..&key=..&release_on_exit=1
"""

from __future__ import annotations

import select
import threading
import urllib.parse
from concurrent import futures
from typing import Any, Callable, Dict, Optional

import tooz
from tooz import coordination, locking, utils

import elector
from elector import _CAMPAIGNING, _FAILED, _LEADING, _RESIGNED, _elector


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


class ElectorLock(locking.Lock):
    """A tooz lock on elector's keys (NAME/<lease>), with its own session."""

    def __init__(self, driver: "ElectorDriver", name: Any) -> None:
        super().__init__(name)
        self._driver = driver
        self._key = name.decode() if isinstance(name, bytes) else str(name)
        self._lock = elector.Lock(driver._client, self._key, driver._ttl, None,
                                  driver._release_on_exit)
        self._held: Optional[elector.Leadership] = None
        self._mu = threading.Lock()

    def acquire(self, blocking: Any = True, shared: bool = False) -> bool:
        if shared:
            raise tooz.NotImplemented
        with self._mu:
            if self._held is not None:
                return False
        if blocking is True:
            timeout: Optional[float] = None
        elif blocking is False:
            timeout = 0.0
        else:
            timeout = float(blocking)
        try:
            held = self._lock.acquire(timeout=timeout)
        except elector.Timeout:
            return False
        except elector.Error as e:
            raise coordination.ToozConnectionError(str(e)) from e
        with self._mu:
            self._held = held
        self._driver._locks.add(self)
        return True

    def release(self) -> bool:
        with self._mu:
            held, self._held = self._held, None
        if held is None:
            return False
        self._driver._locks.discard(self)
        try:
            self._lock.release()
        except elector.LeadershipLost:
            return True  # released; it had been lost before
        return True

    def is_still_owner(self) -> bool:
        held = self._held
        return held is not None and held.is_leader()

    def heartbeat(self) -> bool:
        return self.is_still_owner()


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
        self._release_on_exit = str(opt("release_on_exit", "1")) not in ("0", "false")
        self._auth = {k: opt(k) for k in ("user", "password", "cacert", "cert", "key")}
        self._client: Any = None
        self._session: Optional[elector.Session] = None
        self._elections: Dict[str, Any] = {}
        self._fired: Dict[str, bool] = {}
        self._locks: set = set()  # type: ignore[type-arg]

    # -- lifetime
    def _start(self) -> None:
        try:
            self._client = elector.Client(self._endpoints.split(","), **self._auth)
            self._session = self._client.session(self._ttl,
                                                 release_on_exit=self._release_on_exit,
                                                 timeout=30)
        except elector.Error as e:
            raise coordination.ToozConnectionError(str(e)) from e

    def _stop(self) -> None:
        for lk in list(self._locks):
            lk.release()
        for g in list(self._elections):
            self._stand_down(g)
        if self._session is not None:
            self._session.close()
            self._session = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def heartbeat(self) -> float:
        """The driver thread renews the leases: this only checks them and
        returns how often to call again."""
        if self._session is not None and not self._session.alive():
            raise coordination.ToozConnectionError("elector session lost")
        return self._ttl / 3.0

    # -- locks
    def get_lock(self, name: Any) -> ElectorLock:
        return ElectorLock(self, name)

    # -- leader election
    def watch_elected_as_leader(self, group_id: Any, callback: Callable[..., Any]) -> None:
        super().watch_elected_as_leader(group_id, callback)

    def run_elect_coordinator(self) -> None:
        for gid, hooks in list(self._hooks_elected_leader.items()):
            if not hooks:
                continue
            g = gid.decode() if isinstance(gid, bytes) else str(gid)
            el = self._elections.get(g)
            if el is None:
                if self._session is None:
                    raise coordination.ToozConnectionError("not started")
                el = _elector.Election(self._session._s, g)
                rc = el.campaign(self._member)
                if rc:
                    raise coordination.ToozError(_elector.strerror(rc))
                self._elections[g] = el
                self._fired[g] = False
            phase = el.state()[0]
            if phase == _LEADING and el.is_leader() and not self._fired[g]:
                self._fired[g] = True
                hooks.run(coordination.LeaderElected(gid, self._member_id))
            elif phase not in (_CAMPAIGNING, _LEADING) or (
                    phase == _LEADING and not el.is_leader()):
                # lost or failed: stand in line again at the next run
                self._stand_down(g)

    def run_watchers(self, timeout: Optional[float] = None) -> list:  # type: ignore[type-arg]
        """Fires the group watchers (members joined or left since the last
        run) and the leader-election hooks."""
        result: list = super().run_watchers(timeout)  # type: ignore[type-arg]
        self.run_elect_coordinator()
        return result

    def _stand_down(self, g: str) -> None:
        el = self._elections.pop(g, None)
        self._fired.pop(g, None)
        if el is None:
            return
        try:  # resign and wait (bounded) until etcd deleted our key
            if el.state()[0] in (_CAMPAIGNING, _LEADING) and el.resign() == 0:
                elector._wait_on(
                    el, lambda: True if el.state()[0] in (_FAILED, _RESIGNED) else None,
                    elector._deadline(5.0), "stand down")
        except elector.Error:
            pass
        finally:
            el.free()

    def stand_down_group_leader(self, group_id: Any) -> None:
        g = group_id.decode() if isinstance(group_id, bytes) else str(group_id)
        self._stand_down(g)

    def get_leader(self, group_id: Any) -> coordination.CoordinatorResult:
        g = group_id.decode() if isinstance(group_id, bytes) else str(group_id)
        try:
            ldr = self._client.leader(g)
        except elector.Error as e:
            return _failed(coordination.ToozConnectionError(str(e)))
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
        """Runs a key operation (Driver.put_start, get_start, delete_start) and
        waits for its answer on its fd through select: cooperative under
        eventlet and gevent, interrupted by Ctrl-C; the call ends by the
        client's request timeout."""
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
        return bool(self._kv(self._client._drv.get_start, self._gkey(group_id), False))

    def _result(self, fn: Callable[[], Any]) -> coordination.CoordinatorResult:
        try:
            return _done(fn())
        except tooz.ToozError as e:
            return _failed(e)

    def create_group(self, group_id: Any) -> coordination.CoordinatorResult:
        def create() -> None:
            if self._kv(self._client._drv.put_start, self._gkey(group_id), b"", 0, True) == 1:
                raise coordination.GroupAlreadyExist(group_id)
        return self._result(create)

    def get_groups(self) -> coordination.CoordinatorResult:
        def groups() -> list:  # type: ignore[type-arg]
            pre = self.PREFIX + b"groups/"
            kvs = self._kv(self._client._drv.get_start, pre, True)
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
            if self._kv(self._client._drv.put_start, key, utils.dumps(capabilities),
                        self._session.lease, True) == 1:
                raise coordination.MemberAlreadyExist(group_id, self._member_id)
            self._joined_groups.add(group_id)
        return self._result(join)

    def leave_group(self, group_id: Any) -> coordination.CoordinatorResult:
        def leave() -> None:
            key = self._mprefix(group_id) + _quote(self._member)
            if self._kv(self._client._drv.delete_start, key, False) == 0:
                if not self._group_exists(group_id):
                    raise coordination.GroupNotCreated(group_id)
                raise coordination.MemberNotJoined(group_id, self._member_id)
            self._joined_groups.discard(group_id)
        return self._result(leave)

    def delete_group(self, group_id: Any) -> coordination.CoordinatorResult:
        def delete() -> None:
            if self._kv(self._client._drv.get_start, self._mprefix(group_id), True):
                raise coordination.GroupNotEmpty(group_id)
            if self._kv(self._client._drv.delete_start, self._gkey(group_id), False) == 0:
                raise coordination.GroupNotCreated(group_id)
        return self._result(delete)

    def get_members(self, group_id: Any) -> coordination.CoordinatorResult:
        def members() -> set:  # type: ignore[type-arg]
            pre = self._mprefix(group_id)
            kvs = self._kv(self._client._drv.get_start, pre, True)
            if not kvs and not self._group_exists(group_id):
                raise coordination.GroupNotCreated(group_id)
            return {_unquote(k[len(pre):]) for k, *_ in kvs}
        return self._result(members)

    def get_member_capabilities(self, group_id: Any, member_id: Any
                                ) -> coordination.CoordinatorResult:
        def caps() -> Any:
            key = self._mprefix(group_id) + _quote(_member(member_id))
            kvs = self._kv(self._client._drv.get_start, key, False)
            if not kvs:
                if not self._group_exists(group_id):
                    raise coordination.GroupNotCreated(group_id)
                raise coordination.MemberNotJoined(group_id, member_id)
            return utils.loads(kvs[0][1])
        return self._result(caps)

    def update_capabilities(self, group_id: Any, capabilities: Any
                            ) -> coordination.CoordinatorResult:
        def update() -> None:
            if self._session is None:
                raise coordination.ToozConnectionError("not started")
            key = self._mprefix(group_id) + _quote(self._member)
            if not self._kv(self._client._drv.get_start, key, False):
                if not self._group_exists(group_id):
                    raise coordination.GroupNotCreated(group_id)
                raise coordination.MemberNotJoined(group_id, self._member_id)
            self._kv(self._client._drv.put_start, key, utils.dumps(capabilities),
                     self._session.lease, False)
        return self._result(update)
