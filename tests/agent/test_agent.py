"""retwatch-agent end to end: FunctionProbes applied with kubectl to a real
API server, pods as runc containers, results read back from the status."""

import calendar
import json
import os
import re
import signal
import threading
import time
import urllib.error
import urllib.request

from agentproc import Agent, system_link_ids, wait_for
from conftest import AGENT, install_manifests
from controlplane import ControlPlane

FUNCS = ["main.handleRequest", "main.lookupUser"]
UNITS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def ns_of(duration):
    m = re.fullmatch(r"([0-9.]+)(ns|us|ms|s)", duration)
    assert m, f"not a duration: {duration!r}"
    return float(m.group(1)) * UNITS[m.group(2)]


def rfc3339(ts):
    """Seconds since the epoch of an RFC 3339 UTC time with milliseconds."""
    whole, _, frac = ts.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


def spec(**kw):
    s = {"selector": {"matchLabels": {"app": "web"}}, "functions": FUNCS, "reportInterval": "2s"}
    s.update(kw)
    return s


def fns(entry):
    return {f["name"]: f for f in entry.get("functions", [])}


def buckets(latency):
    """A latency's non-empty buckets, {index: count}, from its bucketCounts
    ("index:count" pairs, one space apart, ascending)."""
    pairs = [tuple(int(x) for x in p.split(":")) for p in latency["bucketCounts"].split()]
    assert [i for i, _ in pairs] == sorted({i for i, _ in pairs}), latency["bucketCounts"]
    return dict(pairs)


def has_calls(cluster, ns, name, node, funcs=FUNCS, more_than=0):
    """node's entry once every function of funcs has more than more_than calls."""
    entry = cluster.node_entry(ns, name, node)
    if entry and all(fns(entry).get(f, {}).get("calls", 0) > more_than for f in funcs):
        return entry
    return None


def attached_log(agent, pid, timeout):
    try:
        return wait_for(f"the agent to attach to process {pid}",
                        lambda: agent.find(msg_has=f"attached to process {pid}:"), timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}\nthe agent's log:\n{agent.tail()}") from None


def count_afresh(agent, c, timeout=5):
    """Once the agent has attached to container c's podapp, starts its counts
    afresh: a call under way at the attach (the agent saw only its return)
    ends long before, so every call podapp counts is one the agent saw whole.
    Returns once podapp's stats say it did (on a loaded machine the signal
    may wait): a report written after that holds every call the agent
    counted before podapp's counts began."""
    attached_log(agent, c.pid, timeout)
    time.sleep(0.3)
    since = time.time_ns()
    os.kill(c.pid, signal.SIGUSR1)
    wait_for("podapp's counts begun afresh",
             lambda: c.stats(fresh=False).get("reset_unix_ns", 0) >= since, timeout=10)


def report_after_pause(cluster, ns, name, node, paused, own):
    """node's first report that holds every call the paused podapps (their
    stats own) made: written after the pause, with at least their calls
    (the agent counted from a little before their counts began)."""
    last = {}

    def complete():
        e = last["entry"] = cluster.node_entry(ns, name, node)
        return (e and rfc3339(e["lastUpdate"]) > paused
                and all(fns(e)[f]["calls"] >= sum(o[f]["calls"] for o in own) for f in FUNCS)
                and e)
    try:
        return wait_for("a report with every call made before the pause", complete, timeout=6)
    except AssertionError as e:
        e = last.get("entry") or {}
        seen = {f: {k: fns(e).get(f, {}).get(k) for k in ("calls", "orphans")} for f in FUNCS}
        mine = {f: sum(o[f]["calls"] for o in own) for f in FUNCS}
        raise AssertionError(f"no report after the pause at {paused:.3f} held every call: "
                             f"last report at {e.get('lastUpdate')} saw {seen}, "
                             f"the podapps counted {mine}") from None


def test_apply_shows_pods_calls_and_p50_within_5s(cluster, make_pod):
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    make_pod(ns, "other", {"app": "db"}, "node-a")
    c = pod.containers["app"]
    with cluster.agent("node-a") as agent:
        start = time.monotonic()
        cluster.apply_probe(ns, "lat", spec())
        # compare the same window of calls: podapp counts afresh from the
        # attach, then stops calling, and the agent's next report holds them all
        count_afresh(agent, c)
        wait_for("calls of both functions", lambda: has_calls(cluster, ns, "lat", "node-a"),
                 timeout=5)
        assert time.monotonic() - start < 5
        time.sleep(1)
        paused = time.time()
        os.kill(c.pid, signal.SIGUSR2)
        own = c.stats()["functions"]
        entry = report_after_pause(cluster, ns, "lat", "node-a", paused, [own])
        # a pod without an owner: its revision is its image's digest
        digest = pod.image_id.split("@")[1]
        assert entry["pods"] == [{"name": "web-1", "container": "app", "containerID": c.id,
                                  "executable": "/app/podapp", "processes": [c.pid],
                                  "revision": digest[:19]}]
        assert entry["attached"] is True and entry["processes"] == 1 and entry["errors"] == []
        for name, f in fns(entry).items():
            assert f["mode"] == "entry+ret" and f["returnSites"] >= 1
            # the pod's own calls are the node's: it is the only one
            (mine,) = f["pods"]
            assert (mine["name"], mine["container"], mine["revision"]) == \
                ("web-1", "app", digest[:19])
            assert {k: mine[k] for k in ("calls", "sumNs", "bucketCounts")} == \
                {k: f[k] for k in ("calls", "sumNs", "bucketCounts")}
            p50, median = ns_of(f["p50"]), own[name]["median_ns"]
            assert abs(p50 - median) / median < 0.05, (name, f["p50"], median)
            assert f["calls"] == sum(buckets(f).values())
            # the agent also saw the few calls between its attach and the reset
            assert 0 <= f["calls"] - own[name]["calls"] <= 500, (name, f["calls"], own[name])
        # the Lease holder's summary and conditions
        wait_for("the summary", lambda: cluster.status(ns, "lat").get("summary", {}).get("calls"),
                 timeout=6)
        conds = {c["type"]: c for c in cluster.status(ns, "lat")["conditions"]}
        assert conds["Ready"]["status"] == "True"
        assert conds["Attached"]["status"] == "True", conds["Attached"]
        assert conds["Expired"]["status"] == "False"
        assert cluster.status(ns, "lat")["observedGeneration"] == 1
        table = cluster.kubectl("get", "fprobe", "lat", "-n", ns).stdout
        assert "main.handleRequest" in table and "ms" in table, table


