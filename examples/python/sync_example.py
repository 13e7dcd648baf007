# SPDX-License-Identifier: MIT
"""The README's Python example, whole: an instance that campaigns, does the
leader's work once a second with guarded writes (a key beside the election's
prefix, never under it), and resigns on Ctrl-C. A crash (kill -9) hands over in
milliseconds: the session's release helper revokes the lease.

    python3 examples/python/sync_example.py [ID [ENDPOINTS [NAME]]]
"""
import signal
import sys
import time

signal.signal(signal.SIGTERM, signal.default_int_handler)  # a stop resigns too

# snippet: sync
import elector

node = sys.argv[1] if len(sys.argv) > 1 else "host-a"
endpoints = sys.argv[2].split(",") if len(sys.argv) > 2 else ["127.0.0.1:2379"]
name = sys.argv[3] if len(sys.argv) > 3 else "my-service"

client = elector.Client(endpoints)             # user=, password=, cacert=, cert=, key=
try:
    with client.session(ttl=5, release_on_exit=True) as session:  # kill -9: ms handover
        with session.campaign(name, node.encode()) as lead:   # waits until elected
            print(f"{node}: elected, token {lead.token}", flush=True)
            while lead.is_leader():            # deadline check, no I/O
                lead.put(f"{name}-state", f"{node} {time.time():.0f}")  # guarded
                time.sleep(1)                  # the leader's work, paced
except KeyboardInterrupt:                      # Ctrl-C: resigned, lease revoked
    print(f"{node}: resigned", flush=True)
print(client.leader(name))    # elector.Leader(key, value, token, lease) or None
client.close()
# end snippet
