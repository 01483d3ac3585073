"""Tail calls timed (issue 15, item 4) and cold parts of stripped binaries
(item 5), on tests/fixtures/c/tailfix.c and its stripped twin.

A C function that leaves by `jmp other` returns through other's RET, at the
stack pointer it was entered with: retwatch probes the RETs of the functions
a traced function tail-calls (transitively, within a bound) and ends the call
there. Jumps it cannot follow (through memory or a register) make the call a
tail exit: no duration, not an orphan. In a stripped binary, a function's cold
part (gcc's .cold, its symbol gone) is found from the unwind tables and its
RETs probed as the function's own.

A jump through a pointer (a hook, `jmp *hook(%rip)` or `jmp *%reg`) is read
where it runs (issue 47): where it went, the RETs of the function there are
probed as the call's exits, so the calls after the first few end there.

[REF] Counts come from the program: every call it makes, and which of them
leave by a tail call. nap() sleeps nap_ns, so a call ending at nap's RET
lasts at least that, and at most what its caller measured around it (the
same clock as the kernel's). The RET sites come from GNU objdump
(reference.py). Needs root and bpftool; about 2 s per run.

Debian's nginx (unpacked from its package by scripts/deps.sh into the
cache, run on loopback with a configuration the test writes):
ngx_http_finalize_request and ngx_http_process_request leave through tail
calls, and count one call per request.
"""

import os
import re
import tempfile
import urllib.error
import urllib.request

import pytest

import harness
import reference
import tracing

SLACK_NS = 20_000  # clock reads, when comparing with the program's own durations


def tailfix(stripped=False):
    path = harness.fixture("c/tail-stripped/tailfix" if stripped else "c/tail/tailfix")
    assert os.path.exists(path), f"{path} is missing (rebuild the fixtures)"
    return tracing.Tracee(path=path, kind="c", toolchain="gcc", variant="tail", stripped=stripped)


def trace(patterns, options=(), stripped=False, scenario="tail", release=None):
    r = tracing.run_ok([(tailfix(stripped), scenario)], patterns, options=("--raw", *options),
                       release=release)
    tracing.assert_document(r)
    return r


def hooks_said(name):
    """Whether a line of retwatch's says where name's hook jumps."""
    return lambda line: line.startswith(f"retwatch: calls of {name} that jump through a "
                                        "pointer to nap (")


def after_hooks_followed(names):
    """Releases scenario tail-hooked's first round, and the others once
    retwatch said it follows the hooks of names: their calls after the
    first round end at nap's RET, however long the following took."""
    def release(result, started):
        (t,) = started
        t.release()
        for name in names:
            assert result.err_stream.wait_for(hooks_said(name), 60), \
                f"retwatch did not say where {name}'s hook jumps\n{result.err_stream.text}"
        t.release()
        result.reports[0] = t.finish()
    return release


def assert_timed_by_tail(r, name):
    """Every call counted, the tail-called ones ended at nap's RET: each lasts
    at least nap_ns, and no longer than the program measured."""
    rep, f = r.report, r.function(name)
    assert f["calls"] == rep["calls"][name], f"{name}: {f}\n{r.describe()}"
    assert f["tail_closed"] == rep["tail_calls"][name], f"{name}: {f}\n{r.describe()}"
    assert f["orphans"] == 0 and f["tail_exits"] == 0 and f["lost"] == 0, f
    assert f["max_ns"] >= rep["nap_ns"], f"{name}: a tail call not timed to nap's RET: {f}"
    assert f["max_ns"] <= rep["max_ns"][name] + SLACK_NS, f"{name}: {f} vs {rep}"
    if rep["tail_calls"][name] == rep["calls"][name]:
        assert f["min_ns"] >= rep["nap_ns"], f"{name}: {f}"


def assert_tail_exits(r, name):
    """Left through a jump retwatch cannot follow: tail exits, in calls without
    a duration, never orphans."""
    rep, f = r.report, r.function(name)
    assert f["calls"] == rep["calls"][name] and f["orphans"] == 0, f"{name}: {f}\n{r.describe()}"
    assert f["tail_exits"] == rep["tail_calls"][name] == rep["calls"][name], f"{name}: {f}"
    assert f["min_ns"] == 0 and f["max_ns"] == 0, f"{name}: timed: {f}"


def assert_timed_through_hook(r, name):
    """Left through a jump through a pointer, which the kernel reads as it
    runs: every call counted, the others ended at nap's RET, each at least
    nap_ns and no longer than the program measured; never an orphan. Only
    the first round's call may be a tail exit: it jumped before nap's RETs
    were probed for it (they may be by the time nap returns)."""
    rep, f = r.report, r.function(name)
    assert f["calls"] == rep["calls"][name] and f["orphans"] == 0, f"{name}: {f}\n{r.describe()}"
    assert f["tail_exits"] + f["tail_closed"] == rep["tail_calls"][name] == rep["calls"][name], \
        f"{name}: {f}"
    assert f["tail_exits"] <= 1, f"{name}: calls after the hook was followed not timed: {f}"
    assert rep["nap_ns"] <= f["min_ns"] and f["max_ns"] <= rep["max_ns"][name] + SLACK_NS, \
        f"{name}: {f} vs {rep}"
    said = [line for line in r.retwatch.stderr.splitlines() if hooks_said(name)(line)]
    assert said and said[0].endswith(" end at its 1 RETs"), r.retwatch.stderr


