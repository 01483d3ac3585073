"""A ClusterFunctionProbe: one spec over the pods of every namespace its
namespaceSelector selects, each namespace probed under its own shares and
reported in its own FunctionProbeReports; the status merges them and has a
row per namespace. Creating one takes the ClusterRole
retwatch-cluster-investigator: a namespace's rights do not."""

import json
import os
import signal
import time

import yaml

from agentproc import wait_for
from conftest import install_manifests
from test_agent import FUNCS, buckets, count_afresh, fns, has_calls, report_after_pause, spec

CFP_PATH = "/apis/retwatch.io/v1alpha1/clusterfunctionprobes"
CFP_CRD = "crd/clusterfunctionprobes.retwatch.io"


def cfp_doc(name, namespace_selector, **kw):
    return {"apiVersion": "retwatch.io/v1alpha1", "kind": "ClusterFunctionProbe",
            "metadata": {"name": name},
            "spec": dict(spec(**kw), namespaceSelector=namespace_selector)}


def cfp_status(cluster, name):
    return cluster.get(f"{CFP_PATH}/{name}").get("status", {})


def cfp_condition(cluster, name, ctype):
    for c in cfp_status(cluster, name).get("conditions", []):
        if c["type"] == ctype:
            return c
    return None


def labelled_namespace(cluster, **labels):
    ns = cluster.namespace()
    if labels:
        cluster.kubectl("label", "namespace", ns, *(f"{k}={v}" for k, v in labels.items()))
    return ns


def merged(reports):
    """The reports' functions summed exactly: calls, sumNs and buckets by name."""
    want = {}
    for r in reports:
        for f in r["status"]["functions"]:
            w = want.setdefault(f["name"], {"calls": 0, "sumNs": 0, "buckets": {}})
            w["calls"] += f["calls"]
            w["sumNs"] += f["sumNs"]
            for i, n in buckets(f).items():
                w["buckets"][i] = w["buckets"].get(i, 0) + n
    return want


