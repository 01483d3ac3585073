"""Every test function of every fixture binary against the independent
disassembler (the [REF] assertions are in harness.assert_function):

  Go functions  go tool nm -size + go tool objdump of the toolchain that built
                the binary, on the unstripped twin. Stripped binaries must give
                the same entry, size, returns and tail calls, from pclntab.
  C functions   GNU nm -S + objdump -d on the unstripped twin (the function and
                its .cold part). The DWARF-only copy must give the same numbers
                from DWARF, the stripped shared library from .dynsym.
"""

import re

import pytest

import harness
import reference
from harness import binaries

GO_CASES = [(b, name) for b in binaries() for name in b.go_funcs()]
C_CASES = [(b, name) for b in binaries() for name in b.c_funcs()]


def case_id(case):
    b, name = case
    return f"{b.id}:{name}"


@pytest.mark.parametrize("case", GO_CASES, ids=case_id)
def test_go_function_matches_go_objdump(case):
    b, name = case
    twin_names = tuple(b.twin_spell(n) for n in b.go_funcs())
    ref = reference.go_functions(b.toolchain, b.unstripped, twin_names)[b.twin_spell(name)]
    # stripped too: the size without the int3 padding up to the next function
    harness.assert_function(harness.inspected(b, b.spell(name)), ref, b)


@pytest.mark.parametrize("case", C_CASES, ids=case_id)
def test_c_function_matches_gnu_objdump(case):
    b, name = case
    ref = reference.c_function(b.unstripped, name)
    harness.assert_function(harness.inspected(b, name), ref, b)


def test_cases_cover_every_kind_of_fixture():
    """Guards against a manifest that silently lost binaries."""
    variants = {(b.program, b.variant) for b, _ in GO_CASES + C_CASES}
    for want in [("demo", v) for v in ("default", "stripped", "pie", "pie-stripped")] + [
        ("cgodemo", "cgo"), ("cgodemo", "cgo-stripped"),
        ("cfix", "normal"), ("cfix", "nopie"), ("cfix", "dwarf-only"),
        ("libfix.so", "shared"), ("libfix.so", "shared-stripped"),
    ]:
        assert want in variants, f"no test case for {want}"
    toolchains = {b.toolchain for b, _ in GO_CASES}
    assert len(toolchains) >= 3, f"Go toolchains: {sorted(toolchains)}"


def sections(path):
    """{name: (address, size)} of the sections, from readelf."""
    out = reference.run_tool(["readelf", "-SW", path])
    secs = {}
    for m in re.finditer(r"^\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)",
                         out, re.M):
        secs[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16))
    return secs


@pytest.mark.parametrize("variant", ["legacy", "v0"])
def test_symbol_without_size_ends_with_its_section(variant):
    """rustc's linker gives _init and _fini size 0 and leaves zeros between
    .init and .fini: each ends where its section does, not at the next
    symbol, and decodes to objdump's RET."""
    path = harness.fixture(f"rust/{variant}/main")
    secs = sections(path)
    funcs = harness.functions_by_name(harness.inspect_json(path, ["_init", "_fini"]))
    for name, section in (("_init", ".init"), ("_fini", ".fini")):
        addr, size = secs[section]
        symtab = reference.run_tool(["readelf", "-sW", path])
        assert re.search(rf"\b0*{addr:x}\s+0 FUNC .* {name}$", symtab, re.M), f"{name}: not {addr:#x}, size 0"
        f = funcs[name]
        assert (f["address"], f["size"]) == (addr, size), f
        ref = reference.analyse(name, [(addr, size)], reference.gnu_disassemble(path, addr, addr + size))
        assert f["mode"] == "entry+ret" and f["returns"] == list(ref.returns) != [], (f, ref)
