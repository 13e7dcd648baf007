# SPDX-License-Identifier: MIT
"""The package's surface: __version__ (the C library's), __all__, dir(); and
errors that name the endpoint and the cause."""

import os
import re
import socket

import pytest

import elector
import elector.aio

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_version_is_the_c_librarys():
    with open(os.path.join(ROOT, "include", "elector", "version.h")) as f:
        header = f.read()
    m = re.search(r'#define ELECTOR_VERSION_STRING "([^"]+)"', header)
    assert m, "ELECTOR_VERSION_STRING not found in version.h"
    parts = [re.search(rf"#define ELECTOR_VERSION_{p} (\d+)", header).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    assert m.group(1) == ".".join(parts)
    assert elector.__version__ == m.group(1)
    # the library the extension runs with
    assert elector._elector.version() == elector.__version__


def test_all_is_complete_and_dir_shows_public_names_only():
    public = {n for n, v in vars(elector).items()
              if not n.startswith("_") and (isinstance(v, type) and v.__module__ == "elector")}
    assert public <= set(elector.__all__), public - set(elector.__all__)
    for n in elector.__all__:
        assert hasattr(elector, n), n
    names = dir(elector)
    for private in ("os", "select", "sys", "Any", "threading", "time", "logging",
                    "weakref", "Optional", "annotations"):
        assert private not in names
    assert "__version__" in names and "Client" in names and "ConnectError" in names
    assert [n for n in names if not n.startswith("__")] == sorted(
        set(elector.__all__) | {"aio"})
    aio = dir(elector.aio)
    assert "asyncio" not in aio and "Any" not in aio
    assert [n for n in aio if not n.startswith("__")] == sorted(elector.aio.__all__)
    # what `from elector import *` gives is what the names say
    ns = {}
    exec("from elector import *", ns)
    assert set(elector.__all__) <= set(ns)


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_etcd_names_the_endpoint_and_the_cause():
    ep = f"127.0.0.1:{_closed_port()}"
    c = elector.Client([ep], dial_timeout=0.5)
    try:
        with pytest.raises(elector.ConnectError) as e:
            c.session(ttl=5, timeout=10)
        assert ep in str(e.value) and "Connection refused" in str(e.value), str(e.value)
        assert str(e.value).startswith("session: cannot connect to etcd")
        with pytest.raises(elector.ConnectError) as e:
            c.leader("x", timeout=10)
        assert ep in str(e.value) and "Connection refused" in str(e.value), str(e.value)
    finally:
        c.close()


def test_unreachable_etcd_aio_names_the_endpoint_and_the_cause():
    import asyncio
    ep = f"127.0.0.1:{_closed_port()}"

    async def main():
        c = elector.aio.Client([ep], dial_timeout=0.5)
        try:
            with pytest.raises(elector.ConnectError) as e:
                await c.session(ttl=5)
            return str(e.value)
        finally:
            await c.close()

    text = asyncio.run(main())
    assert ep in text and "Connection refused" in text, text


def test_guarded_write_to_a_frozen_etcd_says_why(etcd):
    """A guarded put that fails at the transport names the endpoint (the
    client's detail text, carried from the driver's loop thread)."""
    import signal
    c = elector.Client([etcd.endpoint], request_timeout=0.5)
    try:
        with c.session(ttl=30) as s:
            with s.campaign("detail-guarded", b"me") as lead:
                etcd.pause()
                try:
                    with pytest.raises(elector.Error) as e:
                        lead.put("detail-guarded-state", b"x", timeout=10)
                finally:
                    os.kill(etcd.proc.pid, signal.SIGCONT)
                print(type(e.value).__name__, e.value)
                assert etcd.endpoint in str(e.value), str(e.value)
                assert str(e.value).startswith("put b'detail-guarded-state': ")
                lead.put("detail-guarded-state", b"y", timeout=10)
    finally:
        c.close()


def test_aio_guarded_write_to_a_frozen_etcd_says_why(etcd):
    import asyncio
    import signal

    async def main():
        async with elector.aio.Client([etcd.endpoint], request_timeout=0.5) as c:
            async with c.session(ttl=30) as s:
                async with s.campaign("detail-aio", b"me") as lead:
                    etcd.pause()
                    try:
                        with pytest.raises(elector.Error) as e:
                            await lead.put("detail-aio-state", b"x", timeout=10)
                    finally:
                        os.kill(etcd.proc.pid, signal.SIGCONT)
                    await lead.put("detail-aio-state", b"y", timeout=10)
                    return str(e.value)

    text = asyncio.run(main())
    assert etcd.endpoint in text and text.startswith("put b'detail-aio-state': "), text
