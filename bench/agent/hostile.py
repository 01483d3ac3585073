"""retwatch-agent against issue 16's hostile cases: for each, a pod runs the
file an attacker would craft (or podapp with the flags that make it greedy),
a FunctionProbe names what the attacker would name, and, while /healthz and
/metrics (both answered by the agent's main loop) are asked every 0.05 s and
a bystander probe of another namespace reports on a podapp pod, it measures:

- the time from the apply to the attach and to the first error in this
  node's report (FunctionProbeReport), and the error's first words;
- the longest gap between two /healthz answers and between two /metrics
  answers over the case (the main loop's stall);
- the agent's CPU time, its VmRSS before the case, its VmHWM (its peak RSS
  over the case: the peak is reset before each case through
  /proc/PID/clear_refs) and its VmRSS (and RssAnon) after it;
- whether the bystander kept reporting: its reports written during the
  case and the longest time between two of them (its interval is 2 s);
  every case is watched 6 s at least.

The crafted executables are static ELF files made here whose entry point
pauses for ever, written into the pod's own root filesystem (its upper
layer) and run as the container's process; the probe names them in
spec.executable. One agent serves every case, one namespace per case; each
case's probe and pod are deleted before the next.

Cases (issue 16's numbering):
  1    a FIFO as spec.executable (/app/fifo of the podapp image)
  2a   an ELF whose .gopclntab is 64 MiB of zeros (a sparse file)
  2b   the same with 256 MiB
  3a   one function of 64 MiB of RET bytes
  3b   four such functions
  4a   cold-part pairing: 40,000 "hot", 40,000 "hot.cold" (the probe names "lone")
  4b   4,000 functions "main.dup", half of them ABI wrappers, in a Go file
  4c   64 unmatched patterns of 250 characters over 8,000 names of 250
  5a   64 globs matching 256 functions each: 16,384, over the namespace's
       share of functions (--max-functions-per-namespace, default 8,192)
  5b   more goroutines with calls in flight than the namespace's share
       (--max-inflight-per-namespace): podapp -workers 1.5 x the share
  5c   deep recursion over the namespace's share of deep chunks (share / 16
       chunks of 64 frames): podapp -deep N -depth 1024
  8    slowThreshold 1ns on a function called as fast as podapp can
       (bench/agent/flood.py's pod; flood.py has the slow-call figures)
  10   deep recursion past 1,024 frames: podapp -deep 4 -depth 1100
Cases 6 (a crafted mountinfo) and 7 (nested cgroups) need a container the
runtime lets mount an overlay or write its cgroups; the runc pods of
tests/agent are not such containers (see tests/unit/test_overlay.c and
test_cgroup.c).

Env: RETWATCH_AGENT (default build/retwatch-agent), HOSTILE_CASES (which
cases, in that order, default all; a case named twice runs twice, on a new
pod and file), HOSTILE_INFLIGHT (the agent's
--max-inflight-per-namespace, default 1024 rather than the agent's 8,192, so
that on a small machine 5b's pod runs 1,536 goroutines (1.5 x the share), not
over 8,192, and 5c's 7 goroutines 1,024 deep (105 chunks of a share of 64),
not over 34; 10's 4 goroutines need 60 chunks, within it), HOLD_S (seconds
each running case is watched after its attach, default 10), AGENT_ARGS (more
agent options). Prints figures; asserts nothing.
"""

import os
import random
import re
import signal
import struct
import sys
import threading
import time
import urllib.error
import urllib.request

from harness import FUNCS, REPO, Bench, cpu_seconds, probe_doc, proc_status_kib, wait_for

import pods  # noqa: E402 (harness puts tests/agent on the path)
import agentproc  # noqa: E402
import flood  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "tests", "fixtures"))
import fixtool  # noqa: E402

AGENT = os.environ.get("RETWATCH_AGENT", os.path.join(REPO, "build", "retwatch-agent"))
AGENT_ARGS = tuple(os.environ.get("AGENT_ARGS", "").split())
INFLIGHT = int(os.environ.get("HOSTILE_INFLIGHT", "1024"))
HOLD_S = float(os.environ.get("HOLD_S", "10"))
POLL_S = 0.05
MIN_S = 6.0
NODE = "node-a"
REPORTS = "/apis/retwatch.io/v1alpha1/namespaces/{ns}/functionprobereports"

