"""Debian's redis-server (unpacked by scripts/deps.sh into the cache, run on
loopback, persisting nothing): the calls retwatch counts of command
functions against redis's own count, INFO commandstats.

[REF] redis counts each command it runs in cmdstat_<name>:calls=; the
command table (redis 7.0's commands.c) maps SET to setCommand, GET to
getCommand and INCR to incrCommand, which nothing else calls. getCommand
and incrCommand have no RET of their own: gcc made each a jump to
getGenericCommand and incrDecrCommand, whose RETs end their calls (checked
with inspect). Needs root; about 2 s.
"""

import re

import harness
import tracing

COMMANDS = {"set": "setCommand", "get": "getCommand", "incr": "incrCommand"}


def workload(port):
    """A bounded loop of commands, those traced and others beside them."""
    with harness.Resp(port) as r:
        for i in range(150):
            assert r.command("SET", f"k{i % 40}", f"v{i}") == "OK"
            if i % 3 == 0:
                assert r.command("GET", f"k{i % 40}") == f"v{i}"
            if i % 2 == 0:
                assert r.command("INCR", "counter") == i // 2 + 1
                assert r.command("GET", "nothing") is None
            if i % 10 == 0:
                assert r.command("MSET", "a", "1", "b", "2") == "OK"
                assert r.command("INCRBY", "counter2", 5) == 5 * (i // 10 + 1)
                assert r.command("DEL", "a", "b") == 2


def commandstats(port):
    with harness.Resp(port) as r:
        info = r.command("INFO", "commandstats")
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^cmdstat_(\w+):calls=(\d+),", info, re.M)}


def test_commands_counted_as_redis_counts_them(tmp_path):
    with harness.redis(str(tmp_path)) as (srv, port):
        run, funcs = tracing.trace_during([srv.pid], list(COMMANDS.values()),
                                          lambda: workload(port))
        stats = commandstats(port)
    # [REF] what the loop sent, as redis counted it
    assert (stats["set"], stats["get"], stats["incr"]) == (150, 50 + 75, 75), stats
    for cmd, name in COMMANDS.items():
        f = funcs[name]
        assert f["calls"] == stats[cmd], f"{name}: {f} vs cmdstat_{cmd} {stats[cmd]}\n{run.describe()}"
        assert f["orphans"] == 0 and f["lost"] == 0, f
    assert funcs["setCommand"]["mode"] == "entry+ret" and funcs["setCommand"]["tail_closed"] == 0
    # no RET of their own: every call timed at the RET of the function it jumps to
    for name in ("getCommand", "incrCommand"):
        f = funcs[name]
        assert f["mode"] == "entry+ret+tailcall" and f["reason"] is None and f["returns"] == 0, f
        assert f["tail_closed"] == f["calls"] and f["tail_exits"] == 0, f
    for f in funcs.values():
        assert f["raw_p50_ns"] > 0, f  # (less the probe bias, a few us, it may be 0)
