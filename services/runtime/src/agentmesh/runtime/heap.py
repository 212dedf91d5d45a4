"""The garbage collector of a service process, tuned for the chats' tail latency. A started
service holds a large heap that lives as long as it does — its modules, protobuf descriptors,
SQLAlchemy's and gRPC's machinery, its app — 90,000 to 130,000 objects per service, 170,000 in
`agentmesh up`. Python's full collection scans all of them each time: 70 to 150 ms on this
project's 2-core test machine, with the process stopped, landing on whichever requests are in
flight. `freeze_startup_heap`, called once the
service serves, moves what startup made into the permanent generation (`gc.freeze`), which later
collections skip; what requests make is collected as before. `AGENTMESH_GC_FREEZE=0` leaves the
collector alone (for an A/B, or to rule it out when debugging)."""

from __future__ import annotations

import gc
import os

GC_FREEZE_ENV = "AGENTMESH_GC_FREEZE"


def freeze_startup_heap() -> int:
    """Collects what startup left as garbage, then freezes the rest: the number of objects frozen
    (0 when `AGENTMESH_GC_FREEZE` turns it off)."""
    if os.environ.get(GC_FREEZE_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return 0
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
