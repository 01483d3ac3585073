"""On a kernel older than retwatch runs on (the matrix boots Debian 11's
5.10, as Amazon Linux 2 and older nodes run): refused in words. The verifier
alone says "Invalid argument"; retwatch names each missing feature, the
release that brought it, this kernel and the oldest it runs on, and exits.
Skipped where the kernel has them (the BPF programs then load)."""

import os
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import harness

if harness.kernel_version() >= (5, 15):
    pytest.skip("this kernel has what retwatch needs", allow_module_level=True)


def test_trace_names_what_the_kernel_lacks_and_exits():
    run = subprocess.run([harness.RETWATCH, "trace", "--pid", "1", "--duration", "1", "main"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1, run
    err = run.stderr
    assert f"this kernel ({os.uname().release}) lacks" in err, err
    assert "bpf_get_attach_cookie (Linux 5.15)" in err, err
    assert "bpf_loop" not in err, err  # the deep purge's loop is bounded
    assert "retwatch runs on Linux 5.15 or later" in err, err
    assert "verifier" not in err, err


def test_inspect_needs_no_bpf_and_works():
    """Reading a binary needs nothing of the kernel's BPF."""
    run = subprocess.run([harness.RETWATCH, "inspect", harness.RETWATCH, "main"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "main" in run.stdout, run


def test_the_agent_stays_up_and_says_why_it_traces_nothing(tmp_path):
    """No crash loop: the agent serves /healthz and says in its log what the
    kernel lacks (each process its probes select then fails with that in
    the probe's report). Its API server is one nobody answers at: the
    agent keeps asking, as it does whenever the connection drops."""
    agent = os.path.join(os.path.dirname(harness.RETWATCH), "retwatch-agent")
    ca = tmp_path / "ca.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(tmp_path / "ca.key"),
                    "-out", str(ca), "-subj", "/CN=nobody", "-days", "1"],
                   check=True, capture_output=True)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: 'https://127.0.0.1:9',"
        f" certificate-authority: '{ca}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    port = harness.free_port()
    log = open(tmp_path / "log", "w+")
    proc = subprocess.Popen([agent, "--kubeconfig", str(kubeconfig), "--node-name", "old-node",
                             "--metrics-address", "none", "--health-address",
                             f"127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        status = None
        deadline = time.monotonic() + 60
        while status != 200 and time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    status = r.status
            except (OSError, urllib.error.HTTPError):
                time.sleep(0.5)
        time.sleep(3)  # and it is still up a while later
        alive = proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    log.seek(0)
    text = log.read()
    assert status == 200 and alive, text
    assert f"this kernel ({os.uname().release}) lacks" in text, text
    assert "this node traces nothing" in text, text