def test_two_nodes_merge_exactly_without_conflicts(cluster, make_pod):
    ns = cluster.namespace()
    make_pod(ns, "web-a", {"app": "web"}, "node-a")
    pods_b = [make_pod(ns, f"web-b{i}", {"app": "web"}, "node-b") for i in range(2)]
    with cluster.agent("node-a") as a, cluster.agent("node-b") as b:
        cluster.apply_probe(ns, "two", spec())
        for node in ("node-a", "node-b"):
            wait_for(f"{node}'s calls", lambda: has_calls(cluster, ns, "two", node), timeout=8)
        wait_for("node-b's two pods",
                 lambda: len(cluster.node_entry(ns, "two", "node-b")["pods"]) == 2, timeout=8)
        summary = wait_for("a summary over both nodes",
                           lambda: cluster.status(ns, "two").get("summary", {}).get("nodes") == 2
                           and cluster.status(ns, "two")["summary"], timeout=8)
        assert summary["pods"] == 3 and summary["processes"] == 3
        for p in pods_b:
            p.delete()

        # once no call is made anywhere, the summary settles on the nodes' sum
        def merged_equals_nodes():
            st = cluster.status(ns, "two")
            reports = cluster.reports(ns, "two")
            if len(reports) != 2 or not st.get("summary"):
                return None
            want = {}
            for r in reports:
                for f in r["status"]["functions"]:
                    w = want.setdefault(f["name"], {"calls": 0, "sumNs": 0, "buckets": {}})
                    w["calls"] += f["calls"]
                    w["sumNs"] += f["sumNs"]
                    for i, n in buckets(f).items():
                        w["buckets"][i] = w["buckets"].get(i, 0) + n
            got = {f["name"]: {"calls": f["calls"], "sumNs": f["sumNs"], "buckets": buckets(f)}
                   for f in st["summary"]["functions"]}
            return got == want and got

        # node-a keeps counting: stop it to freeze its numbers (its last
        # report says it detached; node-b, the Lease holder now, merges it)
        assert a.stop() == 0
        wait_for("the summary to equal the sum of the node reports", merged_equals_nodes,
                 timeout=20, interval=0.5)
    for agent in (a, b):
        assert not agent.find(msg_has="failed to write status"), agent.tail()


def test_restarted_container_new_process_and_new_pod_are_probed(cluster, make_pod):
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "life", spec())
        attached_log(agent, pod.containers["app"].pid, timeout=5)
        before = wait_for("calls", lambda: has_calls(cluster, ns, "life", "node-a"), timeout=6)

        new = pod.restart_container("app")
        attached_log(agent, new.pid, timeout=3)
        second = new.exec(["/app/podapp", "-stats", "/tmp/second.json", "-name", "second"])
        attached_log(agent, second, timeout=3)
        pod2 = make_pod(ns, "web-2", {"app": "web"}, "node-a")
        attached_log(agent, pod2.containers["app"].pid, timeout=3)

        def all_three():
            e = cluster.node_entry(ns, "life", "node-a")
            procs = sorted(p for item in e["pods"] for p in item["processes"])
            return procs == sorted([new.pid, second, pod2.containers["app"].pid]) and e
        entry = wait_for("the status to list the three processes", all_three, timeout=6)
        ids = {item["containerID"] for item in entry["pods"]}
        assert ids == {new.id, pod2.containers["app"].id}
        # the calls of the process that died stay counted
        for name in FUNCS:
            assert fns(entry)[name]["calls"] > fns(before)[name]["calls"]
        assert agent.find(msg_has="detached from process", pod="web-1")


def test_deleted_pod_and_probe_are_detached(cluster, make_pod):
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "del", spec())
        attached_log(agent, pod.containers["app"].pid, timeout=5)
        links = agent.links()
        assert links
        start = time.monotonic()
        cluster.kubectl("delete", "pod", "web-1", "-n", ns, "--grace-period=0", "--force",
                        "--wait=false")
        wait_for("the links to go", lambda: not agent.links(), timeout=2)
        took = time.monotonic() - start
        assert not links & system_link_ids()
        assert took < 2, took
        pod.delete()

        pod2 = make_pod(ns, "web-2", {"app": "web"}, "node-a")
        attached_log(agent, pod2.containers["app"].pid, timeout=5)
        links = agent.links()
        cluster.kubectl("delete", "functionprobe", "del", "-n", ns)
        wait_for("the links to go", lambda: not agent.links(), timeout=2)
        assert not links & system_link_ids()
        wait_for("the detach in the log",
                 lambda: agent.find(msg_has="the probe was deleted", pod="web-2"), timeout=2)


def test_spec_edit_is_applied(cluster, make_pod):
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a"):
        cluster.apply_probe(ns, "edit", spec(functions=["main.handleRequest"]))
        wait_for("calls", lambda: has_calls(cluster, ns, "edit", "node-a", ["main.handleRequest"]),
                 timeout=6)
        cluster.apply_probe(ns, "edit", spec(functions=["main.lookupUser"]))
        entry = wait_for("the new function's calls",
                         lambda: (e := has_calls(cluster, ns, "edit", "node-a",
                                                 ["main.lookupUser"])) and e["generation"] == 2
                         and e, timeout=6)
        assert list(fns(entry)) == ["main.lookupUser"]
        wait_for("observedGeneration 2",
                 lambda: cluster.status(ns, "edit").get("observedGeneration") == 2, timeout=6)


