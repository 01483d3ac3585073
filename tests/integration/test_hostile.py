"""Files crafted to exhaust the analysis (issue 16): each costs an error or an
entry-only function with the limit named, at once, never the memory and
minutes it took before. The binaries are built here, from C and assembly."""

import os
import struct
import subprocess

import harness

SOURCE = r"""
#include <stdio.h>
#define STR2(x) #x
#define STR(x) STR2(x)
/* BYTES bytes of FILL, then a last RET */
__asm__(".text\n.globl crafted\n.type crafted,@function\ncrafted:\n"
        ".fill " STR(BYTES) ",1," STR(FILL) "\nret\n.size crafted, .-crafted\n");
int plain(int x)
{
        return x > 3 ? x * 2 : x + 1;
}
int main(int argc, char **argv)
{
        (void)argv;
        printf("%d\n", plain(argc));
        return 0;
}
"""


def build(tmp_path, name, nbytes, fill):
    src = tmp_path / "crafted.c"
    src.write_text(SOURCE)
    out = tmp_path / name
    subprocess.run(["gcc", "-O2", f"-DBYTES={nbytes}", f"-DFILL={fill}", "-o", str(out),
                    str(src)], check=True, capture_output=True)
    return str(out)


def functions(path):
    doc = harness.inspect_json(path, ["crafted", "plain"])
    return {f["name"]: f for f in doc["functions"]}


def test_too_many_return_sites_make_only_that_function_entry_only(tmp_path):
    fns = functions(build(tmp_path, "rets", 20000, "0xc3"))
    assert fns["crafted"]["mode"] == "entry-only", fns
    assert fns["crafted"]["returns"] == []
    assert "more than 16384 return sites (the limit per function)" in fns["crafted"]["reason"]
    assert fns["plain"]["mode"] == "entry+ret" and fns["plain"]["returns"], fns


def test_at_the_return_site_limit_every_site_is_kept(tmp_path):
    fns = functions(build(tmp_path, "rets", 16383, "0xc3"))
    assert fns["crafted"]["mode"] == "entry+ret", fns
    assert len(fns["crafted"]["returns"]) == 16384


def test_a_function_past_the_code_limit_is_not_disassembled(tmp_path):
    fns = functions(build(tmp_path, "nops", 5 << 20, "0x90"))
    assert fns["crafted"]["mode"] == "entry-only", fns
    assert "more than 4 MiB (the limit per function)" in fns["crafted"]["reason"]
    assert fns["plain"]["mode"] == "entry+ret", fns


def zero_table(path, size):
    """A valid go1.20+ pcHeader over zeros: as many empty functions as fit."""
    words = [(size - 72) // 8 - 1, 0, 0x401000, 72, 72, 72, 72, 72]
    with open(path, "wb") as f:
        f.write(struct.pack("<IBBBB", 0xfffffff1, 0, 0, 1, 8))
        f.write(b"".join(struct.pack("<Q", w) for w in words))
        f.truncate(size)


def test_gopclntab_of_zeros_is_refused_naming_the_limit(tmp_path):
    plain = build(tmp_path, "plain", 1, "0x90")
    table, out = tmp_path / "zeros.tab", str(tmp_path / "pcln")
    zero_table(table, 64 << 20)
    subprocess.run(["objcopy", "--add-section", f".gopclntab={table}", "--set-section-flags",
                    ".gopclntab=alloc,readonly,data", plain, out], check=True,
                   capture_output=True)
    run = harness.inspect("--json", out, "plain")
    run.assert_refused()
    assert "declares 8388598 functions, more than 524288 (the limit per binary)" in run.stderr, \
        run.describe()
    os.unlink(out)
