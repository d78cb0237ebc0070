"""A module whose import takes WARM_IMPORT_SECONDS (default 30): a stand-in for `import torch`
from a slow filesystem, so that a test can act while a --warm-start template imports
(test_warm_start.py)."""
import os
import time

time.sleep(float(os.environ.get("WARM_IMPORT_SECONDS", "30")))