def test_lifetime_expiry_detaches_and_keeps_results(cluster, make_pod):
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "short", spec(lifetime="4s"))
        wait_for("calls", lambda: has_calls(cluster, ns, "short", "node-a"), timeout=5)
        cond = wait_for("Expired=True",
                        lambda: (c := cluster.condition(ns, "short", "Expired"))
                        and c["status"] == "True" and c, timeout=12)
        assert "results stay" in cond["message"]
        assert not agent.links()
        entry = wait_for("attached=false", lambda: (e := cluster.node_entry(ns, "short", "node-a"))
                         and e["attached"] is False and e, timeout=6)
        assert all(f["calls"] > 0 for f in entry["functions"])
        assert cluster.condition(ns, "short", "Attached")["reason"] == "Expired"


def test_api_server_restart_and_compaction_miss_nothing(cluster, make_pod):
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "before", spec())
        attached_log(agent, pod.containers["app"].pid, timeout=5)
        lists = len(agent.find(msg_has="listed"))
        cluster.cp.restart_apiserver()
        cluster.cp.compact_etcd()
        # changes right after the restart: a new pod, a new probe, a deleted probe
        pod2 = make_pod(ns, "web-2", {"app": "db"}, "node-a")
        cluster.apply_probe(ns, "after", spec(selector={"matchLabels": {"app": "db"}}))
        cluster.kubectl("delete", "functionprobe", "before", "-n", ns)
        wait_for("calls of the probe made after the restart",
                 lambda: has_calls(cluster, ns, "after", "node-a"), timeout=15)
        wait_for("the deleted probe's process to be detached",
                 lambda: agent.find(msg_has="the probe was deleted", pod="web-1"), timeout=5)
        entry = cluster.node_entry(ns, "after", "node-a")
        assert [p["name"] for p in entry["pods"]] == ["web-2"]
        assert pod2.containers["app"].pid in entry["pods"][0]["processes"]
        # the watches resumed or relisted (410 Gone after the compaction)
        assert (len(agent.find(msg_has="listed")) > lists
                or agent.find(msg_has="resume from resourceVersion")), agent.tail()
        assert agent.proc.poll() is None


def test_schema_rejects_bad_probes_with_its_message(cluster):
    ns = cluster.namespace()
    cases = [
        (spec(functions=[]), "should have at least 1 items"),
        (spec(functions=[f"f{i}" for i in range(65)]), "must have at most 64 items"),
        (spec(reportInterval="1s"), "reportInterval must be at least 2s"),
        (spec(lifetime="forever"), "spec.lifetime"),
        ({"functions": FUNCS}, "spec.selector: Required value"),
        (spec(selector={"matchExpressions": [{"key": "app", "operator": "Like"}]}),
         "Unsupported value: \"Like\""),
        (spec(selector={"matchExpressions": [{"key": "app", "operator": "In"}]}),
         "In and NotIn need values"),
        (spec(executable="app/server"), "spec.executable"),
    ]
    for i, (bad, message) in enumerate(cases):
        res = cluster.apply_probe(ns, f"bad{i}", bad, check=False)
        assert res.returncode != 0, bad
        assert message in res.stderr, (bad, res.stderr)


def test_agent_reports_what_only_it_can_reject(cluster, make_pod):
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    # a pod whose container is not running
    cluster.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "waiting", "namespace": ns, "labels": {"app": "web"}},
        "spec": {"nodeName": "node-a", "containers": [{"name": "app", "image": "x"}]}}))
    cluster.kubectl("patch", "pod", "waiting", "-n", ns, "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": {"phase": "Pending", "containerStatuses": [{
                        "name": "app", "image": "x", "imageID": "", "ready": False,
                        "restartCount": 0,
                        "state": {"waiting": {"reason": "ContainerCreating"}}}]}}))
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "typo", spec(functions=["main.handleReqest"]))
        cluster.apply_probe(ns, "escape", spec(executable="/app/escape"))
        cluster.apply_probe(ns, "inside", spec(executable="/app/current"))
        entry = wait_for("errors", lambda: (e := cluster.node_entry(ns, "typo", "node-a"))
                         and len(e["errors"]) == 2 and e, timeout=6)
        assert any("no function matches 'main.handleReqest' in /app/podapp "
                   "(did you mean: main.handleRequest" in e for e in entry["errors"]), entry
        assert "pod waiting, container app: not running (ContainerCreating)" in entry["errors"]
        assert entry["attached"] is False
        cond = wait_for("Attached=False", lambda: (c := cluster.condition(ns, "typo", "Attached"))
                        and c["reason"] == "AttachFailed" and c, timeout=8)
        assert "main.handleReqest" in cond["message"]

        # /app/escape -> /../../../../etc/hostname: resolved inside the container
        entry = wait_for("errors", lambda: (e := cluster.node_entry(ns, "escape", "node-a"))
                         and e["errors"] and e, timeout=6)
        assert any("cannot open spec.executable /app/escape inside the container: "
                   "No such file or directory" in e for e in entry["errors"]), entry
        # a symlink that stays inside works
        wait_for("calls through /app/current",
                 lambda: has_calls(cluster, ns, "inside", "node-a"), timeout=6)
        cluster.kubectl("delete", "pod", "waiting", "-n", ns, "--grace-period=0", "--force")
        assert agent.proc.poll() is None


