"""kubectl-retwatch, the kubectl plugin, against the real control plane and
the real agent: `trace` makes a FunctionProbe of a workload's pods, shows the
probe's numbers live and deletes it when --for ends or on SIGINT; `get` and
`top` read the probes; a user without the right to create probes, a
deployment that does not exist and a pattern that matches nothing get
messages that say so. The plugin runs as kubectl runs it: a program on its
own, with the user's kubeconfig (KUBECONFIG) and its context's namespace."""

import json
import os
import pty
import re
import signal
import subprocess
import threading
import time
import unicodedata

from agentproc import REPO, wait_for
from conftest import AGENT
from test_agent import attached_log
from test_slowest import duration_ns

PLUGIN = os.environ.get("RETWATCH_PLUGIN", os.path.join(REPO, "build/asan/kubectl-retwatch"))
MANAGED_BY = "app.kubernetes.io/managed-by"
CHARGE = ["/app/podapp", "-slow-charge", "250ms", "-charges"]


def kubeconfig_in(cluster, ns, user="admin"):
    """user's kubeconfig of the control plane, its context's namespace ns."""
    with open(cluster.cp.kubeconfig(user)) as f:
        text = f.read()
    marker = "    cluster: retwatch-test\n"
    assert marker in text, text
    path = os.path.join(cluster.cp.workdir, f"kubeconfig-{user}-{ns}")
    with open(path, "w") as f:
        f.write(text.replace(marker, marker + f"    namespace: {ns}\n"))
    return path


