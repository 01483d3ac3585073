"""The agent is shared by every namespace of its node: one probe's slow-call
flood or greed must cost its owner, never the node's other probes."""

import json
import os
import re
import shutil
import signal
import threading
import time
import urllib.error
import urllib.request

from agentproc import wait_for
from test_agent import FUNCS, fns, has_calls, rfc3339, spec

# podapp calling lookupUser as fast as it can: no sleeps, one worker
HOT_ARGS = ("/app/podapp", "-workers", "1", "-latency", "0", "-lookup", "0", "-gap", "0")


class Watch:
    """Asks the agent for /healthz and /metrics (rendered by its main loop)
    every 0.2 s in a thread; keeps each answer's status and how long it took."""

    def __init__(self, agent):
        self.agent, self.answers, self._stop = agent, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _get(self, path):
        start = time.monotonic()
        try:
            with urllib.request.urlopen(self.agent.metrics_url(path), timeout=15) as r:
                code = r.status
                r.read()
        except urllib.error.HTTPError as e:
            code = e.code
        except OSError as e:
            code = str(e)
        self.answers.append((path, code, time.monotonic() - start))

    def _run(self):
        while not self._stop.is_set():
            self._get("/healthz")
            self._get("/metrics")
            self._stop.wait(0.2)

    def stop(self):
        self._stop.set()
        self._thread.join(30)
        return self.answers


def metric(text, name, **labels):
    """The sum of the samples of name whose labels include labels."""
    total, found = 0, False
    for m in re.finditer(rf"^{re.escape(name)}(?:{{([^}}]*)}})? (\d+)$", text, re.M):
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total, found = total + int(m.group(2)), True
    assert found, f"no sample of {name} with {labels}"
    return total


def settled_report(cluster, ns, name, after):
    """node-a's report of probe name once it was written after the wall-clock
    time after and stays the same for 4 s (a node writes only what changed:
    the calls stopped and every slow call was read)."""
    wait_for(f"a report of {name} after the calls stopped",
             lambda: (e := cluster.node_entry(ns, name, "node-a"))
             and rfc3339(e["lastUpdate"]) > after + 0.5, timeout=10)
    last = None
    for _ in range(5):
        e = cluster.node_entry(ns, name, "node-a")
        if last and e["lastUpdate"] == last["lastUpdate"]:
            return e
        last = e
        time.sleep(4)
    raise AssertionError(f"the reports of {name} kept changing after the calls stopped: {last}")


def test_slow_call_flood_is_rate_limited_and_counted(cluster, make_pod):
    """slowThreshold 1ns on a function called as fast as podapp can: the
    kernel sends at most --slow-calls-per-second a second per CPU, the agent
    logs at most that many a second for the probe, and every slow call is
    accounted for (logged + not logged + dropped in the kernel = calls);
    /healthz and /metrics keep answering and another probe keeps reporting."""
    ns, per_sec = cluster.namespace(), 20
    hot = make_pod(ns, "hot-1", {"app": "hot"}, "node-a", containers={"app": HOT_ARGS})
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a", extra=("--slow-calls-per-second", str(per_sec))) as agent:
        cluster.apply_probe(ns, "calm", spec())
        wait_for("calls of the calm probe", lambda: has_calls(cluster, ns, "calm", "node-a"),
                 timeout=8)
        watch = Watch(agent)
        applied = time.monotonic()
        cluster.apply_probe(ns, "flood", spec(selector={"matchLabels": {"app": "hot"}},
                                              functions=["main.lookupUser"],
                                              slowThreshold="1ns",
                                              # recent settles a window after the calls
                                              window="2s",
                                              # the hot function stays traced: the
                                              # overhead guard would detach it
                                              maxOverhead="0"))
        wait_for("dropped slow calls in the flood's report",
                 lambda: (e := has_calls(cluster, ns, "flood", "node-a", ["main.lookupUser"],
                                         more_than=1000))
                 and fns(e)["main.lookupUser"].get("slowDropped", 0) > 0, timeout=10)
        before = has_calls(cluster, ns, "calm", "node-a")["lastUpdate"]
        wait_for("a later report of the calm probe",
                 lambda: (e := has_calls(cluster, ns, "calm", "node-a"))
                 and e["lastUpdate"] != before, timeout=8)
        time.sleep(2)
        answers = watch.stop()
        # stop the calls, then compare what was counted, logged and dropped
        paused = time.time()
        os.kill(hot.containers["app"].pid, signal.SIGUSR2)
        took = time.monotonic() - applied
        entry = settled_report(cluster, ns, "flood", paused)
        logged = len(agent.find(event="slow_call", probe="flood", count=0))
        page = agent.get("/metrics")[1]
        unlogged = metric(page, "retwatch_slow_calls_unlogged_total", namespace=ns,
                          probe="flood")

        f = fns(entry)["main.lookupUser"]
        print(f"flood: {f['calls']} calls in {took:.1f} s, {f['slowDropped']} slow calls dropped "
              f"in the kernel, {logged} logged, {unlogged} not logged; slowest /metrics "
              f"answer {max(t for p, _, t in answers if p == '/metrics'):.2f} s")
        assert f["calls"] > 1000 and f["slowDropped"] > 0, f
        assert logged + unlogged + f["slowDropped"] == f["calls"], (logged, unlogged, f)
        assert entry.get("slowCallsUnlogged", 0) == unlogged, entry
        # the kernel's budget, per_sec a window on each CPU, and the probe's log budget
        assert logged + unlogged <= per_sec * os.cpu_count() * (int(took) + 2)
        assert 0 < logged <= per_sec * (int(took) + 2), logged
        assert metric(page, "retwatch_function_slow_calls_dropped_total", namespace=ns,
                      probe="flood", function="main.lookupUser") == f["slowDropped"]
        assert metric(page, "retwatch_slow_calls_limited_total") > 0
        # the main loop kept turning: every answer came, none was a 503
        assert answers and all(code == 200 for _, code, _ in answers), \
            [a for a in answers if a[1] != 200]
        assert agent.proc.poll() is None


