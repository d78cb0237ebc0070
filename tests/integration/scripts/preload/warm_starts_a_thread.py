"""A module that leaves a thread running when imported: forking after it is unsafe, so a
--warm-start template that preloads it must exec its ranks (test_warm_start.py)."""
import threading
import time

threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
