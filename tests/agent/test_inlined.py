"""Inlined functions in the agent (issue 29): its analyzer reads the inline
tree of a pod's Go service off the main loop, and a FunctionProbe naming a
function the compiler inlined everywhere (podapp's main.finish, inlined into
main.work once per request) counts its calls in the node's report and the
probe's summary, with inlinedCalls and inlinedSites, as `retwatch trace`
does."""

import os
import signal
import time

from agentproc import wait_for
from test_agent import count_afresh, fns, has_calls, rfc3339, spec

FUNCS = ["main.handleRequest", "main.finish"]
WORKERS = 2  # podapp's default: requests in flight at once


def test_a_probe_on_an_inlined_function_counts_its_calls(cluster, make_pod):
    ns = cluster.namespace()
    pod = make_pod(ns, "web-0", {"app": "web"}, "node-a")
    c = pod.containers["app"]
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "inl", spec(functions=FUNCS))
        count_afresh(agent, c)
        wait_for("calls of both functions",
                 lambda: has_calls(cluster, ns, "inl", "node-a", FUNCS, more_than=50), timeout=10)
        paused = time.time()
        os.kill(c.pid, signal.SIGUSR2)
        time.sleep(0.2)
        own = c.stats()["functions"]["main.handleRequest"]["calls"]

        def complete():
            e = cluster.node_entry(ns, "inl", "node-a")
            return (e and rfc3339(e["lastUpdate"]) > paused
                    and fns(e)["main.handleRequest"]["calls"] >= own and e)
        entry = wait_for("a report with every call made before the pause", complete, timeout=8)
        req, fin = fns(entry)["main.handleRequest"], fns(entry)["main.finish"]
        assert 0 <= req["calls"] - own <= 500, (req, own)
        # one finish per request; those under way at the attach saw only part
        assert abs(fin["calls"] - req["calls"]) <= WORKERS, (fin, req)
        assert fin["inlinedCalls"] == fin["calls"], fin
        assert fin["inlinedSites"] == 2 and fin["orphans"] == 0, fin
        assert "inlinedCalls" not in req and "inlinedSites" not in req, req
        assert not [e for e in entry.get("errors", []) if "finish" in str(e)], entry["errors"]

        def summarised():
            s = {f["name"]: f for f in cluster.status(ns, "inl").get("summary", {})
                 .get("functions", [])}
            return s.get("main.finish", {}).get("calls") == fin["calls"] and s["main.finish"]
        merged = wait_for("the summary of the paused pod", summarised, timeout=8)
        assert merged["inlinedCalls"] == fin["calls"] and merged["inlinedSites"] == 2, merged