def test_fifo_as_executable_is_an_error_and_the_agent_stays_live(cluster, make_pod):
    """A FIFO as spec.executable (an open that waits for a writer for ever)
    costs its probe an error at once; the agent stays live and another
    probe on the same pod keeps reporting."""
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "inside", spec(executable="/app/current"))
        wait_for("calls through /app/current",
                 lambda: has_calls(cluster, ns, "inside", "node-a"), timeout=8)
        applied = time.time()
        cluster.apply_probe(ns, "fifo", spec(executable="/app/fifo"))
        entry = wait_for("the FIFO's error", lambda: (e := cluster.node_entry(ns, "fifo", "node-a"))
                         and e["errors"] and e, timeout=6)
        took = time.time() - applied
        assert any("pod web-1, container app: spec.executable /app/fifo is a FIFO, "
                   "not a regular file" in e for e in entry["errors"]), entry
        assert entry["attached"] is False
        print(f"FIFO error in the status {took:.2f} s after the apply")
        assert agent.get("/healthz") == (200, "ok\n")
        before = has_calls(cluster, ns, "inside", "node-a")["lastUpdate"]
        wait_for("a later report of the other probe",
                 lambda: (e := has_calls(cluster, ns, "inside", "node-a"))
                 and e["lastUpdate"] != before, timeout=8)
        assert agent.proc.poll() is None


def test_sigterm_detaches_and_a_new_agent_carries_on(cluster, make_pod):
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    agent = cluster.agent("node-a").start()
    try:
        cluster.apply_probe(ns, "carry", spec())
        before = wait_for("calls", lambda: has_calls(cluster, ns, "carry", "node-a", more_than=50),
                          timeout=15)
        links = agent.links()
        assert links
    finally:
        assert agent.stop(signal.SIGTERM) == 0
    assert not links & system_link_ids()
    assert agent.find(msg_has="the agent is stopping")
    # its last report says it detached
    last = cluster.node_entry(ns, "carry", "node-a")
    assert last["attached"] is False and last["processes"] == 0, last
    low = {n: f["calls"] for n, f in fns(last).items()}
    assert all(low[n] >= fns(before)[n]["calls"] for n in FUNCS)
    with cluster.agent("node-a") as again:
        seen = []

        def grew():
            e = cluster.node_entry(ns, "carry", "node-a")
            seen.append({n: f["calls"] for n, f in fns(e).items()})
            return all(seen[-1][n] > low[n] for n in FUNCS)
        wait_for("calls counted on from the earlier agent's", grew, timeout=8)
        assert all(s[n] >= low[n] for s in seen for n in FUNCS), seen
        assert again.find(msg_has="carrying on from the results written before")


def test_kubeconfig_with_files_and_client_certificate(cluster):
    for user in ("agent-files", "admin-cert"):
        agent = cluster.agent(f"node-{user}", user=user).start()
        assert agent.stop() == 0
        assert not agent.find(level="error"), agent.tail()


def stats(agent):
    """The agent's counters, logged on SIGUSR1."""
    before = len(agent.find(event="stats"))
    agent.proc.send_signal(signal.SIGUSR1)
    return wait_for("a stats line", lambda: agent.find(event="stats", count=before + 1),
                    timeout=5)[-1]


def test_status_writes_are_bounded(cluster, make_pod):
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a") as agent:
        # window: the recent latency settles a window after the calls stop
        # the shortest interval and window the schema takes (2s): the spans
        # below are counted in them
        cluster.apply_probe(ns, "quiet", spec(reportInterval="2s", window="2s"))
        wait_for("calls", lambda: has_calls(cluster, ns, "quiet", "node-a"), timeout=6)
        # a new Lease holder first writes the summary of every probe the
        # earlier tests left: let that pass, then count this probe's writes
        wait_for("the Lease", lambda: agent.find(msg_has="holding Lease"), timeout=20)
        time.sleep(3)
        first = stats(agent)
        time.sleep(6)  # three intervals
        busy = stats(agent)
        # one node entry per interval (jitter: 1.8 to 2.2 s), plus the summary
        node_writes = busy["status_patches"] - first["status_patches"]
        assert 2 <= node_writes <= 2 * 4, (first, busy)
        # no call, no change, no write (recent falls to zero a window and an
        # interval later, the summary settles one interval after that)
        os.kill(pod.containers["app"].pid, signal.SIGUSR2)
        time.sleep(8)
        settled = stats(agent)
        time.sleep(5)  # two and a half intervals without a write
        idle = stats(agent)
        assert idle["status_patches"] == settled["status_patches"], (settled, idle)
        assert idle["status_patch_failures"] == 0


def test_two_probes_on_one_process_count_apart(cluster, make_pod):
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "first", spec(functions=["main.handleRequest"]))
        wait_for("calls", lambda: has_calls(cluster, ns, "first", "node-a",
                                            ["main.handleRequest"], more_than=100), timeout=8)
        cluster.apply_probe(ns, "second", spec())
        wait_for("calls", lambda: has_calls(cluster, ns, "second", "node-a"), timeout=8)
        # the second probe counts from its own start, not the first's: compare
        # both once the calls stop and both reported all of them (a report
        # that missed the last calls is followed by one more, an interval later)
        paused = time.time()
        os.kill(pod.containers["app"].pid, signal.SIGUSR2)

        def after_pause():
            es = [cluster.node_entry(ns, name, "node-a") for name in ("first", "second")]
            return all(e and rfc3339(e["lastUpdate"]) > paused for e in es) and es
        # on a loaded machine a report can come late: wait for it, not a fixed time
        handled = [fns(e)["main.handleRequest"]["calls"]
                   for e in wait_for("reports written after the pause", after_pause, timeout=20)]
        assert handled[0] - handled[1] >= 100, handled
        os.kill(pod.containers["app"].pid, signal.SIGUSR2)
        links = agent.links()
        cluster.kubectl("delete", "functionprobe", "first", "-n", ns)
        wait_for("the first probe's detach",
                 lambda: agent.find(msg_has="the probe was deleted", pod="web-1"), timeout=3)
        # the second keeps counting, from where it was: its first report
        # written after the delete has at least the calls it had before
        deleted = time.time()
        now = fns(cluster.node_entry(ns, "second", "node-a"))["main.handleRequest"]["calls"]

        def report_after_delete():
            e = cluster.node_entry(ns, "second", "node-a")
            return e if e and rfc3339(e["lastUpdate"]) > deleted else None
        first_after = wait_for("a report after the delete", report_after_delete, timeout=8)
        assert fns(first_after)["main.handleRequest"]["calls"] >= now, (first_after, now)
        wait_for("more calls", lambda: has_calls(cluster, ns, "second", "node-a", more_than=now),
                 timeout=8)
        assert agent.links() and agent.links() <= links


