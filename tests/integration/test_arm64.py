"""`retwatch inspect` on AArch64 binaries, read here (x86-64): the Go demo
and tracee built for linux/arm64, and Debian's arm64 libc (unpacked from
libc6:arm64 into the cache by scripts/deps.sh, not installed).

[REF] GNU `aarch64-linux-gnu-objdump -d` (binutils-aarch64-linux-gnu) and
`aarch64-linux-gnu-nm -S`: every function's return instructions (RET, RETAA,
RETAB) and the direct branches that leave it (B, B.cond, CBZ, CBNZ, TBZ,
TBNZ to an address outside the function) are retwatch's returns and tail
calls, function by function.
"""

import bisect
import os
import re
import shutil

import pytest

import harness
import reference

OBJDUMP = "aarch64-linux-gnu-objdump"
NM = "aarch64-linux-gnu-nm"
CACHE = os.environ.get("RETWATCH_CACHE", os.path.expanduser("~/.cache/retwatch"))
LIBC = os.path.join(CACHE, "debs-arm64", "libc", "lib", "aarch64-linux-gnu", "libc.so.6")


def go_arm64(variant, program="demo"):
    ver = os.readlink(harness.fixture("tracee/native")).split("/")[0]
    return harness.fixture(f"arm64/{ver}/{variant}/{program}")


@pytest.fixture(scope="module", autouse=True)
def tools():
    missing = [t for t in (OBJDUMP, NM) if shutil.which(t) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not on PATH (scripts/deps.sh installs binutils-aarch64-linux-gnu)",
                    pytrace=False)
    if not os.path.isfile(LIBC):
        pytest.fail(f"no arm64 libc at {LIBC} (scripts/deps.sh unpacks libc6:arm64)", pytrace=False)


RET = re.compile(r"^\s*([0-9a-f]+):\s+(ret|retaa|retab)\b")
# a direct branch: its target is its last operand (objdump's "// b.hs" comment cut off)
BRANCH = re.compile(r"^\s*([0-9a-f]+):\s+(b|b\.\w+|bc\.\w+|cbn?z|tbn?z)\s+(?:[^,/]+,\s*)*([0-9a-f]+)(?: <[^>]*>)?\s*(?://.*)?$")


def functions(binary, dynamic):
    """{address: (name, size)} of the functions nm lists with a size."""
    out = reference.run_tool([NM, "-S", "--defined-only", *(["-D"] if dynamic else []), binary])
    funcs = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "TtWi" and int(parts[1], 16):
            funcs.setdefault(int(parts[0], 16), (parts[3].split("@")[0], int(parts[1], 16)))
    return funcs


def objdump_exits(binary, funcs):
    """{address: (returns, tail calls)} of each function, as offsets."""
    starts = sorted(funcs)
    exits = {a: (set(), set()) for a in starts}
    out = reference.run_tool([OBJDUMP, "-d", "--no-show-raw-insn", "-w", binary])
    for line in out.splitlines():
        m = RET.match(line)
        b = None if m else BRANCH.match(line)
        if not (m or b):
            continue
        addr = int((m or b).group(1), 16)
        i = bisect.bisect_right(starts, addr) - 1
        if i < 0:
            continue
        start = starts[i]
        size = funcs[start][1]
        if addr >= start + size:
            continue
        if m:
            exits[start][0].add(addr - start)
        else:
            target = int(b.group(3), 16)
            if not start <= target < start + size:
                exits[start][1].add(addr - start)
    return exits


