"""Abandoned analyses (issue 25, item 4): a reading past --analysis-timeout
is cancelled, so that one namespace's hostile executable costs the node's CPU
only until the limit, and never holds another namespace's analyses."""

import os
import struct
import time

from agentproc import wait_for
from test_agent import attached_log, has_calls, spec
from test_metrics import value

BASE, TEXT_OFF = 0x10000000, 0x1000
# mov eax, 34 (pause); syscall; jmp back: a process that waits without CPU
PAUSE_LOOP = bytes.fromhex("b8220000000f05ebf7")


def hostile_elf(nsyms=1000, name_len=4096):
    """A static executable that pauses for ever, with nsyms one-RET functions
    named by name_len bytes of 'a' ending in their number: every glob of
    'a's costs its whole length at each byte of each name."""
    code = 16
    text = PAUSE_LOOP.ljust(code, b"\xcc") + b"\xc3" * nsyms
    strtab, syms = bytearray(b"\0"), [bytes(24)]
    for i in range(nsyms):
        name = b"a" * (name_len - 6) + b"%06d" % i
        syms.append(struct.pack("<IBBHQQ", len(strtab), 0x12, 0, 1,
                                BASE + TEXT_OFF + code + i, 1))
        strtab += name + b"\0"
    symtab = b"".join(syms)
    shstr = b"\0.text\0.symtab\0.strtab\0.shstrtab\0"
    off_sym = (TEXT_OFF + len(text) + 15) & ~15
    off_str = off_sym + len(symtab)
    off_shstr = off_str + len(strtab)
    off_sh = (off_shstr + len(shstr) + 7) & ~7
    ehdr = struct.pack("<4sBBBBB7xHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, 2, 62, 1,
                       BASE + TEXT_OFF, 64, off_sh, 0, 64, 56, 1, 64, 5, 4)
    phdr = struct.pack("<IIQQQQQQ", 1, 5, 0, BASE, BASE, TEXT_OFF + len(text),
                       TEXT_OFF + len(text), 0x1000)

    def shdr(name, typ, flags, addr, off, size, link=0, info=0, align=1, entsize=0):
        return struct.pack("<IIQQQQIIQQ", name, typ, flags, addr, off, size, link, info, align,
                           entsize)

    sh = (bytes(64) + shdr(1, 1, 6, BASE + TEXT_OFF, TEXT_OFF, len(text), align=16)
          + shdr(7, 2, 0, 0, off_sym, len(symtab), link=3, info=1, align=8, entsize=24)
          + shdr(15, 3, 0, 0, off_str, len(strtab)) + shdr(23, 3, 0, 0, off_shstr, len(shstr)))
    out = bytearray(off_sh + len(sh))
    for off, part in ((0, ehdr), (64, phdr), (TEXT_OFF, text), (off_sym, symtab),
                      (off_str, strtab), (off_shstr, shstr), (off_sh, sh)):
        out[off:off + len(part)] = part
    return bytes(out)