def investigator(cluster, ns):
    """A user with the rights docs/kubectl-plugin.md names for trace pod/NAME
    in ns, less watch: a ServiceAccount's token, bound to a Role."""
    cluster.kubectl("create", "serviceaccount", "investigator", "-n", ns)
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "investigator", "namespace": ns},
            "rules": [{"apiGroups": ["retwatch.io"], "resources": ["functionprobes"],
                       "verbs": ["get", "create", "delete"]},
                      {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(role))
    cluster.kubectl("create", "rolebinding", "investigator", "--role", "investigator",
                    "--serviceaccount", f"{ns}:investigator", "-n", ns)
    who = f"system:serviceaccount:{ns}:investigator"
    wait_for("the Role to apply", lambda: cluster.kubectl(
        "auth", "can-i", "create", "functionprobes.retwatch.io", "-n", ns, "--as", who,
        check=False).stdout.strip() == "yes", timeout=10)
    token = cluster.kubectl("create", "token", "investigator", "-n", ns).stdout.strip()
    user = f"investigator-{ns}"
    cluster.cp.add_token_user(user, token)
    return user


class Plugin:
    """kubectl-retwatch with args, its output in files read while it runs."""

    def __init__(self, cluster, kubeconfig, *args, tty=False):
        """tty: stdout is a terminal (a pseudo-terminal read by a thread)."""
        stamp = time.monotonic_ns()
        self.out_path = os.path.join(cluster.workdir, f"plugin-{stamp}.out")
        self.err_path = os.path.join(cluster.workdir, f"plugin-{stamp}.err")
        env = dict(os.environ, KUBECONFIG=kubeconfig)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        self.tty, self.reader = None, None
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            if tty:
                self.tty, slave = pty.openpty()
                out = slave
            self.proc = subprocess.Popen([PLUGIN, *args], stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=err, env=env)
        if tty:
            os.close(slave)
            self.reader = threading.Thread(target=self._read_tty, daemon=True)
            self.reader.start()

    def _read_tty(self):
        with open(self.out_path, "ab") as f:
            while True:
                try:
                    data = os.read(self.tty, 65536)
                except OSError:  # EIO once the plugin has closed it
                    data = b""
                if not data:
                    break
                f.write(data)
                f.flush()
        os.close(self.tty)

    def out(self):
        if self.reader and self.proc.poll() is not None:
            self.reader.join(timeout=5)
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def err(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"the plugin still ran after {timeout}s:\n{self.err()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run(cluster, kubeconfig, *args, timeout=30):
    """kubectl-retwatch run to its end: (exit code, stdout, stderr)."""
    p = Plugin(cluster, kubeconfig, *args)
    rc = p.wait(timeout)
    return rc, p.out(), p.err()


def probes(cluster, ns):
    return json.loads(cluster.kubectl("get", "functionprobes", "-n", ns,
                                      "-o", "json").stdout)["items"]


def table_calls(out, function):
    """The calls of function in each table the plugin printed, in order."""
    return [int(line.split()[1]) for line in out.splitlines()
            if line.split()[:1] == [function]]


def test_trace_a_pod_until_for_ends_shows_the_status_and_leaves_nothing(cluster, make_pod):
    """As a user with only the rights the docs name (no watch: it polls)."""
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web", "tier": "front"}, "node-a",
                   containers={"app": CHARGE + ["300"]})
    pid = pod.containers["app"].pid
    user = investigator(cluster, ns)
    with cluster.agent("node-a") as agent:
        # the namespace is the kubeconfig context's: no -n
        p = Plugin(cluster, kubeconfig_in(cluster, ns, user), "trace", "pod/web-1",
                   "main.charge", "--for", "15s", "--threshold", "50ms", "--args")
        try:
            (probe,) = wait_for("the plugin's probe", lambda: probes(cluster, ns), timeout=10)
            name = probe["metadata"]["name"]
            assert name.startswith("retwatch-pod-web-1-"), name
            assert probe["metadata"]["labels"][MANAGED_BY] == "kubectl-retwatch", probe
            assert probe["spec"]["selector"] == {"matchLabels": {"app": "web", "tier": "front"}}
            assert probe["spec"]["functions"] == ["main.charge"], probe["spec"]
            assert probe["spec"]["lifetime"] == "15s", probe["spec"]
            assert probe["spec"]["slowThreshold"] == "50ms", probe["spec"]
            assert probe["spec"]["captureArguments"] is True, probe["spec"]
            attached_log(agent, pid, timeout=15)
            os.kill(pid, signal.SIGHUP)
            wait_for("a table of 300 calls", lambda: 300 in table_calls(p.out(), "main.charge"),
                     timeout=15, interval=0.2)
            status = cluster.status(ns, name)
            rc = p.wait(timeout=20)
        finally:
            p.stop()
        out, err = p.out(), p.err()
        assert rc == 0, (rc, err)
        assert probes(cluster, ns) == [], err
        # the agent deletes the reports of a deleted probe
        wait_for("the reports to go", lambda: cluster.reports(ns) == [], timeout=8)
    print(err + out)
    (fn,) = [f for f in status["summary"]["functions"] if f["name"] == "main.charge"]
    assert fn["calls"] == 300 and table_calls(out, "main.charge")[-1] == 300, (fn, out)
    assert "tracing 1 pod matching app=web,tier=front: web-1" in err, err
    assert f"created FunctionProbe {name} in namespace {ns}" in err, err
    assert "attached: probes live on 1 processes in 1 pods" in err, err
    assert f"deleted FunctionProbe {name}" in err, err
    # a user who may not watch probes gets them read again and again
    assert "note: you may not watch functionprobes.retwatch.io" in err, err
    # each slowest call once: every 100th of the 300 charges takes 250 ms (on two busy
    # cores a 1 ms sleep can take 100 ms)
    slow = [line for line in out.splitlines() if line.startswith("slowest call: main.charge ")]
    assert len(slow) == len(set(slow)), slow
    assert len([s for s in slow if "ms in pod web-1 (container app, node node-a" in s
                and "main.charge+" in s and duration_ns(s.split()[3]) >= 247e6]) == 3, slow
    # --args: each slow-co charge's arguments under its line
    args = [line.strip() for line in out.splitlines() if line.startswith("  arguments: ")]
    assert len([a for a in args if a.startswith('arguments: customer="slow-co" cents=')]) >= 3, \
        out


def test_trace_a_deployment_get_top_and_ctrl_c(cluster, make_pod):
    ns = cluster.namespace()
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "web", "namespace": ns},
              "spec": {"selector": {"matchLabels": {"app": "web"},
                                    "matchExpressions": [{"key": "track", "operator": "NotIn",
                                                          "values": ["canary"]}]},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "app",
                                                             "image": "podapp"}]}}}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(deploy))
    # no controller manager runs: these stand for the Deployment's pods
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    make_pod(ns, "other", {"app": "other"}, "node-a")
    admin = cluster.cp.kubeconfig("admin")
    with cluster.agent("node-a"):
        started = time.monotonic()
        p = Plugin(cluster, admin, "trace", "deploy/web", "main.handleRequest", "-n", ns,
                   "--for", "60s", tty=True)
        try:
            (probe,) = wait_for("the plugin's probe", lambda: probes(cluster, ns), timeout=10)
            name = probe["metadata"]["name"]
            assert probe["spec"]["selector"] == deploy["spec"]["selector"], probe["spec"]
            wait_for("a table with calls",
                     lambda: any(table_calls(p.out(), "main.handleRequest")), timeout=15,
                     interval=0.05)
            first_table = time.monotonic() - started
            rc, out, _ = run(cluster, admin, "get", name, "-o", "json", "-n", ns)
            assert rc == 0 and json.loads(out)["metadata"]["name"] == name, out
            rc, out, _ = run(cluster, admin, "get", "-o", "json", "-n", ns)
            assert rc == 0 and [i["metadata"]["name"] for i in json.loads(out)["items"]] == \
                [name], out
            rc, out, _ = run(cluster, admin, "get", name, "-o", "yaml", "-n", ns)
            assert rc == 0 and f"  name: {name}\n" in out and "kind: FunctionProbe\n" in out, out
            rc, out, _ = run(cluster, admin, "get", "-n", ns)
            assert rc == 0 and out.splitlines()[1].split()[0] == name, out
            assert "Attached" in out.splitlines()[1], out
            rc, out, _ = run(cluster, admin, "top", "-n", ns)
            assert rc == 0 and out.splitlines()[1].split()[:2] == [name, "main.handleRequest"]
            assert "web-1" in out.splitlines()[1], out
            # the countdown moves every second, between reports too
            wait_for("the countdown to move", lambda: len(set(
                re.findall(r"(\d+)s left;", p.out()))) >= 3, timeout=10)
            began = time.monotonic()
            p.proc.send_signal(signal.SIGINT)
            rc = p.wait(timeout=10)
            took = time.monotonic() - began
        finally:
            p.stop()
        assert rc == 128 + signal.SIGINT, (rc, p.err())
        assert "you may not watch" not in p.err(), p.err()
        assert probes(cluster, ns) == [], p.err()
        assert f"deleted FunctionProbe {name}" in p.err(), p.err()
        wait_for("the reports to go", lambda: cluster.reports(ns) == [], timeout=8)
        # a probe deleted under a trace ends it, saying so
        p2 = Plugin(cluster, admin, "trace", "-l", "app=web", "main.handleRequest", "-n", ns)
        try:
            wait_for("a table with calls",
                     lambda: any(table_calls(p2.out(), "main.handleRequest")), timeout=15)
            cluster.kubectl("delete", "functionprobes", "--all", "-n", ns)
            rc2 = p2.wait(timeout=10)
        finally:
            p2.stop()
        assert rc2 == 1 and "was deleted while it ran" in p2.err(), (rc2, p2.err())
    print(f"start to the first table with calls: {first_table:.2f} s; SIGINT to exit: "
          f"{took:.2f} s")
    # the bar: the live table within 5 s of starting (a 2 s report interval)
    assert first_table < 5, first_table
    # on a terminal: the screen redrawn at each report, the time left under it
    out = p.out()
    assert out.startswith("\033[H\033[2J" + name + ": 1 pods"), out[:200]
    assert "s left; Ctrl-C ends it and deletes the probe" in out, out
    # the countdown line rewritten in place (read as text, "\r" is a newline)
    with open(p.out_path, "rb") as f:
        assert b"\r\033[K" + name.encode() + b": " in f.read(), out[-400:]
    lefts = [int(x) for x in re.findall(r"(\d+)s left;", out)]
    assert lefts == sorted(lefts, reverse=True), lefts
    assert "tracing 1 pod matching app=web,track notin (canary): web-1" in p.err(), p.err()