# -- crafted executables -------------------------------------------------------

BASE = 0x10000000  # the load address of the file's first byte
TEXT = 0x1000  # the file offset of .text
# _start: pause() for ever (mov eax, 34; syscall; jmp _start)
STUB = bytes.fromhex("b8220000000f05ebf7")


def write_elf(path, funcs, extra=(), sparse=None):
    """A static x86-64 executable whose entry pauses for ever, plus funcs.

    funcs: (name, code) function symbols laid out in .text after _start,
    16-byte aligned; code is bytes, or (byte, count) for count copies of
    byte (written a MiB at a time). extra: (name, bytes) allocated sections
    outside the loaded segment. sparse: (name, head, size), a last section
    of size bytes, head then zeros left as a hole in the file."""
    layout, off = [("_start", STUB, 0)], 16
    for name, code in funcs:
        layout.append((name, code, off))
        size = len(code) if isinstance(code, bytes) else code[1]
        off += (size + 15) & ~15
    text_size = off
    strtab, names, symtab = bytearray(b"\0"), {}, bytearray(24)
    for name, code, o in layout:
        if name not in names:
            names[name] = len(strtab)
            strtab += name.encode() + b"\0"
        size = len(code) if isinstance(code, bytes) else code[1]
        # st_name, st_info (LOCAL FUNC), st_other, st_shndx (.text), st_value, st_size
        symtab += struct.pack("<IBBHQQ", names[name], 2, 0, 1, BASE + TEXT + o, size)
    # (name, type, flags, offset, size, link, info, entsize); data placed below
    sections = [(".text", 1, 6, TEXT, text_size, 0, 0, 0)]
    blobs = []
    pos = TEXT + text_size
    for name, typ, flags, data, link, info, entsize in (
            [(".symtab", 2, 0, symtab, 3, len(layout) + 1, 24), (".strtab", 3, 0, strtab, 0, 0, 0)]
            + [(n, 1, 2, d, 0, 0, 0) for n, d in extra]):
        pos = (pos + 15) & ~15
        sections.append((name, typ, flags, pos, len(data), link, info, entsize))
        blobs.append((pos, data))
        pos += len(data)
    if sparse:
        sections.append((sparse[0], 1, 2, None, sparse[2], 0, 0, 0))
    shstrtab = bytearray(b"\0")
    shnames = []
    for s in sections + [(".shstrtab",)]:
        shnames.append(len(shstrtab))
        shstrtab += s[0].encode() + b"\0"
    pos = (pos + 15) & ~15
    sections.append((".shstrtab", 3, 0, pos, len(shstrtab), 0, 0, 0))
    blobs.append((pos, shstrtab))
    shoff = (pos + len(shstrtab) + 7) & ~7
    sparse_off = (shoff + 64 * (len(sections) + 1) + 4095) & ~4095
    shdrs = bytearray(64)
    for i, (name, typ, flags, o, size, link, info, entsize) in enumerate(sections):
        o = sparse_off if o is None else o
        addr = BASE + o if flags & 2 else 0
        shdrs += struct.pack("<IIQQQQIIQQ", shnames[i], typ, flags, addr, o, size, link, info,
                             16, entsize)
    shnum = len(sections) + 1
    ehdr = struct.pack("<4sBBBBB7sHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, bytes(7), 2, 62, 1,
                       BASE + TEXT, 64, shoff, 0, 64, 56, 1, 64, shnum, shnum - 1)
    end = TEXT + text_size
    phdr = struct.pack("<IIQQQQQQ", 1, 5, 0, BASE, BASE, end, end, 0x1000)  # PT_LOAD R+X
    with open(path, "wb") as f:
        f.write(ehdr + phdr)
        for name, code, o in layout:
            f.seek(TEXT + o)
            if isinstance(code, bytes):
                f.write(code)
            else:
                left = code[1]
                while left:
                    n = min(left, 1 << 20)
                    f.write(bytes([code[0]]) * n)
                    left -= n
        for o, data in blobs:
            f.seek(o)
            f.write(data)
        f.seek(shoff)
        f.write(shdrs)
        if sparse:
            f.seek(sparse_off)
            f.write(sparse[1])
            f.truncate(sparse_off + sparse[2])
    os.chmod(path, 0o755)


