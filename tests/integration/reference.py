"""Independent references for `retwatch inspect`.

Nothing here uses retwatch: every expected number comes from another tool.

  Go functions   `go tool nm -size` (address, size) and `go tool objdump`
                 (instructions), both of the toolchain that built the binary,
                 run on the unstripped twin.
  C functions    GNU `nm -S` (address and size of `f` and of its `f.cold`
                 part) and GNU `objdump -d` (instructions), on the unstripped
                 twin.
  ELF facts      `readelf -lW` (PT_LOAD segments -> file offsets), `readelf
                 -SW` (section names), `readelf -n` (GNU build id),
                 `go tool buildid` (Go build id).

Both disassemblers' output is reduced to the same Insn records, then
analyse() derives returns, tail calls and the acceptable modes.
"""

import functools
import glob
import os
import re
import subprocess
from dataclasses import dataclass

# --------------------------------------------------------------------------
# running tools


def run_tool(argv, env=None):
    """stdout of a reference tool; any failure is a broken test setup."""
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run(argv, capture_output=True, text=True, env=full_env, cwd="/", timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


@functools.lru_cache(maxsize=None)
def local_go(toolchain):
    """The go command of a distribution package (/usr/lib/go-X.Y) of this
    version, or None: such a version is not fetched through GOTOOLCHAIN."""
    for go in sorted(glob.glob("/usr/lib/go-*/bin/go")):
        env = dict(os.environ, GOTOOLCHAIN="local")
        proc = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, env=env)
        if proc.returncode == 0 and proc.stdout.strip() == toolchain:
            return go
    return None


def go_tool(toolchain, *args):
    """`go tool ARGS` of one toolchain ("go1.21.13"): a distribution's package
    of that version, else GOTOOLCHAIN fetches it."""
    go = local_go(toolchain)
    if go:
        return run_tool([go, "tool", *args], env={"GOTOOLCHAIN": "local", "GOFLAGS": ""})
    return run_tool(["go", "tool", *args], env={"GOTOOLCHAIN": toolchain, "GOFLAGS": ""})


# --------------------------------------------------------------------------
# ELF facts


@functools.lru_cache(maxsize=None)
def load_segments(binary):
    """[(p_offset, p_vaddr, p_filesz)] of the PT_LOAD headers, from readelf."""
    segs = []
    for line in run_tool(["readelf", "-lW", binary]).splitlines():
        cols = line.split()
        if cols and cols[0] == "LOAD":
            segs.append((int(cols[1], 16), int(cols[2], 16), int(cols[4], 16)))
    return segs


def file_offset(binary, address):
    """Offset in the file of a virtual address: what a uprobe is attached at."""
    for offset, vaddr, filesz in load_segments(binary):
        if vaddr <= address < vaddr + filesz:
            return address - vaddr + offset
    raise ValueError(f"{binary}: {address:#x} is in no PT_LOAD segment")


@functools.lru_cache(maxsize=None)
def section_names(binary):
    names = set()
    for line in run_tool(["readelf", "-SW", binary]).splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)", line)
        if m:
            names.add(m.group(1))
    return frozenset(names)


def has_symtab(binary):
    return ".symtab" in section_names(binary)


@functools.lru_cache(maxsize=None)
def gnu_build_id(binary):
    m = re.search(r"Build ID:\s*([0-9a-f]+)", run_tool(["readelf", "-n", binary]))
    return m.group(1) if m else None


@functools.lru_cache(maxsize=None)
def go_build_id(toolchain, binary):
    return go_tool(toolchain, "buildid", binary).strip()


# --------------------------------------------------------------------------
# instructions, reduced to what retwatch cares about


@dataclass(frozen=True)
class Insn:
    address: int
    kind: str  # "ret", "jmp" (unconditional), "bad" (undecodable), "other"
    target: int | None = None  # direct jmp target; None when indirect


@dataclass(frozen=True)
class Func:
    name: str
    address: int  # entry
    size: int  # of the entry range
    ranges: tuple  # ((address, size), ...), the entry range first
    returns: tuple  # offsets from address, ascending
    tail_calls: tuple  # offsets from address of jmps leaving all ranges
    undecodable: bool

    def file_offset(self, binary):
        return file_offset(binary, self.address)

    def modes(self):
        """The modes retwatch may report for this function."""
        if self.undecodable:
            return {"entry-only"}
        if not self.returns:
            # Only a tail call leaves it: entry-only ("no return found") or
            # the tail call counted as an exit; the spec allows both readings.
            return {"entry-only", "entry+ret+tailcall"} if self.tail_calls else {"entry-only"}
        return {"entry+ret+tailcall"} if self.tail_calls else {"entry+ret"}


def analyse(name, ranges, insns):
    """A Func from its ranges and the instructions found inside them."""
    entry, size = ranges[0]

    def inside(addr):
        return any(start <= addr < start + length for start, length in ranges)

    mine = [i for i in insns if inside(i.address)]
    returns = sorted(i.address - entry for i in mine if i.kind == "ret")
    tails = sorted(
        i.address - entry
        for i in mine
        if i.kind == "jmp" and i.target is not None and not inside(i.target)
    )
    return Func(
        name=name,
        address=entry,
        size=size,
        ranges=tuple(ranges),
        returns=tuple(returns),
        tail_calls=tuple(tails),
        undecodable=any(i.kind == "bad" for i in mine),
    )


# --------------------------------------------------------------------------
# Go: go tool nm / go tool objdump

