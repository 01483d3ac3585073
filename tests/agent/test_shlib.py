"""A FunctionProbe naming functions of shared libraries (LIB:FUNC) in a pod:
shpod (tests/fixtures/c/shlib/shpod.c) calls libshfix.so's shfix_sleep a
known number of times, then dlopens libshplug.so and calls its
shplug_sleep; the agent, with only the DaemonSet's capabilities, opens the
libraries through the container (its image layer) and picks up the
dlopen'ed one in its rescans. The counts are shpod's own loops."""

import os
import re

from agentproc import wait_for
from test_agent import fns, spec

FUNCS = ["libshfix.so:shfix_sleep", "libshplug*:shplug_sleep"]


def logged(agent, what, fn, timeout=10):
    """wait_for, failing with the agent's log."""
    try:
        return wait_for(what, fn, timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}\nthe agent's log:\n{agent.tail()}") from None


def step(c, go, done, timeout=20):
    """Creates the file go in the container's /tmp and waits for shpod's done."""
    tmp = os.path.join(c.rootfs, "tmp")
    with open(os.path.join(tmp, go), "w") as f:
        f.write("go\n")
    wait_for(f"shpod to write {done}", lambda: os.path.exists(os.path.join(tmp, done)), timeout)


def calls(cluster, ns, name, node, want):
    def check():
        e = cluster.node_entry(ns, name, node)
        got = {f: fns(e).get(f, {}).get("calls") for f in want} if e else None
        return e if got == want else None
    return wait_for(f"the report to hold {want}", check, timeout=10)


def test_library_functions_in_a_pod_with_dlopen(cluster, make_pod):
    ns = cluster.namespace()
    pod = make_pod(ns, "native-1", {"app": "web"}, "node-a", containers={"app": ["/app/shpod"]})
    c = pod.containers["app"]
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "libs", spec(functions=FUNCS))
        logged(agent, "the attach to libshfix.so",
               lambda: agent.find(msg_has=f"attached to library libshfix.so of process {c.pid}:"))
        # libshplug.so is not loaded yet: the report says so
        e = wait_for("the error about libshplug", lambda: (
            (e := cluster.node_entry(ns, "libs", "node-a")) and
            any("libshplug*" in err for err in e.get("errors", [])) and e), timeout=10)
        assert e["attached"] is True, e
        step(c, "go1", "done1")
        calls(cluster, ns, "libs", "node-a", {"shfix_sleep": 40})
        step(c, "go2", "loaded")
        logged(agent, "the attach to the dlopen'ed libshplug.so",
               lambda: agent.find(msg_has=f"attached to library libshplug.so of process {c.pid}:"))
        step(c, "go3", "done3")
        e = calls(cluster, ns, "libs", "node-a", {"shfix_sleep": 45, "shplug_sleep": 15})
        for name in ("shfix_sleep", "shplug_sleep"):
            f = fns(e)[name]
            assert f["mode"] == "entry+ret" and f["orphans"] == 0, f
            assert f["minNs"] >= 1_000_000, f
        wait_for("no error once every library is mapped",
                 lambda: cluster.node_entry(ns, "libs", "node-a")["errors"] == [], timeout=10)
        # the layer's files, not the host's: the log names the libraries the container maps
        ev = agent.find(msg_has="attached to library libshfix.so")[0]
        assert ev["pod"] == "native-1" and ev["container"] == "app", ev


def test_name_of_a_library_function_gets_a_hint(cluster, make_pod):
    ns = cluster.namespace()
    pod = make_pod(ns, "native-2", {"app": "web"}, "node-a", containers={"app": ["/app/shpod"]})
    c = pod.containers["app"]
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "hint", spec(functions=["shfix_sleep"]))
        # the libraries are read off the agent's loop: the hint follows the
        # first error within a turn or two
        e = logged(agent, "the hint", lambda: (
            (e := cluster.node_entry(ns, "hint", "node-a")) and "libshfix.so:shfix_sleep"
            in " ".join(e.get("errors", [])) and e))
        text = " ".join(e["errors"])
        assert "shfix_sleep is in libshfix.so: write 'libshfix.so:shfix_sleep'" in text, e
        assert str(c.pid) in text or "native-2" in text, e