def test_a_new_probe_summary_is_written_early_only_until_it_shows_calls(cluster, make_pod):
    """A new probe's summary is asked for again every 0.25 s until it shows
    calls, then once an interval: each write goes to every agent's watch.
    Here more nodes report in the probe's first seconds (copies of node-a's
    report), so each early summary would differ and be written. The agent's
    copy of the probe has no summary: the early ones went on for the probe's
    first 10 s, a write for each new report."""
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    events = []

    def watch():
        path = (f"/apis/retwatch.io/v1alpha1/namespaces/{ns}/functionprobes?watch=1"
                "&fieldSelector=metadata.name%3Dearly&timeoutSeconds=12")
        with cluster.cp.urlopen(path, timeout=30) as r:
            for line in r:
                events.append(json.loads(line))
    with cluster.agent("node-a") as agent:
        wait_for("the Lease", lambda: agent.find(msg_has="holding Lease"), timeout=20)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        time.sleep(0.5)
        cluster.apply_probe(ns, "early", spec())
        (mine,) = wait_for("node-a's report", lambda: cluster.reports(ns, "early"), timeout=8)
        for i in range(16):
            other = json.loads(json.dumps(mine))
            other["metadata"] = {"name": f"early-other-{i}", "namespace": ns,
                                 "labels": mine["metadata"]["labels"]
                                 | {"retwatch.io/node": f"other-{i}"},
                                 "ownerReferences": mine["metadata"]["ownerReferences"]}
            other["node"] = f"other-{i}"
            # as the agent's ServiceAccount: nobody else may write reports
            cluster.kubectl("create", "-f", "-", input=json.dumps(other), user="agent")
            time.sleep(0.3)
        watcher.join(20)
    writes = [e for e in events if e["type"] == "MODIFIED"]
    nodes = [(e["object"].get("status", {}).get("summary") or {}).get("nodes", 0) for e in writes]
    assert nodes and nodes[-1] > 1, events
    # early ones until calls show (about 1 s), then one per 2 s interval:
    # 7-8 here, against 20 (a write for nearly every new report) before
    assert len(writes) <= 12, (len(writes), nodes)


def test_missing_crd_and_rbac_leave_the_agent_running(cluster, workdir):
    """A control plane without the CRD, and an identity without RBAC rules:
    the agent says what is wrong and keeps trying."""
    cp = ControlPlane(os.path.join(workdir, "bare"), cluster.cp.bindir)
    cp.start()
    agent = Agent(AGENT, cp.kubeconfig("agent"), "node-x", workdir)
    try:
        agent.start(wait_listed=False)
        wait_for("the RBAC hint", lambda: agent.find(msg_has="check its credentials and RBAC")
                 or agent.proc.poll() is not None, timeout=10)
        assert agent.proc.poll() is None, agent.tail()
        # the rest of the install first, the CRD after
        rbac = install_manifests(without={"CustomResourceDefinition"})
        cp.kubectl("apply", "-f", "-", input=rbac)
        wait_for("the CRD hint",
                 lambda: agent.find(msg_has="is its CustomResourceDefinition installed"),
                 timeout=15)
        cp.kubectl("apply", "-f", "-", input=install_manifests(kinds={"CustomResourceDefinition"}))
        wait_for("the lists", lambda: agent.find(msg_has="functionprobes: listed"), timeout=15)
        assert agent.proc.poll() is None
    finally:
        assert agent.stop() == 0
        cp.stop()


def test_pods_of_one_image_share_probes_and_count_exactly(cluster, make_pod):
    """Each container sees its own overlay of the image, but uprobes land on
    the layer's file that all of them share. Where the probe selects every
    process running it, each function is probed once for all of them (an
    entry and a RET link, and Go's morestack marker): the links do not grow
    with the pods. A pod of the image in another namespace, which no probe
    selects, must not trap on them: while it runs, the probes are each traced
    process's own (filtered to it), and shared again once it is gone. Each
    process's calls are counted once throughout."""
    ns, other_ns = cluster.namespace(), cluster.namespace()
    pods = [make_pod(ns, f"web-{i}", {"app": "web"}, "node-a") for i in range(3)]
    per_file = 2 * len(FUNCS) + 1
    # and the fork and exec programs', held while any process is traced (test_prefork.py)
    shared = per_file + 2
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "image", spec())
        for p in pods:
            count_afresh(agent, p.containers["app"])
        wait_for("one link per function and program for the three pods",
                 lambda: len(agent.links()) == shared, timeout=5)
        neighbour = make_pod(other_ns, "web-0", {"app": "web"}, "node-a")
        wait_for("links of each traced process's own, with another namespace's pod of the image",
                 lambda: len(agent.links()) == 3 * per_file + 2, timeout=8)
        neighbour.delete()
        wait_for("shared links again once it is gone",
                 lambda: len(agent.links()) == shared, timeout=8)
        time.sleep(1)
        paused = time.time()
        for p in pods:
            os.kill(p.containers["app"].pid, signal.SIGUSR2)
        own = [p.containers["app"].stats()["functions"] for p in pods]
        entry = report_after_pause(cluster, ns, "image", "node-a", paused, own)
        assert entry["processes"] == 3
        for name in FUNCS:
            f = fns(entry)[name]
            assert f["orphans"] == 0, f
            mine = sum(o[name]["calls"] for o in own)
            assert 0 <= f["calls"] - mine <= 3 * 500, (name, f["calls"], mine)
        cluster.kubectl("delete", "functionprobe", "image", "-n", ns)
        wait_for("the links to go", lambda: not agent.links(), timeout=2)
        # one pod of three selected: the other two never trap, so its
        # probes are its own
        cluster.kubectl("label", "pod", "web-0", "-n", ns, "single=yes")
        cluster.apply_probe(ns, "single", spec(selector={"matchLabels": {
            "app": "web", "single": "yes"}}))
        wait_for("the attach", lambda: agent.find(msg_has="attached to process", probe="single"),
                 timeout=5)
        wait_for("the single pod's links", lambda: len(agent.links()) == shared, timeout=5)
        time.sleep(2)
        assert len(agent.links()) == shared
        pid = pods[0].containers["app"].pid
        assert agent_link_pids(agent) == {pid}, agent_link_pids(agent)


