"""Writes this worker's environment and argv as JSON to $ENVDUMP_DIR/<LOCAL_RANK>.json."""
import json
import os
import sys

path = os.path.join(os.environ["ENVDUMP_DIR"], os.environ["LOCAL_RANK"] + ".json")
with open(path, "w") as f:
    json.dump({"env": dict(os.environ), "argv": sys.argv}, f)
