"""The demo (make demo): the local single-node cluster (cluster.py), the
agent installed with helm, the Go demo payment service (tests/fixtures/go)
as a Deployment, and the example FunctionProbe
(manifests/examples/payments-probe.yaml); shows its live numbers and leaves
the cluster up. A run that fails stops the cluster it started.

    python3 tests/cluster/demo.py up     # make demo
    python3 tests/cluster/demo.py down   # make demo-down

Needs root. Standard library only.
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cluster as clusterlib  # noqa: E402
import conftest  # noqa: E402

DEMO_IMAGE = "localhost/retwatch-demo:cluster"
PROBE = os.path.join(clusterlib.REPO, "manifests", "examples", "payments-probe.yaml")
# What the builds print (go, buildah, apt in the image's build stage).
BUILD_LOG = os.path.join(os.path.dirname(clusterlib.LAST_LOGS), "demo-build.log")


def step(msg, start):
    print(f"[{time.monotonic() - start:6.1f} s] {msg}", flush=True)


def build_demo_image(workdir):
    """DEMO_IMAGE: the Go demo payment service, static, as /app/demo."""
    root = os.path.join(workdir, "demo-root", "app")
    os.makedirs(root, exist_ok=True)
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-buildvcs=false")
    subprocess.run(["go", "build", "-o", os.path.join(root, "demo"), "."], check=True, env=env,
                   cwd=os.path.join(clusterlib.REPO, "tests", "fixtures", "go"))
    clusterlib._image_from_dir(DEMO_IMAGE, os.path.dirname(root), ["/app/demo"])
    return DEMO_IMAGE


def deployment():
    labels = {"app": "payments-demo"}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "payments", "namespace": "demo"},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "terminationGracePeriodSeconds": 2,
                         "containers": [{"name": "payments", "image": DEMO_IMAGE,
                                         "imagePullPolicy": "Never"}]}}}}


def function_table(status):
    rows = [("FUNCTION", "CALLS", "P50", "P95", "P99", "MAX")]
    for f in status.get("summary", {}).get("functions", []):
        rows.append((f["name"], str(f.get("calls", 0)), f.get("p50", "-"), f.get("p95", "-"),
                     f.get("p99", "-"), f.get("max", "-")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


@contextlib.contextmanager
def output_to(path):
    """This process's and its children's stdout and stderr go to path."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(path, "a") as f:
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, s in ((1, saved[0]), (2, saved[1])):
            os.dup2(s, fd)
            os.close(s)


