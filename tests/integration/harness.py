"""Where the fixtures are, which functions the tests look up, and how
`retwatch inspect` is run.

Environment (both required; conftest.py refuses to run without them):
  RETWATCH            the retwatch binary under test
  RETWATCH_FIXTURES   the OUTDIR of tests/fixtures/build.sh
"""

import contextlib
import functools
import json
import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass

import pytest

import reference

RETWATCH = os.environ.get("RETWATCH", "")
FIXTURES = os.environ.get("RETWATCH_FIXTURES", "")

# Functions of tests/fixtures/go/main.go (program `demo`).
GO_DEMO_FUNCS = (
    "main.main",
    "main.ProcessPayment",
    "main.CalculateTotal",
    "main.ValidateCard",
    "main.luhn",
    "main.chargeCard",
    "main.(*Cart).Add",
    "main.(*Cart).Total",
    "main.Map[go.shape.int]",  # the generic function's shape instance
    "main.makeCounter",
    "main.makeCounter.func1",  # the closure
    "main.fib",  # recursive
    "main.safeDivide",  # panics and recovers
    "main.safeDivide.func1",  # its deferred closure
    "main.distinctItems",  # uses a function-local type
    "main.add",
    "main.addMany",
    "main.addThree",
)
# Go functions of tests/fixtures/cgo/main.go (program `cgodemo`).
GO_CGODEMO_FUNCS = ("main.main", "main.Fee", "main.checkout")
# C functions of the cgo program: only in the unstripped binary's .symtab.
C_CGODEMO_FUNCS = ("fee_cents",)

# Functions of tests/fixtures/c/fix.c.
C_FIX_FUNCS = (
    "main",
    "parse_sign",
    "parse_int",
    "parse_hex",
    "scale",
    "dispatch",  # a ret and a tail call
    "forward",  # only a tail call
    "report",  # cold attribute; tail-calls fprintf through the PLT
    "checked_div",  # has a checked_div.cold part
    "fib",  # recursive
    "fatal_exit",  # no ret: entry-only
)
# Hand-written in top-level asm: in .symtab, not in DWARF.
C_FIX_ASM_FUNCS = ("asm_rets", "asm_bad")
# Functions of tests/fixtures/c/libfix.c.
C_LIB_FUNCS = ("fix_sum", "fix_max", "fix_total")


@dataclass(frozen=True)
class Binary:
    path: str  # absolute
    kind: str  # "go" or "c"
    program: str  # demo, cgodemo, cfix, libfix.so
    toolchain: str  # go1.21.13, gcc-12.2.0
    variant: str
    stripped: bool
    unstripped: str  # absolute path of the unstripped twin (itself if unstripped)

    @property
    def id(self):
        return os.path.relpath(self.path, FIXTURES)

    def expected_source(self):
        """The table retwatch must take the functions from."""
        if self.kind == "go":
            return "pclntab" if self.stripped else "symtab"
        return "dwarf" if self.variant == "dwarf-only" else "symtab"

    def go_funcs(self):
        """Go functions of this binary (pclntab or symtab), spelled as Go 1.20+
        does; spell() gives this binary's spelling."""
        return {"demo": GO_DEMO_FUNCS, "cgodemo": GO_CGODEMO_FUNCS}.get(self.program, ())

    def spell(self, name):
        """A test function's name as this binary spells it."""
        return go_spelling(self.toolchain, self.stripped, name) if self.kind == "go" else name

    def twin_spell(self, name):
        """... and as its unstripped twin (and so go tool nm) spells it."""
        return go_spelling(self.toolchain, False, name) if self.kind == "go" else name

    def spell_pattern(self, pattern):
        return go_spelling(self.toolchain, False, pattern, pattern=True) if self.kind == "go" else pattern

    def to_twin(self, name):
        """This binary's name of a test function in its twin's spelling."""
        for n in self.go_funcs():
            if self.spell(n) == name:
                return self.twin_spell(n)
        return name

    def c_funcs(self):
        """C functions findable in this binary."""
        if self.program == "cfix":
            if self.variant == "stripped":
                return ()
            if self.variant == "dwarf-only":
                return C_FIX_FUNCS
            return C_FIX_FUNCS + C_FIX_ASM_FUNCS
        if self.program == "libfix.so":
            return C_LIB_FUNCS
        if self.program == "cgodemo" and not self.stripped:
            return C_CGODEMO_FUNCS
        return ()

    def funcs(self):
        return tuple(self.spell(n) for n in self.go_funcs()) + self.c_funcs()


def kernel_version():
    """This machine's kernel release as (major, minor)."""
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return int(m.group(1)), int(m.group(2))


def go_version(toolchain):
    m = re.match(r"go(\d+)\.(\d+)", toolchain)
    return (int(m.group(1)), int(m.group(2)))


