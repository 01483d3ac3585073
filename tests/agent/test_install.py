"""The Helm chart (charts/retwatch) and what is rendered from it
(manifests/install.yaml), against the test control plane: lint, the values'
schema, the DaemonSet as the agent needs it, helm install and uninstall, the
agent's RBAC (what it needs and nothing more), the committed manifests up to
date with the chart, and the example FunctionProbe valid.

helm comes from tests/helm/build.sh (built from its Go module, cached)."""

import difflib
import json
import os
import subprocess
import tarfile

import pytest
import yaml

from agentproc import wait_for
from conftest import ARGUMENT_POLICY, INSTALL_YAML, REPO, install_manifests
from controlplane import ControlPlane

CHART = os.path.join(REPO, "charts", "retwatch")
HELM_BUILD = os.path.join(REPO, "tests", "helm", "build.sh")
RENDER = os.path.join(REPO, "manifests", "render.sh")
EXAMPLES = os.path.join(REPO, "manifests", "examples")
CRD = "customresourcedefinition/functionprobes.retwatch.io"


@pytest.fixture(scope="session")
def helm():
    """helm(*args, kubeconfig=None, check=True) -> CompletedProcess."""
    out = subprocess.run([HELM_BUILD], stdout=subprocess.PIPE, text=True, check=True)
    binary = os.path.join(out.stdout.strip().splitlines()[-1], "helm")

    def run(*args, kubeconfig=None, check=True):
        argv = [binary, *args] + (["--kubeconfig", kubeconfig] if kubeconfig else [])
        res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if check and res.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {res.returncode}:\n{res.stderr}")
        return res

    run.binary = binary
    return run


def render(helm, *args):
    """The chart's objects for values args, as {(kind, name): object}."""
    out = helm("template", "retwatch", CHART, "--namespace", "retwatch", *args).stdout
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out) if d}


def agent_container(objects):
    ds = objects["DaemonSet", "retwatch-agent"]
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    return ds["spec"]["template"]["spec"], container


def test_lint_strict(helm):
    helm("lint", "--strict", CHART)
    helm("lint", "--strict", CHART, "--set", "metrics.enabled=false",
         "--set", "serviceAccount.create=false,serviceAccount.name=default,rbac.create=false")


CRD_FILES = ["clusterfunctionprobe.yaml", "functionprobe.yaml", "functionprobereport.yaml"]


def test_package_holds_the_crds(helm, tmp_path):
    """The chart's crds/*.yaml are symlinks to the one file of each CRD: the
    package holds their contents."""
    helm("package", CHART, "-d", str(tmp_path))
    (tgz,) = tmp_path.iterdir()
    for name in CRD_FILES:
        assert os.path.islink(os.path.join(CHART, "crds", name))
        with tarfile.open(tgz) as tar:
            packaged = tar.extractfile(f"retwatch/crds/{name}").read()
        with open(os.path.join(REPO, "crds", name), "rb") as f:
            assert packaged == f.read()


