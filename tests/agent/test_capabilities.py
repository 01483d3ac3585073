"""The DaemonSet grants the agent a few capabilities instead of privileged:
every other test runs the agent with exactly those (agentproc drops the
rest with capsh). Here: each of them is needed, and the kernel's older
attach path needs one more, which the chart adds when told."""

import subprocess

import pytest

from agentproc import daemonset_capabilities, wait_for
from conftest import AGENT
from test_agent import attached_log, spec


def run_self_check(caps, *args):
    from agentproc import capsh_argv
    return subprocess.run(capsh_argv(caps, [AGENT, "--self-check", *args]),
                          capture_output=True, text=True, timeout=60)


def test_the_daemonset_grants_no_more_than_the_agent_uses():
    caps = daemonset_capabilities()
    assert "cap_sys_admin" not in caps
    ok = run_self_check(caps)
    assert ok.returncode == 0 and "self-check: ok\n" in ok.stdout, ok.stdout + ok.stderr


@pytest.mark.parametrize("cap", daemonset_capabilities())
def test_each_capability_is_needed(cluster, make_pod, cap):
    """Without cap the agent cannot trace a pod: it stops at start (and says
    why), or the probe's status says what failed."""
    fewer = [c for c in daemonset_capabilities() if c != cap]
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    agent = cluster.agent("node-a", caps=fewer)
    try:
        agent.start()
    except AssertionError:
        # the BPF programs could not even load: the agent said so and exited 1
        assert agent.proc.returncode == 1, agent.tail()
        assert agent.find(msg_has="Operation not permitted", level="error"), agent.tail()
        return
    with agent:
        cluster.apply_probe(ns, "caps", spec())

        def failed():
            e = cluster.node_entry(ns, "caps", "node-a")
            return e and not e["attached"] and e["errors"] and e
        entry = wait_for(f"the attach to fail without {cap}", failed, timeout=6)
        assert any("Permission denied" in m for m in entry["errors"]), entry["errors"]
        assert not agent.find(msg_has=f"attached to process {pod.containers['app'].pid}:")


def test_perf_event_uprobes_need_sys_admin(cluster, make_pod):
    """Kernels before 6.6 have no uprobe_multi links: perf-event uprobes
    need CAP_SYS_ADMIN, which the chart's perfEventUprobes value adds
    (test_install checks the rendering)."""
    caps = daemonset_capabilities()
    without = run_self_check(caps, "--attach", "perf_event")
    assert without.returncode == 1 and "Permission denied" in without.stdout, without.stdout
    with_admin = run_self_check(caps + ["cap_sys_admin"], "--attach", "perf_event")
    assert with_admin.returncode == 0, with_admin.stdout + with_admin.stderr

    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a", extra=["--attach", "perf_event"],
                       caps=caps + ["cap_sys_admin"]) as agent:
        cluster.apply_probe(ns, "perf", spec())
        attached_log(agent, pod.containers["app"].pid, timeout=5)
