"""The --json document itself: its schema and the per-binary facts.

[REF] go_version: the toolchain that built the fixture (manifest.json);
build_id: readelf -n (GNU build id), else `go tool buildid`; stripped:
readelf -SW has no .symtab.
"""

import json
import os
import subprocess

import pytest

import harness
import reference
from harness import binaries

SOURCES = {"symtab", "dwarf", "pclntab"}
MODES = {"entry+ret", "entry+ret+tailcall", "entry-only"}
INSPECTABLE = binaries(predicate=lambda b: b.funcs())


# the general-purpose registers in hardware encoding order
GPRS = ["rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
        "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"]


def is_int(x):
    return type(x) is int  # bool is an int subclass: reject it


def is_str_or_none(x):
    return x is None or isinstance(x, str)


def schema_errors(doc):
    errors = []
    for key, ok in (("binary", lambda x: isinstance(x, str)), ("go_version", is_str_or_none),
                    ("build_id", is_str_or_none), ("stripped", lambda x: type(x) is bool),
                    # a stripped file's separate debug file, and one refused (test_debugfile.py)
                    ("debug_file", is_str_or_none), ("debug_file_ignored", is_str_or_none),
                    ("entries_emulated", is_int),
                    ("functions", lambda x: isinstance(x, list)),
                    # inlined copies (test_inline.py): none of the functions listed here
                    ("inlined", lambda x: isinstance(x, list)), ("inlined_total", is_int)):
        if key not in doc or not ok(doc[key]):
            errors.append(f"document: bad {key}: {doc.get(key, '<missing>')!r}")
    for f in doc.get("functions", []):
        checks = {
            "name": lambda x: isinstance(x, str) and x,
            # C and Go names are not mangled: demangled is null there
            "demangled": lambda x: x is None or (isinstance(x, str) and x),
            "address": is_int,
            "file_offset": is_int,
            "size": is_int,
            # where the entry probe goes: an offset into the function, and
            # the kind of instruction there (an emulated one, or stepped)
            "entry_site": lambda x: is_int(x) and 0 <= x < 128,
            "entry_kind": lambda x: x in ("stepped", "push", "nop", "nop5", "jump", "call"),
            # how far below the entry's the stack pointer is there (a SUB RSP skipped)
            "entry_sp": lambda x: is_int(x) and 0 <= x < 1 << 20,
            "return": lambda x: x in ("ret", "trampoline"),
            "return_reason": lambda x: x is None or isinstance(x, str) and x,
            "source": lambda x: x in SOURCES,
            # the file that named it: the binary, or its debug file
            "names_from": lambda x: isinstance(x, str) and x,
            "mode": lambda x: x in MODES,
            "reason": is_str_or_none,
            "returns": lambda x: isinstance(x, list) and all(map(is_int, x)),
            "tail_calls": lambda x: isinstance(x, list) and all(map(is_int, x)),
            "tail_returns": lambda x: isinstance(x, list) and all(map(is_int, x)),
            "tail_calls_followed": is_int,
            "tail_untimed": is_int,
            "indirect_jumps": is_int,
            "hook_jumps": is_int,
            "ranges": lambda x: isinstance(x, list) and x and all(
                isinstance(r, dict) and set(r) == {"address", "size"}
                and is_int(r["address"]) and is_int(r["size"]) for r in x),
        }
        for key, ok in checks.items():
            if key not in f or not ok(f[key]):
                errors.append(f"{f.get('name')}: bad {key}: {f.get(key, '<missing>')!r}")
        # the registers written before a moved entry probe, in hardware
        # order; only when the probe is moved and some are
        clobbers = f.get("entry_clobbers")
        if "entry_clobbers" in f and not (
                isinstance(clobbers, list) and clobbers and f.get("entry_site")
                and all(r in GPRS for r in clobbers)
                and clobbers == sorted(set(clobbers), key=GPRS.index)):
            errors.append(f"{f.get('name')}: bad entry_clobbers: {clobbers!r}")
        # a stack pointer moved before the site: only past the first byte, by
        # an instruction that writes RSP
        if f.get("entry_sp") and not (f.get("entry_site") and "rsp" in (clobbers or [])):
            errors.append(f"{f.get('name')}: entry_sp {f['entry_sp']} with entry_site "
                          f"{f.get('entry_site')} and entry_clobbers {clobbers!r}")
        # the trampoline exactly where nothing refuses it
        if (f.get("return") == "trampoline") != (f.get("return_reason") is None):
            errors.append(f"{f.get('name')}: return {f.get('return')!r} with reason "
                          f"{f.get('return_reason')!r}")
        if f.get("return") == "trampoline" and (f.get("mode") == "entry-only"
                                                 or not f.get("returns")):
            errors.append(f"{f.get('name')}: the trampoline without a RET of its own")
        extra = set(f) - set(checks) - {"entry_clobbers"}
        if extra:
            errors.append(f"{f.get('name')}: unexpected keys {sorted(extra)}")
    return errors


