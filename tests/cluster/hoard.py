"""The image of a tenant that asks the agent for all it can hold (issue 45):
its programs fill the bounds of the agent's memory, not the node's CPU.

/app/hoard: a static C program of HOARD_FUNCS functions whose names are as
long as a frame of a kept slow call may hold, each called about 50 times a
second at the bottom of a chain of CHAIN_DEPTH callers with names as long:
every slowest call it gives its probe keeps SLOWEST_MAX_FRAMES frames of
about 500 bytes, so that a probe on keep_* with spec.slowCalls.keep 20 holds
more than a namespace's --max-kept-bytes-per-namespace.

/app/kubectl: the tests' Kubernetes build's kubectl, whose analysis holds
about 16 MiB (bench/analysis_mem.sh). A container that copies it into its own
writable layer, appends a byte and runs the copy (`kubectl proxy`, which
waits for connections) makes the agent read one more distinct file of that
size: a few such containers pass --analysis-max-bytes.

Standard library only; built by the test that uses it, not by build_images().
"""

import os
import shutil
import subprocess

import cluster as clusterlib

HOARD_IMAGE = "localhost/retwatch-hoard:cluster"
HOARD_FUNCS = 64
CHAIN_DEPTH = 15
# a frame reads "NAME+0x1a (/app/hoard)": within the 512 bytes a frame keeps
NAME_LEN = 480


def name(kind, i):
    head = f"{kind}_{i:02d}_"
    return head + "x" * (NAME_LEN - len(head))


def hoard_source():
    """The C program: keep_NN_xxx... called through chain_NN_xxx..."""
    keeps = [name("keep", i) for i in range(HOARD_FUNCS)]
    chain = [name("chain", i) for i in range(CHAIN_DEPTH)]
    out = ["#include <time.h>", "",
           "#define NOINLINE __attribute__((noinline, noclone))",
           "volatile unsigned long sink;", ""]
    for k in keeps:
        # a sleep of 0.3 ms: slow enough to be kept, rare enough to cost
        # its process far less than a share of a CPU
        out += [f"NOINLINE void {k}(void)", "{",
                "\tstruct timespec ts = { 0, 300000 };", "",
                "\tnanosleep(&ts, 0);", "\tsink++;", "}", ""]
    out += ["static void (*const keeps[])(void) = {"]
    out += [f"\t{k}," for k in keeps] + ["};", ""]
    # the innermost of the chain calls every keep_; each calls the next one
    # in and then writes sink, so that no call is a jump
    out += [f"NOINLINE void {chain[-1]}(void)", "{",
            "\tfor (unsigned int i = 0; i < sizeof(keeps) / sizeof(keeps[0]); i++)",
            "\t\tkeeps[i]();", "\tsink++;", "}", ""]
    for i in range(CHAIN_DEPTH - 2, -1, -1):
        out += [f"NOINLINE void {chain[i]}(void)", "{", f"\t{chain[i + 1]}();", "\tsink++;",
                "}", ""]
    out += ["int main(void)", "{", "\tfor (;;)", f"\t\t{chain[0]}();", "}", ""]
    return "\n".join(out)


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: none, user: {}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
"""


def build_hoard_image(workdir):
    """HOARD_IMAGE, from tests/agent/pods.py's busybox, the generated
    program and the cluster's kubectl."""
    root = os.path.join(workdir, "hoard-root")
    shutil.rmtree(root, ignore_errors=True)
    for d in ("bin", "app", "proc", "dev", "sys", "tmp"):
        os.makedirs(os.path.join(root, d))
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    shutil.copy2("/bin/busybox", os.path.join(root, "bin", "busybox"))
    os.symlink("busybox", os.path.join(root, "bin", "sh"))
    src = os.path.join(workdir, "hoard.c")
    with open(src, "w") as f:
        f.write(hoard_source())
    subprocess.run(["gcc", "-O1", "-g", "-static", "-fno-optimize-sibling-calls", "-Wall",
                    "-Wextra", "-Werror", "-o", os.path.join(root, "app", "hoard"), src],
                   check=True)
    kubectl = os.path.realpath(os.path.join(clusterlib.build_bindir(), "kubectl"))
    shutil.copy2(kubectl, os.path.join(root, "app", "kubectl"))
    with open(os.path.join(root, "app", "kubeconfig"), "w") as f:
        f.write(KUBECONFIG)
    clusterlib._image_from_dir(HOARD_IMAGE, root, ["/app/hoard"])
    return HOARD_IMAGE


# A container's command that runs its own copy of kubectl, one byte longer
# than the image's (so a file of its own) and waiting for connections.
def copy_command(n):
    return ["/bin/sh", "-c",
            "busybox cp /app/kubectl /tmp/kubectl && echo %d >> /tmp/kubectl && "
            "exec /tmp/kubectl --kubeconfig=/app/kubeconfig proxy --port=0" % n]
