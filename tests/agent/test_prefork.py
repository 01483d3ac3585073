"""A pre-fork server in a pod (tests/fixtures/c/shlib/preforkd.c, the
shape of PostgreSQL's backend per connection): its workers call serve() and
exit, most within milliseconds, long before the agent's scan of /proc a
second apart sees them. The agent counts them from their fork: every call
of every worker, exactly, the short-lived ones in the server's own numbers
and the ones the scan finds handed over without a call lost or split."""

import os
import time

from agentproc import wait_for
from test_agent import attached_log, fns


def round_of(c, n, workers, calls, usec, at_once, timeout=30, spread=0):
    """Round n: preforkd forks workers, each calling serve(usec) calls times,
    all at once, one after another, or at_once (an int, 2 and up) at a time,
    each first sleeping up to spread microseconds; returns the calls its
    workers made, as it counted them."""
    tmp = os.path.join(c.rootfs, "tmp")
    path = os.path.join(tmp, f"go{n}")
    with open(path + ".tmp", "w") as f:
        f.write(f"{workers} {calls} {usec} {int(at_once)} {spread}\n")
    os.rename(path + ".tmp", path)
    done = os.path.join(tmp, f"done{n}")
    wait_for(f"preforkd's round {n}", lambda: os.path.exists(done), timeout)
    with open(done) as f:
        return int(f.read())


def test_workers_of_a_prefork_server_are_counted_from_their_fork(cluster, make_pod):
    ns = cluster.namespace()
    pod = make_pod(ns, "pg-1", {"app": "pg"}, "node-a", containers={"app": ["/app/preforkd"]})
    c = pod.containers["app"]
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "pre", {"selector": {"matchLabels": {"app": "pg"}},
                                        "functions": ["serve"], "reportInterval": "2s"})
        attached_log(agent, c.pid, timeout=15)
        # 100 workers one after another, 50 calls of 1.2 ms each: each lives
        # some 65 ms, and 6.5 s of them pass through at most 7 scans
        short = round_of(c, 1, 100, 50, 1200, at_once=False)
        # 3 workers at once, 1,500 calls of 1 ms: the scan finds each, and
        # takes it over from its parent's numbers
        long = round_of(c, 2, 3, 1500, 1000, at_once=True)
        assert (short, long) == (5000, 4500)

        def counted():
            e = cluster.node_entry(ns, "pre", "node-a")
            return e and fns(e).get("serve", {}).get("calls") == short + long and e
        try:
            e = wait_for("every worker's calls in the report", counted, timeout=15)
        except AssertionError as err:
            e = cluster.node_entry(ns, "pre", "node-a")
            raise AssertionError(f"{err}\nreport: {e}\nthe agent's log:\n{agent.tail()}") \
                from None
        # counted from their fork, so none is said to be lost
        assert not any(m.startswith("calls not counted") for m in e["errors"]), e["errors"]
        # the long-lived workers were found and traced on their own (the
        # server and at least one of them)
        assert len(agent.find(msg_has="attached to process", count=0)) >= 2, agent.tail()
        time.sleep(2.5)  # a report later, nothing more or less
        assert fns(cluster.node_entry(ns, "pre", "node-a"))["serve"]["calls"] == short + long
    assert e["pods"][0]["name"] == "pg-1", e["pods"]


def test_workers_that_end_while_the_agent_attaches_them_keep_their_calls(cluster, make_pod):
    """Workers of a few milliseconds, 8 alive at a time, each making one call
    at a point of its life spread over 8 ms, and exiting: the scan finds
    some, and of those some make their call once their histograms are made
    and end before the agent sees its attach through. Those calls count in
    the pod's numbers, as every other: the count is exact."""
    ns = cluster.namespace()
    pod = make_pod(ns, "pg-1", {"app": "pg"}, "node-a", containers={"app": ["/app/preforkd"]})
    c = pod.containers["app"]
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "pre", {"selector": {"matchLabels": {"app": "pg"}},
                                        "functions": ["serve", "parse", "reply"],
                                        "reportInterval": "2s", "maxOverhead": "0"})
        attached_log(agent, c.pid, timeout=15)
        made = round_of(c, 1, 8000, 1, 50, 8, timeout=120, spread=20000)
        assert made == 8000

        def counted():
            e = cluster.node_entry(ns, "pre", "node-a")
            got = fns(e) if e else {}
            return all(got.get(f, {}).get("calls") == made for f in ("serve", "parse", "reply")) \
                and e
        try:
            e = wait_for("every worker's call in the report", counted, timeout=15)
        except AssertionError as err:
            raise AssertionError(f"{err}\nreport: {cluster.node_entry(ns, 'pre', 'node-a')}"
                                 f"\nthe agent's log:\n{agent.tail()}") from None
        # a worker that ended (a zombie, no root to open) is no failure
        assert not e["errors"] and not agent.find(level="error", count=0), e["errors"]
        kept = [x["calls_kept"] for x in agent.find(
            msg_has="while its probes were attached", count=0) if "calls_kept" in x]
        print(f"{len(kept)} workers ended while attached, {sum(kept)} calls kept from them")


