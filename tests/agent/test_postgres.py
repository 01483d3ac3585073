"""PostgreSQL 15 as Debian ships it (stripped, a pre-fork server) in a pod,
with pg_stat_statements loaded as most installations have it, under a
FunctionProbe while pgbench runs in the same pod: every statement of every
backend is counted, each backend forked per connection and living a
fraction of a second (with -C, one per transaction), long before the
agent's scan of /proc would see it. ExecutorRun leaves through the
extension's hook (an indirect tail jump into another file, to a function
without a symbol): where the jump goes is read as it runs, and the calls
after the first few end at the hook's RET, timed.

[REF] The counts come from PostgreSQL itself: the server's log of every
statement it ran (log_statement = all), and pgbench's count of its
transactions. scripts/deps.sh unpacks the package into the cache; the
image is made from it and the C runtime its programs link (what ldd
lists). The server runs as nobody, on a Unix socket in the pod's /tmp."""

import os
import re
import shutil

import pytest

import pods
from agentproc import wait_for
from test_agent import attached_log, fns, spec, stats
from test_slowest import duration_ns

DEBS = os.path.join(os.environ.get("RETWATCH_CACHE", os.path.expanduser("~/.cache/retwatch")),
                    "debs")
PG = "usr/lib/postgresql/15"
CLIENTS, TRANSACTIONS = 4, 500
FUNCS = ["PortalRun", "ExecutorRun", "standard_ExecutorRun"]
NOBODY = (65534, 65534)  # the server refuses to run as root
STATEMENT = re.compile(r"\bLOG:  statement: (.*)")
SELECT = "SELECT abalance FROM pgbench_accounts"


def pg_package():
    """The unpacked package's root; skips where deps.sh could not fetch it."""
    pkg = os.path.join(DEBS, "postgresql")
    if os.path.exists(os.path.join(pkg, PG, "bin", "postgres")):
        return pkg
    if os.path.exists(os.path.join(DEBS, "postgresql.unavailable")):
        pytest.skip("Debian's postgresql is not in the cache (scripts/deps.sh)")
    pytest.fail(f"{pkg} is missing: run scripts/deps.sh (make deps)", pytrace=False)


@pytest.fixture(scope="module")
def pg_image(workdir, image):
    return make_pg_image(os.path.join(workdir, "pg-image"), os.path.join(image, "app", "podapp"))


