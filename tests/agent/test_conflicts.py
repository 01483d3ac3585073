"""The API server pushing back: 429 and 503 with Retry-After, 409
conflicts, a watch that stays open and silent. The agent reaches the test
control plane's real API server through apiproxy.ApiProxy, which answers
some requests itself where the real server cannot be made to on demand
(its own 429 comes from --max-requests-inflight or API Priority and
Fairness under a load no test can aim at one request; a server-side apply
sends no resourceVersion, and the server retries such a patch's conflicts
itself, so a resourceVersion 409 of an apply never reaches the agent in a
test) and makes the real server answer 409 where it can (a Lease written
meanwhile, a probe replaced under the agent's write)."""

import time

from agentproc import wait_for
from apiproxy import ApiProxy, Reply, status_body
from test_agent import spec

LEASE = "/apis/coordination.k8s.io/v1/namespaces/retwatch/leases/retwatch-summary"


def status_path(ns, name):
    return f"/apis/retwatch.io/v1alpha1/namespaces/{ns}/functionprobes/{name}/status"


def patches(proxy, ns, name):
    return proxy.requests("PATCH", status_path(ns, name))


def written(cluster, ns, name):
    """The probe's status as the summary writer wrote it (conditions)."""
    return cluster.status(ns, name).get("conditions")


def wait_written(cluster, ns, name, agent, proxy, timeout=30):
    try:
        return wait_for(f"the status of {name} written", lambda: written(cluster, ns, name),
                        timeout=timeout)
    except AssertionError as e:
        seen = [(round(r.at, 2), r.method, r.path[:120], r.action) for r in proxy.requests()]
        raise AssertionError(f"{e}\nthe proxy saw: {seen}\n"
                             f"the agent's log:\n{agent.tail()}") from None


def answer_first(ns, name, replies):
    """A rule answering the probe's first status writes with replies, in order."""
    left = list(replies)

    def rule(req):
        if req.method == "PATCH" and req.path.startswith(status_path(ns, name)) and left:
            return left.pop(0)
        return None
    return rule


def test_429_and_503_retry_after_are_honoured(cluster):
    ns = cluster.namespace()
    rule = answer_first(ns, "busy", [
        Reply(429, status_body(429, "TooManyRequests", "too many requests, please try again"),
              {"Retry-After": "3"}),
        Reply(503, status_body(503, "ServiceUnavailable", "the server is shutting down"),
              {"Retry-After": "2"})])
    with ApiProxy(cluster.cp, rule) as proxy:
        with cluster.agent("node-a", user=proxy.kubeconfig_user()) as agent:
            cluster.apply_probe(ns, "busy", spec())
            wait_written(cluster, ns, "busy", agent, proxy)
            sent = patches(proxy, ns, "busy")
            assert [r.action.split()[0] for r in sent[:3]] == ["429", "503", "forwarded"], sent
            after_429 = sent[1].at - sent[0].at
            after_503 = sent[2].at - sent[1].at
            print(f"retried {after_429:.2f} s after a 429 with Retry-After: 3, "
                  f"{after_503:.2f} s after a 503 with Retry-After: 2")
            assert after_429 >= 3 and after_503 >= 2, (after_429, after_503)
            assert after_429 < 5 and after_503 < 4, (after_429, after_503)
            assert agent.find(msg_has="answered 429 with Retry-After 3 s; retrying in 3 s")
            assert agent.find(msg_has="answered 503 with Retry-After 2 s; retrying in 2 s")


def test_429_without_retry_after_backs_off(cluster):
    ns = cluster.namespace()
    rule = answer_first(ns, "busy", [
        Reply(429, status_body(429, "TooManyRequests", "too many requests"))] * 2)
    with ApiProxy(cluster.cp, rule) as proxy:
        with cluster.agent("node-a", user=proxy.kubeconfig_user()) as agent:
            cluster.apply_probe(ns, "busy", spec())
            wait_written(cluster, ns, "busy", agent, proxy)
            sent = patches(proxy, ns, "busy")
            gaps = [b.at - a.at for a, b in zip(sent, sent[1:3])]
            # jittered in [ceiling / 2, ceiling], the ceiling 1 s at first
            assert gaps[0] >= 0.5 and gaps[1] >= 0.5, gaps
            assert agent.find(msg_has="answered 429; retrying in")