def agent_link_pids(agent):
    """The processes the agent's uprobe links are filtered to (0: every process)."""
    pids = set()
    for fd in os.listdir(f"/proc/{agent.pid}/fdinfo"):
        try:
            with open(f"/proc/{agent.pid}/fdinfo/{fd}") as f:
                text = f.read()
        except OSError:
            continue
        if "link_type:\tuprobe_multi" in text:
            m = re.search(r"^pid:\s*(\d+)", text, re.M)
            pids.add(int(m.group(1)) if m else 0)
    return pids


def rows(entries, key):
    return {e[key]: e for e in entries}


def test_reports_say_which_pods_and_which_revision_are_slow(cluster, make_pod):
    """Pods of two ReplicaSets of one Deployment, the new one four times as slow,
    over two nodes: the summary has a row per revision and the slowest pods
    are the new revision's, with their node."""
    ns = cluster.namespace()
    # four times as slow: a 3 ms pod's p99 on a loaded machine can pass 6 ms
    slow = ["/app/podapp", "-latency", "12ms"]
    make_pod(ns, "web-old-1", {"app": "web"}, "node-a", owner="web-5d8f")
    make_pod(ns, "web-new-1", {"app": "web"}, "node-a", {"app": slow}, owner="web-7c9b")
    make_pod(ns, "web-new-2", {"app": "web"}, "node-b", {"app": slow}, owner="web-7c9b")
    with cluster.agent("node-a"), cluster.agent("node-b"):
        cluster.apply_probe(ns, "rollout", spec())

        def summary():
            s = cluster.status(ns, "rollout").get("summary", {})
            f = fns(s).get("main.handleRequest", {})
            revs = rows(f.get("revisions", []), "revision")
            # enough calls of each pod that a few delayed ones (a loaded
            # machine) do not decide its p99, which ranks the pods
            return (s.get("nodes") == 2 and set(revs) == {"web-5d8f", "web-7c9b"}
                    and revs["web-7c9b"]["pods"] == 2 and len(f.get("slowestPods", [])) == 3
                    and all(p["calls"] >= 300 for p in f["slowestPods"]) and f)
        f = wait_for("a summary with both revisions", summary, timeout=30)
    revs = rows(f["revisions"], "revision")
    # 3 ms against 12 ms a call (sleeps: longer on a loaded machine, never shorter)
    assert 2.85e6 <= ns_of(revs["web-5d8f"]["p50"]) < ns_of(revs["web-7c9b"]["p50"]), revs
    assert ns_of(revs["web-7c9b"]["p50"]) >= 11.4e6, revs
    assert revs["web-5d8f"]["pods"] == 1
    assert sum(r["calls"] for r in revs.values()) == f["calls"]
    slowest = f["slowestPods"]
    assert [(p["pod"], p["node"]) for p in slowest[:2]] in (
        [("web-new-1", "node-a"), ("web-new-2", "node-b")],
        [("web-new-2", "node-b"), ("web-new-1", "node-a")]), slowest
    assert slowest[2]["pod"] == "web-old-1" and slowest[2]["revision"] == "web-5d8f"
    # each node's report holds its own pods' calls
    for node, pods_here in (("node-a", {"web-old-1", "web-new-1"}), ("node-b", {"web-new-2"})):
        e = cluster.node_entry(ns, "rollout", node)
        f = fns(e)["main.handleRequest"]
        assert {p["name"] for p in f["pods"]} == pods_here
        assert sum(p["calls"] for p in f["pods"]) == f["calls"]


def test_a_reports_pods_add_up_to_its_functions_calls_while_they_count_fast(cluster, make_pod):
    """Two pods calling a function in a tight loop (hundreds of thousands of
    calls a second): each report's pods' calls add up to the function's, as
    the summary's revisions do, though the kernel counts on while the agent
    reads."""
    ns = cluster.namespace()
    for i in (1, 2):
        make_pod(ns, f"web-{i}", {"app": "web"}, "node-a", owner="web-5d8f",
                 containers={"app": ["/app/podapp", "-hot", "1"]})
    seen = {}
    with cluster.agent("node-a"):
        # no overhead budget: the guard would detach the hot function
        cluster.apply_probe(ns, "fast", spec(functions=["main.hotPath"], maxOverhead="0"))

        def three_reports():
            e = cluster.node_entry(ns, "fast", "node-a")
            f = e and fns(e).get("main.hotPath")
            # reports while both count fast: not the first, written as the
            # second pod's process was being attached
            if f and len(f.get("pods", [])) == 2 and f["calls"] > 10000:
                seen[e["lastUpdate"]] = f
            return len(seen) >= 3
        wait_for("three reports of calls", three_reports, timeout=20, interval=0.3)
        s = wait_for("a summary", lambda: fns(cluster.status(ns, "fast").get("summary", {}))
                     .get("main.hotPath"), timeout=10)
    for f in seen.values():
        assert sum(p["calls"] for p in f["pods"]) == f["calls"], f
    assert sum(r["calls"] for r in s["revisions"]) == s["calls"], s


