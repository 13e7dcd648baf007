# SPDX-License-Identifier: MIT
"""A tooz backend on elector: ``tooz.coordination.get_coordinator(
"elector://127.0.0.1:2379?ttl=10", member_id)``.

Implemented: leader election (watch_elected_as_leader + run_watchers,
get_leader, stand_down_group_leader), locks (get_lock: the keys of
``etcdctl lock``), heartbeat (the driver thread keeps the leases alive: it only
reports whether they still are). Not yet: groups (create_group, join_group,
get_members, ...), which raise tooz.NotImplemented.

URL: elector://host:port[,host:port...]?ttl=10&user=..&password=..&cacert=..
&cert=..&key=..&release_on_exit=1
"""

from __future__ import annotations

import threading
from concurrent import futures
from typing import Any, Callable, Dict, Optional

import tooz
from tooz import coordination, locking

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


class ElectorDriver(coordination.CoordinationDriver):
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
        self.run_elect_coordinator()
        return []

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

    # -- groups: not yet
    def create_group(self, group_id: Any) -> Any:
        raise tooz.NotImplemented

    def get_groups(self) -> Any:
        raise tooz.NotImplemented

    def join_group(self, group_id: Any, capabilities: Any = b"") -> Any:
        raise tooz.NotImplemented

    def leave_group(self, group_id: Any) -> Any:
        raise tooz.NotImplemented

    def delete_group(self, group_id: Any) -> Any:
        raise tooz.NotImplemented

    def get_members(self, group_id: Any) -> Any:
        raise tooz.NotImplemented