def test_daemonset_runs_the_agent_as_it_needs(helm):
    objects = render(helm)
    assert sorted(objects) == [
        ("ClusterRole", "retwatch-agent"), ("ClusterRole", "retwatch-agent-metrics-reader"),
        ("ClusterRole", "retwatch-argument-capture"),
        ("ClusterRole", "retwatch-cluster-investigator"),
        ("ClusterRole", "retwatch-investigator"),
        ("ClusterRoleBinding", "retwatch-agent"),
        ("DaemonSet", "retwatch-agent"), ("NetworkPolicy", "retwatch-agent"),
        ("Role", "retwatch-agent-lease"),
        ("RoleBinding", "retwatch-agent-lease"), ("Secret", "retwatch-agent-metrics-tls"),
        ("ServiceAccount", "retwatch-agent"),
        ("ValidatingAdmissionPolicy", "retwatch-agent-arguments"),
        ("ValidatingAdmissionPolicy", "retwatch-agent-report-writers"),
        ("ValidatingAdmissionPolicy", "retwatch-agent-reports"),
        ("ValidatingAdmissionPolicy", "retwatch-agent-summary"),
        ("ValidatingAdmissionPolicy", "retwatch-agent-summary-lease"),
        ("ValidatingAdmissionPolicyBinding", "retwatch-agent-arguments"),
        ("ValidatingAdmissionPolicyBinding", "retwatch-agent-report-writers"),
        ("ValidatingAdmissionPolicyBinding", "retwatch-agent-reports"),
        ("ValidatingAdmissionPolicyBinding", "retwatch-agent-summary"),
        ("ValidatingAdmissionPolicyBinding", "retwatch-agent-summary-lease")]
    summary = objects["ValidatingAdmissionPolicyBinding", "retwatch-agent-summary"]["spec"]
    assert summary["paramRef"] == {"name": "retwatch-summary", "namespace": "retwatch",
                                   "parameterNotFoundAction": "Deny"}, summary
    for name in ("reports", "summary-lease", "report-writers"):
        policy = objects["ValidatingAdmissionPolicy", f"retwatch-agent-{name}"]["spec"]
        assert "system:serviceaccount:retwatch:retwatch-agent" in \
            policy["matchConditions"][0]["expression"], name
    lease = objects["ValidatingAdmissionPolicy", "retwatch-agent-summary-lease"]["spec"]
    assert lease["matchConditions"][1]["expression"] == "request.namespace == 'retwatch'"
    pod, c = agent_container(objects)
    assert pod["hostPID"] is True
    assert pod["serviceAccountName"] == "retwatch-agent"
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert pod["terminationGracePeriodSeconds"] >= 10
    # the one volume: the metrics certificate's Secret
    assert pod["volumes"] == [{"name": "metrics-tls", "secret": {
        "secretName": "retwatch-agent-metrics-tls", "defaultMode": 0o400}}], pod["volumes"]
    assert c["volumeMounts"] == [{"name": "metrics-tls", "mountPath": "/etc/retwatch/metrics-tls",
                                  "readOnly": True}]
    assert objects["DaemonSet", "retwatch-agent"]["spec"]["updateStrategy"]["type"] == \
        "RollingUpdate"
    assert c["image"] == "retwatch-agent:0.1.0"
    assert c["args"] == ["--log-level=info", "--attach=auto", "--returns=trampoline",
                         "--max-probes=100",
                         "--report-writes-per-second=50", "--report-budget=1Mi",
                         "--slow-calls-per-second=100",
                         "--max-functions-per-namespace=8192",
                         "--max-inflight-per-namespace=8192",
                         "--slow-calls-per-namespace=500", "--analysis-timeout=5s",
                         "--calibrate-every=10m", "--argument-capture=deny",
                         "--metrics-address=:9431",
                         "--metrics-max-series=5000", "--metrics-auth=kube",
                         "--metrics-tls-cert=/etc/retwatch/metrics-tls/tls.crt",
                         "--metrics-tls-key=/etc/retwatch/metrics-tls/tls.key",
                         "--health-address=:9432"]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
    assert env == {"NODE_NAME": "spec.nodeName", "POD_NAMESPACE": "metadata.namespace"}
    assert c["ports"] == [{"name": "metrics", "containerPort": 9431, "protocol": "TCP"},
                          {"name": "health", "containerPort": 9432, "protocol": "TCP"}]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert c["resources"]["requests"] and c["resources"]["limits"]
    sc = c["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True and sc["runAsUser"] == 0
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sc["capabilities"]["add"] == ["BPF", "PERFMON", "SYS_PTRACE"]
    assert sc["seccompProfile"] == {"type": "Unconfined"}
    assert sc["appArmorProfile"] == {"type": "Unconfined"}
    annotations = objects["DaemonSet", "retwatch-agent"]["spec"]["template"]["metadata"][
        "annotations"]
    assert annotations["prometheus.io/port"] == "9431"
    assert annotations["prometheus.io/scheme"] == "https"


def test_the_daemonset_schedules_on_amd64_and_arm64_linux_nodes(helm):
    pod, _ = agent_container(render(helm))
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}, pod["nodeSelector"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert term == {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In",
                                          "values": ["amd64", "arm64"]}]}, term