@pytest.mark.parametrize("b", INSPECTABLE, ids=harness.param_id)
def test_schema(b):
    errors = schema_errors(harness.document(b))
    assert not errors, f"{b.id}:\n" + "\n".join(errors)


@pytest.mark.parametrize("b", INSPECTABLE, ids=harness.param_id)
def test_binary_facts(b):
    doc = harness.document(b)
    assert os.path.samefile(doc["binary"], b.path), f"binary {doc['binary']!r}"
    # [REF] the toolchain that built it
    assert doc["go_version"] == (b.toolchain if b.kind == "go" else None)
    # [REF] readelf -n, else go tool buildid
    want_id = reference.gnu_build_id(b.path)
    if want_id is None and b.kind == "go":
        want_id = reference.go_build_id(b.toolchain, b.path)
    assert doc["build_id"] == want_id
    # [REF] readelf -SW. A DWARF-only binary has no .symtab either but is not
    # what people call stripped: left to the implementation.
    if b.variant != "dwarf-only":
        assert doc["stripped"] == (not reference.has_symtab(b.path))
        assert doc["stripped"] == b.stripped


@pytest.mark.parametrize("b", INSPECTABLE, ids=harness.param_id)
def test_lists_exactly_the_requested_functions(b):
    names = [f["name"] for f in harness.document(b)["functions"]]
    assert sorted(names) == sorted(b.funcs())


# Bytes a symbol's name may hold that JSON must escape (a quote, a backslash,
# control characters), and UTF-8 it keeps as it is.
ODD_NAME = 'odd"quote\\back\tab\x01\x1fctl\x7f\u00e9nd'


def test_json_escapes_names(tmp_path):
    """A name with a quote, a backslash and control characters (objcopy
    writes any bytes into .strtab) comes back exact from --json; the text
    output shows its controls as escapes (test_terminal.py), a tab as it is."""
    src, obj, out = tmp_path / "odd.c", tmp_path / "odd.o", tmp_path / "odd"
    src.write_text("int odd_fn(int x) { return x * 3; }\nint main(void) { return odd_fn(1); }\n")
    subprocess.run(["gcc", "-O1", "-c", "-o", str(obj), str(src)], check=True)
    subprocess.run([b"objcopy", b"--redefine-sym", b"odd_fn=" + ODD_NAME.encode(), str(obj).encode()],
                   check=True)
    subprocess.run(["gcc", "-o", str(out), str(obj)], check=True)
    argv = [harness.RETWATCH, "inspect", "--json", str(out), "odd*"]
    proc = subprocess.run(argv, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    doc = json.loads(proc.stdout.decode())
    assert [f["name"] for f in doc["functions"]] == [ODD_NAME]
    # the short escapes where JSON has them, \u00XX for other control bytes and DEL
    assert b'"odd\\"quote\\\\back\\tab\\u0001\\u001fctl\\u007f\xc3\xa9nd"' in proc.stdout
    text = subprocess.run([harness.RETWATCH, "inspect", str(out), "odd*"], capture_output=True,
                          timeout=60)
    shown = 'odd"quote\\back\tab\\x01\\x1fctl\\x7f\u00e9nd'
    assert text.returncode == 0 and b"\n" + shown.encode() + b"\n" in text.stdout, text.stdout
