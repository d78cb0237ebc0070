"""Issue 7 acceptance 3: other tools can consume the job status through a Python grpcio
client generated from proto/ (Debian's python3-grpc-tools), no muster code involved."""
import importlib
import subprocess
import sys

import pytest

from conftest import FAKE, MUSTER, REPO, muster_env, wait_for
from multinode import free_port

grpc = pytest.importorskip("grpc", reason="SKIPPED LOUDLY: python3-grpcio not installed")
protoc = pytest.importorskip("grpc_tools.protoc",
                             reason="SKIPPED LOUDLY: python3-grpc-tools not installed")


def test_generated_python_client_reads_job_status(tmp_path):
    proto_root = REPO / "proto"
    rc = protoc.main(["protoc", f"-I{proto_root}", f"--python_out={tmp_path}",
                      f"--grpc_python_out={tmp_path}",
                      str(proto_root / "muster" / "v1" / "rendezvous.proto")])
    assert rc == 0
    sys.path.insert(0, str(tmp_path))
    pb = importlib.import_module("muster.v1.rendezvous_pb2")
    pb_grpc = importlib.import_module("muster.v1.rendezvous_pb2_grpc")

    port = free_port()
    agents = [subprocess.Popen([str(MUSTER), "run", "--rdzv-endpoint", f"127.0.0.1:{port}",
                                "--rdzv-id", "py", "--nnodes", "2", "--nproc-per-node", "2",
                                "--no-python", str(FAKE), "sleep=3"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=muster_env()) for _ in range(2)]
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.JobStatusStub(channel)

    def running():
        try:
            reply = stub.Get(pb.GetJobStatusRequest(run_id="py"), timeout=5,
                             wait_for_ready=True)
        except grpc.RpcError:
            return None
        return reply if reply.phase == pb.JOB_PHASE_RUNNING else None

    reply = wait_for(running, 20, what="phase Running through the Python client")
    assert sorted(n.group_rank for n in reply.nodes) == [0, 1]
    assert all(n.local_world_size == 2 for n in reply.nodes)
    for a in agents:
        assert a.wait(60) == 0
    channel.close()