def test_values_change_the_daemonset(helm):
    objects = render(helm, "--set", "metrics.enabled=false,logLevel=debug,maxProbesPerNode=0",
                     "--set", "reportWritesPerSecond=0,reportBudget=512Ki",
                     "--set", "slowCallsPerSecond=0,maxFunctionsPerNamespace=64",
                     "--set", "maxInflightPerNamespace=0,slowCallsPerNamespace=7",
                     "--set", "analysisTimeout=750ms,calibrateEvery=0",
                     "--set", "attach=perf_event,priorityClassName=system-node-critical",
                     "--set", "returns=ret",
                     "--set", "image.tag=dev,extraArgs[0]=--extra",
                     "--set", "podAnnotations.team=perf",
                     "--set", "reportAdmissionPolicy=false,argumentAdmissionPolicy=false",
                     "--set", "allowArgumentCapture=false")
    assert not any(kind.startswith("ValidatingAdmission") for kind, _ in objects)
    pod, c = agent_container(objects)
    assert c["args"] == ["--log-level=debug", "--attach=perf_event", "--returns=ret",
                         "--max-probes=0",
                         "--report-writes-per-second=0", "--report-budget=512Ki",
                         "--slow-calls-per-second=0",
                         "--max-functions-per-namespace=64",
                         "--max-inflight-per-namespace=0", "--slow-calls-per-namespace=7",
                         "--analysis-timeout=750ms", "--calibrate-every=0",
                         "--argument-capture=deny", "--metrics-address=none", "--health-address=:9432", "--extra"]
    # perf-event uprobes need SYS_ADMIN (tests/agent/test_capabilities.py)
    assert c["securityContext"]["capabilities"]["add"][-1] == "SYS_ADMIN"
    # no metrics port, but the health port and its probes stay
    assert [p["name"] for p in c["ports"]] == ["health"]
    assert c["livenessProbe"]["httpGet"]["port"] == "health"
    assert pod["priorityClassName"] == "system-node-critical"
    assert c["image"] == "retwatch-agent:dev"
    annotations = objects["DaemonSet", "retwatch-agent"]["spec"]["template"]["metadata"][
        "annotations"]
    assert annotations == {"team": "perf"}

    objects = render(helm, "--set", "metrics.port=9500,metrics.maxSeries=10")
    _, c = agent_container(objects)
    assert c["args"][-6:-4] == ["--metrics-address=:9500", "--metrics-max-series=10"]
    assert c["ports"][0]["containerPort"] == 9500

    # the node's debug directories, read-only, looked in by --debug-dir
    pod, c = agent_container(render(helm, "--set-json", 'debugDirs=["/usr/lib/debug"]'))
    assert "--debug-dir=/node/debug/0" in c["args"], c["args"]
    assert {"name": "debug-0", "hostPath": {"path": "/usr/lib/debug", "type": "Directory"}} \
        in pod["volumes"], pod["volumes"]
    assert {"name": "debug-0", "mountPath": "/node/debug/0", "readOnly": True} \
        in c["volumeMounts"], c["volumeMounts"]
    res = helm("template", "retwatch", CHART, "--set-json", 'debugDirs=["relative"]', check=False)
    assert res.returncode != 0 and "debugDirs" in res.stderr, res.stderr

    objects = render(helm, "--set", "perfEventUprobes=true")
    _, c = agent_container(objects)
    assert c["securityContext"]["capabilities"]["add"] == ["BPF", "PERFMON", "SYS_PTRACE",
                                                           "SYS_ADMIN"]

    objects = render(helm, "--set", "serviceAccount.create=false,serviceAccount.name=mine",
                     "--set", "rbac.create=false")
    assert sorted(objects) == [("DaemonSet", "retwatch-agent"),
                               ("NetworkPolicy", "retwatch-agent"),
                               ("Secret", "retwatch-agent-metrics-tls"),
                               ("ValidatingAdmissionPolicy", "retwatch-agent-arguments"),
                               ("ValidatingAdmissionPolicy", "retwatch-agent-report-writers"),
                               ("ValidatingAdmissionPolicy", "retwatch-agent-reports"),
                               ("ValidatingAdmissionPolicy", "retwatch-agent-summary"),
                               ("ValidatingAdmissionPolicy", "retwatch-agent-summary-lease"),
                               ("ValidatingAdmissionPolicyBinding", "retwatch-agent-arguments"),
                               ("ValidatingAdmissionPolicyBinding",
                                "retwatch-agent-report-writers"),
                               ("ValidatingAdmissionPolicyBinding", "retwatch-agent-reports"),
                               ("ValidatingAdmissionPolicyBinding", "retwatch-agent-summary"),
                               ("ValidatingAdmissionPolicyBinding",
                                "retwatch-agent-summary-lease")]
    # the admission policies follow the ServiceAccount the agent runs as
    for name in ("reports", "summary-lease", "report-writers"):
        assert "system:serviceaccount:retwatch:mine" in objects[
            "ValidatingAdmissionPolicy", f"retwatch-agent-{name}"]["spec"]["matchConditions"][
            0]["expression"], name
    assert agent_container(objects)[0]["serviceAccountName"] == "mine"