def zero_pclntab(size):
    """The head of a go1.20+ .gopclntab of size bytes over zeros: a valid
    pcHeader declaring as many (empty) functions as would fit."""
    words = [(size - 72) // 8 - 1, 0, 0x401000, 72, 72, 72, 72, 72]
    return struct.pack("<IBBBB", 0xfffffff1, 0, 0, 1, 8) + struct.pack("<8Q", *words)


def go_pclntab(go_binary):
    """go_binary's .gopclntab, its text start filled in when Go left it 0."""
    with open(go_binary, "rb") as f:
        data = f.read()
    off, size = fixtool.section(data, ".gopclntab")
    pcln = bytearray(data[off:off + size])
    if struct.unpack_from("<Q", pcln, 24)[0] == 0:
        pcln[24:32] = struct.pack("<Q", fixtool.symbol(data, "runtime.text"))
    return bytes(pcln)


def long_names(seed, n):
    """n names of 250 characters, a letter and a dot over and over."""
    rng = random.Random(seed)
    return ["".join(rng.choice("abcdefghij") + "." for _ in range(125))[:250] for _ in range(n)]


NOP_RET = b"\x90" * 15 + b"\xc3"
WRAPPER = b"\xe8" + struct.pack("<i", -(16 + 5)) + b"\xc3" + b"\xcc" * 10  # call the body before


def craft(kind, path, podapp):
    if kind == "zeros64":
        write_elf(path, [("plain", NOP_RET)], sparse=(".gopclntab", zero_pclntab(64 << 20),
                                                      64 << 20))
    elif kind == "zeros256":
        write_elf(path, [("plain", NOP_RET)], sparse=(".gopclntab", zero_pclntab(256 << 20),
                                                      256 << 20))
    elif kind == "rets1":
        write_elf(path, [("rets", (0xc3, 64 << 20))])
    elif kind == "rets4":
        write_elf(path, [(f"rets{i}", (0xc3, 64 << 20)) for i in range(4)])
    elif kind == "cold":
        funcs = [f for _ in range(40000) for f in (("hot", b"\xc3"), ("hot.cold", b"\xc3"))]
        write_elf(path, funcs + [("lone", b"\x90\xc3"), ("lone.cold", b"\x90\xc3"),
                                 ("ghost.cold", b"\xc3")])
    elif kind == "abi":
        funcs = [("main.dup", NOP_RET if i % 2 == 0 else WRAPPER) for i in range(4000)]
        write_elf(path, funcs, extra=[(".gopclntab", go_pclntab(podapp))])
    elif kind == "suggest":
        funcs = [(n, b"\xc3") for n in long_names(0x5106, 8000)]
        write_elf(path, funcs + [("main.ProcessPayment", b"\x90\xc3")])
    elif kind == "many":
        write_elf(path, [(f"f{g:02d}_{i:03d}", NOP_RET) for g in range(64) for i in range(256)])
    else:
        raise ValueError(kind)


# -- cases -------------------------------------------------------------------

def share_workers():
    return str(INFLIGHT * 3 // 2)


def share_deep():
    # a goroutine 1,024 deep holds 15 chunks past its first 64 frames
    return str(max(2, (INFLIGHT // 16) * 3 // 2 // 15 + 1))


# id, what, how the pod runs ("file" KIND: a crafted executable; "args":
# podapp's arguments), the probe's spec, and what ends the case: "analysis"
# (the first error or the attach), "running" (HOLD_S after the attach) or
# "running+error" (the same, and the error expected, up to 3 x HOLD_S)
CASES = [
    ("1", "FIFO as spec.executable", ("args", None),
     {"functions": FUNCS, "executable": "/app/fifo"}, "analysis"),
    ("2a", ".gopclntab of 64 MiB of zeros", ("file", "zeros64"), {"functions": ["plain"]},
     "analysis"),
    ("2b", ".gopclntab of 256 MiB of zeros", ("file", "zeros256"), {"functions": ["plain"]},
     "analysis"),
    ("3a", "1 function of 64 MiB of RETs", ("file", "rets1"), {"functions": ["rets"]},
     "analysis"),
    ("3b", "4 functions of 64 MiB of RETs", ("file", "rets4"), {"functions": ["rets*"]},
     "analysis"),
    ("4a", "cold pairing, 80,000 symbols", ("file", "cold"), {"functions": ["lone"]},
     "analysis"),
    ("4b", "4,000 main.dup, ABI wrappers", ("file", "abi"), {"functions": ["main.dup"]},
     "analysis"),
    ("4c", "64 unmatched over 8,000 names", ("file", "suggest"),
     {"functions": long_names(7, 63) + ["main.ProcessPaymnt"]}, "analysis"),
    ("5a", "64 globs x 256 functions", ("file", "many"),
     {"functions": [f"f{g:02d}_*" for g in range(64)]}, "analysis"),
    ("5b", "in-flight share", ("args", lambda: ("/app/podapp", "-workers", share_workers(),
                                                "-latency", "1s", "-lookup", "500ms",
                                                "-gap", "0")),
     {"functions": FUNCS, "maxOverhead": "0"}, "running+error"),
    ("5c", "deep-chunk share", ("args", lambda: ("/app/podapp", "-workers", "1", "-gap", "1s",
                                                 "-deep", share_deep(), "-depth", "1024")),
     {"functions": ["main.recurse"], "maxOverhead": "0"}, "running+error"),
    ("8", "slowThreshold 1ns, hot function", ("args", lambda: flood.ARGS),
     {"functions": [flood.FUNC], "slowThreshold": "1ns", "maxOverhead": "0"}, "running"),
    ("10", "recursion 1,100 deep", ("args", lambda: ("/app/podapp", "-workers", "1", "-gap",
                                                     "1s", "-deep", "4", "-depth", "1100")),
     {"functions": ["main.recurse"], "maxOverhead": "0"}, "running"),
]
WANTED = os.environ.get("HOSTILE_CASES", " ".join(c[0] for c in CASES)).split()
CASES = [c for w in WANTED for c in CASES if c[0] == w]  # in the order given, repeats too


# -- watching the agent ----------------------------------------------------------

class Watch:
    """Threads asking /healthz and /metrics every POLL_S, and reading the
    bystander's report every 0.25 s; each keeps the times of its answers."""

    def __init__(self, b, agent, bystander_ns):
        self.stop = threading.Event()
        self.beats = {"/healthz": [], "/metrics": []}
        self.reports = []  # (time, lastUpdate)
        base = agent.metrics_url("/")[:-1]  # read once: the log grows
        self.threads = [threading.Thread(target=self._http, args=(base + p, out), daemon=True)
                        for p, out in self.beats.items()]
        self.threads.append(threading.Thread(target=self._bystander, args=(b, bystander_ns),
                                             daemon=True))
        for t in self.threads:
            t.start()

    def _http(self, url, out):
        while not self.stop.is_set():
            try:
                with urllib.request.urlopen(url, timeout=60) as r:
                    r.read()
                    out.append(time.monotonic())
            except (urllib.error.URLError, OSError):
                pass
            self.stop.wait(POLL_S)

    def _bystander(self, b, ns):
        last = None
        while not self.stop.is_set():
            try:
                r = report(b, ns, "calm")
            except OSError:
                r = None
            if r and r.get("lastUpdate") != last:
                last = r.get("lastUpdate")
                self.reports.append(time.monotonic())
            self.stop.wait(0.25)

    def gap(self, path, start, end):
        return longest_gap(self.beats[path], start, end)

    def bystander(self, start, end):
        """(reports written in [start, end], the longest time without one)."""
        return (sum(start <= t <= end for t in self.reports),
                longest_gap(self.reports, start, end))

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(70)


def longest_gap(times, start, end):
    times = [start] + [t for t in times if start <= t <= end] + [end]
    return max(b - a for a, b in zip(times, times[1:]))


def report(b, ns, name):
    """This node's report of probe name (its status), or None."""
    for r in b.get(REPORTS.format(ns=ns))["items"]:
        if r.get("probe", {}).get("name") == name and r.get("node") == NODE:
            return r.get("status")
    return None


def reset_peak(pid):
    """Start VmHWM afresh at the current RSS (proc(5): clear_refs, 5)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def first_words(err, n=70):
    """An error without its pod/container/process prefix, cut to n characters."""
    err = re.sub(r"^pod [^,]+, container [^,:]+(, process \d+)?: ", "", err)
    return err if len(err) <= n else err[:n - 3] + "..."


def losses(r):
    """Calls lost and slow calls dropped, over the report's functions."""
    fs = r.get("functions", []) if r else []
    return sum(f.get("lost", 0) for f in fs), sum(f.get("slowDropped", 0) for f in fs)


# -- one case ----------------------------------------------------------------

def start_pod(b, ns, how):
    """The case's pod, its process running what it should; returns the Pod."""
    kind, what = how
    if kind == "args":
        args = what() if what else None
        return pods.Pod(b.kubectl, ns, "target", {"app": "target"}, NODE, {"app": args},
                        b.image, b.workdir).create()
    name = f"/tmp/{what}"
    p = pods.Pod(b.kubectl, ns, "target", {"app": "target"}, NODE,
                 {"app": ("/bin/sh", "-c", f"while [ ! -x {name} ]; do sleep 0.1; done; "
                          f"exec {name}")}, b.image, b.workdir).create()
    c = p.containers["app"]
    part = os.path.join(c.rootfs, "tmp", what + ".part")
    craft(what, part, os.path.join(b.image, "app", "podapp"))
    os.rename(part, os.path.join(c.rootfs, "tmp", what))
    wait_for(f"the pod to run {name}", lambda: os.readlink(f"/proc/{c.pid}/exe").endswith(name),
             timeout=30)
    return p


def run_case(b, agent, watch, case, n):
    cid, what, how, spec, expect = case
    ns = b.namespace(f"case-{n}-{cid}")
    pod = start_pod(b, ns, how)
    doc = probe_doc(ns, "hostile", {"app": "target"})
    doc["spec"].update(spec)
    if how[0] == "file":
        doc["spec"]["executable"] = f"/tmp/{how[1]}"
    time.sleep(1)
    reset_peak(agent.pid)
    (before,) = proc_status_kib(agent.pid, "VmRSS")
    cpu0, start = cpu_seconds(agent.pid), time.monotonic()
    b.apply([doc])
    attached = errored = lost_from = r = None
    deadline = start + 120
    # analysis: until the first error or the attach; running: HOLD_S more
    # after the attach, or until an error past that when one is expected
    while time.monotonic() < deadline:
        r = report(b, ns, "hostile") or r
        t = time.monotonic() - start
        if r and r.get("attached") and attached is None:
            attached = t
        if r and r.get("errors") and errored is None:
            errored = t
        if losses(r)[0] and lost_from is None:
            lost_from = t
        if expect == "analysis" and (attached is not None or errored is not None):
            break
        if expect != "analysis" and attached is None and errored is not None:
            break
        if attached is not None and t - attached >= HOLD_S and (
                errored is not None or expect == "running" or t - attached >= 3 * HOLD_S):
            break
        time.sleep(0.02)
    # every case is watched MIN_S at least: the bystander reports in it
    while time.monotonic() < start + MIN_S:
        time.sleep(0.2)
    r = report(b, ns, "hostile") or r
    end = time.monotonic()
    cpu = cpu_seconds(agent.pid) - cpu0
    hwm, rss, anon = proc_status_kib(agent.pid, "VmHWM", "VmRSS", "RssAnon")
    nrep, bgap = watch.bystander(start, end)
    lost, dropped = losses(r)
    fs = r.get("functions", []) if r else []
    if r and r.get("errors"):
        text = first_words(r["errors"][0]) + (f" (+{len(r['errors']) - 1} more)"
                                              if len(r["errors"]) > 1 else "")
    elif r and r.get("attached"):
        modes = sorted({f.get("mode", "?") for f in fs})
        text = f"attached, {len(fs)} functions ({', '.join(modes)})"
        reasons = {f.get("reason") for f in fs if f.get("reason")}
        if reasons:
            text += ": " + first_words(sorted(reasons)[0], 50)
    else:
        text = "no report in 120 s"
    if lost_from is not None:
        text = f"[lost from {lost_from:.1f} s] {text}"
    row = {"case": cid, "what": what, "attach": attached, "error": errored,
           "healthz": watch.gap("/healthz", start, end),
           "metrics": watch.gap("/metrics", start, end), "before": before >> 10,
           "hwm": hwm >> 10, "rss": rss >> 10, "anon": anon >> 10, "cpu": cpu,
           "took": end - start, "reports": nrep, "bgap": bgap, "lost": lost, "dropped": dropped,
           "text": text, "errors": (r or {}).get("errors", []),
           "alive": agent.proc.poll() is None}
    # tear the case down: the probe (its detach waited for), then the pod
    b.delete_probe(ns, "hostile")
    if attached is not None:
        wait_for("the detach", lambda: agent.find(msg_has="detached from process",
                                                  probe="hostile", namespace=ns),
                 timeout=60, interval=0.2)
    pod.delete()
    time.sleep(1)
    return row


def fmt_s(v):
    return "-" if v is None else f"{v:.2f}"


HEADER = (f"{'case':<4} {'what':<31} {'attach':>6} {'error':>6} {'/healthz':>8} {'/metrics':>8}"
          f" {'RSS0':>5} {'HWM':>5} {'RSS':>5} {'anon':>5} {'CPU':>9} {'bystander':>11} {'lost':>7}"
          f" {'dropped':>8}  outcome")
LEGEND = ("times in s from the apply; /healthz, /metrics: longest gap between answers (asked"
          f" every {POLL_S} s), s; RSS0: the agent's RSS before the case, HWM: its peak over"
          " the case, RSS after it, anon: its anonymous part, MiB; CPU: the agent's CPU"
          " seconds over the case's seconds; bystander: its reports during the case, longest"
          " gap between two; lost calls and slow calls dropped of the case's probe")


def print_row(row):
    print(f"{row['case']:<4} {row['what']:<31} {fmt_s(row['attach']):>6} {fmt_s(row['error']):>6}"
          f" {row['healthz']:>8.2f} {row['metrics']:>8.2f} {row['before']:>5} {row['hwm']:>5}"
          f" {row['rss']:>5} {row['anon']:>5} {row['cpu']:>4.1f}/{row['took']:<4.0f}"
          f" {row['reports']:>3} {row['bgap']:>5.1f} s {row['lost']:>7} {row['dropped']:>8}  "
          f"{row['text']}{'' if row['alive'] else ' [AGENT EXITED]'}", flush=True)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = ("--layer-root", "WORKDIR", "--max-inflight-per-namespace", str(INFLIGHT)) + AGENT_ARGS
    print(f"agent: {AGENT} {' '.join(args)}", flush=True)
    began = time.monotonic()
    with Bench(AGENT) as b:
        by = b.namespace("bystander")
        b.pod(by, "web-0", {"app": "web"}, NODE)
        agent = agentproc.Agent(AGENT, b.cp.kubeconfig("agent"), NODE, b.workdir,
                                tuple(b.workdir if a == "WORKDIR" else a for a in args))
        b.agents.append(agent)
        agent.start()
        b.apply([probe_doc(by, "calm", {"app": "web"})])
        wait_for("the bystander's calls", lambda: (r := report(b, by, "calm")) and any(
            f.get("calls") for f in r.get("functions", [])), timeout=30)
        watch = Watch(b, agent, by)
        print(LEGEND, flush=True)
        print(HEADER, flush=True)
        rows = []
        try:
            for n, case in enumerate(CASES):
                if agent.proc.poll() is not None:
                    print(f"{case[0]:<4} not run: the agent exited", flush=True)
                    continue
                rows.append(run_case(b, agent, watch, case, n))
                print_row(rows[-1])
        finally:
            watch.close()
        print("the errors in full:")
        for row in rows:
            for err in row["errors"]:
                if len(err) > 600:
                    err = f"{err[:300]} ... ({len(err)} characters) ... {err[-300:]}"
                print(f"  {row['case']}: {err}")
        hwm, rss = proc_status_kib(agent.pid, "VmHWM", "VmRSS")
        print(f"agent at the end: VmRSS {rss >> 10} MiB; bench took "
              f"{time.monotonic() - began:.0f} s", flush=True)


if __name__ == "__main__":
    main()
