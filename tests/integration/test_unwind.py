"""Slow-call stacks of native code built without frame pointers.

Target: tests/fixtures/c/deepstack.c, built here with gcc -O2
-fomit-frame-pointer (gcc then keeps values in rbp, so a frame-pointer walk
reads garbage): main -> outer -> middle -> inner -> slow_leaf (2 ms).
retwatch must print each slow call's stack unwound with the unwind tables:
those five functions innermost first, and never an address no user code can
have. Variants: tables in .eh_frame and names in .symtab; or both only in a
separate debug file that .gnu_debuglink names (stripped binary, tables
built into .debug_frame alone).

Real software: Debian's redis-server (-O2, no frame pointers; unpacked by
scripts/deps.sh into the cache, run on loopback), whose DEBUG SLEEP makes
debugCommand slow.

[REF] the call chains are the programs' own (deepstack.c; redis 7.0's
networking.c and server.c: readQueryFromClient -> processInputBuffer ->
processCommand -> call -> debugCommand); gcc's output is checked with
readelf so that each variant has what it claims. Needs root.
"""

import os
import re
import signal
import subprocess
import time

import pytest

import harness
import tracing

SOURCE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "c", "deepstack.c")
CHAIN = ["slow_leaf", "inner", "middle", "outer", "main"]
CALLS = 60
FRAME_RE = re.compile(r"^    (\S.*)$")


def sh(*argv):
    subprocess.run(argv, check=True, capture_output=True)


def sections(path):
    out = subprocess.run(["readelf", "-SW", path], check=True, capture_output=True, text=True)
    return set(re.findall(r"\]\s+(\.\S+)", out.stdout))


def build(tmp_path, variant):
    exe = str(tmp_path / f"deepstack-{variant}")
    base = ["gcc", "-O2", "-fomit-frame-pointer", "-g", "-o", exe, SOURCE]
    if variant == "eh_frame":
        sh(*base)
        assert ".symtab" in sections(exe)
        return exe
    # debuglink: unwind tables only in .debug_frame, which goes to the debug
    # file with the symbols; slow_leaf stays in .dynsym to be traced by name
    sh(*base, "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
       "-Wl,--export-dynamic-symbol=slow_leaf")
    debug = exe + ".debug"
    sh("objcopy", "--only-keep-debug", exe, debug)
    sh("objcopy", "--strip-all", "--add-gnu-debuglink=" + debug, exe)
    have = sections(exe)
    assert ".symtab" not in have and ".debug_frame" not in have and ".gnu_debuglink" in have
    assert ".debug_frame" in sections(debug)
    return exe