@pytest.mark.parametrize("values, message", [
    (["--set", "logLevel=verbose"], "at '/logLevel': value must be one of"),
    (["--set", "attach=kprobe"], "at '/attach': value must be one of"),
    (["--set", "returns=uretprobe"], "at '/returns': value must be one of"),
    (["--set", "metrics.port=70000"], "at '/metrics/port': maximum"),
    (["--set", "metrics.port=0"], "at '/metrics/port': minimum"),
    (["--set", "maxProbesPerNode=-1"], "at '/maxProbesPerNode': minimum"),
    (["--set", "slowCallsPerSecond=-1"], "at '/slowCallsPerSecond': minimum"),
    (["--set", "maxFunctionsPerNamespace=-1"], "at '/maxFunctionsPerNamespace': minimum"),
    (["--set", "maxInflightPerNamespace=-1"], "at '/maxInflightPerNamespace': minimum"),
    (["--set-string", "analysisTimeout=5"], "at '/analysisTimeout': '5' does not match pattern"),
    (["--set-string", "calibrateEvery=often"], "at '/calibrateEvery'"),
    (["--set", "calibrateEvery=5"], "at '/calibrateEvery'"),
    (["--set-string", "reportBudget=1MB"], "at '/reportBudget': '1MB' does not match pattern"),
    (["--set", "metrics.maxSeries=-5"], "at '/metrics/maxSeries': minimum"),
    (["--set-string", "perfEventUprobes=yes"], "at '/perfEventUprobes': got string, want boolean"),
    (["--set-string", "maxProbesPerNode=ten"], "at '/maxProbesPerNode': got string, want integer"),
    (["--set-string", "metrics.enabled=yes"], "at '/metrics/enabled': got string, want boolean"),
    (["--set", "image.pullPolicy=Sometimes"], "at '/image/pullPolicy': value must be one of"),
    (["--set", "maxProbes=5"], "additional properties 'maxProbes' not allowed"),
    (["--set", "metrics.prot=9000"], "additional properties 'prot' not allowed"),
    (["--set", "serviceAccount.create=false"], "serviceAccount.name: name an existing"),
])
def test_bad_values_are_refused_with_the_field_named(helm, values, message):
    res = helm("template", "retwatch", CHART, *values, check=False)
    assert res.returncode != 0, f"helm accepted {values}"
    assert message in res.stderr


def test_manifests_are_up_to_date_with_the_chart(helm):
    fresh = subprocess.run(["bash", RENDER], capture_output=True, text=True, check=True,
                           env={**os.environ, "HELM": helm.binary}).stdout
    with open(INSTALL_YAML) as f:
        committed = f.read()
    diff = "".join(list(difflib.unified_diff(
        committed.splitlines(True), fresh.splitlines(True), "manifests/install.yaml",
        "rendered from charts/retwatch"))[:60])
    assert not diff, \
        f"manifests/install.yaml differs from what the chart renders: run make manifests\n{diff}"