def test_cluster_probe_counts_each_namespace_exactly_and_separately(cluster, make_pod):
    team = f"cfp{os.getpid()}"
    ns_a = labelled_namespace(cluster, team=team)
    ns_b = labelled_namespace(cluster, team=team)
    ns_c = labelled_namespace(cluster, team="someone-else")
    pods = {ns_a: [make_pod(ns_a, "web-1", {"app": "web"}, "node-a")],
            ns_b: [make_pod(ns_b, f"web-{i}", {"app": "web"}, "node-a") for i in range(2)]}
    outsider = make_pod(ns_c, "web-1", {"app": "web"}, "node-a")
    name = f"cluster-{team}"
    try:
        with cluster.agent("node-a") as agent:
            start = time.monotonic()
            cluster.kubectl("apply", "-f", "-", input=json.dumps(
                cfp_doc(name, {"matchLabels": {"team": team}})))
            for ns, ps in pods.items():
                for p in ps:
                    count_afresh(agent, p.containers["app"], timeout=8)
            for ns in pods:
                try:
                    wait_for(f"calls in {ns}", lambda: has_calls(cluster, ns, name, "node-a"),
                             timeout=8)
                except AssertionError as e:
                    raise AssertionError(f"{e}\nthe agent's log:\n{agent.tail()}") from None
            took = time.monotonic() - start
            time.sleep(1)
            paused = time.time()
            own = {}
            for ns, ps in pods.items():
                for p in ps:
                    os.kill(p.containers["app"].pid, signal.SIGUSR2)
                own[ns] = [p.containers["app"].stats()["functions"] for p in ps]
            entries = {ns: report_after_pause(cluster, ns, name, "node-a", paused, own[ns])
                       for ns in pods}
            # each namespace's report holds its own pods' calls and no other's
            for ns, e in entries.items():
                assert sorted(p["name"] for p in e["pods"]) == \
                    sorted(p.name for p in pods[ns]), (ns, e["pods"])
                assert e["processes"] == len(pods[ns])
                for f in FUNCS:
                    mine = sum(o[f]["calls"] for o in own[ns])
                    got = fns(e)[f]["calls"]
                    assert 0 <= got - mine <= 500 * len(pods[ns]), (ns, f, got, mine)
            # the namespace the selector leaves out is not probed
            assert not cluster.reports(ns_c), cluster.reports(ns_c)
            assert not agent.find(msg_has=f"attached to process {outsider.containers['app'].pid}:",
                                  count=0)

            # the status: a row per namespace equal to its reports, the summary their sum
            def settled():
                st = cfp_status(cluster, name)
                rows = {r["namespace"]: r for r in st.get("namespaces", [])}
                reports = {ns: cluster.reports(ns, name) for ns in pods}
                if sorted(rows) != sorted(pods) or not st.get("summary"):
                    return None
                for ns, rs in reports.items():
                    want = merged(rs)
                    if {f["name"]: f["calls"] for f in rows[ns]["functions"]} != \
                            {k: v["calls"] for k, v in want.items()}:
                        return None
                whole = merged([r for rs in reports.values() for r in rs])
                got = {f["name"]: {"calls": f["calls"], "sumNs": f["sumNs"],
                                   "buckets": buckets(f)} for f in st["summary"]["functions"]}
                return got == whole and st
            st = wait_for("rows equal to each namespace's reports, the summary to their sum",
                          settled, timeout=20, interval=0.5)
            rows = {r["namespace"]: r for r in st["namespaces"]}
            assert rows[ns_a]["pods"] == 1 and rows[ns_b]["pods"] == 2, rows
            assert st["summary"]["namespaces"] == 2 and st["summary"]["pods"] == 3, st["summary"]
            assert st["summary"]["calls"] == rows[ns_a]["calls"] + rows[ns_b]["calls"]
            conds = {c["type"]: c for c in st["conditions"]}
            assert conds["Ready"]["status"] == "True", conds
            assert conds["Attached"]["status"] == "True", conds
            # the reports are owned by the cluster probe and say so
            for ns in pods:
                (r,) = cluster.reports(ns, name)
                assert r["probe"]["kind"] == "ClusterFunctionProbe", r["probe"]
                assert r["metadata"]["ownerReferences"][0]["kind"] == "ClusterFunctionProbe"
                assert r["metadata"]["labels"]["retwatch.io/cluster-probe"] == "true"
            table = cluster.kubectl("get", "cfprobe", name).stdout
            assert name in table, table
            print(f"cluster probe over {len(pods)} namespaces: calls in both reports "
                  f"{took:.1f} s after the apply; rows {[rows[n]['calls'] for n in pods]}, "
                  f"summary {st['summary']['calls']}")

            # a namespace unlabelled leaves the probe: its processes are detached, its report goes
            cluster.kubectl("label", "namespace", ns_b, "team-")
            wait_for(f"{ns_b}'s report to go", lambda: not cluster.reports(ns_b, name),
                     timeout=10)
            wait_for("the detach", lambda: agent.find(msg_has="detached from process",
                                                      pod="web-0"), timeout=10)
            cluster.kubectl("delete", "clusterfunctionprobe", name)
            wait_for(f"{ns_a}'s report to go", lambda: not cluster.reports(ns_a, name),
                     timeout=10)
            assert agent.proc.poll() is None
            assert not agent.find(msg_has="failed to write status"), agent.tail()
    finally:
        cluster.kubectl("delete", "clusterfunctionprobe", name, "--ignore-not-found")


def test_namespace_rights_cannot_create_a_cluster_probe(cluster):
    """A user with the namespace role retwatch-investigator (bound in a
    namespace) may make a FunctionProbe there but no ClusterFunctionProbe;
    one bound to retwatch-cluster-investigator may."""
    ns = cluster.namespace()
    tenant, platform = f"tenant-{os.getpid()}", f"platform-{os.getpid()}"
    cluster.kubectl("create", "rolebinding", "investigate", "-n", ns,
                    "--clusterrole", "retwatch-investigator", "--user", tenant)
    doc = json.dumps(cfp_doc(f"by-{tenant}", {}))
    res = cluster.kubectl("create", "-f", "-", f"--as={tenant}", input=doc, check=False)
    assert res.returncode != 0
    assert "Forbidden" in res.stderr and "clusterfunctionprobes" in res.stderr, res.stderr
    assert f'"{tenant}" cannot create resource "clusterfunctionprobes"' in res.stderr, res.stderr
    # the same user's namespace probe is fine
    probe = {"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
             "metadata": {"name": "mine", "namespace": ns}, "spec": spec()}
    cluster.kubectl("create", "-f", "-", f"--as={tenant}", input=json.dumps(probe))

    cluster.kubectl("create", "clusterrolebinding", f"investigate-{platform}",
                    "--clusterrole", "retwatch-cluster-investigator", "--user", platform)
    try:
        name = f"by-{platform}"
        cluster.kubectl("create", "-f", "-", f"--as={platform}",
                        input=json.dumps(cfp_doc(name, {})))
        got = cluster.kubectl("get", "cfprobe", name, "-o", "json", f"--as={platform}").stdout
        assert json.loads(got)["spec"]["namespaceSelector"] == {}
        res = cluster.kubectl("delete", "cfprobe", name, f"--as={tenant}", check=False)
        assert res.returncode != 0 and "Forbidden" in res.stderr, res.stderr
        cluster.kubectl("delete", "cfprobe", name, f"--as={platform}")
    finally:
        cluster.kubectl("delete", "clusterrolebinding", f"investigate-{platform}")


