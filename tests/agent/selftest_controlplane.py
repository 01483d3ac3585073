#!/usr/bin/env python3
"""Checks that controlplane.py gives a working Kubernetes control plane.

Builds the binaries (tests/k8s/build.sh, minutes when cold), starts etcd and
kube-apiserver in a temporary directory, and exercises what the agent's tests
rely on: the four users, RBAC, an apiserver restart that keeps the data, and
410 Gone for a watch from a compacted resourceVersion.
Usage: selftest_controlplane.py [--keep]   (--keep leaves the work directory)
"""

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from controlplane import AGENT_USER, ControlPlane, build_bindir  # noqa: E402


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def whoami(cp, user):
    info = json.loads(cp.kubectl("auth", "whoami", "-o", "json", user=user).stdout)
    return info["status"]["userInfo"]


def check_basics(cp):
    v = json.loads(cp.kubectl("version", "-o", "json").stdout)
    client, server = v["clientVersion"]["gitVersion"], v["serverVersion"]["gitVersion"]
    check(client == server and client.startswith("v1."), f"versions {client} / {server}")
    names = cp.kubectl("get", "namespaces", "-o", "name").stdout.split()
    check({"namespace/default", "namespace/kube-system"} <= set(names), f"namespaces: {names}")
    print(f"  kubectl {client}, kube-apiserver {server}; namespaces {' '.join(names)}")


def check_users(cp):
    for user, name, group in [("admin", "admin", "system:masters"),
                              ("admin-cert", "admin-cert", "system:masters"),
                              ("agent", AGENT_USER, "system:serviceaccounts:retwatch"),
                              ("agent-files", AGENT_USER, "system:serviceaccounts:retwatch")]:
        info = whoami(cp, user)
        check(info["username"] == name and group in info.get("groups", []),
              f"{user}: whoami says {info}")
    print("  admin, admin-cert, agent, agent-files authenticate as expected")


def check_agent_unprivileged(cp):
    for verb, resource in [("list", "pods"), ("get", "namespaces"), ("create", "pods")]:
        res = cp.kubectl("auth", "can-i", verb, resource, "-A", user="agent", check=False)
        check(res.stdout.strip() == "no", f"agent can {verb} {resource}: {res.stdout}")
    rules = cp.kubectl("auth", "can-i", "--list", user="agent").stdout
    print("  agent's rules without a binding:\n    " + rules.strip().replace("\n", "\n    "))


def watch_first_event(cp, rv):
    """The first event of a namespace watch from rv, or the HTTP error code."""
    path = f"/api/v1/namespaces?watch=1&resourceVersion={rv}&timeoutSeconds=5"
    try:
        with cp.urlopen(path, timeout=10) as r:
            return json.loads(r.readline())
    except urllib.error.HTTPError as e:
        return {"type": "HTTP", "code": e.code}


def is_gone(event):
    return event.get("code") == 410 or event.get("object", {}).get("code") == 410


def create_namespace(cp, name):
    """Create a namespace; return its resourceVersion."""
    ns = json.loads(cp.kubectl("create", "namespace", name, "-o", "json").stdout)
    return ns["metadata"]["resourceVersion"]


def check_restart(cp):
    old_rv = create_namespace(cp, "selftest")
    create_namespace(cp, "selftest-later")  # so that old_rv is not the newest
    t = time.monotonic()
    cp.restart_apiserver()
    elapsed = time.monotonic() - t
    cp.kubectl("get", "namespace", "selftest")
    # The new watch cache starts at the current revision: older ones are gone.
    first = watch_first_event(cp, old_rv)
    check(is_gone(first), f"watch from {old_rv} after restart: {first}")
    print(f"  apiserver restart: {elapsed:.1f} s; namespace kept; "
          f"watch from {old_rv}: {json.dumps(first)[:120]}")


def check_compaction(cp):
    old_rv = create_namespace(cp, "selftest")
    # A watch from rv reads etcd from rv + 1, which survives a compaction at
    # rv + 1: two newer writes put old_rv out of reach.
    create_namespace(cp, "selftest-later")
    create_namespace(cp, "selftest-latest")
    first = watch_first_event(cp, old_rv)
    check(first.get("type") == "ADDED", f"watch from {old_rv} before compaction: {first}")
    rev = cp.compact_etcd()
    check(rev > int(old_rv), f"compacted at {rev}, not after {old_rv}")
    first = watch_first_event(cp, old_rv)
    check(is_gone(first), f"watch from {old_rv} after compaction at {rev}: {first}")
    print(f"  compacted at {rev}; watch from {old_rv}: {json.dumps(first)[:120]}")


def run_steps(cp, steps):
    """Run steps in order, stopping at the first failure; return (passed, failed)."""
    for i, step in enumerate(steps):
        print(step.__name__)
        try:
            step(cp)
        except Exception as e:  # report the step, skip the ones that need it
            print(f"  FAILED: {e}")
            return i, 1
    return len(steps), 0


def start(workdir, bindir, watch_cache):
    t = time.monotonic()
    cp = ControlPlane(workdir, bindir, watch_cache=watch_cache).start()
    print(f"control plane (watch cache {'on' if watch_cache else 'off'}) up at {cp.url}"
          f" in {time.monotonic() - t:.1f} s")
    return cp


def main():
    keep = "--keep" in sys.argv[1:]
    t = time.monotonic()
    bindir = build_bindir()
    print(f"binaries: {bindir} ({time.monotonic() - t:.1f} s)")
    workdir = tempfile.mkdtemp(prefix="retwatch-cp-")
    passed = failed = 0
    finished = False
    try:
        with start(os.path.join(workdir, "cached"), bindir, watch_cache=True) as cp:
            p, f = run_steps(cp, [check_basics, check_users, check_agent_unprivileged,
                                  check_restart])
            passed, failed = passed + p, failed + f
            t = time.monotonic()
        print(f"stopped in {time.monotonic() - t:.1f} s")
        with start(os.path.join(workdir, "uncached"), bindir, watch_cache=False) as cp:
            p, f = run_steps(cp, [check_compaction])
            passed, failed = passed + p, failed + f
        finished = True
    finally:
        if keep or failed or not finished:
            print(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir)
    print(f"selftest_controlplane: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