def test_install_yaml_is_the_chart_with_its_namespace_and_crd(helm):
    with open(INSTALL_YAML) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    kinds = [d["kind"] for d in docs]
    assert kinds[:4] == ["CustomResourceDefinition"] * 3 + ["Namespace"], \
        "CRDs and Namespace first"
    for doc, name in zip(docs, CRD_FILES):
        with open(os.path.join(REPO, "crds", name)) as f:
            assert doc == yaml.safe_load(f)
    ns = docs[3]
    assert ns["metadata"]["name"] == "retwatch"
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    # each agent makes its own metrics certificate there: no Secret
    assert {(d["kind"], d["metadata"]["name"]) for d in docs[4:]} == set(
        render(helm, "--set", "metrics.tls.certificate=agent"))
    (agent,) = [d for d in docs if d["kind"] == "DaemonSet"]
    assert "--metrics-tls=self-signed" in agent["spec"]["template"]["spec"]["containers"][0][
        "args"]


def install_yaml_count():
    with open(INSTALL_YAML) as f:
        return sum(1 for d in yaml.safe_load_all(f) if d)


def test_install_yaml_objects_exist_in_the_cluster(cluster):
    """The cluster fixture applied manifests/install.yaml: every object of it
    was accepted (but the argument policy, which test_arguments.py applies)."""
    names = cluster.kubectl("get", "-f", "-", "-o", "name", input=install_manifests(
        without_names=(ARGUMENT_POLICY,))).stdout.split()
    assert len(names) == install_yaml_count() - 2, names
    assert "daemonset.apps/retwatch-agent" in names


AGENT_SA = "system:serviceaccount:retwatch:retwatch-agent"
# (verb, resource, namespace or None for all): what the agent does.
NEEDED = [
    ("get", "functionprobes.retwatch.io", "shop"),
    ("list", "functionprobes.retwatch.io", None),
    ("watch", "functionprobes.retwatch.io", None),
    ("patch", "functionprobes.retwatch.io/status", "shop"),
    ("list", "clusterfunctionprobes.retwatch.io", None),
    ("watch", "clusterfunctionprobes.retwatch.io", None),
    ("patch", "clusterfunctionprobes.retwatch.io/status", None),
    ("list", "namespaces", None),
    ("watch", "namespaces", None),
    ("create", "functionprobereports.retwatch.io", "shop"),
    ("patch", "functionprobereports.retwatch.io", "shop"),
    ("get", "functionprobereports.retwatch.io", "shop"),
    ("list", "functionprobereports.retwatch.io", None),
    ("delete", "functionprobereports.retwatch.io", "shop"),
    ("list", "pods", None),
    ("watch", "pods", None),
    # the summary writer sums only the reports of the cluster's nodes
    ("list", "nodes", None),
    ("get", "leases.coordination.k8s.io/retwatch-summary", "retwatch"),
    ("create", "leases.coordination.k8s.io", "retwatch"),
    ("update", "leases.coordination.k8s.io/retwatch-summary", "retwatch"),
    # reviews of the tokens that scrapers of /metrics present
    ("create", "tokenreviews.authentication.k8s.io", None),
    ("create", "subjectaccessreviews.authorization.k8s.io", None),
]
REFUSED = [
    ("create", "functionprobes.retwatch.io", "shop"),
    ("update", "functionprobes.retwatch.io", "shop"),
    ("patch", "functionprobes.retwatch.io", "shop"),
    ("delete", "functionprobes.retwatch.io", "shop"),
    ("deletecollection", "functionprobes.retwatch.io", "shop"),
    ("update", "functionprobes.retwatch.io/status", "shop"),
    ("create", "clusterfunctionprobes.retwatch.io", None),
    ("delete", "clusterfunctionprobes.retwatch.io", None),
    ("update", "clusterfunctionprobes.retwatch.io/status", None),
    ("update", "namespaces", None),
    ("deletecollection", "functionprobereports.retwatch.io", "shop"),
    ("watch", "functionprobereports.retwatch.io", None),
    ("get", "pods", "shop"),
    ("patch", "pods", "shop"),
    ("delete", "pods", "shop"),
    ("create", "pods/exec", "shop"),
    ("get", "secrets", "retwatch"),
    ("list", "secrets", None),
    ("list", "configmaps", "shop"),
    ("get", "nodes", None),
    ("watch", "nodes", None),
    ("patch", "nodes", None),
    ("list", "serviceaccounts", "retwatch"),
    ("create", "serviceaccounts/token", "retwatch"),
    ("list", "leases.coordination.k8s.io", "retwatch"),
    ("delete", "leases.coordination.k8s.io/retwatch-summary", "retwatch"),
    ("patch", "leases.coordination.k8s.io/retwatch-summary", "retwatch"),
    ("get", "leases.coordination.k8s.io/retwatch-summary", "kube-system"),
    ("update", "leases.coordination.k8s.io/retwatch-summary", "default"),
    ("get", "leases.coordination.k8s.io/another", "retwatch"),
    ("update", "leases.coordination.k8s.io/another", "retwatch"),
    ("create", "leases.coordination.k8s.io", "kube-node-lease"),
    ("update", "customresourcedefinitions.apiextensions.k8s.io", None),
    ("list", "daemonsets.apps", None),
    ("escalate", "clusterroles.rbac.authorization.k8s.io", None),
    ("impersonate", "users", None),
]