def test_errors_name_what_to_fix(cluster):
    ns = cluster.namespace()
    # the agent's identity may read FunctionProbes, not create them
    rc, out, err = run(cluster, cluster.cp.kubeconfig("agent"), "trace", "-l", "app=web",
                       "main.charge", "-n", ns)
    assert rc == 1, (rc, out, err)
    assert f"you may not create functionprobes.retwatch.io in namespace {ns}: ask for the " \
        f"'create' verb on functionprobes.retwatch.io" in err, err
    for kind, resource in (("deploy", "deployments.apps"), ("sts", "statefulsets.apps"),
                           ("ds", "daemonsets.apps"), ("pod", "pods")):
        rc, out, err = run(cluster, kubeconfig_in(cluster, ns), "trace", f"{kind}/nope",
                           "main.x")
        assert rc == 1 and f'{resource} "nope" not found in namespace {ns}' in err, err
    rc, out, err = run(cluster, kubeconfig_in(cluster, ns), "trace", "-l", "app in web",
                       "main.x")
    assert rc == 1 and "'tier in (web,api)'" in err, err
    assert probes(cluster, ns) == []


def test_a_pattern_that_matches_nothing_says_so_with_suggestions(cluster, make_pod):
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a", containers={"app": CHARGE + ["1"]})
    with cluster.agent("node-a"):
        rc, out, err = run(cluster, kubeconfig_in(cluster, ns), "trace", "pod/web-1",
                           "main.chrage", "--for", "30s", timeout=20)
    assert rc == 1, (rc, out, err)
    assert "error: the probe did not attach: pod web-1, container app, process " in err, err
    assert "no function matches 'main.chrage' in /app/podapp (did you mean: main.charge)" in err
    assert "not attached yet" not in err, err
    assert "deleted FunctionProbe" in err, err
    assert probes(cluster, ns) == []