def make_pg_image(root, podapp):
    """An image with busybox, podapp (the harness names images by it), the
    server, pgbench, and what they load, at the paths they have on the host,
    and users root and nobody."""
    pkg = pg_package()
    pods.make_rootfs(root, podapp)
    for sub in (PG, "usr/share/postgresql/15"):
        if not os.path.exists(os.path.join(root, sub)):
            shutil.copytree(os.path.join(pkg, sub), os.path.join(root, sub), symlinks=True)
    bins = [os.path.join(pkg, PG, p) for p in ("bin/postgres", "bin/pgbench", "bin/initdb",
                                                "lib/pg_stat_statements.so")]
    for b in bins:
        pods.add_libraries(root, b, skip=pkg)
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    with open(os.path.join(root, "etc", "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n")
    with open(os.path.join(root, "etc", "group"), "w") as f:
        f.write("root:x:0:\nnogroup:x:65534:\n")
    return root


def statements(c):
    with open(os.path.join(c.rootfs, "tmp", "pg.log"), errors="replace") as f:
        return [m.group(1) for m in map(STATEMENT.search, f) if m]


def server_args():
    """The pod's command (run as nobody): initdb, then the server in its
    place (the container's first process), logging every statement."""
    bindir = f"/{PG}/bin"
    init = (f"{bindir}/initdb -D /tmp/data -A trust -U postgres --no-sync --locale=C -E UTF8 "
            f"> /tmp/initdb.log 2>&1")
    serve = (f"exec {bindir}/postgres -D /tmp/data -k /tmp -c listen_addresses= -c jit=off "
             f"-c fsync=off -c autovacuum=off -c shared_preload_libraries=pg_stat_statements "
             f"-c log_statement=all > /tmp/pg.log 2>&1")
    return ["/bin/sh", "-c", f"{init} && {serve}"]


def pgbench(c, *args, timeout=300):
    run = c.run([f"/{PG}/bin/pgbench", "-h", "/tmp", "-U", "postgres", *args, "postgres"],
                timeout=timeout)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_pgbench_statements_in_a_pod_are_each_counted(cluster, pg_image, workdir):
    ns = cluster.namespace()
    pod = pods.Pod(cluster.kubectl, ns, "pg-0", {"app": "pg"}, "node-a",
                   {"db": server_args()}, pg_image, workdir, user=NOBODY)
    with pod:
        c = pod.containers["db"]
        log = os.path.join(c.rootfs, "tmp", "pg.log")
        wait_for("the server to accept connections",
                 lambda: os.path.exists(log) and "ready to accept connections" in open(log).read(),
                 timeout=120)
        pgbench(c, "-i", "-s", "1", "-q")
        with cluster.agent("node-a") as agent:
            # counted exactly: the overhead budget must not detach one
            # on a loaded machine, where a call's cost is calibrated high
            cluster.apply_probe(ns, "pg", spec(selector={"matchLabels": {"app": "pg"}},
                                               functions=FUNCS, maxOverhead="0"))
            attached_log(agent, c.pid, timeout=30)
            want, exits = 0, None
            for kind, clients, transactions, extra in (
                    ("warm-up", 1, 20, ()),
                    ("a connection per client", CLIENTS, TRANSACTIONS, ()),
                    ("a connection per transaction", CLIENTS, TRANSACTIONS, ("-C",))):
                before = len(statements(c))
                out = pgbench(c, "-n", "-S", "-c", str(clients), "-t", str(transactions), *extra)
                done = re.search(r"number of transactions actually processed: (\d+)/", out)
                assert done and int(done.group(1)) == clients * transactions, out
                ran = wait_for("the server's log of the run", lambda: (
                    s := statements(c)[before:]) and sum(x.startswith(SELECT) for x in s)
                    == clients * transactions and s, timeout=10)
                want += len(ran)
                e = counted(cluster, agent, ns, want, exits)
                if exits is None:
                    # the first calls through the hook: where it goes is read,
                    # and the RETs there probed; the calls before are tail exits
                    wait_for("the hook followed", lambda: agent.find(
                        msg_has="calls of ExecutorRun that jump through a pointer to the "
                        "function at 0x"), timeout=20)
                    e = wait_for("every warm-up call ended", lambda: (x := fns(
                        cluster.node_entry(ns, "pg", "node-a"))["ExecutorRun"]).get(
                            "tailExits", 0) + x.get("tailClosed", 0) == want and x, timeout=20)
                    exits = e.get("tailExits", 0)
                    continue
                print(f"{kind}: {len(ran)} statements, each function counted {want} in all")
            got = fns(e)
            line = stats(agent)
            print(f"share changes {line['share_changes']}, the kernel's counters {line['kernel']}")
            kept = [x["calls_kept"] for x in agent.find(
                msg_has="while its probes were attached", count=0) if "calls_kept" in x]
            print(f"{len(kept)} backends ended while attached, {sum(kept)} calls kept from them")
    assert all(got[f]["orphans"] == 0 for f in FUNCS), got
    # ExecutorRun ends at the hook's RET: it holds standard_ExecutorRun's
    # call, and PortalRun holds it
    p50 = {f: duration_ns(got[f]["p50"]) for f in FUNCS}
    print(f"ExecutorRun: {exits} tail exits in the warm-up, then every call timed; p50 {p50}")
    assert p50["standard_ExecutorRun"] < p50["ExecutorRun"] <= p50["PortalRun"], p50
    st = wait_for("the summary", lambda: (s := cluster.status(ns, "pg")).get(
        "summary", {}).get("functions") and s, timeout=20)
    # the warm-up's first calls were not timed, and the condition says so
    (timed,) = [x for x in st["conditions"] if x["type"] == "Timed"]
    assert (timed["reason"] == "CallsNotTimed") == (exits > 0), timed
    assert exits == 0 or timed["message"].startswith(f"ExecutorRun: {exits} of its "), timed


def counted(cluster, agent, ns, want, exits):
    """The node's report once each function counted want calls; past the
    warm-up (exits: ExecutorRun's tail exits then), every ExecutorRun call
    after it ended at the hook's RET."""
    def check():
        e = cluster.node_entry(ns, "pg", "node-a")
        got = fns(e) if e else {}
        if not all(got.get(f, {}).get("calls") == want for f in FUNCS):
            return None
        x = got["ExecutorRun"]
        timed = exits is None or (x.get("tailExits", 0) == exits and
                                  x.get("tailClosed", 0) == want - exits)
        return e if timed else None
    try:
        return wait_for(f"{want} calls of each", check, timeout=20)
    except AssertionError as err:
        e = cluster.node_entry(ns, "pg", "node-a")
        got = {f: {k: v for k, v in x.items() if k in ("calls", "orphans", "tailExits",
                                                       "tailClosed")}
               for f, x in (fns(e) if e else {}).items()}
        # last, as the end of a long output is what is shown of it
        raise AssertionError(f"{err}\nreport: {e}\nthe agent's log:\n{agent.tail()}"
                             f"\nthe kernel's counters: {stats(agent).get('kernel')}"
                             f"\nwanted {want} calls of each, counted: {got}") from None