def cfp_crd():
    (crd,) = [d for d in yaml.safe_load_all(install_manifests(kinds={"CustomResourceDefinition"}))
              if d and d["metadata"]["name"] == "clusterfunctionprobes.retwatch.io"]
    return crd


def loosened_cfp_crd():
    """The CRD with namespaceSelector unchecked: an object written around it."""
    crd = cfp_crd()
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]
    props["namespaceSelector"] = {"type": "object",
                                  "x-kubernetes-preserve-unknown-fields": True}
    return crd


def test_malformed_namespace_selector_is_refused_with_a_clear_error(cluster, make_pod):
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    crd = loosened_cfp_crd()
    bad = {"matchExpressions": [{"key": "team", "operator": "Near", "values": ["a"]}]}
    name = f"bad-{os.getpid()}"
    try:
        with cluster.agent("node-a") as agent:
            cluster.apply_probe(ns, "fine", spec())
            wait_for("calls of the other probe",
                     lambda: has_calls(cluster, ns, "fine", "node-a"), timeout=8)
            cluster.kubectl("apply", "-f", "-", input=json.dumps(crd))
            last = []

            def created():
                last[:] = [cluster.kubectl("create", "-f", "-", check=False,
                                           input=json.dumps(cfp_doc(name, bad)))]
                return last[0].returncode == 0
            try:
                wait_for("the loosened CRD to take the probe", created, timeout=20,
                         interval=0.5)
            except AssertionError as e:
                raise AssertionError(f"{e}: {last[0].stderr[:1000]}") from None
            (ev,) = wait_for("the agent to refuse it",
                             lambda: agent.find(msg_has=f"cluster probe {name} is not valid"),
                             timeout=15)
            want = ("spec.namespaceSelector.matchExpressions[0].operator must be In, NotIn, "
                    "Exists or DoesNotExist")
            assert want in ev["msg"], ev
            cond = wait_for("Ready=False", lambda: (c := cfp_condition(cluster, name, "Ready"))
                            and c["status"] == "False" and c, timeout=20)
            assert cond["reason"] == "InvalidSpec" and want in cond["message"], cond
            # nothing is probed for it, and the agent goes on
            assert not [r for r in cluster.reports(ns) if r["probe"]["name"] == name]
            assert agent.get("/healthz") == (200, "ok\n")
            before = has_calls(cluster, ns, "fine", "node-a")["lastUpdate"]
            wait_for("a later report of the other probe",
                     lambda: (e := has_calls(cluster, ns, "fine", "node-a"))
                     and e["lastUpdate"] != before, timeout=8)
            assert agent.proc.poll() is None
    finally:
        cluster.kubectl("delete", "clusterfunctionprobe", name, "--ignore-not-found")
        cluster.kubectl("apply", "-f", "-", input=json.dumps(cfp_crd()))
        cluster.kubectl("wait", "--for=condition=Established", CFP_CRD)


