"""The agent's /metrics, /healthz and /readyz: checked by promtool, scraped
by a real Prometheus server on loopback, and compared with the probe's
status; the series limit and the probes-per-node limit."""

import base64
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from agentproc import wait_for
from test_agent import FUNCS, attached_log, fns, rfc3339, spec, stats

HIST = "retwatch_function_duration_seconds"


def samples(text, name):
    """{labels-dict-as-sorted-tuple: value} of the samples of name."""
    out = {}
    for line in text.splitlines():
        m = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line)
        if not m or m.group(1) != name:
            continue
        labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or "")))
        out[labels] = float(m.group(3))
    return out


def value(text, name, **labels):
    """The value of the one sample of name whose labels include labels."""
    hits = [v for k, v in samples(text, name).items()
            if all((n, str(want)) in k for n, want in labels.items())]
    assert len(hits) == 1, f"{name}{labels}: {len(hits)} samples"
    return hits[0]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def paused_counts(cluster, ns, name, node, container):
    """Pauses podapp and returns the node entry of a report written after
    the pause: every call is in it, and no more come."""
    paused = time.time()
    os.kill(container.pid, signal.SIGUSR2)

    def after():
        e = cluster.node_entry(ns, name, node)
        return e and rfc3339(e["lastUpdate"]) > paused + 0.2 and e
    return wait_for("a report after the pause", after, timeout=6)