def test_no_agent_is_said_and_ctrl_c_before_attaching_leaves_nothing(cluster, make_pod):
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a", containers={"app": CHARGE + ["1"]})
    p = Plugin(cluster, kubeconfig_in(cluster, ns), "trace", "pod/web-1", "main.charge")
    try:
        wait_for("the plugin to ask for the agent",
                 lambda: "is retwatch-agent running on the pods' nodes" in p.err(), timeout=15)
        p.proc.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=10)
    finally:
        p.stop()
    assert rc == 128 + signal.SIGTERM, (rc, p.err())
    assert "deleted FunctionProbe retwatch-pod-web-1-" in p.err(), p.err()
    assert probes(cluster, ns) == []


EXEC_PLUGIN = """#!/bin/sh
# An exec credential plugin as managed clusters ship them: the token on
# stdout in an ExecCredential; each run and what kubectl would pass it noted
echo "$KUBERNETES_EXEC_INFO $RW_EXEC_ENV $1" >> "{log}"
[ "$1" = fail ] && {{ echo "no credentials for you" >&2; exit 3; }}
printf '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
printf '"status":{{"token":"%s","expirationTimestamp":"2099-01-01T00:00:00Z"}}}}\\n' "{token}"
"""


def exec_user(cluster, ns, name, token, arg):
    """A kubeconfig whose user's token comes from an exec plugin (as EKS's
    and GKE's do), run with arg; its log of runs."""
    log = os.path.join(cluster.cp.workdir, f"exec-{name}.log")
    script = os.path.join(cluster.cp.workdir, f"exec-{name}.sh")
    with open(script, "w") as f:
        f.write(EXEC_PLUGIN.format(log=log, token=token))
    os.chmod(script, 0o755)
    with open(cluster.cp.kubeconfig("admin")) as f:
        text = f.read()
    head, users = text.split("users:\n", 1)
    path = os.path.join(cluster.cp.workdir, f"kubeconfig-{name}")
    with open(path, "w") as f:
        f.write(head.replace("    cluster: retwatch-test\n",
                             f"    cluster: retwatch-test\n    namespace: {ns}\n") +
                "users:\n- name: admin\n  user:\n    exec:\n"
                "      apiVersion: client.authentication.k8s.io/v1\n"
                f"      command: {script}\n      args: [{arg}]\n"
                "      env: [{name: RW_EXEC_ENV, value: from-kubeconfig}]\n"
                "      installHint: install the test's plugin\n"
                "      interactiveMode: Never\n")
    return path, log


def test_a_kubeconfig_exec_plugin_gives_the_token(cluster):
    """Managed clusters' kubeconfigs get their token from a program: the
    plugin runs it as kubectl does (its arguments, its environment,
    KUBERNETES_EXEC_INFO), once while the token lasts; a plugin that fails
    is named with its exit status and install hint."""
    ns = cluster.namespace()
    user = investigator(cluster, ns)
    with open(cluster.cp.kubeconfig(user)) as f:
        token = next(line.split(":", 1)[1].strip().strip('"') for line in f
                     if line.strip().startswith("token:"))
    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
        "metadata": {"name": "seen", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "functions": ["main.x"]}}))
    config, log = exec_user(cluster, ns, "good", token, "ok")
    rc, out, err = run(cluster, config, "get", "seen", "-o", "json")
    assert rc == 0 and json.loads(out)["metadata"]["name"] == "seen", (rc, out, err)
    with open(log) as f:
        runs = f.read().splitlines()
    assert len(runs) == 1, runs
    info, env, arg = runs[0].rsplit(" ", 2)
    assert json.loads(info) == {"apiVersion": "client.authentication.k8s.io/v1",
                                "kind": "ExecCredential", "spec": {"interactive": False}}, info
    assert (env, arg) == ("from-kubeconfig", "ok"), runs
    # the token it gives is the one the API server checks
    config, _ = exec_user(cluster, ns, "wrong", "not-a-token", "ok")
    rc, out, err = run(cluster, config, "get", "seen")
    assert rc == 1 and "did not accept your kubeconfig's credentials (HTTP 401)" in err, err
    config, _ = exec_user(cluster, ns, "failing", token, "fail")
    rc, out, err = run(cluster, config, "get", "seen")
    assert rc == 1, (rc, out, err)
    assert "exec plugin" in err and "failed (exit status 3) (install the test's plugin)" in err
    assert "no credentials for you" in err, err


def inspect_names(image, pattern):
    """The functions `retwatch inspect` names in the pods' executable for pattern."""
    out = subprocess.run([os.path.join(os.path.dirname(AGENT), "retwatch"), "inspect", "--json",
                          "--limit", "100000", os.path.join(image, "app", "podapp"), pattern],
                         capture_output=True, text=True, check=True).stdout
    return sorted(f["name"] for f in json.loads(out)["functions"])