def test_namespace_share_refuses_the_greedy_probe_only(cluster, make_pod):
    """--max-functions-per-namespace 6: a probe of namespace A whose pattern
    matches podapp's 18 main.* functions is refused with an error naming the
    limit, its flag and chart value; A's small probe and namespace B's probe
    attach and count."""
    a, b = cluster.namespace(), cluster.namespace()
    make_pod(a, "web-1", {"app": "web"}, "node-a")
    make_pod(b, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a", extra=("--max-functions-per-namespace", "6")) as agent:
        cluster.apply_probe(a, "greedy", spec(functions=["main.*"]))
        entry = wait_for("the greedy probe's error",
                         lambda: (e := cluster.node_entry(a, "greedy", "node-a"))
                         and e["errors"] and e, timeout=8)
        assert entry["attached"] is False and not entry.get("functions"), entry
        (err,) = entry["errors"]
        for part in (f"pod web-1, container app, process ", f"namespace {a} may trace 6 ",
                     "--max-functions-per-namespace", "maxFunctionsPerNamespace",
                     "functions in /app/podapp, more than 6"):
            assert part in err, (part, err)
        assert re.search(r"the patterns match (\d+) functions", err) and \
            int(re.search(r"the patterns match (\d+) functions", err).group(1)) > 6, err
        cluster.apply_probe(a, "small", spec())
        cluster.apply_probe(b, "other", spec())
        for ns, name in ((a, "small"), (b, "other")):
            e = wait_for(f"calls of {ns}/{name}", lambda: has_calls(cluster, ns, name, "node-a"),
                         timeout=8)
            assert e["attached"] is True and e["errors"] == [], e
            assert set(fns(e)) == set(FUNCS)
        # the greedy probe still waits, with the same error
        assert cluster.node_entry(a, "greedy", "node-a")["errors"] == [err]
        page = agent.get("/metrics")[1]
        assert metric(page, "retwatch_namespace_share_refusals_total") >= 1
        assert agent.proc.poll() is None


def test_namespace_share_of_inflight_calls_and_slow_calls(cluster, make_pod):
    """--max-inflight-per-namespace 4 and --slow-calls-per-namespace 20: in
    namespace A, 12 podapp workers each keep calls in flight and every call is
    slow (slowThreshold 1ns): the calls of the goroutines past A's 4 are lost,
    counted per function, slow calls past 20 a second are dropped, counted,
    and A's report says which share ran out and what sets it. Namespace B's
    probe, one slow worker, loses nothing and drops nothing."""
    a, b = cluster.namespace(), cluster.namespace()
    make_pod(a, "busy-1", {"app": "web"}, "node-a",
             containers={"app": ("/app/podapp", "-workers", "12")})
    make_pod(b, "calm-1", {"app": "web"}, "node-a",
             containers={"app": ("/app/podapp", "-workers", "1", "-gap", "200ms")})
    with cluster.agent("node-a", extra=("--max-inflight-per-namespace", "4",
                                        "--slow-calls-per-namespace", "20")) as agent:
        cluster.apply_probe(a, "busy", spec(slowThreshold="1ns", maxOverhead="0"))
        cluster.apply_probe(b, "calm", spec(slowThreshold="1ns", maxOverhead="0"))
        entry = wait_for("lost calls and dropped slow calls in A's report",
                         lambda: (e := has_calls(cluster, a, "busy", "node-a"))
                         and all(f.get("lost", 0) > 0 and f.get("slowDropped", 0) > 0
                                 for f in fns(e).values()) and len(e["errors"]) == 2 and e,
                         timeout=15)
        inflight, slow = sorted(entry["errors"])
        for part in (f"namespace {a} on this node had 4 goroutines and threads",
                     "--max-inflight-per-namespace", "maxInflightPerNamespace"):
            assert part in inflight, (part, inflight)
        for part in (f"namespace {a} on this node passed its share of 20 slow calls a second",
                     "--slow-calls-per-namespace", "slowCallsPerNamespace"):
            assert part in slow, (part, slow)
        calm = wait_for("B's calls", lambda: has_calls(cluster, b, "calm", "node-a",
                                                       more_than=20), timeout=10)
        assert calm["errors"] == [], calm
        for f in fns(calm).values():
            assert not f.get("lost") and not f.get("slowDropped"), f
        page = agent.get("/metrics")[1]
        assert metric(page, "retwatch_namespace_share_lost_calls_total") > 0
        assert metric(page, "retwatch_namespace_share_slow_calls_limited_total") > 0
        assert agent.proc.poll() is None


def test_namespace_inflight_share_is_given_back_when_a_process_goes(cluster, make_pod):
    """A share of 4: pod x's 3 workers take 3, so pod y's 3 workers (same
    namespace) lose calls; once x is deleted its contexts come back, and y's
    calls are all measured again: its lost count stops growing."""
    ns = cluster.namespace()
    x = make_pod(ns, "x-1", {"app": "x"}, "node-a",
                 containers={"app": ("/app/podapp", "-workers", "3")})
    make_pod(ns, "y-1", {"app": "y"}, "node-a",
             containers={"app": ("/app/podapp", "-workers", "3")})
    with cluster.agent("node-a", extra=("--max-inflight-per-namespace", "4")):
        cluster.apply_probe(ns, "px", spec(selector={"matchLabels": {"app": "x"}}))
        wait_for("x's calls", lambda: has_calls(cluster, ns, "px", "node-a"), timeout=8)
        cluster.apply_probe(ns, "py", spec(selector={"matchLabels": {"app": "y"}}))
        wait_for("y's lost calls",
                 lambda: (e := has_calls(cluster, ns, "py", "node-a"))
                 and fns(e)["main.handleRequest"].get("lost", 0) > 0, timeout=10)
        x.delete()

        def lost_settled():
            e1 = cluster.node_entry(ns, "py", "node-a")
            time.sleep(4.5)  # two report intervals
            e2 = cluster.node_entry(ns, "py", "node-a")
            f1, f2 = fns(e1)["main.handleRequest"], fns(e2)["main.handleRequest"]
            return f2["calls"] > f1["calls"] and f2["lost"] == f1["lost"] and e2

        wait_for("y's calls all measured", lost_settled, timeout=20)


def test_namespace_share_of_deep_calls(cluster, make_pod):
    """--max-inflight-per-namespace 16 gives each namespace 1 chunk of 64
    frames past the first 64 (16 x 4,096 / 65,536): namespace A's two
    goroutines recursing 200 deep need 6, so calls are lost, counted, with
    the share named; namespace B's one goroutine 100 deep needs 1 and loses
    nothing."""
    a, b = cluster.namespace(), cluster.namespace()
    idle = ("-workers", "1", "-gap", "1s")
    make_pod(a, "deep-1", {"app": "web"}, "node-a",
             containers={"app": ("/app/podapp", *idle, "-deep", "2", "-depth", "200")})
    make_pod(b, "deep-1", {"app": "web"}, "node-a",
             containers={"app": ("/app/podapp", *idle, "-deep", "1", "-depth", "100")})
    with cluster.agent("node-a", extra=("--max-inflight-per-namespace", "16")):
        for ns in (a, b):
            cluster.apply_probe(ns, "deep", spec(functions=["main.recurse"], maxOverhead="0"))
        entry = wait_for("A's lost calls and the error",
                         lambda: (e := has_calls(cluster, a, "deep", "node-a", ["main.recurse"]))
                         and fns(e)["main.recurse"].get("lost", 0) > 0 and e["errors"] and e,
                         timeout=15)
        (err,) = entry["errors"]
        for part in (f"namespace {a} on this node had calls nested deeper than 64 in flight "
                     "in 1 chunks of 64", "--max-inflight-per-namespace"):
            assert part in err, (part, err)
        calm = wait_for("B's calls", lambda: has_calls(cluster, b, "deep", "node-a",
                                                       ["main.recurse"], more_than=1000),
                        timeout=10)
        assert calm["errors"] == [] and not fns(calm)["main.recurse"].get("lost"), calm


def test_calls_past_the_depth_the_kernel_follows_are_lost_with_words(cluster, make_pod):
    """A goroutine recursing 1,100 deep: the calls entered with 1,024 in
    flight below them are not measured, counted in lost, and the report
    says why and what to change; the 1,024 below are measured."""
    ns = cluster.namespace()
    make_pod(ns, "deep-1", {"app": "web"}, "node-a", containers={
        "app": ("/app/podapp", "-workers", "1", "-gap", "1s", "-deep", "1", "-depth", "1100")})
    with cluster.agent("node-a"):
        cluster.apply_probe(ns, "deep", spec(functions=["main.recurse"], maxOverhead="0"))
        entry = wait_for("lost calls and the error",
                         lambda: (e := has_calls(cluster, ns, "deep", "node-a",
                                                 ["main.recurse"], more_than=1024))
                         and fns(e)["main.recurse"].get("lost", 0) > 0 and e["errors"] and e,
                         timeout=20)
        (err,) = entry["errors"]
        for part in (f"processes of namespace {ns} on this node were entered with 1024 traced "
                     "calls in flight below them", "recurse less deep"):
            assert part in err, (part, err)
        f = fns(entry)["main.recurse"]
        # each round of 1,100 levels: 1,024 measured, 76 lost (a round may be under way)
        rounds = f["lost"] / 76
        assert abs(f["calls"] - 1024 * rounds) <= 1100, f


def test_a_binary_past_the_analysis_time_limit_costs_its_probe_only(cluster, make_pod):
    """--analysis-timeout 300ms and a pod running kube-apiserver (119 MB of
    Go, read in 0.4 s, 1 s under ASan; podapp takes 0.03 s): its probe gets an
    error naming the limit, the flag that sets it and the file; the reading
    ran off the main loop, so /healthz and /metrics kept answering, and
    another probe on another pod attaches and keeps reporting."""
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    # --help into a pipe nobody reads: its 68 kB fill the pipe, and it waits
    big = make_pod(ns, "big-1", {"app": "big"}, "node-a", containers={
        "app": ("/bin/sh", "-c", "while [ ! -x /tmp/kube-apiserver ]; do sleep 0.1; done; "
                "/tmp/kube-apiserver --help | sleep 100000")})
    c = big.containers["app"]
    # the container's own file, in its upper layer, written through its root
    tmp = os.path.join(c.rootfs, "tmp")
    shutil.copy(os.path.join(cluster.cp.bindir, "kube-apiserver"), os.path.join(tmp, "k.part"))
    os.rename(os.path.join(tmp, "k.part"), os.path.join(tmp, "kube-apiserver"))
    with cluster.agent("node-a", extra=("--analysis-timeout", "300ms")) as agent:
        cluster.apply_probe(ns, "calm", spec())
        wait_for("calls of the calm probe", lambda: has_calls(cluster, ns, "calm", "node-a"),
                 timeout=8)
        watch = Watch(agent)
        applied = time.monotonic()
        cluster.apply_probe(ns, "big", spec(selector={"matchLabels": {"app": "big"}},
                                            functions=["main.main"],
                                            executable="/tmp/kube-apiserver"))
        entry = wait_for("the big probe's error",
                         lambda: (e := cluster.node_entry(ns, "big", "node-a"))
                         and e["errors"] and e, timeout=10)
        took = time.monotonic() - applied
        (err,) = entry["errors"]
        for part in ("pod big-1, container app, process ", "reading /tmp/kube-apiserver took "
                     "more than 0.3 s", "--analysis-timeout", "not traced"):
            assert part in err, (part, err)
        assert entry["attached"] is False and not entry.get("functions"), entry
        before = has_calls(cluster, ns, "calm", "node-a")["lastUpdate"]
        wait_for("a later report of the calm probe",
                 lambda: (e := has_calls(cluster, ns, "calm", "node-a"))
                 and e["lastUpdate"] != before, timeout=8)
        answers = watch.stop()
        print(f"analysis time limit: error in the status {took:.2f} s after the apply; "
              f"slowest /healthz answer {max(t for p, _, t in answers if p == '/healthz'):.2f} s")
        assert answers and all(code == 200 for _, code, _ in answers), \
            [a for a in answers if a[1] != 200]
        os.kill(agent.proc.pid, signal.SIGUSR1)
        (stats,) = wait_for("the counters", lambda: agent.find(event="stats"), timeout=5)
        assert stats["analysis_timeouts"] >= 1, stats
        assert metric(agent.get("/metrics")[1], "retwatch_analysis_timeouts_total") >= 1
        assert agent.proc.poll() is None


def test_slow_call_thresholds_are_each_process_own(cluster, make_pod):
    """Two namespaces probe the same function of one binary, A with
    slowThreshold 1ns, B with 100ms: each process's calls are judged by its
    own probe's threshold. B's calls (far under 100ms) are never sent as
    slow, so none is dropped and none logged, while A's flood is."""
    a, b = cluster.namespace(), cluster.namespace()
    make_pod(a, "hot-a", {"app": "hot"}, "node-a", containers={"app": HOT_ARGS})
    make_pod(b, "hot-b", {"app": "hot"}, "node-a", containers={"app": HOT_ARGS})
    probe = {"selector": {"matchLabels": {"app": "hot"}}, "functions": ["main.lookupUser"],
             "maxOverhead": "0"}
    with cluster.agent("node-a", extra=("--slow-calls-per-second", "5")) as agent:
        cluster.apply_probe(a, "greedy", dict(probe, slowThreshold="1ns"))
        cluster.apply_probe(b, "modest", dict(probe, slowThreshold="100ms"))
        wait_for("A's slow calls dropped in the kernel",
                 lambda: (e := has_calls(cluster, a, "greedy", "node-a", ["main.lookupUser"],
                                         more_than=1000))
                 and fns(e)["main.lookupUser"].get("slowDropped", 0) > 0, timeout=15)
        wait_for("B's calls", lambda: has_calls(cluster, b, "modest", "node-a",
                                                ["main.lookupUser"], more_than=5000),
                 timeout=15)
        time.sleep(3)
        f = fns(has_calls(cluster, b, "modest", "node-a", ["main.lookupUser"]))[
            "main.lookupUser"]
        slow_b = agent.find(event="slow_call", probe="modest", count=0)
        print(f"B: {f['calls']} calls, slowDropped {f.get('slowDropped', 0)}, "
              f"{len(slow_b)} logged slow; A: "
              f"{len(agent.find(event='slow_call', probe='greedy', count=0))} logged slow")
        assert not f.get("slowDropped"), f
        assert all(ev["duration_ns"] >= 100_000_000 for ev in slow_b), slow_b[:3]
        assert agent.find(event="slow_call", probe="greedy")
        assert agent.proc.poll() is None


def test_probe_slots_shared_between_namespaces(cluster, make_pod):
    """--max-probes 100 on a node where one namespace has 150 probes (all
    created first, the oldest): it holds 100. A new probe of another
    namespace attaches anyway, in its namespace's share, and the greedy
    namespace's newest probe over its share waits instead, the agent saying
    --max-probes. Prints how long the new probe took to attach."""
    greedy, other = cluster.namespace(), cluster.namespace()
    pods = {ns: make_pod(ns, "web-1", {"app": "web"}, "node-a") for ns in (greedy, other)}
    probes = [{"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
               "metadata": {"name": f"p{i:03d}", "namespace": greedy},
               "spec": spec(functions=["main.lookupUser"], reportInterval="5s")}
              for i in range(150)]
    with cluster.agent("node-a", extra=["--max-probes", "100"]) as agent:
        cluster.kubectl("create", "-f", "-",
                        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": probes}))

        def limited():
            code, text = agent.get("/metrics")
            return code == 200 and metric(text, "retwatch_probes_limited") == 50
        wait_for("50 of the greedy namespace's probes to wait", limited, timeout=90,
                 interval=0.5)
        time.sleep(1.1)  # creation times are in whole seconds: the new probe is the newest
        cluster.apply_probe(other, "mine", spec(functions=["main.lookupUser"]))
        began = time.monotonic()
        wait_for("the other namespace's probe to attach",
                 lambda: (cluster.node_entry(other, "mine", "node-a") or {}).get("attached"),
                 timeout=60, interval=0.1)
        took = time.monotonic() - began
        assert agent.find(msg_has=f"attached to process {pods[other].containers['app'].pid}:",
                          namespace=other), agent.tail()
        # the greedy namespace's probe over its share (of the same second:
        # by uid) waits now: 51 of its 150
        wait_for("51 of the greedy namespace's probes to wait",
                 lambda: metric(agent.get("/metrics")[1], "retwatch_probes_limited") == 51,
                 timeout=30, interval=0.5)
        assert agent.find(msg_has="each namespace first its share", count=51), agent.tail()
    print(f"the other namespace's new probe attached {took:.2f} s after it was created")