def test_metrics_match_the_status_and_pass_promtool(cluster, make_pod, tmp_path):
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    c = pod.containers["app"]
    with cluster.agent("node-a") as agent:
        # alive once its main loop turns, ready once that loop has both lists
        # (which the watch threads log first)
        wait_for("/healthz", lambda: agent.get("/healthz") == (200, "ok\n"), timeout=2)
        wait_for("/readyz", lambda: agent.get("/readyz") == (200, "ok\n"), timeout=2)
        cluster.apply_probe(ns, "m", spec())
        attached_log(agent, c.pid, timeout=5)
        wait_for("calls", lambda: (cluster.node_entry(ns, "m", "node-a") or {}).get("functions"),
                 timeout=6)
        entry = paused_counts(cluster, ns, "m", "node-a", c)
        code, text = agent.get("/metrics")
        assert code == 200
        labels = {"namespace": ns, "probe": "m", "pod": "web-1", "container": "app"}
        for name, f in fns(entry).items():
            assert f["calls"] > 0
            count = value(text, HIST + "_count", function=name, **labels)
            assert count == f["calls"], (name, count, f["calls"])
            assert value(text, "retwatch_function_calls_total", function=name, **labels) == count
            assert value(text, HIST + "_bucket", function=name, le="+Inf", **labels) == count
            assert value(text, HIST + "_sum", function=name, **labels) == \
                pytest.approx(f["sumNs"] / 1e9, abs=1e-9)
            # every call counted below the bucket holding the slowest one
            assert value(text, HIST + "_bucket", function=name, le="68.719476736", **labels) \
                == count
            assert value(text, "retwatch_function_return_sites", namespace=ns, probe="m",
                         function=name) == f["returnSites"] >= 1
        build = samples(text, "retwatch_build_info")
        assert [dict(k)["version"] for k in build] == [agent_version()]
        every = cluster.kubectl("get", "fprobe", "-A", "-o", "name").stdout.split()
        assert value(text, "retwatch_probes") == len(every)
        assert value(text, "retwatch_traced_processes") == 1
        assert value(text, "retwatch_errors_total", type="attach") == 0
        assert value(text, "retwatch_lost_events_total") == 0
        assert value(text, "retwatch_metrics_series") == len(FUNCS)
        assert value(text, "retwatch_metrics_series_dropped") == 0

        # the only agent holds the Lease and writes the summary from the report
        wait_for("the summary", lambda: cluster.status(ns, "m").get("summary", {}).get("calls"),
                 timeout=30)
        text = agent.get("/metrics")[1]
        assert value(text, "retwatch_lease_holder") == 1
        assert value(text, "retwatch_summaries_written_total") >= 1
        assert value(text, "retwatch_summaries_total") >= value(text, "retwatch_summaries_written_total")
        assert value(text, "retwatch_reports_read_total") >= 1
        assert value(text, "retwatch_report_pages_listed_total") >= 1
        assert value(text, "retwatch_summaries_failed_total") == 0

        lint = subprocess.run(["promtool", "check", "metrics"], input=text,
                              capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout + lint.stderr


def agent_version():
    from conftest import AGENT
    out = subprocess.run([AGENT, "--version"], capture_output=True, text=True, check=True)
    return out.stdout.split()[1]


class Prometheus:
    """A Prometheus server (Debian's package) scraping targets every second."""

    def __init__(self, workdir, targets):
        self.port = free_port()
        self.dir = workdir
        os.makedirs(workdir, exist_ok=True)
        config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                  "scrape_configs": [{"job_name": "retwatch-agent",
                                      "static_configs": [{"targets": targets}]}]}
        self.config = os.path.join(workdir, "prometheus.yml")
        with open(self.config, "w") as f:
            json.dump(config, f)  # YAML is a superset of JSON
        self.log = open(os.path.join(workdir, "prometheus.log"), "wb")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={self.config}",
             f"--storage.tsdb.path={os.path.join(workdir, 'data')}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        wait_for("Prometheus to be ready", self._ready, timeout=30)

    def _ready(self):
        assert self.proc.poll() is None, self.tail()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def query(self, promql):
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": promql}))
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def tail(self):
        with open(os.path.join(self.dir, "prometheus.log"), "rb") as f:
            return f.read().decode(errors="replace")[-3000:]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def test_prometheus_scrapes_the_histogram(cluster, make_pod, tmp_path):
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    c = pod.containers["app"]
    with cluster.agent("node-a") as agent:
        port = int(agent.metrics_url().split(":")[2].split("/")[0])
        prom = Prometheus(str(tmp_path / "prometheus"), [f"127.0.0.1:{port}"])
        try:
            cluster.apply_probe(ns, "scraped", spec())
            attached_log(agent, c.pid, timeout=5)
            wait_for("calls", lambda: (cluster.node_entry(ns, "scraped", "node-a") or {})
                     .get("functions"), timeout=6)
            entry = paused_counts(cluster, ns, "scraped", "node-a", c)
            want = fns(entry)["main.handleRequest"]["calls"]
            sel = (f'{HIST}_count{{namespace="{ns}",probe="scraped",pod="web-1",'
                   f'container="app",function="main.handleRequest"}}')

            def scraped():
                r = prom.query(sel)
                return r and float(r[0]["value"][1]) == want and r
            wait_for(f"Prometheus to hold {want} calls", scraped, timeout=15, interval=0.5)
            # the buckets, as PromQL sees them, end at the same count
            buckets = prom.query(f'{HIST}_bucket{{namespace="{ns}",probe="scraped",'
                                 f'function="main.handleRequest"}}')
            les = {b["metric"]["le"]: float(b["value"][1]) for b in buckets}
            assert les["+Inf"] == want and len(les) == 28
            counts = [les[k] for k in sorted(les, key=lambda s: float(s))]
            assert counts == sorted(counts), "buckets must be cumulative"
            up = prom.query('up{job="retwatch-agent"}')
            assert up and up[0]["value"][1] == "1"
        finally:
            prom.stop()


def test_series_limit_is_counted(cluster, make_pod):
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a", extra=["--metrics-max-series", "1"]) as agent:
        cluster.apply_probe(ns, "many", spec())
        attached_log(agent, pod.containers["app"].pid, timeout=5)
        code, text = agent.get("/metrics")
        assert code == 200
        assert value(text, "retwatch_metrics_series") == 1
        assert value(text, "retwatch_metrics_series_dropped") == len(FUNCS) - 1
        assert len(samples(text, "retwatch_function_calls_total")) == 1
        assert agent.find(msg_has="raise --metrics-max-series")