def table_names(out):
    """The FUNCTION column of the tables functions printed."""
    names, inside = [], False
    for line in out.splitlines():
        if line.startswith("FUNCTION "):
            inside = True
        elif not line.strip() or line.startswith("... and ") or " in " in line and \
                line.rstrip().endswith(("function", "functions")):
            inside = False
        elif inside:
            names.append(line.split()[0])
    return names


def test_functions_lists_names_through_the_agent_and_leaves_nothing(cluster, make_pod, image):
    """Two pods of one image: one list, naming both; what inspect names for the
    same binary; bounded without a pattern; suggestions for a name that matches
    nothing; no probe nor report left, and no uprobe attached."""
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    make_pod(ns, "web-2", {"app": "web"}, "node-a")
    kc = kubeconfig_in(cluster, ns)
    want = inspect_names(image, "main.*")
    every = inspect_names(image, "*")
    assert "main.handleRequest" in want and len(every) > 1000, (want, len(every))
    with cluster.agent("node-a") as agent:
        started = time.monotonic()
        rc, out, err = run(cluster, kc, "functions", "pod/web-1", "main.*", timeout=60)
        took = time.monotonic() - started
        assert rc == 0, (rc, out, err)
        assert "listing the functions of 2 pods matching app=web" in err, err
        assert "deleted FunctionProbe retwatch-pod-web-1-" in err, err
        # one executable, one list, both pods under it
        assert out.count("/app/podapp in ") == 1, out
        head = [line for line in out.splitlines() if line.startswith("/app/podapp in ")][0]
        assert "web-1 (app)" in head and "web-2 (app)" in head and "on node node-a" in head, head
        assert head.endswith(f": {len(want)} functions"), (head, len(want))
        assert sorted(table_names(out)) == want, (table_names(out), want)
        print(err + out)
        # no pattern: every function, at most 1000 listed, the rest counted
        rc, out, err = run(cluster, kc, "functions", "pod/web-1", "-o", "json", timeout=60)
        assert rc == 0, (rc, err)
        (exe,) = json.loads(out)["executables"]
        assert exe["executable"] == "/app/podapp" and exe["nodes"] == ["node-a"], exe
        assert len(exe["functions"]) == 1000 and exe["matched"] == len(every), \
            (len(exe["functions"]), exe["matched"], len(every))
        assert exe["omitted"] == len(every) - 1000, exe["omitted"]
        assert {f["name"] for f in exe["functions"]} <= set(every)
        rc, out, _ = run(cluster, kc, "functions", "pod/web-1", timeout=60)
        assert rc == 0 and f"... and {len(every) - 1000} more" in out, out[-500:]
        assert len(table_names(out)) == 1000
        # a name that matches nothing: the agent's suggestions
        rc, out, err = run(cluster, kc, "functions", "deploy/nope", "main.x", timeout=20)
        assert rc == 1 and f'deployments.apps "nope" not found in namespace {ns}' in err, err
        rc, out, err = run(cluster, kc, "functions", "-l", "app=web", "main.chrage", timeout=60)
        assert rc == 1, (rc, out, err)
        assert "error: nothing matched: no function matches 'main.chrage' in /app/podapp " \
            "(did you mean: main.charge)" in err, err
        assert probes(cluster, ns) == [], err
        wait_for("the reports to go", lambda: cluster.reports(ns) == [], timeout=8)
        # a List probe applied by hand: its report and its condition; a
        # library pattern whose library the (static) process has not mapped
        cluster.apply_probe(ns, "names", {"selector": {"matchLabels": {"app": "web"}},
                                          "functions": ["main.charge", "libc*:malloc"],
                                          "mode": "List", "reportInterval": "2s"})
        entry = wait_for("the node's list", lambda: (
            e := cluster.node_entry(ns, "names", "node-a")) and e.get("functionList") and
            e.get("functionListPending") == 0 and e,
            timeout=15)
        assert len(entry["functionList"]) == 1, entry
        (exe,) = entry["functionList"]
        assert [f["name"] for f in exe["functions"]] == ["main.charge"], exe
        assert exe["matched"] == 1 and exe["omitted"] == 0, exe
        assert exe["errors"] == ["no library the process has mapped matches 'libc*' "
                                 "(of 'libc*:malloc')"], exe
        assert sorted(p["pod"] for p in exe["pods"]) == ["web-1", "web-2"], exe
        cond = wait_for("the ListOnly condition", lambda: cluster.condition(
            ns, "names", "Attached"), timeout=15)
        assert cond["reason"] == "ListOnly", cond
        cluster.kubectl("delete", "functionprobe", "names", "-n", ns)
        listed = agent.find(msg_has="listed ")
        attached = agent.find(msg_has="attached to process")
    print(f"functions 'main.*' of 2 pods: {took:.2f} s")
    # listed once per list (the pods share the file), never attached
    assert listed and not attached, agent.tail()