def go_spelling(toolchain, stripped, name, pattern=False):
    """How one build spells a name given as Go 1.20+ spells it. Before Go 1.20
    compiler-generated functions start with "type.." instead of "type:.", and
    a generic's shape instance is "Map[go.shape.int_0]" in the symbol table
    but only "Map[...]" in the function table, all a stripped binary keeps."""
    if go_version(toolchain) >= (1, 20):
        return name
    if not pattern and re.fullmatch(r"main\.Map\[.*\]", name):
        return "main.Map[...]" if stripped else "main.Map[go.shape.int_0]"
    return name.replace("type:.", "type..", 1)


def param_id(value):
    """pytest id of a parameter: a Binary by its path under the fixtures."""
    return value.id if isinstance(value, Binary) else str(value)


@functools.lru_cache(maxsize=None)
def manifest():
    with open(os.path.join(FIXTURES, "manifest.json")) as f:
        return json.load(f)


def binaries(kind=None, program=None, predicate=lambda b: True):
    out = []
    for rec in manifest()["binaries"]:
        b = Binary(
            path=os.path.join(FIXTURES, rec["path"]),
            kind=rec["kind"],
            program=rec["program"],
            toolchain=rec["toolchain"],
            variant=rec["variant"],
            stripped=rec["stripped"],
            unstripped=os.path.join(FIXTURES, rec["unstripped"]),
        )
        if kind in (None, b.kind) and program in (None, b.program) and predicate(b):
            out.append(b)
    return out


def malformed_files():
    return [os.path.join(FIXTURES, m["path"]) for m in manifest()["malformed"]]


DEBS = os.path.join(os.environ.get("RETWATCH_CACHE", os.path.expanduser("~/.cache/retwatch")),
                    "debs")


def deb_binary(name, relpath):
    """A program of Debian's package name, unpacked by scripts/deps.sh into
    the cache. Skips the test only where deps.sh could not fetch it (it says
    so in name.unavailable); fails when deps.sh was not run."""
    path = os.path.join(DEBS, name, relpath)
    if os.path.exists(path):
        return path
    unavailable = os.path.join(DEBS, f"{name}.unavailable")
    if os.path.exists(unavailable):
        with open(unavailable) as f:
            pytest.skip(f"Debian's {name} is not in the cache: {f.read().strip()}")
    pytest.fail(f"{path} is missing: run scripts/deps.sh (make deps)", pytrace=False)


def free_port():
    """A loopback TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, timeout=10):
    """Until something accepts TCP connections on the loopback port; fails
    when proc exits first or the time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the server exited with {proc.returncode} before listening"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


NGINX_CONF = """daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {dir}; proxy_temp_path {dir}; fastcgi_temp_path {dir};
    uwsgi_temp_path {dir}; scgi_temp_path {dir};
    server {{
{server}
    }}
}}
"""


@contextlib.contextmanager
def serving(srv, port):
    """Until srv (a server just started) listens on port; it is stopped by
    its PID when the block ends, however it ends."""
    try:
        wait_listening(port, srv)
        yield
    finally:
        srv.kill()
        srv.wait()


@contextlib.contextmanager
def nginx(directory, server):
    """Debian's nginx as one process (no master: the process is the worker)
    serving one server block (its lines, "{port}" in them replaced) on a
    free loopback port, writing only into directory. Yields (Popen, port);
    stopped by its PID."""
    exe = deb_binary("nginx", "usr/sbin/nginx")
    port = free_port()
    conf = os.path.join(directory, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(dir=directory, server=server.replace("{port}", str(port))))
    log = os.path.join(directory, "error.log")
    srv = subprocess.Popen([exe, "-p", directory, "-c", conf, "-e", log],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with serving(srv, port):
        yield srv, port


@contextlib.contextmanager
def redis(directory, *args):
    """Debian's redis-server on a free loopback port, persisting nothing,
    writing only into directory; args are more options. Yields (Popen,
    port); stopped by its PID."""
    exe = deb_binary("redis", "usr/bin/redis-check-rdb")
    port = free_port()
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(DEBS, "redis/usr/lib/x86_64-linux-gnu"))
    # redis-check-rdb is the server when run under the name redis-server
    srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--dir", directory, *args],
                           executable=exe, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    with serving(srv, port):
        yield srv, port


class Resp:
    """A RESP connection to a redis server on loopback: one command, one
    reply, in turn."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.rfile = self.sock.makefile("rb")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.rfile.close()
        self.sock.close()

    def command(self, *args):
        """The reply: str for a status or bulk string, int, None for a nil."""
        req = f"*{len(args)}\r\n" + "".join(f"${len(str(a))}\r\n{a}\r\n" for a in args)
        self.sock.sendall(req.encode())
        line = self.rfile.readline().decode().rstrip("\r\n")
        kind, rest = line[:1], line[1:]
        if kind == "+":
            return rest
        if kind == ":":
            return int(rest)
        if kind == "$":
            if int(rest) < 0:
                return None
            data = self.rfile.read(int(rest) + 2)
            return data[:-2].decode()
        raise AssertionError(f"redis replied {line!r} to {args}")


def fixture(relpath):
    return os.path.join(FIXTURES, relpath)


def go_demo(variant):
    """The demo binary of one variant, built by the machine's go (go/native)."""
    native = os.readlink(fixture("go/native")).split("/")[0]
    found = binaries(program="demo", predicate=lambda b: b.toolchain == native and b.variant == variant)
    assert len(found) == 1, f"no {native} {variant} demo in manifest.json"
    return found[0]


