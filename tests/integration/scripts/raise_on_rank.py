"""Raises ValueError on rank $FAIL_RANK under torch's @record; other ranks sleep."""
import os
import time

from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    if os.environ["RANK"] == os.environ.get("FAIL_RANK", "1"):
        raise ValueError(f"boom from rank {os.environ['RANK']}")
    time.sleep(30)


if __name__ == "__main__":
    main()