def test_probes_over_the_node_limit_wait(cluster, make_pod):
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    pid = pod.containers["app"].pid
    with cluster.agent("node-a", extra=["--max-probes", "1"]) as agent:
        cluster.apply_probe(ns, "first", spec())
        attached_log(agent, pid, timeout=5)
        time.sleep(1.1)  # creation times are in whole seconds
        cluster.apply_probe(ns, "second", spec(functions=["main.lookupUser"]))

        def waiting():
            e = cluster.node_entry(ns, "second", "node-a")
            return e and not e["attached"] and any("--max-probes" in m for m in e["errors"]) and e
        try:
            wait_for("the second probe to wait", waiting, timeout=6)
        except AssertionError as e:
            raise AssertionError(f"{e}\nsecond: {cluster.node_entry(ns, 'second', 'node-a')}\n"
                                 f"first: {cluster.node_entry(ns, 'first', 'node-a')}\n"
                                 f"{agent.tail()}") from None
        code, text = agent.get("/metrics")
        assert value(text, "retwatch_probes_limited") == 1
        assert cluster.node_entry(ns, "first", "node-a")["attached"] is True

        cluster.kubectl("delete", "fprobe", "first", "-n", ns)
        wait_for("the second probe to attach",
                 lambda: (cluster.node_entry(ns, "second", "node-a") or {}).get("attached"),
                 timeout=6)


# 64 functions of the Go runtime that podapp calls seldom or never, each with
# RETs: a traced process holds an entry link and a return link for each
RUNTIME_FUNCS = ["runtime.print*", "runtime.debug*", "runtime.check*", "runtime.mProf*",
                 "runtime.schedinit", "runtime.schedtrace"]
CALM_ARGS = ("/app/podapp", "-workers", "1", "-gap", "50ms")


def timed_get(agent, path):
    """(status or the error, body, seconds) of a GET of the agent's endpoint."""
    start = time.monotonic()
    try:
        code, body = agent.get(path)
    except OSError as e:
        code, body = repr(e), ""
    return code, body, time.monotonic() - start


def soft_nofile(pid):
    with open(f"/proc/{pid}/limits") as f:
        return int(re.search(r"^Max open files\s+(\d+)", f.read(), re.M).group(1))


def test_endpoint_answers_with_more_than_1024_descriptors_open(cluster, make_pod):
    """Issue 24: an agent probing many pods holds a BPF link per traced
    function and process for its entry, another for its returns, and one for
    runtime.morestack: 9 pods x 64 functions, 1,161 links. The sockets it
    accepts are then numbered past FD_SETSIZE, which select() cannot wait
    on; /healthz, /readyz and /metrics still answer, and the metrics and the
    stats line say how many descriptors it holds and may hold."""
    ns, neighbour = cluster.namespace(), cluster.namespace()
    # the image runs where no probe looks too: the traced processes keep
    # links of their own rather than one per file shared by every process
    idle = make_pod(neighbour, "many-idle", {"app": "many"}, "node-a",
                    containers={"app": CALM_ARGS})
    pods = [make_pod(ns, f"many-{i}", {"app": "many"}, "node-a", containers={"app": CALM_ARGS})
            for i in range(9)]
    with cluster.agent("node-a") as agent:
        limit = wait_for("the open files limit in the log",
                         lambda: agent.find(msg_has="open files limit"), timeout=5)[0]
        assert limit["open_files_limit"] == soft_nofile(agent.pid) > 1024, limit
        cluster.apply_probe(ns, "many", spec(selector={"matchLabels": {"app": "many"}},
                                             functions=RUNTIME_FUNCS, maxOverhead="0"))
        for p in pods:
            attached_log(agent, p.containers["app"].pid, timeout=20)
        held = wait_for("over 1,024 links held", lambda: (n := len(agent.links())) > 1024 and n,
                        timeout=10)
        assert not agent.find(msg_has=f"attached to process {idle.containers['app'].pid}:")
        fds = len(os.listdir(f"/proc/{agent.pid}/fd"))
        assert fds > held

        # ready once what it found at its start is attached: an earlier
        # test's probe may still be reading a large binary (ASan, a loaded
        # machine); the answers are timed once it is
        said = []
        try:
            wait_for("/readyz", lambda: said.append(agent.get("/readyz")) or said[-1][0] == 200,
                     timeout=60)
        except AssertionError as err:
            raise AssertionError(f"{err}: {said[-1]}\n{agent.tail()}") from None
        took = {}
        for path in ("/healthz", "/readyz", "/metrics"):
            code, text, took[path] = timed_get(agent, path)
            assert code == 200, (path, code, text, agent.find(msg_has="ready"), agent.tail())
            assert took[path] < 1, (path, took[path])
        assert value(text, "retwatch_bpf_links") == held
        assert fds - 64 < value(text, "retwatch_open_files") < fds + 64
        assert value(text, "retwatch_open_files_limit") == soft_nofile(agent.pid)
        line = stats(agent)
        assert line["bpf_links"] == held
        assert line["open_files"] > held
        assert line["open_files_limit"] == soft_nofile(agent.pid)
        # the kernel programs' counters, those not 0, by name
        assert isinstance(line.get("kernel"), dict) and all(
            isinstance(n, int) and n > 0 for n in line["kernel"].values()), line
        print(f"links {held}, descriptors {fds}, answered in "
              + ", ".join(f"{p} {t * 1000:.0f} ms" for p, t in took.items()))