def c_fix(variant):
    found = binaries(program="cfix", predicate=lambda b: b.variant == variant)
    assert len(found) == 1, f"no {variant} cfix in manifest.json"
    return found[0]


# --------------------------------------------------------------------------
# running retwatch

SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:")


@dataclass(frozen=True)
class Run:
    argv: tuple
    returncode: int
    stdout: str
    stderr: str

    def describe(self):
        return (f"$ {' '.join(self.argv)}\nexit {self.returncode}\n"
                f"--- stderr\n{self.stderr[-3000:]}\n--- stdout\n{self.stdout[:2000]}")

    def assert_no_crash(self):
        """Exit by exit(), not by a signal, and no sanitizer report."""
        assert 0 <= self.returncode < 128, f"crashed\n{self.describe()}"
        for mark in SANITIZER_MARKS:
            assert mark not in self.stderr, f"sanitizer report\n{self.describe()}"

    def assert_refused(self):
        """Non-zero exit with a message, and no crash."""
        self.assert_no_crash()
        assert self.returncode != 0, f"expected a failure\n{self.describe()}"
        assert self.stderr.strip(), f"no message on stderr\n{self.describe()}"


@functools.lru_cache(maxsize=None)
def inspect(*args):
    """Runs `retwatch inspect ARGS...` once per distinct ARGS."""
    argv = (RETWATCH, "inspect", *args)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    return Run(argv, proc.returncode, proc.stdout, proc.stderr)


def inspect_json(path, patterns, options=()):
    """The parsed --json document of a successful run."""
    run = inspect("--json", *options, path, *patterns)
    run.assert_no_crash()
    assert run.returncode == 0, f"inspect failed\n{run.describe()}"
    try:
        return json.loads(run.stdout)
    except json.JSONDecodeError as e:
        raise AssertionError(f"stdout is not JSON ({e})\n{run.describe()}") from None


def functions_by_name(doc):
    names = [f["name"] for f in doc["functions"]]
    dups = {n for n in names if names.count(n) > 1}
    assert not dups, f"functions listed twice: {sorted(dups)}"
    return {f["name"]: f for f in doc["functions"]}


@functools.lru_cache(maxsize=None)
def document(binary):
    """The --json document for all of a binary's test functions (one run)."""
    return inspect_json(binary.path, binary.funcs())


def inspected(binary, name):
    """One function of document(binary); fails when retwatch did not list it."""
    funcs = functions_by_name(document(binary))
    assert name in funcs, f"{binary.id}: {name} not in output ({sorted(funcs)})"
    return funcs[name]


# --------------------------------------------------------------------------
# comparing with the reference


def assert_function(got, ref, binary):
    """One function of retwatch's output against its reference (a
    reference.Func from the independent disassembler)."""
    where = f"{binary.id} {ref.name}"
    # [REF] entry and size: go tool nm / GNU nm
    assert got["address"] == ref.address, f"{where}: address {got['address']:#x} != {ref.address:#x}"
    assert got["size"] == ref.size, f"{where}: size {got['size']} != {ref.size}"
    expected_ranges = list(ref.ranges)
    # [REF] ranges: the symbol, plus its .cold part for C
    ranges = [(r["address"], r["size"]) for r in got["ranges"]]
    assert ranges[:1] == expected_ranges[:1], f"{where}: entry range {ranges[:1]} != {expected_ranges[:1]}"
    assert sorted(ranges[1:]) == sorted(expected_ranges[1:]), f"{where}: ranges {ranges} != {expected_ranges}"
    # [REF] file offset: the binary's own PT_LOAD headers (readelf -lW)
    want_off = reference.file_offset(binary.path, ref.address)
    assert got["file_offset"] == want_off, f"{where}: file_offset {got['file_offset']:#x} != {want_off:#x}"
    # [REF] mode, returns and tail calls: the disassembler's ret and jmp lines
    assert got["mode"] in ref.modes(), f"{where}: mode {got['mode']!r} not in {sorted(ref.modes())}"
    if got["mode"] == "entry-only":
        assert isinstance(got["reason"], str) and got["reason"], f"{where}: entry-only without a reason"
    else:
        assert got["reason"] is None, f"{where}: reason {got['reason']!r} for mode {got['mode']}"
    if not ref.undecodable:  # past an undecodable byte, nothing is certain
        assert sorted(got["returns"]) == list(ref.returns), \
            f"{where}: returns {sorted(got['returns'])} != {list(ref.returns)}"
        assert sorted(got["tail_calls"]) == list(ref.tail_calls), \
            f"{where}: tail_calls {sorted(got['tail_calls'])} != {list(ref.tail_calls)}"
    # which table gave the function
    assert got["source"] == binary.expected_source(), \
        f"{where}: source {got['source']!r} != {binary.expected_source()!r}"
