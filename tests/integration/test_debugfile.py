"""Stripped binaries with separate debug files (issue 30, item 2), on
tests/fixtures/c/debugfix.c split as distributions ship it: the binary
stripped of every symbol with a .gnu_debuglink, and its debug file.

The debug file is placed as gdb looks for it: (a) under a --debug-dir in
.build-id layout (DIR/.build-id/xx/yyyy.debug), the binary alone elsewhere;
(b) beside the binary, by the name .gnu_debuglink holds; (c) beside it with
a CRC-32 that is not the link's: ignored, and said. With the debug file,
`retwatch inspect` finds the static functions and says where their names
came from, and `retwatch trace` counts their calls exactly.

[REF] Addresses and sizes from GNU nm on the debug file, RET sites from GNU
objdump on the stripped binary (reference.py), file offsets from the
binary's program headers (readelf); call counts from the program itself.
Tracing needs root and bpftool; about 2 s per run.
"""

import os
import re
import shutil
import subprocess

import pytest

import harness
import reference
import tracing

STATIC = ("parse_record", "checksum")


def fixture_pair():
    d = harness.fixture("c/debug")
    exe, dbg = os.path.join(d, "debugfix"), os.path.join(d, "debugfix.debug")
    assert os.path.exists(exe) and os.path.exists(dbg), f"{d} is incomplete (rebuild the fixtures)"
    return exe, dbg


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    assert m, f"{path} has no GNU build id"
    return m.group(1)


def place(tmp, layout):
    """The stripped binary and its debug file laid out as layout says: the
    binary's path and the options retwatch needs."""
    exe, dbg = fixture_pair()
    bindir = tmp / "bin"
    bindir.mkdir()
    shutil.copy2(exe, bindir / "debugfix")
    options = ()
    if layout == "build-id":
        bid = build_id(exe)
        where = tmp / "debug" / ".build-id" / bid[:2]
        where.mkdir(parents=True)
        shutil.copy2(dbg, where / (bid[2:] + ".debug"))
        options = ("--debug-dir", str(tmp / "debug"))
    elif layout == "debuglink":
        shutil.copy2(dbg, bindir / "debugfix.debug")
    elif layout == "debug-subdir":
        (bindir / ".debug").mkdir()
        shutil.copy2(dbg, bindir / ".debug" / "debugfix.debug")
    elif layout == "wrong-crc":
        shutil.copy2(dbg, bindir / "debugfix.debug")
        with open(bindir / "debugfix.debug", "ab") as f:
            f.write(b"\0")  # still ELF, still the same build id: only the CRC differs
    return str(bindir / "debugfix"), options