# ---- issue 25: the health port, /metrics behind a token, the chart's policy ----

HOLD_S = 60
TRICKLE_S = 5  # under the metrics port's 10 s idle timeout


def health_port(agent):
    (ev,) = wait_for("the health port in the log",
                     lambda: agent.find(msg_has="on health port"), timeout=10)
    return int(ev["msg"].rsplit(" ", 1)[1])


def metrics_port(agent):
    return int(agent.metrics_url().split(":")[2].split("/")[0])


def http_get(port, path, token=None, timeout=5):
    """(status or the error's name, body, seconds) of a GET on 127.0.0.1:port."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    start = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            code, body = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        code, body = e.code, e.read().decode()
    except OSError as e:
        code, body = type(e).__name__, str(e)
    return code, body, time.monotonic() - start


def hold(port, source):
    """A connection to port from address source that has begun a request
    and sends nothing more (until trickle())."""
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(2)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: agent\r\n")
    return s


def trickle(socks, port):
    """One more header line on each held connection, so that none times out;
    one the agent closed is opened again (as a client bent on it would)."""
    reopened = 0
    for i, s in enumerate(socks):
        try:
            s.sendall(b"X-Idle: 1\r\n")
            continue
        except OSError:
            pass
        s.close()
        try:
            socks[i] = hold(port, s_source(i))
        except OSError:
            socks[i] = socket.socket()
        reopened += 1
    return reopened


def s_source(i):
    # 8 connections from each of 127.0.0.2 .. 127.0.0.5: the port's per-address
    # limit is 8, its limit 32
    return f"127.0.0.{2 + i // 8}"


def test_health_port_answers_while_the_metrics_port_is_held(cluster):
    """Issue 25: 32 idle connections to the metrics port (from four
    addresses, 8 each: its per-address limit) fill it for 60 s; the health
    port's /healthz answers within 1 s every time, the agent keeps running,
    and the refused connections do not each write a log line."""
    with cluster.agent("node-a", extra=["--health-address", "127.0.0.1:0"]) as agent:
        hport, mport = health_port(agent), metrics_port(agent)
        assert hport != mport
        assert http_get(hport, "/healthz")[:2] == (200, "ok\n")
        wait_for("/readyz on the health port",
                 lambda: http_get(hport, "/readyz")[:2] == (200, "ok\n"), timeout=5)
        assert http_get(hport, "/metrics")[0] == 404  # not there: its own port
        socks = [hold(mport, s_source(i)) for i in range(32)]
        try:
            time.sleep(0.5)
            # the metrics port is full: another client gets nothing there
            code, _, _ = http_get(mport, "/healthz", timeout=2)
            assert code != 200, "the metrics port should be held by the 32 connections"
            refused = 1
            answers, reopened = [], 0
            start = last_trickle = time.monotonic()
            while time.monotonic() - start < HOLD_S:
                if time.monotonic() - last_trickle >= TRICKLE_S:
                    reopened += trickle(socks, mport)
                    last_trickle = time.monotonic()
                # more refused connections, which the agent logs
                for _ in range(5):
                    refused += http_get(mport, "/healthz", timeout=1)[0] != 200
                answers.append(http_get(hport, "/healthz", timeout=5))
                time.sleep(0.5)
            bad = [(c, b) for c, b, _ in answers if c != 200]
            slowest = max(t for _, _, t in answers)
            print(f"{len(answers)} /healthz answers on the health port over {HOLD_S} s with "
                  f"32 connections held on the metrics port: slowest {slowest * 1000:.1f} ms; "
                  f"{refused} connections refused on the metrics port, {reopened} reopened")
            assert not bad, bad[:3]
            assert slowest < 1, slowest
            assert agent.proc.poll() is None
            # one line per 10 s at most, with a count of those left out
            lines = agent.find(msg_has="metrics endpoint:")
            assert refused >= 100 and len(lines) <= HOLD_S / 10 + 3, (refused, len(lines))
            wait_for("a count of the messages left out",
                     lambda: agent.find(msg_has="more messages left out"), timeout=12)
        finally:
            for s in socks:
                s.close()
        # the metrics port serves again once they are gone
        wait_for("/metrics again", lambda: http_get(mport, "/metrics")[0] == 200, timeout=15)


def service_account_token(cluster, ns, name):
    cluster.kubectl("create", "serviceaccount", name, "-n", ns, check=False)
    return cluster.kubectl("create", "token", name, "-n", ns).stdout.strip()


def test_metrics_needs_a_token_whose_user_may_get_it(cluster):
    """Issue 25: with --metrics-auth kube (the chart's default) /metrics
    refuses a request without a token (401) or with one the API server does
    not accept (401), and a ServiceAccount not bound to the chart's
    metrics-reader ClusterRole (403); bound, its token reads the metrics.
    /healthz needs no token."""
    ns = cluster.namespace()
    with cluster.agent("node-a", extra=["--metrics-auth", "kube"]) as agent:
        port = metrics_port(agent)
        code, body, _ = http_get(port, "/metrics")
        assert code == 401 and "Bearer" in body, (code, body)
        assert http_get(port, "/metrics", token="not-a-token")[0] == 401
        assert http_get(port, "/metrics", token="x" * 9000)[0] == 401
        assert http_get(port, "/healthz")[:2] == (200, "ok\n")

        token = service_account_token(cluster, ns, "prometheus")
        code, body, _ = http_get(port, "/metrics", token=token)
        assert code == 403 and "may not get /metrics" in body, (code, body)

        cluster.kubectl("create", "clusterrolebinding", f"{ns}-prometheus-metrics",
                        "--clusterrole=retwatch-agent-metrics-reader",
                        f"--serviceaccount={ns}:prometheus")
        # a refusal is kept 10 s: a new token of the same account is asked afresh
        token = service_account_token(cluster, ns, "prometheus")
        code, body, _ = http_get(port, "/metrics", token=token)
        assert code == 200 and "retwatch_build_info" in body, (code, body[:300])
        # the answer is kept: more scrapes send no review
        reviews = value(body, "retwatch_metrics_auth_reviews_total")
        assert reviews >= 2  # a TokenReview and a SubjectAccessReview at least
        times = [http_get(port, "/metrics", token=token) for _ in range(3)]
        assert all(c == 200 for c, _, _ in times)
        assert value(times[-1][1], "retwatch_metrics_auth_reviews_total") == reviews
        print("scrapes with a cached token: " +
              ", ".join(f"{t * 1000:.1f} ms" for _, _, t in times))
        assert agent.proc.poll() is None


def make_certificates(d, name):
    """(ca, cert, key, other_key): a CA, a server certificate it signs for
    the DNS name name and its key, and a key of no certificate, made by
    openssl in d."""
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=test metrics CA")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "tls.key", "-out", "tls.csr", "-subj", f"/CN={name}")
    (d / "ext").write_text(f"subjectAltName=DNS:{name}\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext", "-out", "tls.crt")
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-out", "other.key")
    return (str(d / f) for f in ("ca.crt", "tls.crt", "tls.key", "other.key"))


def tls_get(port, path, token=None, cafile=None, name="retwatch-agent"):
    """(status, body) of a GET over TLS on 127.0.0.1:port, the certificate
    verified against cafile for the name name (unverified without cafile)."""
    ctx = ssl.create_default_context(cafile=cafile) if cafile else ssl._create_unverified_context()
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    with ctx.wrap_socket(raw, server_hostname=name) as s:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.sock = s
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        r = conn.getresponse()
        return r.status, r.read().decode()


def test_metrics_are_served_over_tls_only(cluster, tmp_path):
    """Issue 46: /metrics is served over TLS only, still behind the token
    review. By default with a certificate the agent makes at start: a plain
    HTTP request gets no answer, TLS without a token 401, with an allowed
    token the metrics. With --metrics-tls-cert/--metrics-tls-key, a scraper
    verifies the certificate against its CA for the name it was made for.
    A key that is not the certificate's stops the agent with words."""
    ca, cert, key, other_key = make_certificates(tmp_path, "retwatch-agent.retwatch.svc")
    ns = cluster.namespace()
    token = service_account_token(cluster, ns, "prometheus")
    cluster.kubectl("create", "clusterrolebinding", f"{ns}-prometheus-metrics",
                    "--clusterrole=retwatch-agent-metrics-reader",
                    f"--serviceaccount={ns}:prometheus")
    kube = ["--metrics-auth", "kube"]
    with cluster.agent("node-a", extra=[*kube, "--metrics-tls", "self-signed"]) as agent:
        port = metrics_port(agent)
        code, body, _ = http_get(port, "/metrics", token=token)
        assert not isinstance(code, int), (code, body[:200])
        assert tls_get(port, "/metrics")[0] == 401
        code, body = tls_get(port, "/metrics", token=token)
        assert code == 200 and "retwatch_build_info" in body, (code, body[:300])
        with pytest.raises(ssl.SSLCertVerificationError):
            tls_get(port, "/metrics", token=token, cafile=ca)
        (ev,) = agent.find(msg_has="/metrics over TLS only")
        assert "self-signed certificate made at start (CN retwatch-agent, valid until" \
            in ev["msg"], ev
    with cluster.agent("node-a", extra=[*kube, "--metrics-tls-cert", cert,
                                        "--metrics-tls-key", key]) as agent:
        port = metrics_port(agent)
        code, body = tls_get(port, "/metrics", token=token, cafile=ca,
                             name="retwatch-agent.retwatch.svc")
        assert code == 200 and "retwatch_build_info" in body, (code, body[:300])
        with pytest.raises(ssl.SSLCertVerificationError):
            tls_get(port, "/metrics", token=token, cafile=ca, name="retwatch-agent.other.svc")
        assert not isinstance(http_get(port, "/metrics", token=token)[0], int)
    agent = cluster.agent("node-a", extra=[*kube, "--metrics-tls-cert", cert,
                                           "--metrics-tls-key", other_key])
    with pytest.raises(AssertionError, match="not a PEM certificate and its unencrypted"):
        agent.start()
    assert agent.proc.wait(5) == 1
    cluster.kubectl("delete", "clusterrolebinding", f"{ns}-prometheus-metrics")


# ---- the chart: the health port, the NetworkPolicy, the reviews' RBAC ----

from test_install import CHART as CHART_DIR, agent_container, helm, render  # noqa: E402,F401


def policy(objects):
    return objects["NetworkPolicy", "retwatch-agent"]["spec"]


def test_chart_probes_use_the_health_port(helm):
    objects = render(helm)
    _, c = agent_container(objects)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"metrics": 9431, "health": 9432}
    assert "--health-address=:9432" in c["args"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}

    _, c = agent_container(render(helm, "--set", "health.port=9500"))
    assert "--health-address=:9500" in c["args"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]}["health"] == 9500
    res = helm("template", "retwatch", CHART_DIR, "--set", "health.port=0", check=False)
    assert res.returncode != 0 and "at '/health/port': minimum" in res.stderr