def test_functions_errors_a_user_understands(cluster, make_pod):
    """No right to read the agents' lists: the verb and resource named, the
    probe deleted; no agent on the pod's node: said after --timeout."""
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    user = investigator(cluster, ns)
    with cluster.agent("node-a"):
        rc, out, err = run(cluster, kubeconfig_in(cluster, ns, user), "functions", "pod/web-1",
                           "main.*", timeout=30)
    assert rc == 1, (rc, out, err)
    assert f"you may not list functionprobereports.retwatch.io in namespace {ns}: ask for " \
        "the 'list' verb on functionprobereports.retwatch.io" in err, err
    assert "deleted FunctionProbe" in err and probes(cluster, ns) == [], err
    started = time.monotonic()
    rc, out, err = run(cluster, kubeconfig_in(cluster, ns), "functions", "pod/web-1",
                       "--timeout", "3s", timeout=30)
    assert rc == 1, (rc, out, err)
    assert "no retwatch agent answered on node node-a within 3s: is retwatch-agent running " \
        "there" in err, err
    assert time.monotonic() - started < 15 and probes(cluster, ns) == [], err
    # Ctrl-C while it waits: the probe deleted all the same
    p = Plugin(cluster, kubeconfig_in(cluster, ns), "functions", "pod/web-1")
    try:
        wait_for("the probe", lambda: "created FunctionProbe" in p.err(), timeout=15)
        p.proc.send_signal(signal.SIGINT)
        rc = p.wait(timeout=10)
    finally:
        p.stop()
    assert rc == 128 + signal.SIGINT, (rc, p.err())
    assert "deleted FunctionProbe retwatch-pod-web-1-" in p.err() and probes(cluster, ns) == []


def test_functions_of_a_shared_library(cluster, make_pod):
    """LIB:NAME patterns list the functions of the libraries the pod's process
    has mapped (tests/fixtures/c/shlib: shpod links libshfix.so), named as
    a pattern names them; a library function that is not there: suggestions."""
    ns = cluster.namespace()
    make_pod(ns, "native-1", {"app": "native"}, "node-a", containers={"app": ["/app/shpod"]})
    kc = kubeconfig_in(cluster, ns)
    with cluster.agent("node-a"):
        rc, out, err = run(cluster, kc, "functions", "pod/native-1", "libshfix.so:shfix_*",
                           "-o", "json", timeout=60)
        assert rc == 0, (rc, out, err)
        (exe,) = json.loads(out)["executables"]
        assert exe["executable"] == "/app/shpod", exe
        assert {f["library"] for f in exe["functions"]} == {"libshfix.so"}, exe
        assert "shfix_sleep" in {f["name"] for f in exe["functions"]}, exe
        rc, out, err = run(cluster, kc, "functions", "pod/native-1", "libshfix.so:shfix_slep",
                           timeout=60)
        assert probes(cluster, ns) == []
    assert rc == 1, (rc, out, err)
    assert "nothing matched: no function matches 'shfix_slep' in libshfix.so (did you mean: " \
        "shfix_sleep" in err, err


def test_functions_waits_for_every_node_and_names_the_silent_one(cluster, make_pod):
    """Pods on two nodes: one list naming both nodes once both agents answered;
    with node-b's agent not running, node-a's list is shown and node-b named."""
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    make_pod(ns, "web-2", {"app": "web"}, "node-b")
    kc = kubeconfig_in(cluster, ns)
    with cluster.agent("node-a"), cluster.agent("node-b"):
        rc, out, err = run(cluster, kc, "functions", "-l", "app=web", "main.charge", "-o",
                           "json", timeout=60)
    assert rc == 0, (rc, out, err)
    (exe,) = json.loads(out)["executables"]
    assert sorted(exe["nodes"]) == ["node-a", "node-b"], exe
    assert sorted(p["pod"] for p in exe["pods"]) == ["web-1", "web-2"], exe
    assert [f["name"] for f in exe["functions"]] == ["main.charge"], exe
    with cluster.agent("node-a"):
        rc, out, err = run(cluster, kc, "functions", "-l", "app=web", "main.charge",
                           "--timeout", "5s", timeout=60)
    assert rc == 1, (rc, out, err)
    assert "no retwatch agent answered on node node-b within 5s" in err, err
    assert "/app/podapp in web-1 (app) on node node-a: 1 function\n" in out, out
    assert probes(cluster, ns) == [], err