def assert_nap_counts_every_path(r):
    """nap, traced, counts its own calls by every path into it: the tail calls
    of direct, relay (via chain), mixed, indirect, pointer and both; the
    calls from outer, hidden (via via_static) and main."""
    rep = r.report
    want = sum(rep["tail_calls"][n] for n in ("direct", "chain", "mixed", "indirect", "pointer",
                                             "both"))
    want += rep["calls"]["outer"] + rep["calls"]["via_static"] + rep["calls"]["nap"]
    nap = r.function("nap")
    assert nap["calls"] == want and nap["orphans"] == 0 and nap["tail_closed"] == 0, nap


@pytest.mark.parametrize("attach,stripped", [("uprobe_multi", False), ("perf_event", False),
                                             ("uprobe_multi", True)])
def test_tail_calls_timed(attach, stripped):
    r = trace(("direct", "chain", "mixed", "indirect", "pointer", "outer", "via_static"),
              ("--attach", attach), stripped=stripped, scenario="tail-hooked",
              release=after_hooks_followed(("indirect", "pointer")))
    # via_static tail-calls hidden, a static function: in the stripped twin it
    # has no symbol, and is found from its unwind table entry
    for name in ("direct", "chain", "mixed", "via_static"):
        assert_timed_by_tail(r, name)
    for name in ("indirect", "pointer"):
        assert_timed_through_hook(r, name)
    # nap called normally from outer (and from main) closes nothing of another function
    outer = r.function("outer")
    assert outer["calls"] == r.report["calls"]["outer"] and outer["tail_closed"] == 0, outer
    assert outer["min_ns"] >= r.report["nap_ns"] and outer["orphans"] == 0, outer


@pytest.mark.parametrize("attach", ["uprobe_multi", "perf_event"])
def test_a_hook_set_anew_is_followed_again(attach):
    """indirect's hook followed to nap (the 5 calls after it timed); then set
    to nap2 while traced: its calls to nap2 leave as tail exits until the
    jump's probe, attached again, reads where they go, and then end at
    nap2's RET. Every call is counted; the ten after the second follow are
    all timed."""
    def release(result, started):
        (t,) = started
        for target in ("nap", "nap2"):
            t.release()
            assert result.err_stream.wait_for(lambda l: l.startswith(
                f"retwatch: calls of indirect that jump through a pointer to {target} ("), 60), \
                f"retwatch did not say the hook went to {target}\n{result.err_stream.text}"
        t.release()
        result.reports[0] = t.finish()

    r = trace(("indirect",), ("--attach", attach), scenario="rehook", release=release)
    rep, f = r.report, r.function("indirect")
    assert f["calls"] == rep["calls"]["indirect"] and f["orphans"] == 0, f"{f}\n{r.describe()}"
    assert f["tail_exits"] + f["tail_closed"] == f["calls"], f
    # the first call to nap may be a tail exit, and the calls to nap2
    # before the jump's probe read where they went
    assert 1 <= f["tail_exits"] and f["tail_closed"] >= 5 + 10, f
    assert rep["nap_ns"] <= f["min_ns"] and f["max_ns"] <= rep["max_ns"]["indirect"] + SLACK_NS, \
        f"{f} vs {rep}"


def test_tail_target_traced_too():
    """A traced function the call jumps to (relay, nap) is timed on its own,
    and the caller's call ends with it at the same RET, whether the jump
    could be followed or not (pointer's, through a register)."""
    r = trace(("direct", "chain", "relay", "nap", "pointer"))
    # relay runs only as chain's tail call, inside chain's timing
    for key in ("calls", "tail_calls", "max_ns"):
        r.report[key]["relay"] = r.report[key]["chain"]
    for name in ("direct", "chain", "relay", "pointer"):
        assert_timed_by_tail(r, name)
    assert_nap_counts_every_path(r)


@pytest.mark.parametrize("attach", ["uprobe_multi", "perf_event"])
def test_wrapper_traced_with_its_target(attach):
    """A wrapper that leaves by a jump retwatch cannot follow (through a
    register) as well as by a direct one, traced together with the function
    both jump to: each call of the wrapper ends at the target's RET, whichever
    jump it took, and the target's calls are its own."""
    r = trace(("both", "pointer", "nap"), ("--attach", attach))
    for name in ("both", "pointer"):
        assert_timed_by_tail(r, name)
    assert_nap_counts_every_path(r)


def test_wrapper_alone_ends_at_its_targets_ret():
    """Traced alone, the wrapper's calls end at nap's RET by either jump: the
    direct jump is followed, and the indirect one lands on the same RET."""
    r = trace(("both",))
    assert_timed_by_tail(r, "both")