def test_lease_written_meanwhile_is_a_real_409_and_read_again(cluster):
    """The proxy writes the Lease (as another agent would) between the
    agent's read and its write: the real server answers 409."""
    ns = cluster.namespace()
    cluster.ensure_summary_lease()
    bumped = []

    def rule(req):
        if req.method == "PUT" and req.path == LEASE and not bumped:
            bumped.append(time.monotonic())
            cluster.kubectl("annotate", "lease", "-n", "retwatch", "retwatch-summary",
                            "--overwrite", f"retwatch.io/test-bump={time.time_ns()}")
        return None
    with ApiProxy(cluster.cp, rule) as proxy:
        with cluster.agent("node-a", user=proxy.kubeconfig_user()) as agent:
            wait_for("the Lease", lambda: agent.find(msg_has="holding Lease"), timeout=20)
            puts = proxy.requests("PUT", LEASE)
            assert puts[0].action == "forwarded 409", puts
            assert agent.find(msg_has="changed since it was read (409 Conflict)")
            cluster.apply_probe(ns, "led", spec())
            wait_for("the summary written", lambda: written(cluster, ns, "led"), timeout=20)


def test_conflicts_are_retried_unless_the_probe_was_replaced(cluster):
    """A resourceVersion 409 is sent again until it lands; a 409 whose Status
    says the uid precondition failed (the object was deleted and made again
    under its name) is for an object that is gone: not sent again. Both
    answered by the proxy, in the storage layer's words: the real server
    never says the second to a status apply (the status subresource keeps
    the stored metadata, and a PATCH carries no uid precondition, so the
    body's uid is ignored: measured against it, such a write lands on the
    new probe, and the agent's next write for the new probe replaces it)."""
    ns = cluster.namespace()
    conflict = Reply(409, status_body(
        409, "Conflict", 'Operation cannot be fulfilled on functionprobes.retwatch.io "c": '
        "the object has been modified; please apply your changes to the latest version "
        "and try again"))
    gone = Reply(409, status_body(
        409, "Conflict", 'Operation cannot be fulfilled on functionprobes.retwatch.io "u": '
        "Precondition failed: UID in precondition: 1111, UID in object meta: 2222"))
    on_c, on_u = answer_first(ns, "c", [conflict] * 2), answer_first(ns, "u", [gone])
    with ApiProxy(cluster.cp, lambda req: on_c(req) or on_u(req)) as proxy:
        with cluster.agent("node-a", user=proxy.kubeconfig_user()) as agent:
            cluster.apply_probe(ns, "u", spec())
            cluster.apply_probe(ns, "c", spec())
            wait_written(cluster, ns, "c", agent, proxy)
            sent = patches(proxy, ns, "c")
            assert [r.action.split()[0] for r in sent[:3]] == ["409", "409", "forwarded"], sent
            assert sent[2].action == "forwarded 200", sent[2]
            assert agent.find(msg_has="retrying against the newer object")
            assert patches(proxy, ns, "u")[0].action == "409"
            assert agent.find(msg_has="its probe was replaced")
            assert not agent.find(msg_has=f"write status {status_path(ns, 'u')}")


def test_lists_wait_for_retry_after(cluster):
    """The informer's list of probes and the summary writer's list of a
    probe's reports, answered 429 and 503 with Retry-After: each is tried
    again no sooner than asked."""
    ns = cluster.namespace()
    left = {"probes": 1, "reports": 1}

    def rule(req):
        if req.method == "GET" and "/apis/retwatch.io/v1alpha1/functionprobes?" in req.path \
                and "watch=1" not in req.path and left["probes"]:
            left["probes"] -= 1
            return Reply(429, status_body(429, "TooManyRequests", "slow down"),
                         {"Retry-After": "2"})
        if req.method == "GET" and f"/namespaces/{ns}/functionprobereports?" in req.path \
                and left["reports"]:
            left["reports"] -= 1
            return Reply(503, status_body(503, "ServiceUnavailable", "busy"),
                         {"Retry-After": "2"})
        return None
    with ApiProxy(cluster.cp, rule) as proxy:
        with cluster.agent("node-a", user=proxy.kubeconfig_user()) as agent:
            lists = [r for r in proxy.requests("GET", "/apis/retwatch.io/v1alpha1/functionprobes?")
                     if "watch=1" not in r.path]
            assert lists[0].action == "429" and lists[1].at - lists[0].at >= 2, lists[:2]
            assert agent.find(msg_has="answered 429 with Retry-After 2 s")
            cluster.apply_probe(ns, "l", spec())
            wait_written(cluster, ns, "l", agent, proxy)
            reports = proxy.requests("GET", f"/namespaces/{ns}/functionprobereports?")
            assert reports[0].action == "503", reports
            assert reports[1].at - reports[0].at >= 2, reports[:2]