def text_offset(exe, addr):
    """File offset of a virtual address, by the binary's executable PT_LOAD."""
    out = subprocess.run(["readelf", "-lW", exe], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        cols = line.split()
        if cols and cols[0] == "LOAD" and "E" in cols[6:-1]:
            off, vaddr, filesz = int(cols[1], 16), int(cols[2], 16), int(cols[4], 16)
            if vaddr <= addr < vaddr + filesz:
                return addr - vaddr + off
    raise LookupError(f"{exe}: no executable segment holds {addr:#x}")


def test_stripped_binary_alone_has_no_static_function(tmp_path):
    path, _ = place(tmp_path, "none")
    run = harness.inspect(path, "parse_record")
    run.assert_refused()
    assert "its own are in its debug file, not found" in run.stderr, run.describe()
    assert "--debug-dir" in run.stderr and ".build-id/" in run.stderr, run.describe()


@pytest.mark.parametrize("layout", ["build-id", "debuglink", "debug-subdir"])
def test_inspect_finds_static_functions(tmp_path, layout):
    path, options = place(tmp_path, layout)
    _, dbg = fixture_pair()
    doc = harness.inspect_json(path, STATIC, options)
    assert doc["stripped"] is True and doc["debug_file"], doc
    if layout == "build-id":
        bid = build_id(path)
        assert doc["debug_file"] == str(tmp_path / "debug" / ".build-id" / bid[:2] / (bid[2:] + ".debug"))
    elif layout == "debuglink":
        assert doc["debug_file"] == os.path.join(os.path.dirname(path), "debugfix.debug")
    else:
        assert doc["debug_file"] == os.path.join(os.path.dirname(path), ".debug", "debugfix.debug")
    funcs = harness.functions_by_name(doc)
    syms = reference.elf_symbols(dbg)
    for name in STATIC:
        f = funcs[name]
        start, size = syms[name]
        ref = reference.analyse(name, [(start, size)], reference.gnu_disassemble(path, start, start + size))
        assert (f["address"], f["size"]) == (start, size), f
        assert f["file_offset"] == text_offset(path, start), f
        assert tuple(f["returns"]) == ref.returns, (f, ref)
        assert f["names_from"] == doc["debug_file"], f
    text = harness.inspect(*options, path, "parse_record")
    assert text.returncode == 0 and f"symbols from {doc['debug_file']}" in text.stdout, text.describe()


def test_wrong_crc_is_ignored_and_said(tmp_path):
    path, _ = place(tmp_path, "wrong-crc")
    run = harness.inspect(path, "parse_record")
    run.assert_refused()
    want = os.path.join(os.path.dirname(path), "debugfix.debug")
    assert re.search(rf"ignored debug file {re.escape(want)}: its CRC-32 is [0-9a-f]{{8}}, not the "
                     r"[0-9a-f]{8} that \.gnu_debuglink holds", run.stderr), run.describe()


def test_debug_dir_must_be_absolute():
    exe, _ = fixture_pair()
    run = harness.inspect("--debug-dir", "relative/dir", exe, "parse_record")
    assert run.returncode == 2 and "--debug-dir" in run.stderr, run.describe()


@pytest.mark.parametrize("layout", ["build-id", "debuglink"])
def test_trace_counts_static_functions(tmp_path, layout):
    path, options = place(tmp_path, layout)
    tracee = tracing.Tracee(path=path, kind="c", toolchain="gcc", variant="debug", stripped=True)
    r = tracing.run_ok([(tracee, "count")], STATIC, options=options)
    for name in STATIC:
        f = r.function(name)
        assert f["calls"] == r.report["calls"][name] > 0, f"{name}: {f}\n{r.describe()}"
        assert f["orphans"] == 0 and f["lost"] == 0, f


def container_root(tmp, layout):
    """A chroot holding the stripped binary at /bin/debugfix, the libraries it
    loads, and its debug file as layout says: in the root's own
    /usr/lib/debug/.build-id ("build-id") or beside the binary ("debuglink").
    The node's copy of the debug file is nowhere the search looks."""
    exe, dbg = fixture_pair()
    root = tmp / "root"
    (root / "bin").mkdir(parents=True)
    shutil.copy2(exe, root / "bin" / "debugfix")
    ldd = subprocess.run(["ldd", exe], capture_output=True, text=True, check=True).stdout
    for lib in re.findall(r"(/\S+) \(0x", ldd):
        dest = root / lib.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(lib), dest)
    if layout == "build-id":
        bid = build_id(exe)
        where = root / "usr/lib/debug/.build-id" / bid[:2]
        where.mkdir(parents=True)
        shutil.copy2(dbg, where / (bid[2:] + ".debug"))
        return root, f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"
    if layout == "escape":  # a link out of the root: resolved inside it, to nothing
        os.symlink(os.path.abspath(dbg), root / "bin" / "debugfix.debug")
        return root, None
    shutil.copy2(dbg, root / "bin" / "debugfix.debug")
    return root, "/bin/debugfix.debug"


@pytest.mark.parametrize("layout", ["build-id", "debuglink", "escape"])
def test_container_root_searched_first(tmp_path, layout):
    """A process in another root (chroot): its debug file is looked for
    inside that root (the path reported is the one the root sees), through
    /proc/PID/exe and /proc/PID/root/PATH as the agent names files. A
    symlink there to the node's copy leads nowhere (resolved in the root)."""
    root, want = container_root(tmp_path, layout)
    proc = subprocess.Popen(["chroot", str(root), "/bin/debugfix", "count"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("ready "), "the chrooted fixture did not start"
        for path in (f"/proc/{proc.pid}/exe", f"/proc/{proc.pid}/root/bin/debugfix"):
            if want is None:
                run = harness.inspect(path, "parse_record")
                run.assert_refused()
                assert "not found" in run.stderr, run.describe()
                continue
            doc = harness.inspect_json(path, STATIC)
            assert doc["debug_file"] == want, (path, doc)
            assert set(harness.functions_by_name(doc)) == set(STATIC), doc
    finally:
        proc.kill()
        proc.wait()
