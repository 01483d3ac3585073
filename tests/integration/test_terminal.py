"""What a traced program's names write to a terminal: nothing.

A C program whose function is named with an OSC that sets the terminal's
title and rings its bell, a CSI that clears the screen and a C1 CSI (U+009B).
On a pty, `retwatch inspect` and `retwatch trace` (the table, the slow calls
with their stacks, the slowest calls, a missing name's suggestions) print
none of those bytes, but visible escapes; their JSON is valid and holds the
name exactly as the file does."""

import json
import os
import pty
import select
import signal
import subprocess
import time
import tty

import harness

SOURCE = r"""
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) int PLACEHOLDER(int x)
{
	__asm__ volatile("" : "+r"(x));
	usleep(2000);
	return x * 3 + 1;
}

int main(void)
{
	long s = 0;

	for (int i = 0;; i++) {
		s += PLACEHOLDER(i);
		if (i % 100 == 0)
			fprintf(stderr, "%ld\n", s);
	}
}
"""
PLACEHOLDER = b"evil_placeholder_name_0123456789abcdefghijklmn"
# an OSC title with BEL, a screen clear, a C1 CSI, DEL and CR: as long as the
# placeholder, so that the patched file's tables stay as they were
EVIL = b"ev\x1b]0;pwned\x07\x1b[2J\xc2\x9b31m\x7f\rx"
EVIL = EVIL + b"_" * (len(PLACEHOLDER) - len(EVIL))
SHOWN = "ev\\x1b]0;pwned\\x07\\x1b[2J\\xc2\\x9b31m\\x7f\\x0dx"


def build(tmp_path):
    src = tmp_path / "evil.c"
    src.write_text(SOURCE.replace("PLACEHOLDER", PLACEHOLDER.decode()))
    out = tmp_path / "evil"
    subprocess.run(["gcc", "-O2", "-o", str(out), str(src)], check=True, capture_output=True)
    data = out.read_bytes()
    assert data.count(PLACEHOLDER) >= 1
    out.write_bytes(data.replace(PLACEHOLDER, EVIL))
    return str(out)


def controls(data):
    """The bytes of data a terminal takes as controls: C0 but tab and
    newline, DEL, and C1 in UTF-8."""
    found = [b for b in data if (b < 0x20 and b not in (9, 10)) or b == 0x7F]
    found += [data[i:i + 2] for i in range(len(data) - 1)
              if data[i] == 0xC2 and 0x80 <= data[i + 1] <= 0x9F]
    return found


def on_pty(argv, timeout=60):
    """argv's stdout and stderr on one pty in raw mode (no CR added to a
    newline): its exit status and every byte it wrote."""
    master, slave = pty.openpty()
    tty.setraw(slave)
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the pty
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return code, out


def test_inspect_shows_a_hostile_name_escaped_on_a_terminal(tmp_path):
    evil = build(tmp_path)
    code, out = on_pty([harness.RETWATCH, "inspect", evil, "ev*"])
    assert code == 0, out
    assert not controls(out), out
    assert SHOWN.encode() in out, out
    # a name that is missing: the suggestions name it escaped too
    code, out = on_pty([harness.RETWATCH, "inspect", evil, EVIL[:-2] + b"zz"])
    assert code != 0 and b"similar names" in out, out
    assert not controls(out) and SHOWN.encode() in out, out


def test_inspect_json_holds_the_name_exactly(tmp_path):
    evil = build(tmp_path)
    run = subprocess.run([harness.RETWATCH, "inspect", "--json", evil, "ev*"],
                         capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert not controls(run.stdout.replace(b"\n", b"")), run.stdout
    (f,) = json.loads(run.stdout)["functions"]
    assert f["name"].encode() == EVIL, f


def test_trace_shows_a_hostile_name_escaped_on_a_terminal(tmp_path):
    evil = build(tmp_path)
    target = subprocess.Popen([evil], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.2)
        code, out = on_pty([harness.RETWATCH, "trace", "--pid", str(target.pid),
                            "--duration", "3", "--threshold", "1ms", "--slowest", "2",
                            "--slow-calls-per-second", "5", "ev*"], timeout=90)
        run = subprocess.run([harness.RETWATCH, "trace", "--pid", str(target.pid),
                              "--duration", "2", "--json", "ev*"],
                             capture_output=True, timeout=90)
    finally:
        target.send_signal(signal.SIGKILL)
        target.wait()
    assert code == 0, out
    assert not controls(out), out
    # the table's row, a slow call's stack and the slowest calls' stacks
    assert out.count(SHOWN[:24].encode()) >= 3, out
    assert run.returncode == 0, run.stderr
    assert not controls(run.stdout.replace(b"\n", b"")), run.stdout
    (f,) = json.loads(run.stdout)["functions"]
    assert f["name"].encode() == EVIL and f["calls"] > 0, f