def test_the_shipped_investigator_role_is_what_the_plugin_needs(cluster):
    """The chart's ClusterRole retwatch-investigator, bound in a namespace:
    every right docs/kubectl-plugin.md lists there, none in another
    namespace; the plugin creates, reads and deletes a probe with it."""
    ns, other = cluster.namespace(), cluster.namespace()
    cluster.kubectl("create", "serviceaccount", "alice", "-n", ns)
    cluster.kubectl("create", "rolebinding", "alice-investigates", "--clusterrole",
                    "retwatch-investigator", "--serviceaccount", f"{ns}:alice", "-n", ns)
    who = f"system:serviceaccount:{ns}:alice"
    rights = [("create", "functionprobes.retwatch.io"), ("get", "functionprobes.retwatch.io"),
              ("list", "functionprobes.retwatch.io"), ("watch", "functionprobes.retwatch.io"),
              ("delete", "functionprobes.retwatch.io"),
              ("list", "functionprobereports.retwatch.io"), ("get", "pods"), ("list", "pods"),
              ("get", "deployments.apps"), ("get", "statefulsets.apps"),
              ("get", "daemonsets.apps")]

    def can(verb, resource, where):
        return cluster.kubectl("auth", "can-i", verb, resource, "-n", where, "--as", who,
                               check=False).stdout.strip() == "yes"
    wait_for("the binding to apply", lambda: can("create", "functionprobes.retwatch.io", ns),
             timeout=10)
    assert [r for r in rights if not can(*r, ns)] == [], "rights missing in the namespace"
    assert [r for r in rights if can(*r, other)] == [], "rights in another namespace"
    assert not can("update", "functionprobes/status", ns) and not can("delete", "pods", ns)
    token = cluster.kubectl("create", "token", "alice", "-n", ns).stdout.strip()
    config = cluster.cp.add_token_user(f"alice-{ns}", token)
    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
        "metadata": {"name": "seen", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "functions": ["main.x"]}}))
    rc, out, err = run(cluster, config, "get", "-n", ns)
    assert rc == 0 and out.splitlines()[1].split()[0] == "seen", (rc, out, err)
    rc, out, err = run(cluster, config, "get", "-n", other)
    assert rc == 1 and "you may not list functionprobes.retwatch.io" in err, err


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\u009b31m\x7f\r"
SHOWN = b"\\x1b]0;pwned\\x07\\x1b[2J\\xc2\\x9b31m\\x7f\\x0d"


def controls(data):
    """The bytes of data a terminal takes as controls: C0 but tab and
    newline, DEL, and C1 in UTF-8."""
    found = [b for b in data if (b < 0x20 and b not in (9, 10)) or b == 0x7F]
    found += [data[i:i + 2] for i in range(len(data) - 1)
              if data[i] == 0xC2 and 0x80 <= data[i + 1] <= 0x9F]
    return found


def poisoned(v, key=None):
    """v with every name, pod, stack frame and message led by HOSTILE, as a
    traced program's symbols, a pod's name or an agent could make them."""
    if isinstance(v, dict):
        return {k: poisoned(x, k) for k, x in v.items()}
    if isinstance(v, list):
        return [poisoned(x, key) for x in v]
    if isinstance(v, str) and key in ("name", "pod", "stack", "message", "value"):
        return HOSTILE + v
    return v


def test_names_from_pods_and_agents_reach_no_terminal_raw(cluster, make_pod):
    """A probe's status whose function names, pods, stack frames, argument
    values and messages hold an OSC title, a screen clear, a C1 CSI, DEL and
    CR: `get`, `get NAME` and `top` on a terminal print none of those bytes
    but visible escapes; `-o json` holds the strings exactly and `-o yaml`
    prints them escaped."""
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a", containers={"app": CHARGE + ["50"]})
    with cluster.agent("node-a") as a:
        cluster.apply_probe(ns, "evil", {"selector": {"matchLabels": {"app": "web"}},
                                         "functions": ["main.charge"], "reportInterval": "2s",
                                         "captureArguments": True, "slowThreshold": "100ms"})
        attached_log(a, pod.containers["app"].pid, timeout=10)
        os.kill(pod.containers["app"].pid, signal.SIGHUP)
        wait_for("the summary's slowest calls", lambda: any(
            f.get("slowestCalls") for f in
            cluster.status(ns, "evil").get("summary", {}).get("functions", [])),
            timeout=30, interval=0.5)
    probe = cluster.probe(ns, "evil")
    probe["status"] = poisoned(probe["status"])
    cluster.kubectl("replace", "--subresource", "status", "-f", "-", input=json.dumps(probe))
    kc = kubeconfig_in(cluster, ns)
    for args in (("get",), ("get", "evil"), ("top",)):
        p = Plugin(cluster, kc, *args, tty=True)
        assert p.wait(30) == 0, p.err()
        p.out()
        with open(p.out_path, "rb") as f:
            out = f.read().replace(b"\r\n", b"\n")  # the pty's own CR
        assert not controls(out), (args, out)
        # the list shows the probes' own names and specs; the others the status
        assert args == ("get",) or SHOWN in out, (args, out)
    rc, out, err = run(cluster, kc, "get", "evil", "-o", "json")
    assert rc == 0, err
    got = json.loads(out)
    assert got["status"] == probe["status"]
    p = Plugin(cluster, kc, "get", "evil", "-o", "yaml")
    assert p.wait(30) == 0, p.err()
    with open(p.out_path, "rb") as f:
        out = f.read()
    assert not controls(out), out
    assert b"\\u001b]0;pwned\\u0007\\u001b[2J\\u009b31m\\u007f\\r" in out, out