def can_i(kubectl, sa, verb, resource, ns):
    """kubectl auth can-i as sa; resource is TYPE, TYPE/SUBRESOURCE (status,
    exec, token) or TYPE/NAME; ns None asks about every namespace."""
    resource, _, sub = resource.partition("/")
    if sub and sub not in ("status", "exec", "token"):
        resource = f"{resource}/{sub}"  # a name
        sub = ""
    args = ["auth", "can-i", verb, resource, f"--as={sa}"]
    args += [f"--subresource={sub}"] if sub else []
    args += ["-n", ns] if ns else ["--all-namespaces"]
    res = kubectl(*args, check=False)
    assert res.stdout.strip() in ("yes", "no"), res.stderr
    return res.stdout.strip() == "yes"


def test_agent_may_do_what_it_needs_and_nothing_more(cluster):
    """The ServiceAccount of manifests/install.yaml, which the cluster fixture
    applied (the identity every agent test runs as)."""
    kubectl = cluster.kubectl
    denied = [c for c in NEEDED if not can_i(kubectl, AGENT_SA, *c)]
    allowed = [c for c in REFUSED if can_i(kubectl, AGENT_SA, *c)]
    assert not denied and not allowed, f"denied: {denied}; allowed: {allowed}"


def objects_of(helm, release, ns, kubeconfig):
    """kind/name of every object of a release's manifest (not its CRDs)."""
    out = helm("get", "manifest", release, "-n", ns, kubeconfig=kubeconfig).stdout
    return [(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace"))
            for d in yaml.safe_load_all(out) if d]


def assert_exist(kubectl, objects, exist):
    for kind, name, ns in objects:
        res = kubectl("get", kind, name, *(["-n", ns] if ns else []), check=False)
        if exist:
            assert res.returncode == 0, f"{kind} {name}: {res.stderr}"
        else:
            assert "NotFound" in res.stderr, f"{kind} {name} still exists: {res.stdout}"


def test_helm_install_and_uninstall_beside_another_install(cluster, helm):
    """A second release, in another namespace, in the cluster that already
    has the CRD and the RBAC of manifests/install.yaml: helm skips the
    existing CRD, and every object's name is the release's own."""
    ns = cluster.namespace()
    kubeconfig = cluster.cp.kubeconfig("admin")
    res = helm("install", "second", CHART, "-n", ns, kubeconfig=kubeconfig)
    try:
        assert "STATUS: deployed" in res.stdout
        assert "kubectl get fprobe" in res.stdout  # the NOTES
        objects = objects_of(helm, "second", ns, kubeconfig)
        assert sorted(kind for kind, _, _ in objects) == [
            "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRole",
            "ClusterRoleBinding", "DaemonSet",
            "NetworkPolicy", "Role",
            "RoleBinding", "Secret", "ServiceAccount"] + ["ValidatingAdmissionPolicy"] * 5 + [
            "ValidatingAdmissionPolicyBinding"] * 5
        assert all(name.startswith("second-retwatch-") for _, name, _ in objects), objects
        assert_exist(cluster.kubectl, objects, True)
        sa = f"system:serviceaccount:{ns}:second-retwatch-agent"
        assert can_i(cluster.kubectl, sa, "list", "functionprobes.retwatch.io", None)
        assert can_i(cluster.kubectl, sa, "update", "leases.coordination.k8s.io/retwatch-summary", ns)
        assert not can_i(cluster.kubectl, sa, "update", "leases.coordination.k8s.io", "retwatch")
    finally:
        # its admission policies would refuse what the tests that follow do
        helm("uninstall", "second", "-n", ns, kubeconfig=kubeconfig)
    assert_exist(cluster.kubectl, objects, False)
    probe = {"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
             "metadata": {"name": "args", "namespace": ns},
             "spec": {"selector": {"matchLabels": {"app": "web"}}, "functions": ["f"],
                      "captureArguments": True}}
    wait_for("its argument policy out of force", lambda: cluster.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(probe),
        check=False).returncode == 0, timeout=30)
    cluster.kubectl("get", CRD)  # still there, for the other install