def test_a_program_started_again_and_again_beside_a_traced_run_is_counted_whole(
        cluster, make_pod):
    """A container starts the traced program again and again (runc exec, as
    kubectl exec or a pod's shell loop would), each run some 65 ms, most
    gone before a scan of /proc sees them; their parent is not traced. A
    traced run of the program in the same container lends them its numbers
    from their first instruction: every call of every run is counted."""
    ns = cluster.namespace()
    pod = make_pod(ns, "pg-1", {"app": "pg"}, "node-a", containers={"app": ["/app/preforkd"]})
    c = pod.containers["app"]
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "pre", {"selector": {"matchLabels": {"app": "pg"}},
                                        "functions": ["serve"], "reportInterval": "2s"})
        attached_log(agent, c.pid, timeout=15)
        runs = 20
        for _ in range(runs):
            r = c.run(["/app/preforkd", "--serve", "50", "1200"])
            assert r.returncode == 0, r

        def counted():
            e = cluster.node_entry(ns, "pre", "node-a")
            return e and fns(e).get("serve", {}).get("calls") == runs * 50 and e
        try:
            e = wait_for("every run's calls in the report", counted, timeout=15)
        except AssertionError as err:
            e = cluster.node_entry(ns, "pre", "node-a")
            raise AssertionError(f"{err}\nreport: {e}\nthe agent's log:\n{agent.tail()}") \
                from None
        assert not any(m.startswith("calls not counted") for m in e["errors"]), e["errors"]
        time.sleep(2.5)  # a report later, nothing more or less
        assert fns(cluster.node_entry(ns, "pre", "node-a"))["serve"]["calls"] == runs * 50


def test_a_worker_gone_before_its_slow_call_is_read_has_it_named(cluster, make_pod):
    """Issue 47: workers that make one slow call and exit as soon as it
    returns, so the agent reads each call after its worker is gone, most
    never attached themselves (counted from their fork): each call's stack
    is named through the server's mappings, which the worker had as
    forked."""
    ns = cluster.namespace()
    pod = make_pod(ns, "pg-1", {"app": "pg"}, "node-a", containers={"app": ["/app/preforkd"]})
    c = pod.containers["app"]
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "pre", {"selector": {"matchLabels": {"app": "pg"}},
                                        "functions": ["serve"], "reportInterval": "2s",
                                        "slowThreshold": "100ms"})
        attached_log(agent, c.pid, timeout=15)
        assert round_of(c, 1, 4, 1, 300000, at_once=False) == 4
        try:
            slow = wait_for("the four slow calls logged",
                            lambda: len(e := agent.find(event="slow_call", count=0)) >= 4 and e,
                            timeout=20)
        except AssertionError as err:
            raise AssertionError(f"{err}\nthe agent's log:\n{agent.tail()}") from None
    raw = [ev["stack"] for ev in slow if not ev["stack"][0].startswith("serve+")]
    assert not raw, raw
    assert all(any(f.startswith("main+") for f in ev["stack"]) for ev in slow), slow


def test_workers_followed_from_their_fork_count_against_their_namespace_share(cluster, make_pod):
    """--slow-calls-per-namespace 20: 100 workers forked one after another,
    each making 10 slow calls (slowThreshold 1ns) and gone within some 15 ms,
    too soon for the scan to give any its own share: their slow calls count
    against their server's namespace's share, as the server's own would, so
    the share runs out, said in the report, and every call is still counted.
    Held to share 0 (no share's limit) instead, none would be dropped."""
    ns = cluster.namespace()
    pod = make_pod(ns, "pg-1", {"app": "pg"}, "node-a", containers={"app": ["/app/preforkd"]})
    c = pod.containers["app"]
    with cluster.agent("node-a", extra=("--slow-calls-per-namespace", "20")) as agent:
        cluster.apply_probe(ns, "pre", {"selector": {"matchLabels": {"app": "pg"}},
                                        "functions": ["serve"], "reportInterval": "2s",
                                        "slowThreshold": "1ns", "maxOverhead": "0"})
        attached_log(agent, c.pid, timeout=15)
        assert round_of(c, 1, 100, 10, 1000, at_once=False) == 1000

        def dropped():
            e = cluster.node_entry(ns, "pre", "node-a")
            serve = e and fns(e).get("serve", {})
            return serve and serve.get("calls") == 1000 and serve.get("slowDropped") and e
        try:
            e = wait_for("the workers' slow calls held to the namespace's share", dropped,
                         timeout=15)
        except AssertionError as err:
            e = cluster.node_entry(ns, "pre", "node-a")
            raise AssertionError(f"{err}\nreport: {e}\nthe agent's log:\n{agent.tail()}") \
                from None
    assert any(f"namespace {ns} on this node passed its share of 20 slow calls a second" in m
               for m in e["errors"]), e["errors"]


