"""Patterns: `*` and `?` are wildcards, brackets are literal (Go generic names).

[REF] where noted, the expected set is the glob applied to the text symbols
that go tool nm / GNU nm list in the unstripped twin.
"""

import os
import re
import subprocess

import pytest

import harness
import reference
from harness import binaries

GO_DEMOS = binaries(program="demo", predicate=lambda b: b.variant in ("default", "stripped"))
C_FIXES = binaries(program="cfix", predicate=lambda b: b.variant in ("normal", "dwarf-only"))
LIBS = binaries(program="libfix.so")

GO_GLOBS = {
    "main.add*": {"main.add", "main.addMany", "main.addThree"},
    "main.ad?": {"main.add"},
    "main.(*Cart).*": {"main.(*Cart).Add", "main.(*Cart).Total"},
    "main.Map[*]": {"main.Map[go.shape.int]"},
    "main.*Card": {"main.ValidateCard", "main.chargeCard"},
    # compiler-generated; the local type's suffix is "·1" inside pclntab but
    # ".1" in the ELF symbol table: one spelling, whatever the source
    "type:.eq.main.*": {"type:.eq.main.Item", "type:.eq.main.key.1"},
}
C_GLOBS = {
    "parse_*": {"parse_sign", "parse_int", "parse_hex"},
    "parse_?nt": {"parse_int"},
    # a .cold part belongs to its function: never listed as a function itself
    "checked_div*": {"checked_div"},
}
LIB_GLOBS = {"fix_*": {"fix_sum", "fix_max", "fix_total"}}


def names(path, pattern, options=()):
    return {f["name"] for f in harness.inspect_json(path, [pattern], options)["functions"]}


@pytest.mark.parametrize("b", GO_DEMOS, ids=harness.param_id)
@pytest.mark.parametrize("pattern", GO_GLOBS)
def test_go_glob(b, pattern):
    got = names(b.path, b.spell_pattern(pattern))
    assert got == {b.spell(n) for n in GO_GLOBS[pattern]}
    # [REF] the same glob over go tool nm's text symbols
    assert {b.to_twin(n) for n in got} == reference.glob_match(
        b.spell_pattern(pattern), reference.go_symbols(b.toolchain, b.unstripped))


@pytest.mark.parametrize("b", GO_DEMOS, ids=harness.param_id)
@pytest.mark.parametrize("pattern", ["main.*", "type:.eq.main.*"])
def test_go_glob_lists_each_function_once(b, pattern):
    pattern = b.spell_pattern(pattern)
    funcs = harness.inspect_json(b.path, [pattern], ("--limit", "1000"))["functions"]
    got = [b.to_twin(f["name"]) for f in funcs]
    # [REF] go tool nm
    want = reference.glob_match(pattern, reference.go_symbols(b.toolchain, b.unstripped))
    assert sorted(got) == sorted(want)
    by_address = {}
    for f in funcs:
        by_address.setdefault(f["address"], []).append(f["name"])
    twice = {f"{a:#x}": n for a, n in by_address.items() if len(n) > 1}
    assert not twice, f"one function listed under several names: {twice}"


@pytest.mark.parametrize("b", C_FIXES, ids=harness.param_id)
@pytest.mark.parametrize("pattern", C_GLOBS)
def test_c_glob(b, pattern):
    assert names(b.path, pattern) == C_GLOBS[pattern]


@pytest.mark.parametrize("b", LIBS, ids=harness.param_id)
@pytest.mark.parametrize("pattern", LIB_GLOBS)
def test_shared_library_glob(b, pattern):
    assert names(b.path, pattern) == LIB_GLOBS[pattern]


def test_patterns_combine_without_duplicates():
    path = harness.go_demo("default").path
    doc = harness.inspect_json(path, ["main.add*", "main.add", "main.fib"])
    got = [f["name"] for f in doc["functions"]]
    assert sorted(got) == ["main.add", "main.addMany", "main.addThree", "main.fib"]


def test_limit_option_refuses_larger_match_with_count():
    run = harness.inspect("--json", "--limit", "2", harness.go_demo("default").path, "main.add*")
    run.assert_refused()
    assert re.search(r"\b3\b", run.stderr), f"the count (3) is not in the message\n{run.describe()}"


def test_default_limit_is_256():
    run = harness.inspect("--json", harness.go_demo("default").path, "runtime.*")
    run.assert_refused()
    counts = [int(n) for n in re.findall(r"\d+", run.stderr)]
    assert any(n > 256 for n in counts), f"no match count above 256\n{run.describe()}"


def test_limit_raised_accepts_the_same_glob():
    doc = harness.inspect_json(harness.go_demo("default").path, ["runtime.*"], ("--limit", "100000"))
    assert len(doc["functions"]) > 256


GENERIC_SOURCE = """package main

import "fmt"

//go:noinline
func Map[T any](xs []T, f func(T) T) []T {
	out := make([]T, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func main() {
	fmt.Println(Map([]int{1, 2}, func(x int) int { return x * 2 }))
	fmt.Println(Map([]string{"a"}, func(s string) string { return s + s }))
	fmt.Println(Map([]float64{1.5}, func(x float64) float64 { return x / 2 }))
}
"""


def test_go_1_19_shape_instances_share_a_name(tmp_path):
    """Go 1.18 and 1.19 name every shape instance of a generic function
    "main.Map[...]" in .gopclntab, all a stripped binary keeps: each is a
    function of its own, listed and counted (the limit's count is the
    JSON's). [REF] go tool nm on the unstripped build."""
    go = reference.local_go("go1.19.8")
    assert go, "Debian's golang-1.19-go is not installed: run scripts/deps.sh"
    (tmp_path / "go.mod").write_text("module gen\n\ngo 1.19\n")
    (tmp_path / "main.go").write_text(GENERIC_SOURCE)
    env = {"GOTOOLCHAIN": "local", "GOFLAGS": "", "CGO_ENABLED": "0"}
    for out, flags in (("full", []), ("stripped", ["-ldflags=-s"])):
        subprocess.run([go, "build", *flags, "-o", out, "."], cwd=tmp_path, check=True,
                       capture_output=True, env=dict(os.environ, **env), timeout=300)
    nm = reference.run_tool([go, "tool", "nm", str(tmp_path / "full")], env=env)
    want = sorted(int(a, 16) for a, name in re.findall(r"^\s*([0-9a-f]+) T (main\.Map\[\S+)$", nm, re.M))
    assert len(want) == 3, nm
    stripped = str(tmp_path / "stripped")
    for pattern in ("main.Map[...]", "main.Map*"):
        funcs = harness.inspect_json(stripped, [pattern])["functions"]
        assert sorted(f["address"] for f in funcs) == want, funcs
        assert {f["name"] for f in funcs} == {"main.Map[...]"} and {f["source"] for f in funcs} == {"pclntab"}
        run = harness.inspect("--limit", "2", stripped, pattern)
        run.assert_refused()
        assert f"'{pattern}' matches 3 functions, more than the limit of 2" in run.stderr, run.describe()