def test_library_functions_count_against_the_namespace_share(cluster, make_pod):
    """--max-functions-per-namespace counts a library's functions as the
    executable's: a probe whose library patterns match more is refused,
    with the limit named, and nothing of it is traced."""
    ns = cluster.namespace()
    make_pod(ns, "native-3", {"app": "web"}, "node-a", containers={"app": ["/app/shpod"]})
    with cluster.agent("node-a", extra=("--max-functions-per-namespace", "2")) as agent:
        cluster.apply_probe(ns, "greedy", spec(functions=["libshfix.so:shfix_*"]))
        e = logged(agent, "the share's refusal", lambda: (
            (e := cluster.node_entry(ns, "greedy", "node-a")) and
            any("namespace's share" in err for err in e.get("errors", [])) and e))
        text = " ".join(e["errors"])
        assert "more than 2" in text and "--max-functions-per-namespace" in text, e
        assert not any(f.get("calls") for f in e.get("functions", [])), e
        assert agent.find(msg_has="attached to library libshfix.so") == []


def test_library_refused_for_the_share_is_attached_once_it_has_room(cluster, make_pod):
    """--max-functions-per-namespace 2: probe "first" traces shfix_sleep (1),
    so probe "second", whose 2 library functions would pass the share, is
    refused with the share named; deleting "first" gives the room back and
    "second" attaches to the library and counts, without an agent restart."""
    ns = cluster.namespace()
    pod = make_pod(ns, "native-4", {"app": "web"}, "node-a", containers={"app": ["/app/shpod"]})
    c = pod.containers["app"]
    attached = f"attached to library libshfix.so of process {c.pid}:"
    with cluster.agent("node-a", extra=("--max-functions-per-namespace", "2")) as agent:
        cluster.apply_probe(ns, "first", spec(functions=["libshfix.so:shfix_sleep"]))
        logged(agent, "the first attach", lambda: agent.find(msg_has=attached))
        cluster.apply_probe(ns, "second", spec(functions=["libshfix.so:shfix_sleep",
                                                          "libshfix.so:shfix_add"]))
        e = logged(agent, "the share's refusal", lambda: (
            (e := cluster.node_entry(ns, "second", "node-a")) and
            any("namespace's share" in err for err in e.get("errors", [])) and e))
        assert "--max-functions-per-namespace" in " ".join(e["errors"]), e
        cluster.kubectl("delete", "functionprobe", "first", "-n", ns)
        logged(agent, "the second attach", lambda: len(agent.find(msg_has=attached)) == 2)
        step(c, "go1", "done1")
        e = calls(cluster, ns, "second", "node-a", {"shfix_sleep": 40})
        assert "shfix_add" in fns(e), e
        assert not any("namespace's share" in err for err in e.get("errors", [])), e


