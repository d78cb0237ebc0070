"""A worker that fills the agent's c10d store past --store-max-bytes (issue 31 item 7):
a small SET, then one of BIG bytes, then a GET. Prints what torch raised and exits 1."""
import datetime
import os
import sys

import torch.distributed as dist

store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                      is_master=False, timeout=datetime.timedelta(seconds=10))
store.set("small", "x")
try:
    store.set("big", "x" * int(os.environ["BIG"]))
    print(f"get after the big set: {store.get('big')[:8]!r}", flush=True)
except Exception as e:  # noqa: BLE001  (what torch raises is the point)
    print(f"store error: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    sys.exit(1)
print("no error", flush=True)
