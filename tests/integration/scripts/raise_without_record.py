"""Imports torch, then raises ValueError on rank $FAIL_RANK without torch's @record: no
error file, so the agent reports the last lines of the worker's stderr. Other ranks sleep."""
import os
import time

import torch  # noqa: F401  (a real torch worker: its interpreter, its imports)


def main():
    if os.environ["RANK"] == os.environ.get("FAIL_RANK", "1"):
        raise ValueError(f"boom from rank {os.environ['RANK']}")
    time.sleep(30)


if __name__ == "__main__":
    main()