WATCH_TIMEOUT_S = 5  # the least informer.c takes
WATCH_IDLE_S = 7  # informer.c: the timeout and a quarter of it, at least 2 s


def test_silent_watch_is_restarted(cluster, monkeypatch):
    """The probes' watch, once established, passes nothing (no event, no
    bookmark, not the server's end of it): the agent restarts it past its
    timeout and sees, through the new one, a probe made during the silence."""
    ns = cluster.namespace()
    stalled = []

    def rule(req):
        if "/functionprobes?" in req.path and "watch=1" in req.path and not stalled:
            stalled.append(req)
            return "stall"
        return None
    monkeypatch.setenv("RETWATCH_WATCH_TIMEOUT_S", str(WATCH_TIMEOUT_S))
    with ApiProxy(cluster.cp, rule) as proxy:
        with cluster.agent("node-a", user=proxy.kubeconfig_user()) as agent:
            wait_for("the probes' watch", lambda: stalled, timeout=20)
            cluster.apply_probe(ns, "late", spec())
            wait_for("the silent watch restarted", lambda: agent.find(msg_has="watch silent"),
                     timeout=WATCH_IDLE_S + 10)
            took = time.monotonic() - stalled[0].at
            print(f"silent watch restarted {took:.1f} s after it was established "
                  f"(timeoutSeconds={WATCH_TIMEOUT_S})")
            assert WATCH_TIMEOUT_S <= took <= WATCH_IDLE_S + 3, took
            wait_for("the late probe's status", lambda: written(cluster, ns, "late"), timeout=20)
            first = patches(proxy, ns, "late")[0]
            # seen only through the new watch
            assert first.at - stalled[0].at >= WATCH_IDLE_S - 1, first.at - stalled[0].at


def test_reports_listed_at_start_are_asked_again_after_a_429(cluster, make_pod):
    """Issue 47: an agent restarted while the API server is busy (its first
    two lists of this node's reports answered 429) asks again, and carries
    on from the report its predecessor wrote: no count starts afresh."""
    from test_agent import FUNCS, fns, has_calls
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a"):
        cluster.apply_probe(ns, "carry", spec())
        wait_for("calls", lambda: has_calls(cluster, ns, "carry", "node-a", more_than=50),
                 timeout=15)
    low = {n: f["calls"] for n, f in fns(cluster.node_entry(ns, "carry", "node-a")).items()}
    busy = [Reply(429, status_body(429, "TooManyRequests", "too many requests"))] * 2

    def rule(req):
        if req.method == "GET" and "functionprobereports?labelSelector=" in req.path and busy:
            return busy.pop(0)
        return None
    with ApiProxy(cluster.cp, rule) as proxy:
        with cluster.agent("node-a", user=proxy.kubeconfig_user()) as again:
            wait_for("calls counted on from the earlier agent's", lambda: all(
                f["calls"] > low[n] for n, f in fns(cluster.node_entry(
                    ns, "carry", "node-a")).items() if n in FUNCS), timeout=15)
            assert len(again.find(msg_has="listing this node's reports again")) == 2
            assert again.find(msg_has="carrying on from the results written before")
            assert not again.find(msg_has="counts start afresh")
            lists = [r for r in proxy.seen if "functionprobereports?labelSelector=" in r.path]
            assert [r.action.split()[0] for r in lists[:3]] == ["429", "429", "forwarded"], lists
