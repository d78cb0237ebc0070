"""The etcd backend's security (issue 16 item 4) against a real etcd (Debian's etcd-server)
and real torch workers: TLS with certificates made here with openssl (server certificate
for 127.0.0.1/localhost, client certificates for --client-cert-auth), an etcd user with a
role on the job's prefix (its password from a file, never logged), and every key of a
finished job gone within the lease TTL, after a success and after a failure."""
import json
import os
import subprocess
import time
from types import SimpleNamespace

import pytest

from conftest import MUSTER, fake, muster_env, wait_for
from etcd_cluster import ETCD, EtcdCluster
from test_etcd import CHECK, FAST, finish, lines, start_agents

pytestmark = pytest.mark.skipif(not os.path.exists(ETCD),
                                reason="etcd-server is not installed (scripts/setup.sh)")

TTL = 2  # FAST's lease: heartbeat_interval 1 s x heartbeat_misses 2
# The TLS-and-password job's lease: 4 s. Each of its agents' first calls is a TLS handshake
# and a password check (bcrypt) on one member; on a loaded 2-core machine that outlasted a
# 2 s lease before the first keep-alive.
SECURE_TTL = 4
SECURE_FAST = FAST.replace("heartbeat_misses=2", "heartbeat_misses=4")
JOB_TTL = 3 * TTL  # the job lease: the job's state and status outlive its agents by this


def only_job_keys_left(etcd, prefix):
    """The agents' keys are gone; the job's state and final status wait for the job lease."""
    return set(etcd.keys(prefix)) <= {prefix + "job", prefix + "status"}


def openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    return d / f"{name}.pem"


def make_cert(d, ca, name, ext):
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    (d / f"{name}.ext").write_text(ext + "\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
            cwd=d)
    return d / f"{name}.pem", d / f"{name}.key"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = make_ca(d, "ca")
    wrong_ca = make_ca(d, "wrongca")
    server = make_cert(d, "ca", "server", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                       "extendedKeyUsage=serverAuth,clientAuth")
    client = make_cert(d, "ca", "client", "extendedKeyUsage=clientAuth")
    return {"ca": ca, "wrong_ca": wrong_ca, "server": server, "client": client}


PASSWORD = "s3cret-Pa55-7d1f"


@pytest.fixture(scope="module")
def secure_etcd(pki):
    """One member over TLS that requires a client certificate (--client-cert-auth), with
    auth on: root, and user `muster` whose role may read and write /secure/ only (the job's
    etcd_prefix). One member for every test here: a cluster costs a start, and each job
    below asserts TLS and auth at once."""
    cert, key = pki["server"]
    ccert, ckey = pki["client"]
    cluster = EtcdCluster(
        1, scheme="https",
        member_args=["--cert-file", str(cert), "--key-file", str(key),
                     "--trusted-ca-file", str(pki["ca"]), "--client-cert-auth"],
        ctl_args=["--cacert", str(pki["ca"]), "--cert", str(ccert), "--key", str(ckey)],
        http_too=True)
    for args in (["user", "add", "root", "--new-user-password", "rootpw"],
                 ["user", "add", "muster", "--new-user-password", PASSWORD],
                 ["role", "add", "job"],
                 ["role", "grant-permission", "job", "--prefix=true", "readwrite", "/secure/"],
                 ["user", "grant-role", "muster", "job"],
                 ["auth", "enable"]):
        r = cluster.ctl(*args)
        assert r.returncode == 0, (args, r.stderr)
    cluster.ctl_args += ["--user", "root:rootpw"]
    yield cluster
    cluster.stop()


def tls_conf(pki, ca=None, client=True):
    ccert, ckey = pki["client"]
    conf = f"{FAST},protocol=https,cacert={ca or pki['ca']}"
    return conf + (f",cert={ccert},key={ckey}" if client else "")


def auth_conf(pki, tmp_path, password=PASSWORD, fast=FAST):
    """Mutual TLS and the user `muster` (its password from a file)."""
    pw = tmp_path / "password"
    pw.write_text(password + "\n")
    return (f"{tls_conf(pki).replace(FAST, fast)},etcd_prefix=/secure,username=muster,"
            f"password_file={pw}")