def test_tail_text_output():
    r = tracing.run_ok([(tailfix(), "tail")], ("direct", "indirect"), json_out=False)
    out = r.retwatch.stdout
    calls = r.report["calls"]
    assert f"direct: {calls['direct']} of the calls ended at a RET of a function they tail-called" \
        in out, out
    # through a pointer: the first calls tail exits, the others ended at nap's RET
    closed = re.search(r"^indirect: (\d+) of the calls ended at a RET of a function they "
                       r"tail-called", out, re.M)
    left = re.search(r"^indirect: (\d+) of the calls left by a tail call that cannot be "
                     r"followed", out, re.M)
    assert closed and int(closed.group(1)) + (int(left.group(1)) if left else 0) == \
        calls["indirect"], out
    row = next(line.split() for line in out.splitlines() if line.split()[:1] == ["indirect"])
    assert row[1] == str(calls["indirect"]) and row[2] != "-", row


def test_inspect_tail_returns():
    """The RETs probed for a tail-calling function are its targets' RETs
    (objdump's), as offsets in the file from the function's own."""
    path = tailfix().path
    funcs = harness.functions_by_name(harness.inspect_json(
        path, ["direct", "chain", "indirect", "pointer", "outer", "via_static"]))

    def rets(name):
        ref = reference.c_function(path, name)
        return [reference.file_offset(path, ref.address) + off for off in ref.returns]

    for name, targets in (("direct", ["nap"]), ("chain", ["relay", "nap"]),
                          ("via_static", ["hidden"])):
        f = funcs[name]
        want = sorted(o - f["file_offset"] for t in targets for o in rets(t))
        assert f["tail_returns"] == want, f
        assert f["tail_calls_followed"] == len(f["tail_calls"]) == 1, f
        assert f["tail_untimed"] == 0 and f["indirect_jumps"] == 0, f
    # stripped: hidden has no symbol, its RETs come from its unwind table entry
    stripped = harness.functions_by_name(harness.inspect_json(tailfix(stripped=True).path,
                                                              ["via_static"]))["via_static"]
    assert stripped["tail_returns"] == funcs["via_static"]["tail_returns"] != [], stripped
    assert funcs["indirect"]["tail_untimed"] == 1 and funcs["indirect"]["tail_returns"] == []
    assert funcs["pointer"]["indirect_jumps"] == 1 and funcs["pointer"]["tail_returns"] == []
    assert funcs["outer"]["tail_returns"] == [] and funcs["outer"]["tail_untimed"] == 0
    # the jumps through a pointer are read where they run; a direct one is not
    assert funcs["indirect"]["hook_jumps"] == funcs["pointer"]["hook_jumps"] == 1, funcs
    assert all(funcs[n]["hook_jumps"] == 0 for n in ("direct", "chain", "outer")), funcs


def test_inspect_cold_part_of_stripped():
    """Stripped, hot.cold has no symbol: its unwind table entry (it runs in
    hot's frame) gives the same range nm gives the unstripped twin, with the
    same returns, and the jumps into it and back are no tail calls."""
    ref = reference.c_function(tailfix().path, "hot")
    assert len(ref.ranges) == 2 and ref.tail_calls == (), ref
    f = harness.functions_by_name(harness.inspect_json(tailfix(stripped=True).path, ["hot"]))["hot"]
    assert [(r["address"], r["size"]) for r in f["ranges"]] == [tuple(r) for r in ref.ranges], f
    assert f["returns"] == list(ref.returns), f
    assert f["tail_calls"] == [] and f["mode"] == "entry+ret", f


def test_cold_part_of_stripped_timed():
    """Every 4th call of hot sleeps in its cold part: all calls timed, as a
    function of its own code (no tail call), none left as a tail exit or an
    orphan."""
    r = trace(("hot",), stripped=True, scenario="cold")
    rep, f = r.report, r.function("hot")
    assert f["mode"] == "entry+ret" and f["calls"] == rep["calls"]["hot"], f"{f}\n{r.describe()}"
    assert f["orphans"] == 0 and f["tail_exits"] == 0 and f["tail_closed"] == 0, f
    assert rep["nap_ns"] <= f["max_ns"] <= rep["max_ns"]["hot"] + SLACK_NS, f


NGINX_REQUESTS = 200

NGINX_SERVER = """        listen 127.0.0.1:{port};
        location / { return 200 "ok\\n"; }
        location /missing { return 404; }"""


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_nginx_tail_calling_handlers():
    funcs = ("ngx_http_finalize_request", "ngx_http_process_request")

    def requests():
        codes = [get(port, "/missing" if i % 5 == 0 else "/x") for i in range(NGINX_REQUESTS)]
        assert codes.count(200) == NGINX_REQUESTS * 4 // 5 and codes.count(404) == NGINX_REQUESTS // 5

    with tempfile.TemporaryDirectory() as d, harness.nginx(d, NGINX_SERVER) as (srv, port):
        run, got = tracing.trace_during([srv.pid], funcs, requests)
    for name in funcs:
        f = got[name]
        # one request, one call of each, timed (the probes saw every one)
        assert f["calls"] == NGINX_REQUESTS and f["orphans"] == 0, f"{name}: {f}\n{run.describe()}"
        assert f["tail_closed"] > 0 and f["p50_ns"] > 0, f