def globs(k):
    """64 globs of 256 bytes (the longest allowed) that match no name; k
    makes each probe's set its own."""
    return ["*" + "a" * 252 + chr(ord("A") + k) + chr(ord("A") + i % 26) + chr(ord("A") + i // 26)
            for i in range(64)]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_abandoned_analyses_are_cancelled_and_hold_no_other_namespace(cluster, make_pod):
    """Namespace a runs an executable of 1,000 names of 4 KB and applies four
    probes of 64 globs of 256 bytes (each set about 200 s of CPU to match
    without ASan); --analysis-timeout 300ms. Each probe gets the time-out
    error, and the agent's CPU stops growing: the workers were cancelled,
    not left running. Then namespace b's probe, whose reading needs a worker,
    attaches and reports calls (four readings left running held every
    namespace's analyses)."""
    a, b = cluster.namespace(), cluster.namespace()
    hostile = make_pod(a, "hostile-1", {"app": "hostile"}, "node-a", containers={
        "app": ("/bin/sh", "-c", "while [ ! -x /tmp/hostile ]; do sleep 0.1; done; "
                "exec /tmp/hostile")})
    make_pod(b, "web-1", {"app": "web"}, "node-a")
    tmp = os.path.join(hostile.containers["app"].rootfs, "tmp")
    with open(os.path.join(tmp, "h.part"), "wb") as f:
        f.write(hostile_elf())
    os.chmod(os.path.join(tmp, "h.part"), 0o755)
    os.rename(os.path.join(tmp, "h.part"), os.path.join(tmp, "hostile"))
    with cluster.agent("node-a", extra=("--analysis-timeout", "300ms")) as agent:
        for k in range(4):
            cluster.apply_probe(a, f"hostile-{k}", spec(
                selector={"matchLabels": {"app": "hostile"}}, functions=globs(k),
                executable="/tmp/hostile"))
        for k in range(4):
            entry = wait_for(f"probe hostile-{k}'s error",
                             lambda: (e := cluster.node_entry(a, f"hostile-{k}", "node-a"))
                             and e["errors"] and e, timeout=30)
            (err,) = entry["errors"]
            for part in ("reading /tmp/hostile took more than 0.3 s", "--analysis-timeout"):
                assert part in err, (part, err)
        time.sleep(1)
        cpu0, t0 = cpu_seconds(agent.pid), time.monotonic()
        time.sleep(3)
        cpu = cpu_seconds(agent.pid) - cpu0
        took = time.monotonic() - t0
        print(f"agent CPU over {took:.1f} s after four abandoned analyses: {cpu:.2f} s")
        assert cpu < 0.3 * took, f"the agent spent {cpu:.2f} s of CPU in {took:.1f} s"
        cluster.apply_probe(b, "calm", spec(functions=["main.lookupUser"]))
        wait_for("calls of namespace b's probe",
                 lambda: has_calls(cluster, b, "calm", "node-a", ["main.lookupUser"]),
                 timeout=20)
        assert agent.proc.poll() is None


def test_a_costly_glob_is_refused_naming_the_limit(cluster, make_pod):
    """The reviewer's glob (1 KB; over 1,000 names of 16 KB it cost 22.8 s of
    CPU) is refused at once, in the probe's status, with the limit it is
    over and what to change; another probe of the same namespace attaches."""
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    with cluster.agent("node-a") as agent:
        cluster.apply_probe(ns, "costly", spec(functions=["*" + "a" * 1022 + "b"]))
        try:
            entry = wait_for("the costly probe's error",
                             lambda: (e := cluster.node_entry(ns, "costly", "node-a"))
                             and e["errors"] and e, timeout=20)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{agent.tail(15)}") from None
        (err,) = entry["errors"]
        for part in ("is 1024 bytes long, more than 256", "shorten it"):
            assert part in err, (part, err)
        cluster.apply_probe(ns, "calm", spec())
        wait_for("calls of the calm probe", lambda: has_calls(cluster, ns, "calm", "node-a"),
                 timeout=20)
        assert agent.proc.poll() is None


def test_unused_analyses_held_within_their_byte_bound(cluster, make_pod):
    """Issue 45: the analysis of a file no traced process runs any more is
    kept for the next process only within --analysis-cache-bytes (a tenant
    could have the agent read many large files in turn); one in use is held
    whatever the bound, and one dropped is read again when a process needs
    it."""
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    pid = pod.containers["app"].pid
    with cluster.agent("node-a", extra=("--analysis-cache-bytes", "1Ki")) as agent:
        cluster.apply_probe(ns, "cache", spec())
        attached_log(agent, pid, timeout=20)
        text = agent.get("/metrics")[1]
        assert value(text, "retwatch_analysis_cache_bytes") > 1024, text
        assert value(text, "retwatch_analysis_cache_unused_bytes") == 0, text
        reads = value(text, "retwatch_analyses_total")
        cluster.kubectl("delete", "functionprobe", "cache", "-n", ns)
        wait_for("the unused analysis dropped", lambda: value(
            agent.get("/metrics")[1], "retwatch_analysis_cache_evictions_total") >= 1, timeout=20)
        assert value(agent.get("/metrics")[1], "retwatch_analysis_cache_unused_bytes") <= 1024
        since = len(agent.find(msg_has=f"attached to process {pid}:", count=0))
        cluster.apply_probe(ns, "again", spec())
        wait_for("the process attached again", lambda: len(
            agent.find(msg_has=f"attached to process {pid}:", count=0)) > since, timeout=20)
        wait_for("calls counted again", lambda: has_calls(cluster, ns, "again", "node-a"),
                 timeout=20)
        assert value(agent.get("/metrics")[1], "retwatch_analyses_total") > reads


def test_analyses_in_use_held_within_their_total_bound(cluster, make_pod):
    """Issue 45: all analyses together, those in use included, hold at most
    --analysis-max-bytes, so that the files of many probes cannot take the
    agent past its memory limit: a file whose analysis does not fit is not
    traced, the probe's status says why and names the bound, and the agent
    goes on serving."""
    ns = cluster.namespace()
    pod = make_pod(ns, "web-1", {"app": "web"}, "node-a")
    pid = pod.containers["app"].pid
    with cluster.agent("node-a", extra=("--analysis-max-bytes", "1Ki")) as agent:
        cluster.apply_probe(ns, "big", spec())
        try:
            entry = wait_for("the probe's error", lambda: (
                e := cluster.node_entry(ns, "big", "node-a")) and e["errors"] and e, timeout=20)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{agent.tail(15)}") from None
        (err,) = entry["errors"]
        print(f"the probe's error: {err}")
        for part in ("not traced: its analysis holds", "over the 1 KiB that the agent's "
                     "--analysis-max-bytes allows", "with a larger bound"):
            assert part in err, (part, err)
        text = agent.get("/metrics")[1]
        assert value(text, "retwatch_analysis_refusals_total") >= 1, text
        assert value(text, "retwatch_analysis_cache_bytes") <= 1024, text
        assert not agent.find(msg_has=f"attached to process {pid}:", count=0)
        assert agent.get("/healthz")[0] == 200
        assert agent.proc.poll() is None