def test_helm_install_on_an_empty_cluster_installs_the_crd(cluster, helm, workdir):
    """`helm install retwatch charts/retwatch -n retwatch --create-namespace`
    on a control plane of its own: the CRD comes from the chart's crds/
    (a symlink to crds/functionprobe.yaml), and the release makes the very
    objects of manifests/install.yaml."""
    cp = ControlPlane(os.path.join(workdir, "helm-cp"), cluster.cp.bindir)
    cp.start()
    try:
        kubeconfig = cp.kubeconfig("admin")
        helm("install", "retwatch", CHART, "-n", "retwatch", "--create-namespace",
             kubeconfig=kubeconfig)
        for name in CRD_FILES:
            with open(os.path.join(REPO, "crds", name)) as f:
                want = yaml.safe_load(f)
            crd = f"crd/{want['metadata']['name']}"
            cp.kubectl("wait", "--for=condition=Established", crd)
            got = yaml.safe_load(cp.kubectl("get", crd, "-o", "yaml").stdout)
            assert got["spec"]["versions"][0]["schema"] == want["spec"]["versions"][0]["schema"]
        # all of install.yaml exists (its Namespace made by --create-namespace),
        # and the metrics certificate's Secret (each agent makes its own there)
        names = cp.kubectl("get", "-f", INSTALL_YAML, "-o", "name").stdout.split()
        assert len(names) == install_yaml_count(), names
        objects = objects_of(helm, "retwatch", "retwatch", kubeconfig)
        assert len(objects) == 22
        secret = cp.kubectl("get", "secret", "-n", "retwatch", "retwatch-agent-metrics-tls",
                            "-o", "json").stdout
        # an upgrade keeps the certificate the agents serve and scrapers trust
        helm("upgrade", "retwatch", CHART, "-n", "retwatch", kubeconfig=kubeconfig)
        assert json.loads(cp.kubectl("get", "secret", "-n", "retwatch",
                                     "retwatch-agent-metrics-tls", "-o", "json").stdout)[
            "data"] == json.loads(secret)["data"]
        assert_exist(cp.kubectl, objects, True)

        helm("uninstall", "retwatch", "-n", "retwatch", kubeconfig=kubeconfig)
        assert_exist(cp.kubectl, objects, False)
        cp.kubectl("get", CRD)  # helm never deletes a chart's CRDs
    finally:
        cp.stop()


@pytest.mark.parametrize("name", sorted(os.listdir(EXAMPLES)))
def test_example_probe_is_valid(cluster, name):
    path = os.path.join(EXAMPLES, name)
    with open(path) as f:
        doc = yaml.safe_load(f)
    assert doc["kind"] in ("FunctionProbe", "ResourceQuota")
    ns = doc["metadata"]["namespace"]
    if cluster.kubectl("get", "namespace", ns, check=False).returncode != 0:
        cluster.kubectl("create", "namespace", ns)
    res = cluster.kubectl("apply", "--dry-run=server", "-f", path)
    assert "created (server dry run)" in res.stdout, res.stdout
