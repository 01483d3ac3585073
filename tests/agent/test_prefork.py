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


def round_of(c, n, workers, calls, usec, at_once, timeout=30):
    """Round n: preforkd forks workers, each calling serve(usec) calls times,
    all at once or one after another; returns the calls its workers made, as
    it counted them."""
    tmp = os.path.join(c.rootfs, "tmp")
    path = os.path.join(tmp, f"go{n}")
    with open(path + ".tmp", "w") as f:
        f.write(f"{workers} {calls} {usec} {int(at_once)}\n")
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
        # the long-lived workers were found and traced on their own (the
        # server and at least one of them)
        assert len(agent.find(msg_has="attached to process", count=0)) >= 2, agent.tail()
        time.sleep(2.5)  # a report later, nothing more or less
        assert fns(cluster.node_entry(ns, "pre", "node-a"))["serve"]["calls"] == short + long
    assert e["pods"][0]["name"] == "pg-1", e["pods"]


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