def compare(binary, dynamic):
    doc = harness.inspect_json(binary, ["*"], options=("--limit", "100000"))
    assert doc["machine"] == "aarch64", {k: v for k, v in doc.items() if k != "functions"}
    funcs = functions(binary, dynamic)
    ref = objdump_exits(binary, funcs)
    compared, wrong = 0, []
    for f in doc["functions"]:
        if f["address"] not in funcs or funcs[f["address"]][1] != f["size"] or len(f["ranges"]) != 1:
            continue
        if f["mode"] == "entry-only" and not f["returns"] and "limit" in (f["reason"] or ""):
            continue
        rets, tails = ref[f["address"]]
        got = (set(f["returns"]), set(f["tail_calls"]))
        compared += 1
        if got != (rets, tails):
            wrong.append(f"{f['name']} @0x{f['address']:x}: returns {sorted(got[0])} tail calls "
                         f"{sorted(got[1])}; objdump: {sorted(rets)} and {sorted(tails)}")
    return compared, wrong


@pytest.mark.parametrize("program", ["demo", "tracee"])
def test_go_exits_match_objdump(program):
    compared, wrong = compare(go_arm64("default", program), dynamic=False)
    assert compared > 1000, compared
    assert not wrong, f"{len(wrong)} of {compared} functions differ:\n" + "\n".join(wrong[:20])


def test_libc_exits_match_objdump():
    compared, wrong = compare(LIBC, dynamic=True)
    assert compared > 1000, compared
    assert not wrong, f"{len(wrong)} of {compared} functions differ:\n" + "\n".join(wrong[:20])


def test_stripped_pie_go_names_every_function_from_its_pclntab():
    """The stripped PIE twin: the same main.* functions, with as many
    returns each, found through .gopclntab alone."""
    def mains(path):
        doc = harness.inspect_json(path, ["main.*"])
        return {f["name"]: len(f["returns"]) for f in doc["functions"]}

    full, stripped = mains(go_arm64("default")), mains(go_arm64("pie-stripped"))
    assert len(full) > 10 and stripped == full, (full, stripped)


INSN = re.compile(r"^\s*([0-9a-f]+):\s+([a-z][\w.]*)\s*([^/<]*)")
# what a word before a moved entry probe may be (entrysite_a64.c's plain ones)
PLAIN = {"ldr", "ldur", "ldrb", "ldrh", "ldrsw", "ldrsb", "ldrsh", "str", "stur", "strb", "strh",
         "stp", "add", "adds", "sub", "subs", "cmp", "cmn", "mov", "movz", "movk", "movn", "orr",
         "and", "ands", "eor", "tst", "adr", "adrp", "neg", "mvn", "lsl", "lsr", "asr"}


def test_go_entry_probes_on_the_stack_check():
    """Go's arm64 entries move onto the stack check's B.LS (or a branch or BL
    past it), which the arm64 kernel simulates: as objdump reads them, the
    word at the site is a branch, and the words before it are plain ones
    that write neither SP, X30 (the return address) nor X28 (g)."""
    binary = go_arm64("default", "tracee")
    doc = harness.inspect_json(binary, ["main.*"])
    words = {}
    for line in reference.run_tool([OBJDUMP, "-d", "--no-show-raw-insn", "-w", binary]).splitlines():
        m = INSN.match(line)
        if m:
            words[int(m.group(1), 16)] = (m.group(2), m.group(3).strip())
    moved = [f for f in doc["functions"] if f["entry_site"] > 0]
    assert len(moved) > len(doc["functions"]) // 2, [f["name"] for f in doc["functions"]]
    for f in moved:
        site = f["address"] + f["entry_site"]
        op, _ = words[site]
        assert op in ("b", "bl", "cbz", "cbnz", "tbz", "tbnz") or op.startswith("b."), (f, words[site])
        assert f["entry_kind"] in ("jump", "call"), f
        for a in range(f["address"], site, 4):
            op, args = words[a]
            dest = args.split(",")[0].strip()
            assert op in PLAIN or op.startswith("b."), (f["name"], hex(a), op, args)
            # no writeback to a base register: [Xn, #i]! or [Xn], #i
            assert "]!" not in args and "], #" not in args, (f["name"], hex(a), op, args)
            if op in ("str", "stur", "strb", "strh", "stp", "cmp", "cmn", "tst") or op.startswith("b."):
                continue
            assert dest not in ("sp", "x30", "w30", "x28", "w28"), (f["name"], hex(a), op, args)