def test_mutual_tls_and_password_job_succeeds_token_renewed_password_never_logged(
        secure_etcd, pki, tmp_path):
    """Two agents over mutual TLS as user `muster`: the job's keys go over TLS under
    etcd_prefix, the token is renewed when etcd drops it, the password is never logged, and
    the keys are gone within the lease TTL after the success."""
    out, release = tmp_path / "out.jsonl", tmp_path / "release"
    procs = start_agents(secure_etcd, "auth", 2, "2", out,
                         conf=auth_conf(pki, tmp_path, fast=SECURE_FAST), hold_world="4",
                         RELEASE=release)
    try:
        wait_for(lambda: len(lines(out)) == 4, timeout=60, interval=0.1, what="the workers")
    except AssertionError:
        for p in procs:
            p.kill()
        raise AssertionError("the workers did not report in 60 s; agents said:\n" +
                             "\n".join(p.communicate()[1][-3000:] for p in procs))
    rows = lines(out)
    assert sorted(int(r["RANK"]) for r in rows) == [0, 1, 2, 3]
    assert {r["sum"] for r in rows} == {10.0}
    assert set(secure_etcd.keys("/secure/auth/")), "the job's keys are under etcd_prefix"
    assert not secure_etcd.keys("/muster/")
    # `muster status` reads the job over the same TLS, as the same user (the agents' keys
    # without the rendezvous tuning): on main it took etcd_prefix only, and could not connect.
    status_conf = ",".join(kv for kv in auth_conf(pki, tmp_path).split(",")
                           if kv.split("=")[0] not in dict(x.split("=") for x in FAST.split(",")))
    r = subprocess.run([str(MUSTER), "status", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                        secure_etcd.endpoints, "--rdzv-id", "auth", "--rdzv-conf", status_conf,
                        "--json"], capture_output=True, text=True, timeout=30, env=muster_env())
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["phase"] == "Running" and PASSWORD not in r.stdout + r.stderr
    r = subprocess.run([str(MUSTER), "status", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                        secure_etcd.endpoints, "--rdzv-id", "auth", "--rdzv-conf",
                        status_conf.replace("password_file=", "password=")],
                       capture_output=True, text=True, timeout=30, env=muster_env())
    assert r.returncode == 2 and "password_file" in r.stderr, r.stderr
    # Turning auth off and on drops every token etcd gave: the agents' calls from now on
    # (keep-alives, the workers' reports) need a new one.
    for args in (["auth", "disable"], ["auth", "enable"]):
        r = secure_etcd.ctl(*args)
        assert r.returncode == 0, r.stderr
    time.sleep(SECURE_TTL)  # keep-alives meet the dropped token for a whole lease
    release.touch()
    results = finish(procs)
    for code, out_text, err in results:
        assert code == 0, err[-3000:]
        assert PASSWORD not in out_text + err
    assert len(lines(out)) == 4  # one round: the workers were never stopped
    # Their keys went over TLS too: the agents' keys are gone within the lease TTL.
    wait_for(lambda: only_job_keys_left(secure_etcd, "/secure/auth/"), timeout=SECURE_TTL + 1,
             interval=0.2, what="the agents' keys to go")


def test_wrong_ca_is_exit_2_at_once(secure_etcd, pki, tmp_path):
    start = time.monotonic()
    # join_timeout 60 s (FAST): a certificate that does not verify does not wait for it.
    [(code, _, err)] = finish(start_agents(secure_etcd, "tls-wrong-ca", 1, "2", tmp_path / "o",
                                           conf=tls_conf(pki, ca=pki["wrong_ca"])), timeout=30)
    assert code == 2, err[-3000:]
    assert "TLS to etcd failed" in err and "cacert" in err, err[-3000:]
    assert time.monotonic() - start < 15


def test_no_client_certificate_is_exit_138_at_the_join_timeout_with_a_hint(secure_etcd, pki,
                                                                          tmp_path):
    # TLS 1.3: etcd drops the connection after the handshake, as a member that went away
    # (no certificate error reaches the client), so it is retried until the join timeout.
    conf = tls_conf(pki, client=False).replace("join_timeout=60s", "join_timeout=3s")
    start = time.monotonic()
    [(code, _, err)] = finish(start_agents(secure_etcd, "tls-no-cert", 1, "2", tmp_path / "o",
                                           conf=conf), timeout=30)
    assert code == 138, err[-3000:]
    assert "give --rdzv-conf cert=PATH,key=PATH" in err, err[-3000:]
    assert time.monotonic() - start < 3 + 8