def slow_call_stacks(exe):
    """Runs exe under `retwatch trace --threshold 1ms slow_leaf`: the stacks printed."""
    target = subprocess.Popen([exe, str(CALLS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    proc = None
    try:
        ready = target.stdout.readline()
        assert ready.startswith("ready "), ready
        argv, proc, out, err = tracing.start_retwatch(
            [target.pid], ["slow_leaf"], options=("--threshold", "1ms",
                                                  "--slow-calls-per-second", "5"),
            json_out=False)
        line = err.wait_for(lambda l: l.startswith(tracing.TRACING_LINE), tracing.ATTACH_TIMEOUT)
        assert line, f"retwatch did not attach: {err.text}"
        target.stdin.write("go\n")
        target.stdin.close()
        assert target.wait(30) == 0
        assert tracing.wait_exit(proc, tracing.EXIT_TIMEOUT), "retwatch did not exit"
        out.join()
        err.join()
        assert proc.returncode == 0, err.text
        stacks, cur = [], None
        for l in out.text.splitlines():
            if l.startswith("slow call: "):
                cur = []
                stacks.append((l, cur))
            elif cur is not None and FRAME_RE.match(l):
                cur.append(FRAME_RE.match(l).group(1))
            else:
                cur = None
        assert stacks, f"no slow call printed\n{out.text}\n{err.text}"
        return stacks, out.text
    finally:
        for p in (proc, target):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def assert_canonical(text):
    for h in re.findall(r"0x[0-9a-f]+", text):
        assert int(h, 16) < 1 << 47, f"non-canonical address {h} printed\n{text}"


def libc_debug_file():
    """Debian's libc6-dbg file for this machine's libc (by build id), or None."""
    out = subprocess.run(["readelf", "-n", "/lib/x86_64-linux-gnu/libc.so.6"], capture_output=True,
                         text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    path = m and f"/usr/lib/debug/.build-id/{m.group(1)[:2]}/{m.group(1)[2:]}.debug"
    return path if path and os.path.exists(path) else None


@pytest.mark.parametrize("variant", ["eh_frame", "debuglink"])
def test_stack_without_frame_pointers(tmp_path, variant):
    exe = build(tmp_path, variant)
    stacks, text = slow_call_stacks(exe)
    assert_canonical(text)
    for head, frames in stacks:
        assert head.startswith("slow call: slow_leaf took"), head
        names = [f.split("+")[0].split(" ")[0] for f in frames]
        assert names[:len(CHAIN)] == CHAIN, f"{head}\n" + "\n".join(frames)
        for f in frames[:len(CHAIN)]:
            assert f.endswith(f"({exe})"), f
        # main's caller in libc is in no symbol table of libc.so.6, only in
        # its debug file, found by build id (libc6-dbg, from scripts/deps.sh)
        if libc_debug_file():
            assert names[len(CHAIN)] == "__libc_start_call_main", "\n".join(frames)


def test_unnamed_frames_print_file_offsets(tmp_path):
    """Without its debug file, the stripped variant's frames past slow_leaf
    have no name nor table: the first prints as file+offset, and the walk
    stops rather than print garbage."""
    exe = build(tmp_path, "debuglink")
    os.unlink(exe + ".debug")
    stacks, text = slow_call_stacks(exe)
    assert_canonical(text)
    for head, frames in stacks:
        assert frames[0].startswith("slow_leaf+0x"), frames
        assert len(frames) >= 2 and re.fullmatch(re.escape(exe) + r"\+0x[0-9a-f]+", frames[1]), frames
        assert not any("(?)" in f for f in frames), frames


REDIS_CHAIN = ["debugCommand", "call", "processCommand", "processInputBuffer"]


def test_redis_slow_call_stack(tmp_path):
    def three_slow_commands():
        with harness.Resp(port) as r:
            for _ in range(3):
                assert r.command("DEBUG", "SLEEP", "0.02") == "OK"
        assert out_text.wait_for(lambda l: l.startswith("slow call: "), 10), "no slow call printed"
        time.sleep(0.5)  # the other two

    with harness.redis(str(tmp_path), "--enable-debug-command", "local") as (srv, port):
        argv, rw, out_text, err = tracing.start_retwatch(
            [srv.pid], ["debugCommand"], options=("--threshold", "5ms"), json_out=False)
        try:
            assert err.wait_for(lambda l: l.startswith(tracing.TRACING_LINE), tracing.ATTACH_TIMEOUT), \
                err.text
            three_slow_commands()
            rw.send_signal(signal.SIGINT)
            rw.wait(tracing.EXIT_TIMEOUT)
            out_text.join()
            err.join()
        finally:
            if rw.poll() is None:
                rw.kill()
                rw.wait()
    assert rw.returncode == 0, err.text
    out = out_text.text
    assert_canonical(out)
    blocks = re.findall(r"^slow call: debugCommand took .*\n((?:    .*\n)+)", out, re.M)
    assert len(blocks) == 3, out
    for b in blocks:
        frames = [l.strip() for l in b.splitlines()]
        names = [f.split("+")[0] for f in frames if f.endswith(")")]
        # at least 4 named frames, innermost first, in the order redis calls them
        assert [f.split("+")[0] for f in frames[:4]] == REDIS_CHAIN, b
        assert len(names) >= 4 and not any("(?)" in f for f in frames), b
