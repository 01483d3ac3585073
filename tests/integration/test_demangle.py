"""C++ and Rust functions by their demangled names, one function per address.

Targets: cpp/shop (g++ -O2 -g) and rust/{legacy,v0}/main (rustc -O -g, crate
"main"), built by tests/fixtures/build.sh from tests/fixtures/cpp and
tests/fixtures/rust. Each prints "ready PID", waits for a line, makes N calls
of each traced function (N is its argument) and reports them.

[REF] the mangled names come from the symbol table as `nm` prints it (no
demangling), the demangled ones from `c++filt` (binutils' own demangler,
which knows both C++ and Rust), the counts from the programs themselves.
Needs root for the tracing tests.
"""

import collections
import os
import re
import subprocess

import pytest

import harness
import tracing

RUST = ("legacy", "v0")


def target(rel):
    path = harness.fixture(rel)
    assert os.path.exists(path), f"{rel} missing: rebuild the fixtures (tests/fixtures/build.sh)"
    return path


def nm_functions(path):
    """{address: [mangled names]} of the text symbols, as nm lists them."""
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    funcs = collections.defaultdict(list)
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTiW":
            funcs[int(parts[0], 16)].append(parts[2])
    return funcs


def plain(demangled):
    """c++filt's form without v0's crate disambiguators: main[1a2b]::f -> main::f."""
    return re.sub(r"\[[0-9a-f]+\]", "", demangled)


def cxxfilt(name):
    return plain(subprocess.run(["c++filt", name], capture_output=True, text=True,
                                check=True).stdout.strip())


def mangled_of(path, demangled_prefix):
    """The symbol names whose c++filt form starts with demangled_prefix."""
    names = [n for ns in nm_functions(path).values() for n in ns]
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return sorted(n for n, d in zip(names, out) if plain(d).startswith(demangled_prefix))


@pytest.mark.parametrize("mangling", RUST)
def test_rust_demangled_name_finds_the_function(mangling):
    path = target(f"rust/{mangling}/main")
    want = mangled_of(path, "main::compute")
    assert len(want) == 1, want
    doc = harness.inspect_json(path, ["main::compute"])
    funcs = doc["functions"]
    assert [f["name"] for f in funcs] == want
    assert funcs[0]["demangled"] == "main::compute"
    assert funcs[0]["mode"] == "entry+ret"
    # the hash (legacy) or crate disambiguator (v0) is not part of the name shown
    assert cxxfilt(want[0]).startswith("main::compute")
    # a method: "<main::shop::Cart>::total" in v0, found as legacy prints it too
    want = mangled_of(path, "main::shop::Cart::total") + mangled_of(path, "<main::shop::Cart>::total")
    assert len(want) == 1, want
    doc = harness.inspect_json(path, ["main::shop::Cart::total"])
    assert [f["name"] for f in doc["functions"]] == want


@pytest.mark.parametrize("mangling", RUST)
def test_rust_one_function_per_address(mangling):
    """Symbol table and DWARF name the same functions: each is listed once,
    and DWARF's functions that the linker dropped (address 0) not at all."""
    path = target(f"rust/{mangling}/main")
    doc = harness.inspect_json(path, ["*"], options=("--limit", "100000"))
    addrs = collections.Counter(f["address"] for f in doc["functions"])
    assert [a for a, n in addrs.items() if n > 1] == []
    assert all(f["address"] != 0 for f in doc["functions"])
    # every function nm lists is there, under one of its names
    listed = {f["address"]: f["name"] for f in doc["functions"]}
    for addr, names in nm_functions(path).items():
        if addr in listed:
            assert listed[addr] in names, (hex(addr), listed[addr], names)
    assert len(listed) >= len(nm_functions(path)) * 0.9


def test_cpp_name_without_parameters_finds_every_overload():
    path = target("cpp/shop")
    want = mangled_of(path, "shop::Cart::total(")
    assert len(want) == 2, want
    doc = harness.inspect_json(path, ["shop::Cart::total"])
    assert sorted(f["name"] for f in doc["functions"]) == want
    assert sorted(f["demangled"] for f in doc["functions"]) == sorted(cxxfilt(n) for n in want)


def test_cpp_name_with_parameters_finds_one_overload():
    path = target("cpp/shop")
    doc = harness.inspect_json(path, ["shop::Cart::total(int) const"])
    assert [f["demangled"] for f in doc["functions"]] == ["shop::Cart::total(int) const"]
    assert doc["functions"][0]["name"] == "_ZNK4shop4Cart5totalEi"
    doc = harness.inspect_json(path, ["shop::*::total(*"])
    assert len(doc["functions"]) == 2


def test_text_output_shows_both_names():
    run = harness.inspect(target("cpp/shop"), "shop::Cart::total(int) const")
    assert run.returncode == 0, run.describe()
    lines = run.stdout.splitlines()
    i = lines.index("_ZNK4shop4Cart5totalEi")
    assert lines[i + 1].split(None, 1) == ["demangled", "shop::Cart::total(int) const"]


def test_suggestions_are_demangled():
    run = harness.inspect(target("cpp/shop"), "shop::Cart::totl")
    run.assert_refused()
    assert "similar names: shop::Cart::total" in run.stderr, run.describe()
    assert "_ZNK" not in run.stderr
    run = harness.inspect(target("rust/legacy/main"), "main::compte")
    run.assert_refused()
    assert "similar names: main::compute" in run.stderr, run.describe()


@pytest.mark.parametrize("mangling", RUST)
def test_rust_trace_counts_each_call_once(mangling):
    tracee = tracing.Tracee(path=target(f"rust/{mangling}/main"), kind="rust",
                            toolchain="rustc", variant=mangling, stripped=False)
    result = tracing.run_ok([(tracee, "100")], ["main::compute", "main::shop::Cart::total"])
    assert result.report["calls"] == {"compute": 100, "total": 100}
    funcs = result.functions()
    assert len(funcs) == 2, sorted(funcs)
    assert sorted(f["calls"] for f in funcs.values()) == [100, 100]


def test_cpp_trace_counts_both_overloads():
    tracee = tracing.Tracee(path=target("cpp/shop"), kind="cpp", toolchain="g++",
                            variant="normal", stripped=False)
    result = tracing.run_ok([(tracee, "100")], ["shop::Cart::total"])
    assert result.report["calls"] == {"total()": 100, "total(int)": 100}
    funcs = result.functions()
    # total(int) calls total(): 200 calls of total(), 100 of total(int)
    assert funcs["_ZNK4shop4Cart5totalEv"]["calls"] == 200
    assert funcs["_ZNK4shop4Cart5totalEi"]["calls"] == 100