def test_contexts_of_workers_followed_from_their_fork_come_back_to_their_share(cluster, make_pod):
    """--max-inflight-per-namespace 4: 20 workers one after another, each
    holding a context of its namespace's share until the sweep after it
    ends, run the share out (calls lost); once swept, the share is whole
    again: 4 workers at once lose nothing."""
    ns = cluster.namespace()
    pod = make_pod(ns, "pg-1", {"app": "pg"}, "node-a", containers={"app": ["/app/preforkd"]})
    c = pod.containers["app"]
    with cluster.agent("node-a", extra=("--max-inflight-per-namespace", "4")) as agent:
        cluster.apply_probe(ns, "pre", {"selector": {"matchLabels": {"app": "pg"}},
                                        "functions": ["serve"], "reportInterval": "2s"})
        attached_log(agent, c.pid, timeout=15)
        assert round_of(c, 1, 20, 10, 1000, at_once=False) == 200

        def serve():
            e = cluster.node_entry(ns, "pre", "node-a")
            return fns(e).get("serve", {}) if e else {}
        first = wait_for("the first round's calls counted or lost",
                         lambda: (s := serve()) and s.get("calls", 0) + s.get("lost", 0) == 200
                         and s, timeout=15)
        assert first.get("lost", 0) > 0, first
        time.sleep(11)  # two sweeps: the workers' contexts are given back
        assert round_of(c, 2, 4, 10, 1000, at_once=True) == 40
        try:
            wait_for("the second round's calls all counted",
                     lambda: serve().get("calls") == first["calls"] + 40, timeout=15)
        except AssertionError as err:
            raise AssertionError(f"{err}\n{serve()} after {first}\nthe agent's log:\n"
                                 f"{agent.tail()}") from None
        assert serve().get("lost", 0) == first["lost"], (serve(), first)


def code_changed(pid, rootfs, path):
    """How many bytes of the code mapped from path (as process pid sees it)
    differ in its memory from the file: the breakpoints written into it."""
    changed = 0
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem, \
            open(rootfs + path, "rb") as f:
        for line in maps:
            fields = line.split()
            if len(fields) < 6 or fields[5] != path or "x" not in fields[1]:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            mem.seek(start)
            f.seek(int(fields[2], 16))
            have, want = mem.read(end - start), f.read(end - start)
            changed += sum(a != b for a, b in zip(have, want))
    return changed


def test_a_pod_of_the_same_image_not_selected_is_left_untouched(cluster, make_pod):
    """Two namespaces' pods run one image; a probe selects one: breakpoints
    are written into the selected server's code, and not one byte of the
    other's changes (its calls never trap). The probes are then the
    server's own, which its workers do not inherit: their calls are not
    counted, and the report says how many workers went so, never a silent
    zero."""
    a, b = cluster.namespace(), cluster.namespace()
    mine = make_pod(a, "pg-1", {"app": "pg"}, "node-a",
                    containers={"app": ["/app/preforkd"]}).containers["app"]
    other = make_pod(b, "pg-1", {"app": "pg"}, "node-a",
                     containers={"app": ["/app/preforkd"]}).containers["app"]
    assert code_changed(mine.pid, mine.rootfs, "/app/preforkd") == 0
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(a, "pre", {"selector": {"matchLabels": {"app": "pg"}},
                                       "functions": ["serve"], "reportInterval": "2s"})
        attached_log(agent, mine.pid, timeout=15)
        assert round_of(mine, 1, 3, 10, 1000, at_once=False) == 30
        assert round_of(other, 1, 3, 10, 1000, at_once=False) == 30
        # and two runs started anew in each pod (their parent not traced)
        for c in (mine, other, mine, other):
            r = c.run(["/app/preforkd", "--serve", "10", "1000"])
            assert r.returncode == 0, r
        # per process, the probes are not inherited: the workers' calls are
        # not counted, and the report says so, with their number
        said = ("calls not counted: 5 processes forked by the traced processes of pod pg-1 on "
                "this node, or started there running their executable, ended before")
        e = wait_for("the workers said", lambda: (e := cluster.node_entry(a, "pre", "node-a"))
                     and any(m.startswith(said) for m in e["errors"]) and e, timeout=20)
        assert fns(e)["serve"]["calls"] == 0, e
        assert code_changed(mine.pid, mine.rootfs, "/app/preforkd") > 0
        assert code_changed(other.pid, other.rootfs, "/app/preforkd") == 0