def build(start):
    """The cluster's binaries, helm and the images: (cluster, helm, images)."""
    os.makedirs(os.path.dirname(BUILD_LOG), exist_ok=True)
    open(BUILD_LOG, "w").close()
    step("building what the cluster runs; cached: a first run builds Kubernetes from its Go\n"
         "          modules, helm and the images, about 13 minutes on 2 cores\n"
         f"          (their output: {BUILD_LOG})", start)
    built = time.monotonic()
    step("Kubernetes: etcd, kube-apiserver, controller manager, scheduler, kubelet", start)
    with output_to(BUILD_LOG):
        c = clusterlib.Cluster(clusterlib.build_bindir())
    step("helm", start)
    with output_to(BUILD_LOG):
        helm = os.path.join(conftest.helm_bindir(), "helm")
    step("the images (pause, agent from the Dockerfile, demo service) with buildah", start)
    workdir = tempfile.mkdtemp(prefix="retwatch-demo-")
    try:
        with output_to(BUILD_LOG):
            images = clusterlib.build_images(workdir) + [build_demo_image(workdir)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    step(f"built in {time.monotonic() - built:.0f} s", start)
    return c, helm, images


def up():
    start = time.monotonic()
    c, helm, images = build(start)
    step("starting the cluster", start)
    try:
        c.start()
        show(c, helm, images, start)
    except BaseException:
        c.stop()  # nothing left running; its logs stay in LAST_LOGS
        raise
    c.release()  # the cluster outlives this process


def print_slowest_call(c):
    """The slowest call of the slowest function, as the probe's status holds it."""
    def slowest():
        s = c.kubectl_json("get", "fprobe", "-n", "demo", "payments").get("status", {})
        sm = s.get("summary", {})
        f = next((f for f in sm.get("functions", []) if f["name"] == sm.get("slowest")), {})
        return f.get("slowestCalls") and (f["name"], f["slowestCalls"][0])
    try:
        name, call = conftest.wait_for("the slowest calls in the status", slowest, timeout=30)
    except AssertionError:
        print("(no slowest call in the probe's status yet)\n")
        return
    print(f"The slowest call of {name} (status.summary.functions[].slowestCalls): "
          f"{call['duration']} in pod {call.get('pod')} on {call.get('node')}, "
          f"ended {call.get('ended')}")
    args = " ".join(f"{a['name']}={a.get('value', '(' + a.get('error', '?') + ')')}"
                    for a in call.get("arguments", []))
    if args:
        print(f"  arguments (spec.captureArguments): {args}")
    for frame in call.get("stack", [])[:6]:
        print(f"    {frame}")
    print()


def show(c, helm, images, start):
    """Installs the agent, the service and the probe into the started cluster c;
    prints the probe's live numbers."""
    for image in images:
        c.import_image(image)
    node = conftest.Node(c, helm)
    step("helm install retwatch (charts/retwatch)", start)
    node.install_agent()
    node.ready_agent_pod()
    step("the agent's pod is Ready; deploying the demo service (2 replicas)", start)
    c.kubectl("create", "namespace", "demo")
    c.kubectl("apply", "-f", "-", input=json.dumps(deployment()))
    c.kubectl("rollout", "status", "-n", "demo", "deployment/payments", "--timeout=120s")
    step(f"kubectl apply -f {os.path.relpath(PROBE, clusterlib.REPO)}", start)
    c.kubectl("apply", "-f", PROBE)

    def live():
        s = c.kubectl_json("get", "fprobe", "-n", "demo", "payments").get("status", {})
        return s.get("summary", {}).get("calls") and s
    status = conftest.wait_for("live numbers in the probe's status", live, timeout=60)
    step("live numbers:", start)
    print(c.kubectl("get", "fprobe", "-n", "demo", "payments").stdout)
    print(function_table(status) + "\n")
    print_slowest_call(c)
    pod = node.ready_agent_pod()["metadata"]["name"]
    try:
        slow = conftest.wait_for("a slow call in the agent's log", lambda: [
            line for line in c.kubectl("logs", "-n", conftest.AGENT_NS, pod).stdout.splitlines()
            if '"event":"slow_call"' in line], timeout=30)
        print("A slow call, as the agent logged it:\n" + slow[-1] + "\n")
    except AssertionError:
        print("(no call over the probe's slowThreshold was logged yet)\n")
    holder = c.holder_pid()
    kubectl = os.path.join(c.bindir, "kubectl")
    print(f"""The cluster stays up. Its API server lives in the cluster's own network
namespace; reach it with:

  python3 tests/cluster/cluster.py kubectl get fprobe -A
  python3 tests/cluster/cluster.py kubectl get fprobe -n demo payments -o yaml
  python3 tests/cluster/cluster.py kubectl logs -n retwatch daemonset/retwatch-agent

or, with your own tools, inside that namespace:

  export KUBECONFIG={c.admin_kubeconfig}
  nsenter --net=/proc/{holder}/ns/net {kubectl} get pods -A

Stop it with: make demo-down""")


def main(argv):
    if argv == ["down"]:
        clusterlib.Cluster(None).down()
        return 0
    if argv == ["up"]:
        try:
            up()
        except (subprocess.CalledProcessError, clusterlib.ClusterError, AssertionError,
                OSError) as e:
            print(f"""
make demo failed: {e}
The cluster is stopped; its daemons' logs are in {clusterlib.LAST_LOGS},
the builds' output in {BUILD_LOG}.
The same engine runs without a cluster: make demo-cli""", file=sys.stderr)
            return 1
        return 0
    print("usage: demo.py up | down", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
