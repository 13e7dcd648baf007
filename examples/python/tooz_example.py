# SPDX-License-Identifier: MIT
"""The README's tooz example, whole: an OpenStack-style service that uses tooz
with elector's backend (elector://) to elect one leader per group: it joins
the group, asks to be told when it is elected, drives tooz's watchers from its
own loop, and stands down on Ctrl-C. With release_on_exit=1 in the URL a crash
(kill -9) hands over in milliseconds.

    python3 examples/python/tooz_example.py [ID [ENDPOINTS [GROUP]]]
"""
import signal
import sys
import time

signal.signal(signal.SIGTERM, signal.default_int_handler)  # a stop stands down too

# snippet: tooz
from tooz import coordination

node = sys.argv[1] if len(sys.argv) > 1 else "host-a"
endpoint = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1:2379"
group = (sys.argv[3] if len(sys.argv) > 3 else "my-service").encode()

coord = coordination.get_coordinator(
    f"elector://{endpoint}?ttl=5&release_on_exit=1", node.encode())
coord.start(start_heart=True)
try:
    coord.create_group(group).get()
except coordination.GroupAlreadyExist:
    pass
coord.join_group(group).get()
coord.watch_elected_as_leader(
    group, lambda ev: print(f"{node}: elected in {ev.group_id.decode()}", flush=True))
try:
    while True:
        coord.run_watchers()               # campaigns; calls back once elected
        time.sleep(0.05)
except KeyboardInterrupt:                  # Ctrl-C: stand down, leave, stop
    coord.stand_down_group_leader(group)
    coord.leave_group(group).get()
    coord.stop()
    print(f"{node}: resigned", flush=True)
# end snippet
