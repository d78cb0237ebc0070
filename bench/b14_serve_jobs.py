#!/usr/bin/python3
"""B14 (issue 31 item 7): a long-running `muster serve`'s memory over many short jobs.
Target: flat (the server forgets finished and abandoned jobs after --job-retention).

Server: `muster serve --port 0 --job-retention R`, one fresh process per --retention value.
Load: this process, one grpc.aio channel; N one-node jobs, C at a time. Each job: a Session
stream, Join (min = max = 1 node, its own run id), wait for RoundStarted; then half of them
finish (WorkersSucceeded, wait for Finished, hang up) and half are abandoned (the stream is
cancelled mid-round). Every N/8 jobs, and once more 2 x R (at most 10 s) after the last, the server's
RSS (VmRSS) and the jobs it lists (JobStatus/List) are taken. Printed: one table per
retention, then one JSON line per retention with the rows.
"""
import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

import common as c

sys.path.insert(0, str(c.BENCH / "helpers"))
import rdzv_load  # noqa: E402  (for its stub generator)


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def one_job(stub, pb, i, finish):
    spec = pb.JobSpec(min_nodes=1, max_nodes=1, max_restarts=0, join_timeout_ms=60000,
                      last_call_timeout_ms=1000, heartbeat_interval_ms=5000, heartbeat_misses=3,
                      stop_timeout_ms=10000)
    q = asyncio.Queue()

    async def reqs():
        yield pb.AgentMessage(join=pb.Join(run_id=f"b14-{i}", spec=spec, node=pb.NodeInfo(
            node_id=f"b14-n{i}", host="127.0.0.1", address="127.0.0.1", rank_hint=-1,
            local_world_size=1, store_port=0)))
        while True:
            m = await q.get()
            if m is None:
                return
            yield m

    call = stub.Session(reqs())
    async for msg in call:
        kind = msg.WhichOneof("kind")
        if kind == "round_started":
            if not finish:
                break  # abandoned: the stream goes mid-round
            q.put_nowait(pb.AgentMessage(
                workers_succeeded=pb.WorkersSucceeded(round=msg.round_started.assignment.round)))
        elif kind == "finished":
            break
        elif kind == "error":
            raise RuntimeError(msg.error.message)
    q.put_nowait(None)
    call.cancel()


async def run(muster, retention, n, concurrency):
    import grpc
    pb, pbg = rdzv_load.stubs()
    env = {k: v for k, v in os.environ.items() if k != "MUSTER_TOKEN"}
    serve = subprocess.Popen([muster, "serve", "--port", "0", "--job-retention", retention,
                              "--log-level", "warn"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env,
                             start_new_session=True)
    try:
        port = int(serve.stdout.readline().rsplit(":", 1)[1])
        chan = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = pbg.RendezvousStub(chan)
        lister = pbg.JobStatusStub(chan)

        async def sample(done):
            listed = len((await lister.List(pb.ListJobsRequest(), timeout=30)).jobs)
            return {"jobs_done": done, "rss_mb": round(rss_mb(serve.pid), 1), "listed": listed}

        rows = [await sample(0)]
        every = max(1, n // 8)
        sem = asyncio.Semaphore(concurrency)
        done = 0
        started = time.monotonic()

        async def guarded(i):
            nonlocal done
            async with sem:
                await one_job(stub, pb, i, finish=i % 2 == 0)
                done += 1

        for first in range(0, n, every):
            await asyncio.gather(*(guarded(i) for i in range(first, min(n, first + every))))
            rows.append(await sample(done))
        took = time.monotonic() - started
        wait = min(2 * c_duration_s(retention), 10)  # 1h: 10 s, nothing forgotten yet
        await asyncio.sleep(wait)
        rows.append(await sample(done) | {"after_s": wait})
        await chan.close()
        return {"retention": retention, "jobs": n, "seconds": round(took, 1), "rows": rows}
    finally:
        c.kill_group(serve)


def c_duration_s(text):
    units = {"ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    for u in ("ms", "s", "m", "h"):
        if text.endswith(u) and text[:-len(u)].replace(".", "", 1).isdigit():
            return float(text[:-len(u)]) * units[u]
    raise SystemExit(f"--retention: not a duration: {text}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--muster", default=str(c.MUSTER))
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--retention", default="2s,1h",
                    help="comma-separated --job-retention values (1h: nothing forgotten "
                         "during the run, as before retention existed)")
    a = ap.parse_args()
    results = []
    for retention in a.retention.split(","):
        r = asyncio.run(run(a.muster, retention, a.jobs, a.concurrency))
        results.append(r)
        print(f"\nmuster serve --job-retention {retention}: {a.jobs} jobs (half finished, half "
              f"abandoned) in {r['seconds']} s")
        print(f"| {'jobs done':>9} | {'RSS MB':>7} | {'jobs listed':>11} |")
        print(f"|{'-' * 11}|{'-' * 9}|{'-' * 13}|")
        for row in r["rows"]:
            label = f"+{row['after_s']:.0f} s" if "after_s" in row else str(row["jobs_done"])
            print(f"| {label:>9} | {row['rss_mb']:>7} | {row['listed']:>11} |")
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
