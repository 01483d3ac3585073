"""Refusals: every one exits non-zero with a clear one-line message on stderr,
never by a signal or with a sanitizer report."""

import os
import re
import socket
import subprocess
import time

import pytest

import harness
import reference
from harness import fixture

# malformed/<file> -> words of which the message must contain one (any case)
MALFORMED_KEYWORDS = {
    "truncated-200": ["truncated"],
    "truncated-half": ["truncated"],
    "garbage": ["not an ELF"],
    "empty": ["not an ELF", "empty"],
    "text.txt": ["not an ELF"],
    "emachine-riscv": ["riscv", "architecture"],
    "elf32-i386": ["architecture", "32-bit"],
    "gopclntab-header": ["gopclntab"],
    "gopclntab-functab": ["gopclntab"],
    "gopclntab-middle": ["gopclntab"],
}


def test_every_malformed_fixture_has_expectations():
    on_disk = {os.path.basename(p) for p in harness.malformed_files()}
    assert on_disk == set(MALFORMED_KEYWORDS)


@pytest.mark.parametrize("name", sorted(MALFORMED_KEYWORDS))
def test_malformed_file_is_refused(name):
    path = fixture(f"malformed/{name}")
    run = harness.inspect("--json", path, "main.main")
    run.assert_refused()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, f"message is not one line\n{run.describe()}"
    words = MALFORMED_KEYWORDS[name]
    assert any(w.lower() in lines[0].lower() for w in words), \
        f"message mentions none of {words}\n{run.describe()}"
    assert run.stdout == "", f"output on a refused file\n{run.describe()}"


def test_nonexistent_path_is_named():
    path = "/nonexistent/retwatch-fixture/demo"
    run = harness.inspect("--json", path, "main.main")
    run.assert_refused()
    assert path in run.stderr, run.describe()


def test_directory_is_refused():
    harness.inspect("--json", fixture("c"), "main").assert_refused()


def test_fifo_device_and_socket_are_refused_at_once(tmp_path):
    """Not files to read: refused without opening for long (reading a FIFO
    waits for a writer, for ever)."""
    fifo, sock = tmp_path / "fifo", tmp_path / "sock"
    os.mkfifo(fifo)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock))
    try:
        for path, kind in ((fifo, "a FIFO"), ("/dev/zero", "a device"), (sock, None)):
            start = time.monotonic()
            try:
                run = harness.inspect("--json", str(path), "main")
            except subprocess.TimeoutExpired:
                raise AssertionError(f"inspect of {path} did not end") from None
            took = time.monotonic() - start
            run.assert_refused()
            assert str(path) in run.stderr, run.describe()
            if kind:
                assert kind in run.stderr, run.describe()
            assert took < 1.0, (path, took)
    finally:
        listener.close()


def test_fully_stripped_c_binary_has_nothing_to_match():
    run = harness.inspect("--json", harness.c_fix("stripped").path, "parse_int")
    run.assert_refused()
    # what is wrong, and what can be named instead
    assert "the file is stripped: it has no symbol table and exports no function" in run.stderr, \
        run.describe()
    assert "LIB:PATTERN" in run.stderr, run.describe()


def test_stripped_binary_searched_only_its_exports():
    """A static function of a stripped binary that exports others: the
    message says only the exported ones were searched, and where the others'
    names are."""
    run = harness.inspect(harness.fixture("c/tail-stripped/tailfix"), "hidden")
    run.assert_refused()
    assert re.search(r"the file is stripped: only the \d+ functions it exports were searched, "
                     r"not its static ones", run.stderr), run.describe()
    assert "debug file" in run.stderr, run.describe()


def suggested(stderr, known):
    """Known function names that appear as whole words in the message."""
    return {t for t in re.findall(r"[^\s,;'\"`]+", stderr) if t in known}


@pytest.mark.parametrize("b,pattern,want", [
    (harness.go_demo("default"), "main.ValidateCrd", "main.ValidateCard"),
    (harness.go_demo("stripped"), "main.ValidateCrd", "main.ValidateCard"),
    (harness.c_fix("normal"), "parse_hx", "parse_hex"),
    (harness.c_fix("dwarf-only"), "parse_hx", "parse_hex"),
], ids=harness.param_id)
def test_no_match_suggests_similar_names(b, pattern, want):
    run = harness.inspect("--json", b.path, pattern)
    run.assert_refused()
    assert want in run.stderr, f"{want} not suggested\n{run.describe()}"


def test_no_match_suggests_at_most_five():
    b = harness.go_demo("default")
    run = harness.inspect("--json", b.path, "main.ad")
    run.assert_refused()
    # [REF] go tool nm's names
    names = suggested(run.stderr, set(reference.go_symbols(b.toolchain, b.path)))
    assert 1 <= len(names) <= 5, f"suggestions {sorted(names)}\n{run.describe()}"


def test_every_unmatched_pattern_is_named_typos_first():
    """Three patterns that match nothing: the message names each, the one
    with a suggestion first (a probe of many patterns named only its first,
    and the typo with its fix could be the last)."""
    import subprocess
    import tracing

    tracee = tracing.TraceeProcess(tracing.go_tracee("native", "default"), "sleep")
    try:
        argv = [harness.RETWATCH, "trace", "--pid", str(tracee.pid), "--duration", "1",
                "main.nothing_like_it", "main.another_missing_name", "main.sleepFr"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    finally:
        tracee.kill()
    run = harness.Run(tuple(argv), proc.returncode, proc.stdout, proc.stderr)
    run.assert_refused()
    msg = next(line for line in run.stderr.splitlines() if "no function matches" in line)
    assert re.search(r"no function matches 'main\.sleepFr' in \S+ \(did you mean: [^)]*main\.sleepFor",
                     msg), run.describe()
    assert "; nor 'main.nothing_like_it'" in msg and "; nor 'main.another_missing_name'" in msg, \
        run.describe()


def test_a_pattern_that_matches_nothing_is_said_before_the_calibration():
    """The patterns are checked in the process's executable first: a typo is
    refused before the calibration runs (no "probe bias" line). Behaviour,
    not time: under the suite's load the BPF load before the check alone
    took over the 1.5 s this test once allowed."""
    import tracing

    tracee = tracing.TraceeProcess(tracing.go_tracee("native", "default"), "sleep")
    try:
        argv = [harness.RETWATCH, "trace", "--pid", str(tracee.pid), "main.sleepFr"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    finally:
        tracee.kill()
    run = harness.Run(tuple(argv), proc.returncode, proc.stdout, proc.stderr)
    run.assert_refused()
    assert "did you mean" in run.stderr and "probe bias" not in run.stderr, run.describe()