GO_INSN = re.compile(r"^\s+\S+\s+0x([0-9a-f]+)\s+[0-9a-f]+\s+(.*?)\s*$")
GO_SYMREF = re.compile(r"^(.+?)(?:\+(\d+))?\(SB\)$")


@functools.lru_cache(maxsize=None)
def go_symbols(toolchain, binary):
    """{name: (address, size)} of the text symbols, from `go tool nm -size`."""
    syms = {}
    for line in go_tool(toolchain, "nm", "-size", binary).splitlines():
        cols = line.split(None, 3)
        if len(cols) == 4 and cols[2] in ("T", "t"):
            syms[cols[3]] = (int(cols[0], 16), int(cols[1]))
    return syms


def go_insn(address, text, symbols):
    """Insn from Go assembler syntax: `RET`, `JMP 0x4a1641`, `JMP main.f(SB)`."""
    op, _, operand = text.partition(" ")
    if op == "RET":
        return Insn(address, "ret")
    if op == "JMP":
        operand = operand.strip()
        if re.fullmatch(r"0x[0-9a-f]+", operand):
            return Insn(address, "jmp", int(operand, 16))
        m = GO_SYMREF.match(operand)
        if m and m.group(1) in symbols:
            return Insn(address, "jmp", symbols[m.group(1)][0] + int(m.group(2) or 0))
        return Insn(address, "jmp")  # register or memory operand: indirect
    if op == "?":
        return Insn(address, "bad")
    return Insn(address, "other")


@functools.lru_cache(maxsize=None)
def go_functions(toolchain, binary, names):
    """{name: Func} for a tuple of Go function names, one objdump run."""
    symbols = go_symbols(toolchain, binary)
    missing = [n for n in names if n not in symbols]
    if missing:
        raise LookupError(f"{binary}: go tool nm has no {missing}")
    regex = "^(?:" + "|".join(re.escape(n) for n in names) + ")$"
    blocks = {}
    current = None
    for line in go_tool(toolchain, "objdump", "-s", regex, binary).splitlines():
        if line.startswith("TEXT "):
            current = blocks.setdefault(line[5:].rsplit("(SB)", 1)[0], [])
            continue
        m = GO_INSN.match(line)
        if m and current is not None:
            current.append(go_insn(int(m.group(1), 16), m.group(2), symbols))
    result = {}
    for name in names:
        address, size = symbols[name]
        if name not in blocks:
            raise LookupError(f"{binary}: go tool objdump printed no {name}")
        result[name] = analyse(name, [(address, size)], blocks[name])
    return result


# --------------------------------------------------------------------------
# C: GNU nm / objdump

RET_OPS = {"ret", "retq", "retw", "retl", "lret", "lretq", "lretl", "lretw"}
JMP_OPS = {"jmp", "jmpq"}
PREFIXES = {
    "rep", "repz", "repe", "repnz", "repne", "bnd", "notrack", "lock",
    "data16", "addr32", "cs", "ds", "es", "fs", "gs", "ss",
}
GNU_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(.*?)\s*$")


@functools.lru_cache(maxsize=None)
def elf_symbols(binary):
    """{name: (address, size)} of defined code symbols, from `nm -S`."""
    syms = {}
    for line in run_tool(["nm", "-S", "--defined-only", binary]).splitlines():
        cols = line.split()
        if len(cols) == 4 and cols[2] in ("T", "t", "W", "w", "i"):
            syms.setdefault(cols[3], (int(cols[0], 16), int(cols[1], 16)))
    return syms


def gnu_insn(address, text):
    """Insn from objdump's AT&T syntax (`repz ret`, `jmp 1400 <scale>`)."""
    text = text.split("#", 1)[0].strip()
    if text.startswith("(bad)"):
        return Insn(address, "bad")
    tokens = text.split()
    while tokens and tokens[0] in PREFIXES:
        tokens.pop(0)
    if not tokens:
        return Insn(address, "other")
    op = tokens[0]
    if op in RET_OPS:
        return Insn(address, "ret")
    if op in JMP_OPS:
        m = re.match(r"([0-9a-f]+)\b", tokens[1] if len(tokens) > 1 else "*")
        return Insn(address, "jmp", int(m.group(1), 16) if m else None)
    return Insn(address, "other")


@functools.lru_cache(maxsize=None)
def gnu_disassemble(binary, start, end):
    out = run_tool([
        "objdump", "-d", "-w", "--no-show-raw-insn",
        f"--start-address={start:#x}", f"--stop-address={end:#x}", binary,
    ])
    insns = []
    for line in out.splitlines():
        m = GNU_INSN.match(line)
        if m:
            insns.append(gnu_insn(int(m.group(1), 16), m.group(2)))
    return tuple(insns)


def c_function(binary, name):
    """Func of a C function: its symbol plus its `.cold` part, if any."""
    symbols = elf_symbols(binary)
    if name not in symbols:
        raise LookupError(f"{binary}: nm has no {name}")
    ranges = [symbols[name]]
    if name + ".cold" in symbols:
        ranges.append(symbols[name + ".cold"])
    insns = [i for start, size in ranges for i in gnu_disassemble(binary, start, start + size)]
    return analyse(name, ranges, insns)


# --------------------------------------------------------------------------
# globs


def glob_regex(pattern):
    """retwatch's patterns: `*` and `?` are wildcards, everything else literal."""
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts) + r"\Z", re.S)


def glob_match(pattern, names):
    regex = glob_regex(pattern)
    return {n for n in names if regex.match(n)}