def test_deleting_the_probe_deletes_its_reports(cluster, make_pod):
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "gone", spec())
        wait_for("the report", lambda: has_calls(cluster, ns, "gone", "node-a"), timeout=8)
        uid = cluster.probe(ns, "gone")["metadata"]["uid"]
        (report,) = cluster.reports(ns, "gone")
        # owned by the probe (the garbage collector deletes it where one runs)
        assert [(o["kind"], o["uid"]) for o in report["metadata"]["ownerReferences"]] == \
            [("FunctionProbe", uid)]
        assert report["metadata"]["labels"]["retwatch.io/probe-uid"] == uid
        cluster.kubectl("delete", "functionprobe", "gone", "-n", ns)
        wait_for("the report to go", lambda: cluster.reports(ns) == [], timeout=8)
        assert not agent.find(msg_has="failed to delete"), agent.tail()


def test_many_reporting_nodes_stretch_the_interval(cluster, make_pod):
    """The summary writer counts the nodes reporting a probe and asks each to
    write less often, so that the probe's reports stay within
    --report-writes-per-second; the node's own report says it took it."""
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    cluster.apply_probe(ns, "wide", spec())
    uid = cluster.probe(ns, "wide")["metadata"]["uid"]
    # 39 other nodes' reports, of an older generation (their numbers stay out)
    others = [{"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbeReport",
               "metadata": {"name": f"wide.sim-{i}", "namespace": ns,
                            "labels": {"retwatch.io/probe-uid": uid}},
               "probe": {"name": "wide", "uid": uid}, "node": f"sim-{i}",
               "status": {"node": f"sim-{i}", "generation": 0, "functions": []}}
              for i in range(39)]
    cluster.kubectl("create", "-f", "-", user="agent",
                    input=json.dumps({"apiVersion": "v1", "kind": "List", "items": others}))
    with cluster.agent("node-a", extra=("--report-writes-per-second", "10")):
        # 40 nodes at 10 writes a second: every 4 s at most, not every 2 s
        st = wait_for("the stretched interval, node-a's results in the summary",
                      lambda: cluster.status(ns, "wide").get("reportInterval") == "4.000s"
                      and cluster.status(ns, "wide")["summary"]["nodes"] == 1
                      and cluster.status(ns, "wide"), timeout=15)
        assert st["summary"]["calls"] > 0
        wait_for("node-a's report at the stretched interval",
                 lambda: (cluster.node_entry(ns, "wide", "node-a") or {})
                 .get("reportInterval") == "4.000s", timeout=12)


def pod_token(cluster, node):
    """A token of the agent's ServiceAccount bound to a pod on node, as the
    kubelet mounts one into the DaemonSet's pod: it names the node."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"agent-{node}", "namespace": "retwatch"},
           "spec": {"nodeName": node, "serviceAccountName": "retwatch-agent",
                    "containers": [{"name": "agent", "image": "retwatch-agent"}]}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}))
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    token = cluster.kubectl("create", "token", "retwatch-agent", "-n", "retwatch",
                            "--bound-object-kind", "Pod", "--bound-object-name",
                            f"agent-{node}").stdout.strip()
    review = json.loads(cluster.kubectl("create", "-o", "json", "-f", "-", input=json.dumps({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token}})).stdout)
    assert review["status"]["user"]["extra"]["authentication.kubernetes.io/node-name"] == [node]
    return token


def test_an_agent_writes_only_its_own_nodes_reports(cluster, make_pod):
    """The chart's admission policy: the node a pod's token names is the only
    node whose reports it may create, change or delete."""
    ns = cluster.namespace()
    for node in ("vap-a", "vap-b"):
        cluster.cp.add_token_user(f"pod-{node}", pod_token(cluster, node))
    make_pod(ns, "web-a", {"app": "web"}, "vap-a")
    make_pod(ns, "web-b", {"app": "web"}, "vap-b")
    # vap-b's agent runs with vap-a's token: a compromised node posing as another
    with cluster.agent("vap-a", user="pod-vap-a") as a, \
            cluster.agent("vap-b", user="pod-vap-a") as b:
        cluster.apply_probe(ns, "own", spec())
        wait_for("vap-a's calls", lambda: has_calls(cluster, ns, "own", "vap-a"), timeout=8)
        try:
            refused = wait_for("vap-b's write refused",
                               lambda: b.find(msg_has="may write only its own node"), timeout=8)[0]
        except AssertionError as e:
            raise AssertionError(f"{e}\nvap-b's agent log:\n{b.tail()}") from None
        assert "vap-a" in refused["msg"] and "vap-b" in refused["msg"], refused
        assert cluster.node_entry(ns, "own", "vap-b") is None
        assert b.get("/healthz") == (200, "ok\n")
        assert a.find(msg_has="may write only its own node") == []

    # another node's existing report can be neither changed nor deleted
    mine = cluster.reports(ns, "own")
    assert [r["node"] for r in mine] == ["vap-a"]
    forged = json.loads(json.dumps(mine[0]))
    for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
        forged["metadata"].pop(k, None)
    forged["metadata"]["name"] = "own.vap-c.forged"
    forged["metadata"]["labels"]["retwatch.io/node"] = "vap-c"
    forged["node"] = "vap-c"
    cluster.kubectl("create", "-f", "-", input=json.dumps(forged), user="agent")
    for user in ("pod-vap-a", "pod-vap-b"):
        res = cluster.kubectl("delete", "fpreport", "own.vap-c.forged", "-n", ns, user=user,
                              check=False)
        assert res.returncode != 0 and "may change or delete only its own node" in res.stderr, \
            res.stderr
        res = cluster.kubectl("label", "fpreport", "own.vap-c.forged", "-n", ns, "x=y",
                              user=user, check=False)
        assert res.returncode != 0 and "its own node" in res.stderr, res.stderr
    # and vap-a's token still deletes vap-a's own report
    cluster.kubectl("delete", "fpreport", mine[0]["metadata"]["name"], "-n", ns, user="pod-vap-a")


def test_only_the_lease_holder_writes_a_probes_status(cluster, make_pod):
    """The chart's admission policy: a FunctionProbe's status may be written
    by the agent whose node holds the summary Lease, by no other node's."""
    ns = cluster.namespace()
    tokens = {node: pod_token(cluster, node) for node in ("vap-c", "vap-d")}
    cluster.cp.add_token_user("pod-vap-c", tokens["vap-c"])
    make_pod(ns, "web-c", {"app": "web"}, "vap-c")
    with cluster.agent("vap-c", user="pod-vap-c") as agent:
        cluster.apply_probe(ns, "held", spec())
        wait_for("the summary of the holder", lambda: (cluster.status(ns, "held").get(
            "summary") or {}).get("calls"), timeout=15)
        holder = json.loads(cluster.kubectl("get", "lease", "retwatch-summary", "-n",
                                            "retwatch", "-o", "json").stdout)
        assert holder["spec"]["holderIdentity"] == "vap-c", holder["spec"]
        # a status write as the agent makes it, with each node's token
        uid = cluster.probe(ns, "held")["metadata"]["uid"]
        body = json.dumps({"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
                           "metadata": {"name": "held", "namespace": ns, "uid": uid},
                           "status": {"observedGeneration": 1}}).encode()
        path = (f"/apis/retwatch.io/v1alpha1/namespaces/{ns}/functionprobes/held/status"
                "?fieldManager=retwatch-summary&force=true")
        for node, allowed in (("vap-d", False), ("vap-c", True)):
            req = urllib.request.Request(cluster.cp.url + path, data=body, method="PATCH",
                                         headers={"Authorization": f"Bearer {tokens[node]}",
                                                  "Content-Type": "application/apply-patch+yaml"})
            try:
                with urllib.request.urlopen(req, context=cluster.cp.ssl_context(),
                                            timeout=30) as r:
                    code, text = r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                code, text = e.code, e.read().decode()
            if allowed:
                assert code == 200, (code, text)
            else:
                assert code == 403 and "only while it holds the Lease" in text \
                    and "held by vap-c" in text, (code, text)
        assert not agent.find(msg_has="only while it holds the Lease")