def test_chart_network_policy_admits_only_the_scrapers(helm):
    objects = render(helm)
    ds = objects["DaemonSet", "retwatch-agent"]["spec"]
    assert not ds["template"]["spec"].get("hostNetwork"), \
        "a NetworkPolicy does not apply to a hostNetwork pod"
    spec = policy(objects)
    assert spec["podSelector"] == ds["selector"]
    assert spec["policyTypes"] == ["Ingress"]
    # the metrics port from the default scrapers; the health port from no
    # pod (the node, which NetworkPolicies always admit, probes it)
    assert spec["ingress"] == [{
        "ports": [{"port": "metrics", "protocol": "TCP"}],
        "from": [{"namespaceSelector": {"matchLabels": {
                      "kubernetes.io/metadata.name": "monitoring"}},
                  "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]}]

    spec = policy(render(
        helm, "--set", "networkPolicy.scrapers.namespaceSelector.matchLabels.team=obs",
        "--set", "networkPolicy.scrapers.podSelector=null",
        "--set", "networkPolicy.healthFrom[0].ipBlock.cidr=10.0.0.0/16"))
    metrics, health = spec["ingress"]
    assert metrics["from"] == [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "monitoring", "team": "obs"}}, "podSelector": {}}]
    assert health == {"ports": [{"port": "health", "protocol": "TCP"}],
                      "from": [{"ipBlock": {"cidr": "10.0.0.0/16"}}]}

    # no metrics port: nothing is admitted but the node
    assert policy(render(helm, "--set", "metrics.enabled=false"))["ingress"] == []
    assert not any(kind == "NetworkPolicy"
                   for kind, _ in render(helm, "--set", "networkPolicy.enabled=false"))


def test_chart_grants_the_reviews_and_a_metrics_reader_role(helm):
    objects = render(helm)
    _, c = agent_container(objects)
    assert "--metrics-auth=kube" in c["args"]
    rules = objects["ClusterRole", "retwatch-agent"]["rules"]
    assert {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
            "verbs": ["create"]} in rules
    assert {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
            "verbs": ["create"]} in rules
    assert objects["ClusterRole", "retwatch-agent-metrics-reader"]["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]

    objects = render(helm, "--set", "metrics.auth=false")
    _, c = agent_container(objects)
    assert "--metrics-auth=none" in c["args"]
    assert ("ClusterRole", "retwatch-agent-metrics-reader") not in objects
    assert not [r for r in objects["ClusterRole", "retwatch-agent"]["rules"]
                if "tokenreviews" in r["resources"]]


def test_chart_serves_metrics_over_tls_with_whose_certificate(helm, tmp_path):
    """Issue 46: by default the chart makes a CA and a certificate for
    retwatch-agent.retwatch.svc that the CA signs, and the agent serves
    /metrics with it; `agent` leaves each agent its self-signed one,
    `secret` mounts the user's, and tls.enabled=false serves plain HTTP."""
    objects = render(helm)
    secret = objects["Secret", "retwatch-agent-metrics-tls"]
    assert secret["type"] == "kubernetes.io/tls"
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (tmp_path / name).write_bytes(base64.b64decode(secret["data"][name]))
    res = subprocess.run(["openssl", "verify", "-CAfile", "ca.crt", "-verify_hostname",
                          "retwatch-agent.retwatch.svc", "-purpose", "sslserver", "tls.crt"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0 and "tls.crt: OK" in res.stdout, res.stdout + res.stderr
    pub = [subprocess.run(["openssl", *args], cwd=tmp_path, capture_output=True, text=True,
                          check=True).stdout
           for args in (["x509", "-in", "tls.crt", "-noout", "-pubkey"],
                        ["pkey", "-in", "tls.key", "-pubout"])]
    assert pub[0] == pub[1], "the key is not the certificate's"
    pod, c = agent_container(objects)
    assert "--metrics-tls-key=/etc/retwatch/metrics-tls/tls.key" in c["args"]

    pod, c = agent_container(render(helm, "--set", "metrics.tls.certificate=agent"))
    assert "--metrics-tls=self-signed" in c["args"] and "volumes" not in pod
    assert ("Secret", "retwatch-agent-metrics-tls") not in render(
        helm, "--set", "metrics.tls.certificate=agent")

    objects = render(helm, "--set", "metrics.tls.certificate=secret",
                     "--set", "metrics.tls.secretName=mine")
    pod, c = agent_container(objects)
    assert pod["volumes"][0]["secret"]["secretName"] == "mine"
    assert "--metrics-tls-cert=/etc/retwatch/metrics-tls/tls.crt" in c["args"]
    assert ("Secret", "retwatch-agent-metrics-tls") not in objects
    res = helm("template", "retwatch", CHART_DIR, "--set", "metrics.tls.certificate=secret",
               check=False)
    assert res.returncode != 0 and "metrics.tls.secretName: name the" in res.stderr, res.stderr
    res = helm("template", "retwatch", CHART_DIR, "--set", "metrics.tls.certificate=mine",
               check=False)
    assert res.returncode != 0 and "at '/metrics/tls/certificate'" in res.stderr, res.stderr

    objects = render(helm, "--set", "metrics.tls.enabled=false")
    pod, c = agent_container(objects)
    assert "--metrics-tls=none" in c["args"] and "volumes" not in pod
    annotations = objects["DaemonSet", "retwatch-agent"]["spec"]["template"]["metadata"][
        "annotations"]
    assert annotations["prometheus.io/scheme"] == "http"