def test_calls_that_leave_through_a_hook_are_counted_and_said(cluster, make_pod):
    """Issue 47: dbpod's executor_run leaves through a jump to the hook an
    extension set (as PostgreSQL's ExecutorRun with pg_stat_statements),
    through a pointer. Where the jump goes is read as it runs, and the RETs
    there end the calls from then on: every call counts in calls, the
    first ones (before those RETs were probed) as tail exits, the others
    timed; the log says so, and the Timed condition and the plugin's table
    say what was not timed, in words, with the numbers. Traced with the
    hook, the jump lands on a traced function and the calls are timed (all
    but one the attach caught between the two functions' probes, at
    most)."""
    from test_plugin import kubeconfig_in, run
    ns = cluster.namespace()
    make_pod(ns, "db-1", {"app": "db"}, "node-a", containers={"app": ["/app/dbpod"]})
    db = {"matchLabels": {"app": "db"}}

    def counted(name, functions):
        def check():
            status = cluster.status(ns, name)
            got = fns(status.get("summary", {}))
            return all(got.get(f, {}).get("calls", 0) >= 3 for f in functions) and status
        return wait_for(f"calls of {functions}", check, timeout=30, interval=0.5)

    def timed(status):
        (c,) = [c for c in status["conditions"] if c["type"] == "Timed"]
        return c

    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "hook", spec(selector=db, functions=["executor_run"]))
        wait_for("the hook followed", lambda: agent.find(
            msg_has="calls of executor_run that jump through a pointer to pgss_run (/app/dbpod) "
            "end at its "), timeout=30)
        status = counted("hook", ["executor_run"])
        f = fns(status["summary"])["executor_run"]
        exits, closed = f.get("tailExits", 0), f.get("tailClosed", 0)
        # one call may be in flight as the report is written
        assert f["orphans"] == 0 and f["calls"] - 1 <= exits + closed <= f["calls"], f
        # the calls after the hook was followed end at its RET: of the next
        # three, only one in flight across the follow may be a tail exit
        g = wait_for("three calls more", lambda: (g := fns(cluster.status(ns, "hook")[
            "summary"])["executor_run"])["calls"] >= f["calls"] + 3 and g, timeout=30)
        assert g.get("tailExits", 0) <= exits + 1 and g["tailClosed"] >= closed + 2, (f, g)
        c = timed(status)
        if exits:
            assert (c["status"], c["reason"]) == ("False", "CallsNotTimed"), c
            assert re.fullmatch(rf"executor_run: {exits} of its (\d+) calls left through a jump "
                                r"to code not probed \(tailExits\): percentiles are of the "
                                r"timed calls only", c["message"]), c
            rc, out, err = run(cluster, kubeconfig_in(cluster, ns), "get", "hook")
            assert rc == 0 and "\nCallsNotTimed: executor_run: " in out, (out, err)
        else:
            assert (c["status"], c["reason"]) == ("True", "EveryCallTimed"), c

        cluster.apply_probe(ns, "both", spec(selector=db,
                                             functions=["executor_run", "pgss_run"]))
        f = fns(counted("both", ["executor_run", "pgss_run"])["summary"])["executor_run"]
        assert f.get("tailExits", 0) <= 1, f
        later = wait_for("more calls", lambda: (g := fns(cluster.status(ns, "both")[
            "summary"])["executor_run"])["calls"] >= f["calls"] + 4 and g, timeout=30)
        assert later.get("tailExits", 0) == f.get("tailExits", 0), (f, later)


def test_a_slow_call_read_after_its_process_is_gone_is_named(cluster, make_pod):
    """Issue 47: `dbpod 4` makes one slow db_connect call and exits as soon
    as it returns, so the agent reads the call after the process is gone:
    its stack is still named (the agent read the process's files when it
    attached), in the log and in the slowest call kept."""
    from test_agent import attached_log
    ns = cluster.namespace()
    with cluster.agent("node-a") as a:
        cluster.apply_probe(ns, "job", spec(
            selector={"matchLabels": {"app": "job"}}, functions=["db_connect"],
            slowThreshold="100ms", slowCalls={"keep": 1}))
        pod = make_pod(ns, "job-1", {"app": "job"}, "node-a",
                       containers={"app": ["/app/dbpod", "4"]})
        attached_log(a, pod.containers["app"].pid, timeout=10)
        (ev,) = wait_for("the slow call logged", lambda: a.find(event="slow_call"), timeout=20)
        assert "db_connect+" in ev["stack"][0] and "main+" in ev["stack"][1], ev["stack"]
        (call,) = wait_for("the slowest call kept", lambda: [
            c for f in cluster.status(ns, "job").get("summary", {}).get("functions", [])
            for c in f.get("slowestCalls", [])], timeout=20, interval=0.5)
        assert "db_connect+" in call["stack"][0], call