def test_bad_security_keys_are_exit_2_naming_key_and_path(secure_etcd, pki, tmp_path):
    from conftest import run_muster
    ccert, ckey = pki["client"]
    (tmp_path / "notpem").write_text("hello\n")
    (tmp_path / "pw").write_text("secret\n")
    for conf, env, needle in [
        ("protocol=https,cacert=/nonexistent/ca.pem", {},
         "--rdzv-conf cacert: cannot read '/nonexistent/ca.pem': No such file"),
        (f"protocol=https,ca_cert={tmp_path / 'notpem'}", {},
         f"--rdzv-conf ca_cert: '{tmp_path / 'notpem'}' holds no PEM block"),
        (f"protocol=https,cert={ccert}", {}, "--rdzv-conf cert: give both cert=PATH and key=PATH"),
        (f"cacert={pki['ca']}", {}, "--rdzv-conf cacert: is for etcd over TLS: add protocol=https"),
        ("protocol=ftp", {}, "protocol: 'ftp' must be http or https"),
        ("username=u,password=secret", {}, "password: a password on the command line"),
        ("username=u", {}, "--rdzv-conf username: needs the user's password"),
        (f"password_file={tmp_path / 'pw'}", {}, "--rdzv-conf password_file: needs username"),
        ("username=u,password_file=/nonexistent/pw", {},
         "--rdzv-conf password_file: cannot read '/nonexistent/pw'"),
    ]:
        r = run_muster(["--rdzv-backend", "etcd", "--rdzv-endpoint", secure_etcd.endpoints,
                        "--rdzv-conf", conf, "--nnodes", "2", "--dry-run", str(CHECK)],
                       env=env or None)
        assert r.returncode == 2 and needle in r.stderr, (conf, r.stderr)
    # The keys are etcd's: muster's own rendezvous has flags of its own.
    r = run_muster(["--rdzv-endpoint", "127.0.0.1:29400", "--rdzv-conf",
                    f"protocol=https,cacert={pki['ca']}", "--nnodes", "2", "--dry-run",
                    str(CHECK)])
    assert r.returncode == 2 and "is for --rdzv-backend etcd" in r.stderr, r.stderr
    r = run_muster(["--rdzv-backend", "etcd", "--rdzv-endpoint", secure_etcd.endpoints,
                    "--rdzv-conf", f"protocol=https,cacert={pki['ca']},cert={ccert},key={ckey}",
                    "--nnodes", "2", "--dry-run", str(CHECK)])
    assert r.returncode == 0, r.stderr


def test_wrong_password_is_exit_2_and_not_logged(secure_etcd, pki, tmp_path):
    start = time.monotonic()
    [(code, out_text, err)] = finish(start_agents(
        secure_etcd, "badpw", 1, "2", tmp_path / "o",
        conf=auth_conf(pki, tmp_path, "wrong-" + PASSWORD)), timeout=30)
    assert code == 2, err[-3000:]
    assert "authentication failed" in err and "password_file" in err, err[-3000:]
    assert "wrong-" + PASSWORD not in out_text + err
    assert time.monotonic() - start < 15
    # No user at all against an etcd with auth on: the same, naming the keys to give. Over
    # the member's plain port: a client certificate's CN would be taken as the user.
    plain = SimpleNamespace(endpoints=secure_etcd.http_endpoints)
    [(code, _, err)] = finish(start_agents(plain, "nouser", 1, "2", tmp_path / "o",
                                           conf=f"{FAST},etcd_prefix=/secure"), timeout=30)
    assert code == 2 and "username=NAME,password_file=PATH" in err, err[-3000:]


def test_failed_job_keys_expire(secure_etcd, pki, tmp_path):
    """Rank 1 exits 3 (fake workers: the keys' lifetime needs no torch), the job fails and
    its keys are gone within the job lease."""
    env = muster_env()
    procs = [subprocess.Popen(
        [str(MUSTER), "run", "--rdzv-backend", "etcd", "--rdzv-endpoint", secure_etcd.endpoints,
         "--rdzv-id", "failed", "--rdzv-conf", auth_conf(pki, tmp_path), "--nnodes", "2",
         "--nproc-per-node", "2", "--max-restarts", "0",
         *fake("sleep=0.5", "if-rank=1", "exit=3", "sleep=30")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    results = finish(procs)
    for code, _, err in results:
        assert code != 0, err[-3000:]
    ended = time.monotonic()
    wait_for(lambda: not secure_etcd.keys("/secure/failed/"), timeout=JOB_TTL + 2,
             interval=0.2, what="the failed job's keys to go")
    assert time.monotonic() - ended <= JOB_TTL + 1
