"""Every test function of every fixture binary against the independent
disassembler (the [REF] assertions are in harness.assert_function):

  Go functions  go tool nm -size + go tool objdump of the toolchain that built
                the binary, on the unstripped twin. Stripped binaries must give
                the same entry, size, returns and tail calls, from pclntab.
  C functions   GNU nm -S + objdump -d on the unstripped twin (the function and
                its .cold part). The DWARF-only copy must give the same numbers
                from DWARF, the stripped shared library from .dynsym.
"""

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
