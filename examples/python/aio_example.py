# SPDX-License-Identifier: MIT
"""The README's asyncio example, whole: elector.aio embeds the library in the
event loop (no thread); lead.guard() cancels the work the moment leadership is
lost. Ctrl-C resigns; kill -9 hands over in milliseconds (release helper).

    python3 examples/python/aio_example.py [ID [ENDPOINTS [NAME]]]
"""
import asyncio
import signal
import sys

signal.signal(signal.SIGTERM, signal.default_int_handler)  # a stop resigns too

# snippet: aio
import elector.aio

node = sys.argv[1] if len(sys.argv) > 1 else "host-a"
endpoints = sys.argv[2].split(",") if len(sys.argv) > 2 else ["127.0.0.1:2379"]
name = sys.argv[3] if len(sys.argv) > 3 else "my-service"


async def work(lead: elector.aio.Leadership) -> None:
    while True:                                # the leader's work, paced
        await lead.put(f"{name}-state", f"{node} token {lead.token}")  # guarded
        await asyncio.sleep(1)


async def main() -> None:
    async with elector.aio.Client(endpoints) as client:
        async with client.session(ttl=5, release_on_exit=True) as session:
            async with session.campaign(name, node.encode()) as lead:
                print(f"{node}: elected, token {lead.token}", flush=True)
                async with lead.guard():       # cancelled if leadership is lost
                    await work(lead)

try:
    asyncio.run(main())
except KeyboardInterrupt:                      # Ctrl-C: resigned, lease revoked
    print(f"{node}: resigned", flush=True)
# end snippet
