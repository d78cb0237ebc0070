#!/usr/bin/python3
"""rdzv_load: M simulated muster agents against a real `muster serve` (B2, reference/perf.md §7).

    rdzv_load.py PORT M [--heartbeat-secs S] [--hb-interval-ms I] [--run-id ID]
                        [--local-world-size L] [--report-workers]

Every agent has its own gRPC channel (own TCP connection: local subchannel pool), all in one
asyncio process (grpc.aio). Phase 1 connects every channel (channel_ready, concurrently) and
reports connect_ms. Phase 2 opens M Session streams; each sends Join (min_nodes = max_nodes =
M, so the round starts when the last agent joins) and waits for RoundStarted; round_ms = first
Join written -> last RoundStarted received. With --heartbeat-secs S the agents then stay
joined and send Heartbeat every I ms for S seconds (the driver samples the server meanwhile).
Prints one JSON line on stdout; "hb_window" lines on stderr mark the heartbeat window.
Each agent claims L local workers (default 1); with --report-workers it also sends
WorkersStarted (made-up pids) after RoundStarted, as a real agent does, so that the job status
lists M x L workers with pids (bench/b10_status.py).
Stubs are generated at run time from proto/muster/v1/rendezvous.proto with grpc_tools.
"""
import argparse
import asyncio
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]


def stubs():
    out = tempfile.mkdtemp(prefix="muster-b2-pb-")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{REPO / 'proto'}",
                    f"--python_out={out}", f"--grpc_python_out={out}",
                    str(REPO / "proto" / "muster" / "v1" / "rendezvous.proto")], check=True)
    sys.path.insert(0, out)
    from muster.v1 import rendezvous_pb2, rendezvous_pb2_grpc  # noqa: E402
    return rendezvous_pb2, rendezvous_pb2_grpc


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("m", type=int)
    ap.add_argument("--run-id", default="b2")
    ap.add_argument("--heartbeat-secs", type=float, default=0)
    ap.add_argument("--hb-interval-ms", type=int, default=1000)
    ap.add_argument("--local-world-size", type=int, default=1)
    ap.add_argument("--report-workers", action="store_true")
    return ap.parse_args()


class Round:
    """M agents' Session streams over their own channels, in one asyncio loop; counts the
    RoundStarted replies and times the first Join and the last RoundStarted."""

    def __init__(self, a, pb, pbg, chans):
        self.a, self.pb, self.pbg, self.chans = a, pb, pbg, chans
        M = a.m
        self.spec = pb.JobSpec(min_nodes=M, max_nodes=M, max_restarts=0, join_timeout_ms=600000,
                               last_call_timeout_ms=1000, heartbeat_interval_ms=a.hb_interval_ms,
                               heartbeat_misses=30, stop_timeout_ms=10000)
        self.done = asyncio.Event()
        self.hb_stop = asyncio.Event()
        self.got = 0
        self.t_first = None
        self.t_last = None
        self.errors = []

    async def agent(self, i):
        import grpc
        a, pb = self.a, self.pb
        stub = self.pbg.RendezvousStub(self.chans[i])
        q = asyncio.Queue()
        join = pb.AgentMessage(join=pb.Join(run_id=a.run_id, spec=self.spec, node=pb.NodeInfo(
            node_id=f"b2-{i}", host="127.0.0.1", address="127.0.0.1", rank_hint=-1,
            local_world_size=a.local_world_size, store_port=0)))

        async def reqs():
            if self.t_first is None:
                self.t_first = time.monotonic()
            yield join
            while True:
                m = await q.get()
                if m is None:
                    return
                yield m
        call = stub.Session(reqs())
        try:
            async for msg in call:
                if msg.WhichOneof("kind") == "round_started":
                    if a.report_workers:
                        asg = msg.round_started.assignment
                        q.put_nowait(pb.AgentMessage(workers_started=pb.WorkersStarted(
                            round=asg.round, workers=[
                                pb.StartedWorker(local_rank=lr, rank=asg.rank_base + lr,
                                                 pid=100000 + asg.rank_base + lr)
                                for lr in range(a.local_world_size)])))
                    self.got += 1
                    if self.got == a.m:
                        self.t_last = time.monotonic()
                        self.done.set()
                    break
                if msg.WhichOneof("kind") == "error":
                    self.errors.append(msg.error.message)
                    self.done.set()
                    return
        except grpc.aio.AioRpcError as e:
            self.errors.append(str(e.code()))
            self.done.set()
            return
        if a.heartbeat_secs > 0:
            while not self.hb_stop.is_set():
                try:
                    await asyncio.wait_for(self.hb_stop.wait(), a.hb_interval_ms / 1000)
                except asyncio.TimeoutError:
                    q.put_nowait(pb.AgentMessage(heartbeat=pb.Heartbeat()))
        q.put_nowait(pb.AgentMessage(leave=pb.Leave(why="benchmark over")))
        q.put_nowait(None)
        call.cancel()


async def main():
    a = parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    pb, pbg = stubs()
    import grpc
    M = a.m
    opts = [("grpc.use_local_subchannel_pool", 1), ("grpc.enable_retries", 0)]
    chans = [grpc.aio.insecure_channel(f"127.0.0.1:{a.port}", options=opts) for _ in range(M)]
    cpu0 = time.process_time()
    t0 = time.monotonic()
    await asyncio.wait_for(asyncio.gather(*(ch.channel_ready() for ch in chans)), 300)
    connect_ms = (time.monotonic() - t0) * 1e3
    cpu_connect = time.process_time() - cpu0
    rnd = Round(a, pb, pbg, chans)
    cpu1 = time.process_time()
    tasks = [asyncio.ensure_future(rnd.agent(i)) for i in range(M)]
    await asyncio.wait_for(rnd.done.wait(), 600)
    cpu_round = time.process_time() - cpu1
    errors = rnd.errors
    res = {"m": M, "connect_ms": connect_ms, "client_cpu_connect_s": cpu_connect,
           "round_ms": (rnd.t_last - rnd.t_first) * 1e3 if rnd.t_last else None,
           "client_cpu_round_s": cpu_round, "errors": errors[:3], "n_errors": len(errors)}
    if a.heartbeat_secs > 0 and not errors:
        await asyncio.sleep(1.5)  # settle: every agent in its heartbeat loop
        cpu2 = time.process_time()
        print(f"hb_window start {time.monotonic()}", file=sys.stderr, flush=True)
        await asyncio.sleep(a.heartbeat_secs)
        print(f"hb_window end {time.monotonic()}", file=sys.stderr, flush=True)
        res["client_cpu_hb_s"] = time.process_time() - cpu2
    rnd.hb_stop.set()
    await asyncio.wait(tasks, timeout=10)
    print(json.dumps(res), flush=True)
    os._exit(0)  # closing thousands of channels one by one takes longer than the benchmark


if __name__ == "__main__":
    asyncio.run(main())
