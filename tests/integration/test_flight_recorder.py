"""Issue 17 item 3: workers get torch's flight recorder settings (both the TORCH_FR_ names
of torch 2.15 and the TORCH_NCCL_ ones older torch reads) unless the user set either name,
with the dump files in the attempt's directory; a failure's root cause names the dump
files found there."""
import json
import re

from conftest import muster_env, run_muster

PY = "/usr/bin/python3"
WRITE_ENV = ("import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))")
# A failing rank that leaves a dump where torch would (prefix + rank), as NCCL's watchdog
# does on a collective timeout.
FAIL_WITH_DUMP = ("import os; p = os.environ['TORCH_FR_DUMP_TEMP_FILE'] + os.environ['RANK'];"
                  " open(p, 'wb').write(b'trace'); raise SystemExit(3)")


def test_workers_get_the_settings_and_a_user_value_wins(tmp_path):
    out = tmp_path / "env.json"
    r = run_muster(["--log-dir", tmp_path / "logs", "--no-python", PY, "-c", WRITE_ENV, out],
                   env=muster_env(TORCH_NCCL_DUMP_ON_TIMEOUT="0"))
    assert r.returncode == 0, r.stderr[-2000:]
    env = json.loads(out.read_text())
    assert env["TORCH_FR_BUFFER_SIZE"] == env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000"
    prefix = env["TORCH_FR_DUMP_TEMP_FILE"]
    assert env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == prefix
    assert re.fullmatch(re.escape(str(tmp_path / "logs")) + r"/none_\w+/attempt_0/"
                        r"flight_recorder_rank_", prefix), prefix
    # The user's choice, in the older spelling, wins over both spellings.
    assert env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "0"
    assert "TORCH_FR_DUMP_ON_TIMEOUT" not in env


def test_root_cause_names_the_dump_files(tmp_path):
    r = run_muster(["--log-dir", tmp_path / "logs", "--nproc-per-node", "1", "--no-python", PY,
                    "-c", FAIL_WITH_DUMP])
    assert r.returncode == 3, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    m = re.search(r"flight recorder traces: (\S+)\)", last)
    assert m, last
    assert m.group(1).endswith("/attempt_0/flight_recorder_rank_0")
    with open(m.group(1), "rb") as f:
        assert f.read() == b"trace"