# A Go generic instance's name, 200 characters (a name in the status is a
# symbol of the traced program, any length).
LONG = "main.(*Table[go.shape.struct { Key string; Val []uint8 }]).Lookup"
LONG += "\u00b7" + "x" * (200 - len(LONG) - 1)


def cells(line):
    """line as the terminal's columns: a wide (CJK) character takes two."""
    out = []
    for c in line:
        out += [c, ""] if unicodedata.east_asian_width(c) in "WF" else [c]
    return out


def calls_aligned(out, head, calls):
    """The rows under the header that starts with head: each has its CALLS
    (the numbers calls names, in order) ending in the header's CALLS column,
    a space before it. Returns the rows."""
    lines = out.splitlines()
    start = [i for i, line in enumerate(lines) if line.startswith(head)]
    assert len(start) == 1, out
    header = lines[start[0]]
    end = len(cells(header[:header.index(" CALLS") + len(" CALLS")]))
    rows = [line for line in lines[start[0] + 1:] if line.strip()][:len(calls)]
    for row, n in zip(rows, calls):
        c = cells(row)
        digits = str(n)
        assert "".join(c[end - len(digits):end]) == digits and c[end - len(digits) - 1] == " ", \
            (row, n, out)
    return rows


def test_a_long_name_keeps_the_columns_and_wide_prints_it_whole(cluster):
    """A 200-character function name, a CJK one and one with an ESC in a
    probe's status (written as an agent would): `get NAME` and `top` cut the
    long one with an ellipsis, every row's CALLS in the header's column;
    with -o wide, the name whole and the columns still aligned. No agent
    runs: the status is written once and read."""
    ns = cluster.namespace()
    cluster.ensure_summary_lease()
    cluster.apply_probe(ns, "long", {"selector": {"matchLabels": {"app": "web"}},
                                     "functions": ["main.*"], "reportInterval": "2s"})
    probe = cluster.probe(ns, "long")
    # p99 highest first: top's order is the table's
    names = [(LONG, 7, "9ms"), ("main.charge", 300, "5ms"),
             ("\u65e5\u672c.\u95a2\u6570", 9, "3ms"), ("main.\x1b[2J", 3, "1ms")]
    probe["status"] = {"summary": {
        "pods": 1, "processes": 1, "nodes": 1, "calls": 319,
        "lastUpdate": "2026-11-29T09:00:00Z", "slowest": LONG, "p50": "1ms", "p99": "9ms",
        "functions": [{"name": name, "calls": calls, "p50": "1ms", "p99": p99,
                       "recent": {"calls": 2, "p50": "1ms", "p99": p99},
                       "slowestPods": [{"pod": "web-1", "p99": p99}]}
                      for name, calls, p99 in names]}}
    cluster.kubectl("replace", "--subresource", "status", "-f", "-", input=json.dumps(probe))
    kc = kubeconfig_in(cluster, ns)
    for args, head in ((("get", "long"), "FUNCTION "), (("top",), "PROBE ")):
        rc, out, err = run(cluster, kc, *args)
        assert rc == 0, err
        rows = calls_aligned(out, head, [7, 300, 9, 3])
        assert LONG not in out and LONG[:40] in rows[0] and "\u2026" in rows[0], out
        assert "main.\\x1b[2J" in rows[3], out
        rc, out, err = run(cluster, kc, *args, "-o", "wide")
        assert rc == 0, err
        rows = calls_aligned(out, head, [7, 300, 9, 3])
        assert LONG in rows[0] and "\u2026" not in out, out
    rc, out, err = run(cluster, kc, "get", "-o", "wide")
    assert rc == 0 and LONG in out, (out, err)
    rc, out, err = run(cluster, kc, "get", "long", "-o", "json")
    assert rc == 0 and json.loads(out)["status"]["summary"]["functions"][0]["name"] == LONG, err