def test_plugin_traces_every_namespace_with_a_cluster_probe(cluster, make_pod):
    """kubectl retwatch trace -A -l SELECTOR: a ClusterFunctionProbe over
    every namespace, made by a user bound to retwatch-cluster-investigator,
    its table with a row per namespace, deleted at the end; a user with a
    namespace's rights only is told which right is missing."""
    from test_plugin import CHARGE, Plugin, kubeconfig_in, run, table_calls
    app = f"charge{os.getpid()}"
    nss = [cluster.namespace(), cluster.namespace()]
    pids = [make_pod(ns, "pay-1", {"app": app}, "node-a",
                     containers={"app": CHARGE + ["300"]}).containers["app"].pid for ns in nss]
    cluster.kubectl("create", "serviceaccount", "platform", "-n", nss[0])
    cluster.kubectl("create", "clusterrolebinding", f"platform-{nss[0]}", "--clusterrole",
                    "retwatch-cluster-investigator", "--serviceaccount", f"{nss[0]}:platform")
    cluster.kubectl("create", "serviceaccount", "tenant", "-n", nss[1])
    cluster.kubectl("create", "rolebinding", "tenant", "-n", nss[1], "--clusterrole",
                    "retwatch-investigator", "--serviceaccount", f"{nss[1]}:tenant")
    users = {}
    for ns, sa in ((nss[0], "platform"), (nss[1], "tenant")):
        token = cluster.kubectl("create", "token", sa, "-n", ns).stdout.strip()
        users[sa] = f"{sa}-{ns}"
        cluster.cp.add_token_user(users[sa], token)
    try:
        rc, out, err = run(cluster, kubeconfig_in(cluster, nss[1], users["tenant"]),
                           "trace", "-A", "-l", f"app={app}", "main.charge")
        assert rc == 1, (rc, out, err)
        assert "you may not create clusterfunctionprobes.retwatch.io cluster-wide: ask for " \
               "the 'create' verb on clusterfunctionprobes.retwatch.io" in err, err
        with cluster.agent("node-a") as agent:
            p = Plugin(cluster, kubeconfig_in(cluster, nss[0], users["platform"]), "trace",
                       "-A", "-l", f"app={app}", "main.charge", "--for", "20s")
            try:
                (cfp,) = wait_for("the plugin's cluster probe", lambda: [
                    o for o in json.loads(cluster.kubectl("get", "cfprobe", "-o", "json")
                                          .stdout)["items"]
                    if o["spec"]["selector"] == {"matchLabels": {"app": app}}], timeout=10)
                assert cfp["spec"]["namespaceSelector"] == {}, cfp["spec"]
                for pid in pids:
                    wait_for(f"the attach to {pid}",
                             lambda: agent.find(msg_has=f"attached to process {pid}:"),
                             timeout=15)
                for pid in pids:
                    os.kill(pid, signal.SIGHUP)
                wait_for("a table of 600 calls",
                         lambda: 600 in table_calls(p.out(), "main.charge"),
                         timeout=20, interval=0.2)
                # get and top read the cluster probes with -A, as the platform user
                name, cfg = cfp["metadata"]["name"], kubeconfig_in(cluster, nss[0],
                                                                   users["platform"])
                rc, out, err = run(cluster, cfg, "get", "-A", "-o", "json")
                assert rc == 0 and name in [i["metadata"]["name"]
                                            for i in json.loads(out)["items"]], (out, err)
                rc, out, err = run(cluster, cfg, "get", "-A")
                assert rc == 0 and name in [r.split()[0] for r in out.splitlines()[1:]
                                            if r.split()], (out, err)
                rc, out, err = run(cluster, cfg, "get", name, "-A")
                assert rc == 0, (out, err)
                for ns in nss:
                    assert ns in out, (ns, out)
                rc, out, err = run(cluster, cfg, "top", "-A")
                assert rc == 0 and [name, "main.charge"] in [r.split()[:2]
                                                             for r in out.splitlines()[1:]], \
                    (out, err)
                rc = p.wait(timeout=30)
            finally:
                p.stop()
            out, err = p.out(), p.err()
            assert rc == 0, (rc, err)
            name = cfp["metadata"]["name"]
            assert f"created ClusterFunctionProbe {name} over every namespace" in err, err
            assert f"deleted ClusterFunctionProbe {name}" in err, err
            rows = [line.split() for line in out.splitlines()
                    if line.split()[:1] and line.split()[0] in nss]
            for ns in nss:
                assert [ns, "1", "300"] in [r[:3] for r in rows], (ns, out)
            assert cluster.kubectl("get", "cfprobe", name, check=False).returncode != 0
            for ns in nss:
                wait_for(f"the reports in {ns} to go", lambda: cluster.reports(ns) == [],
                         timeout=8)
    finally:
        cluster.kubectl("delete", "clusterrolebinding", f"platform-{nss[0]}")
