"""Chaos test (issue #8 item 3): an elastic job of 4 simulated pods, real torch workers
training a tiny model with checkpoints (train.py), while a seeded random driver kills
workers (SIGKILL/SIGTERM), SIGKILLs agents (and restarts them, as a kubelet would), takes a
pod's link down for 2-5 s and delays DNS for a restarted agent. Invariants are checked while
it runs and at the end; any breach fails the test with the whole event timeline.

    MUSTER_CHAOS_SECONDS   length of the chaos window (default 120), split evenly between
                           the modes that run (CI: 60 s for grpc, 60 s for etcd)
    MUSTER_CHAOS_RDZV      grpc, etcd or grpc,etcd (default): the rendezvous backends
    MUSTER_CHAOS_SEED      replay a run's random schedule (the seed is printed)
    MUSTER_CHAOS_GAP       MIN:MAX seconds between two events (default 4:12)

The pods (tests/integration/pods.py) are network + PID namespaces on a bridge. pod0..pod3 run
`muster run --nnodes 2:4` with 2, 1, 2, 1 workers; pod4 runs `muster serve`, the standalone
rendezvous server docs/design.md §1 has for elastic jobs whose server must outlive every worker pod
(an embedded server would take the job down with its agent). Each agent runs under a small
`sh` as the pod's PID 1, so the kernel does not kill the pod's processes when the agent dies:
whether anything outlives the agent is up to muster (watchdog, PDEATHSIG).

The etcd mode (issue 16, chaos_etcd.py) runs the same job with `--rdzv-backend etcd`
against a 3-member etcd in pod4 instead, and adds SIGKILL of the agent that coordinates
(the oldest node key), SIGTERM of an agent (it leaves the job: exit 143) and SIGKILL of one
etcd member (the leader half of the time), started again 1-4 s later; its agents run with
`--restart-policy OnFailure` and a lease TTL of 5 s (docs/operations/limits.md "etcd backend": a
cut-off pod's peers fail with exit 1 before its lease ends; a SIGKILLed agent is seen at
once, so no exit 1 after one is excused). Same invariants,
plus: the coordinator's death is a lost node (the history says "the coordinator", a
kill or outage explains it), no agent exits 138 but one cut off by its link, an etcd
member's death restarts nothing, no agent key is left in etcd a lease TTL + 1 s after the
last agent ended, and the job's two keys are on the job lease (at most 3 TTLs left).
"""
import signal
import subprocess
import time

import pytest

from chaos_checks import (check_accounting, check_early_end, check_etcd_keys_gone,
                          check_outcome, check_pods_empty, check_round_overlap, check_rounds)
from chaos_common import NPROC, chaos_modes, chaos_seconds, chaos_seed
from chaos_etcd import etcd_available
from chaos_world import Chaos
# chaos_common has put tests/integration on sys.path. The autouse fixtures are imported to
# run around this module's test as they do around the integration tests.
from conftest import (TORCH_PYTHON, TORCH_VERSION,  # noqa: F401
                      _binaries_exist, _no_leftover_processes)
from pods import Pods


@pytest.mark.skipif(TORCH_VERSION is None,
                    reason=f"SKIPPED LOUDLY: no torch importable by {TORCH_PYTHON}; install "
                           f"python3-torch to run the chaos test")
@pytest.mark.parametrize("mode", ["grpc", "etcd"])
def test_chaos(tmp_path, mode):
    if mode not in chaos_modes():
        pytest.skip(f"MUSTER_CHAOS_RDZV={','.join(chaos_modes())} leaves out {mode}")
    if mode == "etcd" and not etcd_available():
        pytest.skip("SKIPPED LOUDLY: etcd-server is not installed (scripts/setup.sh)")
    seconds, seed = chaos_seconds(), chaos_seed()
    replay = f"MUSTER_CHAOS_RDZV={mode} MUSTER_CHAOS_SEED={seed} MUSTER_CHAOS_SECONDS={seconds:.0f}"
    print(f"\nchaos ({mode}) seed {seed} (replay: {replay}), window {seconds:.0f} s",
          flush=True)
    t_start = time.monotonic()
    with Pods(len(NPROC) + 1, tmp_path) as pods:
        chaos = Chaos(pods, tmp_path / "chaos", seed, seconds, mode)
        chaos.root.mkdir()
        try:
            chaos.run()
            chaos.read_records()
            final = chaos.status()
            if chaos.watch is not None:
                try:
                    chaos.watch.wait(20)
                except subprocess.TimeoutExpired:
                    chaos.watch.kill()
            if chaos.job_over and final:
                check_early_end(chaos, final)
            elif not chaos.violations:
                check_outcome(chaos, final)
            checked = check_rounds(chaos, final)
            check_round_overlap(chaos)
            history = check_accounting(chaos, final)
            if chaos.current(0) and all(chaos.current(i).ended_at for i in range(len(NPROC))):
                check_pods_empty(chaos)
                if chaos.etcd is not None:
                    check_etcd_keys_gone(chaos)
        finally:
            chaos.watch_done = True
            if chaos.watch_thread is not None:
                chaos.watch_thread.join(40)
            for o in chaos.outages:
                if o["up"] is None:
                    pods[o["pod"]].link_up()
            if chaos.server is not None and chaos.server.poll() is None:
                chaos.server.send_signal(signal.SIGTERM)
            if chaos.etcd is not None:
                chaos.etcd.stop()
    kills = "\n".join(f"  {k['t'] - chaos.t0:8.2f}s {k['kind']} kill on {k['inc'].name}: "
                      f"{k.get('how', '-')}" for k in chaos.kills)
    steps = max((r["step"] for r in chaos.rows if r["ev"] == "done"), default=None)
    summary = (f"{mode} mode, seed {seed}: {seconds:.0f} s of chaos, "
               f"{time.monotonic() - t_start:.0f} s in all; "
               f"events {chaos.counts}; {len(chaos.tokens)} rounds seen by workers, "
               f"{len(history)} history entries, {final and final['restarts_used']} restarts "
               f"used; {checked} earlier-round keys probed; final step {steps}")
    print(f"\n{summary}\nkills and how the history accounts for them:\n{kills}")
    assert not chaos.violations, (
        f"chaos invariants broken (replay: {replay}):\n" +
        "\n".join(f"  {t - chaos.t0:8.2f}s {v}" for t, v in chaos.violations)
        + f"\n{summary}\ntimeline:\n{chaos.timeline_text()}\nkills:\n{kills}\n"
        + chaos.agent_logs())
    assert chaos.counts["worker_sigkill"] + chaos.counts["worker_sigterm"] > 0 or seconds < 60
    if mode == "grpc":
        assert chaos.counts["agent_sigkill"] > 0 or seconds < 60
    else:
        assert chaos.counts["coordinator_killed"] > 0 or seconds < 60
        assert chaos.counts["etcd_member_kill"] > 0 or seconds < 60