def test_lists_come_in_pages_and_a_change_copies_one_probe(cluster):
    """FunctionProbes are listed a page at a time, and a change to one probe
    that is not a spec change (an annotation, a status write) copies that
    probe into the agent's view, not every probe it knows."""
    ns = cluster.namespace()
    items = [{"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
              "metadata": {"name": f"p{i}", "namespace": ns},
              "spec": spec(selector={"matchLabels": {"app": "none"}}, reportInterval="60s")}
             for i in range(40)]
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": items}))
    every = len(cluster.kubectl("get", "fprobe", "-A", "-o", "name").stdout.split())
    with cluster.agent("node-pages", extra=("--list-page-size", "5")) as agent:
        # the FunctionProbes' informer's line, not the ClusterFunctionProbes'
        (listed,) = [e["msg"] for e in agent.find(msg_has="functionprobes: listed")
                     if e["msg"].startswith("functionprobes: ")]
        assert f"listed {every} objects" in listed and \
            listed.endswith(f"in {(every + 4) // 5} pages"), listed
        # the summary writer's first status write to each probe is done
        wait_for("every probe's first summary", lambda: all(
            p.get("status", {}).get("conditions") for p in json.loads(cluster.kubectl(
                "get", "fprobe", "-n", ns, "-o", "json").stdout)["items"]), timeout=40)
        time.sleep(2)
        before = stats(agent)["cache_copies"]
        for k in range(10):
            cluster.kubectl("annotate", "fprobe", "p0", "-n", ns, f"step={k}", "--overwrite")
        wait_for("the last annotation in the agent's view",
                 lambda: stats(agent)["cache_copies"] >= before + 1, timeout=5)
        time.sleep(2)
        copies = stats(agent)["cache_copies"] - before
        # each annotation copies p0 once (or less, when two come between
        # turns); copying the whole cache would be every probe (40 or more)
        assert 1 <= copies <= 15, (copies, every)


def test_a_process_that_execs_the_service_is_probed(cluster, make_pod):
    """An entrypoint script that ends by exec'ing the service, as many images
    do: the process the agent first sees runs a shell, the same process then
    runs the service."""
    ns = cluster.namespace()
    pod = make_pod(ns, "exec-1", {"app": "web"}, "node-a",
                   containers={"app": ["/bin/sh", "-c", "sleep 3; exec /app/podapp"]})
    pid = pod.containers["app"].pid
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "ex", spec())
        attached_log(agent, pid, timeout=15)
        entry = wait_for("calls of the service", lambda: has_calls(cluster, ns, "ex", "node-a"),
                         timeout=10)
        assert [p for item in entry["pods"] for p in item["processes"]] == [pid]


def test_a_probe_selects_only_its_own_namespaces_pods(cluster, make_pod):
    """Two namespaces whose pods carry the same labels: a probe in one never
    reaches the other's."""
    mine, theirs = cluster.namespace(), cluster.namespace()
    pod = make_pod(mine, "web-1", {"app": "web"}, "node-a")
    other = make_pod(theirs, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(mine, "own", spec())
        attached_log(agent, pod.containers["app"].pid, timeout=5)
        entry = wait_for("calls", lambda: has_calls(cluster, mine, "own", "node-a"), timeout=6)
        assert [p for item in entry["pods"] for p in item["processes"]] == \
            [pod.containers["app"].pid]
        assert agent.find(msg_has=f"attached to process {other.containers['app'].pid}:") == []
        assert cluster.reports(theirs) == []
