"""PostgreSQL 15 as Debian ships it (stripped, a pre-fork server), traced
with `retwatch trace --follow --pid POSTMASTER` while pgbench runs: every
query of every backend is counted, though each backend lives a fraction of
a second, and ExecutorRun, which tail-calls standard_ExecutorRun (or a hook
through a register), ends at standard_ExecutorRun's RET.

[REF] The counts come from PostgreSQL itself: pgbench's own count of
transactions, and the server's log of every statement it ran
(log_statement = all). scripts/deps.sh unpacks the package into the cache;
the server runs from a copy, as nobody, on a Unix socket in the test's
directory (no TCP port), and is stopped by its PID. Needs root.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import harness
import tracing

PG = "usr/lib/postgresql/15"
CLIENTS, TRANSACTIONS = 4, 500
NOBODY = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups")
STATEMENT = re.compile(r"\bLOG:  statement: (.*)")


def as_nobody(*argv, **kw):
    return subprocess.run([*NOBODY, *argv], capture_output=True, text=True, timeout=120, **kw)


@pytest.fixture(scope="module")
def pg():
    """A PostgreSQL server with pgbench's tables: (postmaster pid, bin dir,
    socket dir, server log path)."""
    harness.deb_binary("postgresql", f"{PG}/bin/postgres")
    # not under pytest's own directory, which nobody cannot enter
    top = tempfile.mkdtemp(prefix="retwatch-pg-")
    os.chmod(top, 0o755)
    try:
        yield from serve(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def serve(top):
    # the cache is under root's home, which nobody cannot enter: a copy
    pkg = os.path.join(harness.DEBS, "postgresql")
    for sub in (PG, "usr/share/postgresql/15"):
        shutil.copytree(os.path.join(pkg, sub), os.path.join(top, "pg", sub), symlinks=True)
    sock = os.path.join(top, "sock")
    os.mkdir(sock)
    subprocess.run(["chown", "-R", "nobody:nogroup", top], check=True)
    bindir = os.path.join(top, "pg", PG, "bin")
    data = os.path.join(top, "data")
    run = as_nobody(f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres",
                    "--no-sync")
    assert run.returncode == 0, run.stdout + run.stderr
    log = os.path.join(top, "server.log")
    with open(log, "w") as out:
        os.chown(log, 65534, 65534)
        server = subprocess.Popen(
            [*NOBODY, f"{bindir}/postgres", "-D", data, "-k", sock, "-c", "listen_addresses=",
             "-c", "jit=off", "-c", "fsync=off", "-c", "autovacuum=off",
             "-c", "log_statement=all"], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "ready to accept connections" not in open(log).read():
            assert server.poll() is None, open(log).read()
            assert time.monotonic() < deadline, open(log).read()
            time.sleep(0.1)
        run = as_nobody(f"{bindir}/pgbench", "-h", sock, "-U", "postgres", "-i", "-s", "1",
                        "-q", "postgres")
        assert run.returncode == 0, run.stdout + run.stderr
        yield server.pid, bindir, sock, log
    finally:
        # a fast shutdown: its backends end, the postmaster last
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def statements_since(log, offset):
    with open(log) as f:
        f.seek(offset)
        return [m.group(1) for m in map(STATEMENT.search, f) if m]


def test_pgbench_backends_are_counted_from_their_fork(pg):
    postmaster, bindir, sock, log = pg
    proc = subprocess.Popen([harness.RETWATCH, "trace", "--json", "--follow", "--pid",
                             str(postmaster), "PortalRun", "ExecutorRun", "standard_ExecutorRun"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = tracing.Stream(proc.stderr)
    try:
        line = err.wait_for(lambda l: l.startswith(tracing.TRACING_LINE), tracing.ATTACH_TIMEOUT)
        assert line is not None, f"no '{tracing.TRACING_LINE}' line: {err.text}"
        offset = os.path.getsize(log)
        bench = as_nobody(f"{bindir}/pgbench", "-h", sock, "-U", "postgres", "-n", "-S",
                          "-c", str(CLIENTS), "-t", str(TRANSACTIONS), "postgres")
        assert bench.returncode == 0, bench.stdout + bench.stderr
        time.sleep(0.5)  # the server's last lines of log
        ran = statements_since(log, offset)
    finally:
        proc.send_signal(signal.SIGINT)
        out = proc.stdout.read()
        proc.wait(timeout=tracing.EXIT_TIMEOUT)
        err.join()
    assert proc.returncode == 0, err.text
    done = re.search(r"number of transactions actually processed: (\d+)/", bench.stdout)
    assert done and int(done.group(1)) == CLIENTS * TRANSACTIONS, bench.stdout
    # pgbench's own transactions, and its few queries of its own
    assert sum(s.startswith("SELECT abalance FROM pgbench_accounts") for s in ran) == \
        CLIENTS * TRANSACTIONS, ran[:10]
    fns = {f["name"]: f for f in json.loads(out)["functions"]}
    for name in ("PortalRun", "ExecutorRun", "standard_ExecutorRun"):
        assert fns[name]["calls"] == len(ran), (name, fns[name], len(ran), err.text)
        assert fns[name]["orphans"] == 0, fns[name]
    # ExecutorRun tail-calls standard_ExecutorRun: both end at its RET
    assert fns["ExecutorRun"]["tail_closed"] == len(ran), fns["ExecutorRun"]
