"""Functions in shared libraries: `retwatch trace` with LIB:PATTERN on
c/shlib/shtracee (linked against libshfix.so, which it dlopens libshplug.so
beside), on libc's malloc, and on Debian's libssl (`openssl s_client`
talking to `openssl s_server` on loopback, and Debian's nginx serving HTTPS
on loopback); `retwatch inspect` on a library.

[REF] counts and durations come from the tracee itself (tests/fixtures/c/shlib/
shtracee.c times every call around it with CLOCK_MONOTONIC); file offsets
from readelf's program headers; SSL_write's count from the lines s_server
received, each sent only after the previous one arrived; nginx's from the
sizes of the responses the client read (nginx writes them in 16 KiB
buffers). Needs root.
"""

import json
import os
import re
import socket
import ssl
import subprocess
import time

import pytest

import harness
import tracing

MS = 1_000_000
SLACK_NS = 20_000


def shtracee():
    path = harness.fixture("c/shlib/shtracee")
    assert os.path.isfile(path), f"{path} missing (rebuild the fixtures)"
    return tracing.Tracee(path=path, kind="c", toolchain="gcc", variant="shlib", stripped=False)


def assert_counted(result, name, calls, slept_ns):
    f = result.function(name)
    rep = result.report
    assert f["calls"] == calls == rep["calls"][name], \
        f"{name}: calls {f['calls']}, want {calls}\n{result.describe()}"
    assert f["mode"] == "entry+ret" and f["orphans"] == 0, f
    assert f["min_ns"] >= slept_ns, f"{name}: min_ns {f['min_ns']} < {slept_ns}\n{result.describe()}"
    assert f["max_ns"] <= rep["max_ns"][name] + SLACK_NS, \
        f"{name}: max_ns {f['max_ns']} > the tracee's {rep['max_ns'][name]}\n{result.describe()}"
    return f


def test_library_functions_counted_and_timed():
    r = tracing.run_ok([(shtracee(), "calls")], ["libshfix.so:shfix_sleep", "libshfix*:shfix_add"])
    assert_counted(r, "shfix_sleep", 30, 2 * MS)
    assert_counted(r, "shfix_add", 1000, 0)


def test_long_names_keep_the_table_aligned():
    """A name wider than the FUNCTION column widens it (up to 80), and each
    figure stays under its heading."""
    long = "shfix_function_with_a_name_longer_than_the_column"
    r = tracing.run_ok([(shtracee(), "calls")], ["libshfix.so:shfix_*"], json_out=False)
    lines = r.retwatch.stdout.splitlines()
    head = max(i for i, l in enumerate(lines) if l.startswith("FUNCTION"))
    calls_end = lines[head].index("CALLS") + len("CALLS")
    rows = {}
    for line in lines[head + 1:]:
        if not line.strip():
            break
        name, count = line.split()[0], line.split()[1]
        rows[name] = int(count)
        assert line[:calls_end].endswith(count), f"misaligned row {line!r}\n{r.describe()}"
    assert rows == {"shfix_sleep": 30, "shfix_add": 1000, long: 7}, r.describe()


def test_each_process_of_one_library_file_has_its_own_probes():
    """Two processes mapping libshfix.so: each has its own probes (a
    uprobe_multi link for the entries and one for the RETs, filtered to the
    process, so that no other process mapping the library traps on them),
    and each counts its own calls."""
    r = tracing.run_ok([(shtracee(), "calls"), (shtracee(), "calls")],
                       ["libshfix.so:shfix_sleep"], bpf_check=True)
    f = r.function("shfix_sleep")
    assert f["calls"] == 60 == sum(rep["calls"]["shfix_sleep"] for rep in r.reports), r.describe()
    # bpftool 7.1 names the link type by its number (12: BPF_LINK_TYPE_UPROBE_MULTI)
    assert "(uprobe_multi)" in r.retwatch.stderr, r.describe()
    types = [link.get("type") for link in r.links_during]
    assert len(types) == 4 and set(types) <= {"uprobe_multi", 12}, f"{r.links_during}\n{r.describe()}"


def test_exe_and_library_patterns_together():
    """A pattern without a library part still means the executable."""
    r = tracing.run_ok([(shtracee(), "calls")], ["exe_step", "*:shfix_sleep"])
    assert_counted(r, "shfix_sleep", 30, 2 * MS)
    assert r.function("exe_step")["calls"] == 30, r.describe()


def test_libc_malloc_counted_exactly():
    """The tracee calls malloc 777 times after release and nothing else of
    it allocates; other processes' calls of libc's malloc are not counted."""
    r = tracing.run_ok([(shtracee(), "malloc")], ["libc.so.6:malloc"])
    f = r.function("malloc")
    assert f["calls"] == 777 == r.report["calls"]["malloc"], f"{f}\n{r.describe()}"
    assert f["max_ns"] <= r.report["max_ns"]["malloc"] + SLACK_NS, f


def test_libc_snprintf_entered_past_its_frame():
    """libc's snprintf makes its frame with SUB RSP (0xd8) and spills the
    argument registers into it before its first branch (TEST AL: whether
    vector registers hold arguments): its entry probe sits on that branch,
    the frame's size below the entry's stack pointer, which the probe adds
    back. The tracee's 555 calls in 3 threads are counted exactly, none an
    orphan, none longer than the tracee's longest."""
    (info,) = harness.inspect_json("/lib/x86_64-linux-gnu/libc.so.6", ["snprintf"])["functions"]
    assert info["entry_kind"] == "jump" and info["entry_sp"] >= 0xd8, info
    r = tracing.run_ok([(shtracee(), "snprintf")], ["libc.so.6:snprintf"])
    f = r.function("snprintf")
    assert (f["calls"], f["orphans"]) == (555, 0) and r.report["calls"]["snprintf"] == 555, \
        f"{f}\n{r.describe()}"
    assert f["entry"] == "jump", f
    assert f["max_ns"] <= r.report["max_ns"]["snprintf"] + SLACK_NS, f


def test_dlopened_library_picked_up():
    """libshplug.so is loaded after retwatch attached: its function is traced
    from the next look at the process's mappings on."""
    def release(result, started):
        t = started[0]
        t.release()
        assert t.out.wait_for(lambda l: l == "loaded", 20), t.describe()
        line = result.err_stream.wait_for(lambda l: "newly loaded librar" in l, 10)
        assert line, f"retwatch did not attach to the dlopen'ed library\n{t.describe()}"
        t.proc.stdin.write("go\n")
        t.proc.stdin.flush()
        result.reports[0] = t.finish()

    r = tracing.run_ok([(shtracee(), "dlopen")], ["libsh*:*_sleep"], release=release)
    assert_counted(r, "shplug_sleep", 20, MS)
    assert_counted(r, "shfix_sleep", 5, MS)


def trace_refused(pattern):
    t = tracing.TraceeProcess(shtracee(), "calls")
    try:
        proc = subprocess.run([harness.RETWATCH, "trace", "--pid", str(t.pid), "--duration", "1",
                               pattern], capture_output=True, text=True, timeout=60)
    finally:
        t.kill()
    run = harness.Run((pattern,), proc.returncode, proc.stdout, proc.stderr)
    run.assert_refused()
    return run


def test_hint_names_the_library():
    run = trace_refused("shfix_sleep")
    assert "shfix_sleep is in libshfix.so" in run.stderr, run.describe()
    assert "write 'libshfix.so:shfix_sleep'" in run.stderr, run.describe()


def test_unknown_library_refused():
    run = trace_refused("libnosuch*:shfix_sleep")
    assert "no library the process has mapped matches 'libnosuch*'" in run.stderr, run.describe()
    assert "its executable has" not in run.stderr, run.describe()


def test_library_pattern_of_a_function_built_into_the_executable():
    """A library the process has not mapped, for a function linked into the
    executable itself: the error says so, and what to write."""
    run = trace_refused("libshtracee.so.1:main")
    assert "no library the process has mapped matches 'libshtracee.so.1'" in run.stderr, \
        run.describe()
    assert "its executable has main: write 'main'" in run.stderr, run.describe()



def test_misspelled_library_function_suggested():
    run = trace_refused("libshfix.so:shfix_slep")
    assert "no function matches 'shfix_slep' in libshfix.so" in run.stderr, run.describe()
    assert "shfix_sleep" in run.stderr.split("did you mean")[1], run.describe()


def test_cpp_names_are_not_library_patterns():
    """`shop::Cart::total` has colons but names no library: inspect takes it."""
    doc = harness.inspect_json(harness.fixture("cpp/shop"), ["shop::Cart::total"])
    assert doc["functions"], doc


def load_segments(path):
    """(vaddr, offset, filesz) of each PT_LOAD, from readelf."""
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True, check=True).stdout
    segs = []
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[2], 16), int(f[1], 16), int(f[4], 16)))
    return segs


def test_inspect_library_offsets():
    """A library's uprobe offsets are file offsets: address minus its
    segment's vaddr plus the segment's offset (libshfix.so is linked at
    0x40000, so the two differ)."""
    lib = harness.fixture("c/shlib/libshfix.so")
    doc = harness.inspect_json(lib, ["libshfix.so:shfix_*"])
    funcs = harness.functions_by_name(doc)
    assert set(funcs) == {"shfix_sleep", "shfix_add",
                          "shfix_function_with_a_name_longer_than_the_column"}, funcs
    for f in funcs.values():
        seg = [s for s in load_segments(lib) if s[0] <= f["address"] < s[0] + s[2]]
        assert len(seg) == 1, (f, load_segments(lib))
        want = f["address"] - seg[0][0] + seg[0][1]
        assert f["file_offset"] == want != f["address"], f


def test_inspect_other_library_refused():
    run = harness.inspect(harness.fixture("c/shlib/libshfix.so"), "libssl.so.3:SSL_write")
    run.assert_refused()
    assert "names library 'libssl.so.3', not libshfix.so" in run.stderr, run.describe()


def test_inspect_options_after_the_binary():
    run = harness.inspect(harness.fixture("c/shlib/libshfix.so"), "--json", "shfix_add")
    assert run.returncode == 0, run.describe()
    assert harness.functions_by_name(json.loads(run.stdout))["shfix_add"]


# --------------------------------------------------------------------------
# SSL_write in Debian's libssl


@pytest.fixture
def tls_pair(tmp_path):
    """openssl s_server on a loopback port and an s_client connected to it,
    both waiting on their stdin."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj",
                    "/CN=localhost", "-days", "1", "-keyout", key, "-out", cert],
                   check=True, capture_output=True, timeout=60)
    procs = []
    try:
        for attempt in range(5):
            port = 20000 + (os.getpid() * 7 + attempt * 131) % 20000
            server = subprocess.Popen(["openssl", "s_server", "-quiet", "-accept",
                                       f"127.0.0.1:{port}", "-cert", cert, "-key", key],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
            time.sleep(0.5)
            if server.poll() is None:
                break
        procs.append(server)
        # -no_ign_eof: the client exits at the end of its stdin
        client = subprocess.Popen(["openssl", "s_client", "-quiet", "-no_ign_eof", "-connect",
                                   f"127.0.0.1:{port}"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        procs.append(client)
        out = tracing.Stream(server.stdout)
        # the handshake is done once a line goes through
        client.stdin.write("hello\n")
        client.stdin.flush()
        assert out.wait_for(lambda l: l == "hello", 20), "s_server did not receive the first line"
        yield client, out
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_ssl_write_in_debian_libssl(tls_pair):
    """s_client sends each line it reads with one SSL_write; a line is sent
    only once the server printed the one before; at the end of its input the
    client exits, and retwatch reports once it has."""
    client, server_out = tls_pair
    lines = 25
    argv = (harness.RETWATCH, "trace", "--json", "--pid", str(client.pid), "libssl.so*:SSL_write")
    rw = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = tracing.Stream(rw.stderr)
    try:
        assert err.wait_for(lambda l: l.startswith(tracing.TRACING_LINE), 30), err.text
        for i in range(lines):
            client.stdin.write(f"line {i}\n")
            client.stdin.flush()
            assert server_out.wait_for(lambda l, i=i: l == f"line {i}", 20), server_out.text
        # the client exits (every SSL_write returned), and retwatch with it
        client.stdin.close()
        out, _ = rw.communicate(timeout=30)
    finally:
        if rw.poll() is None:
            rw.kill()
            rw.wait()
    run = harness.Run(argv, rw.returncode, out, err.text)
    run.assert_no_crash()
    assert rw.returncode == 0, run.describe()
    f = harness.functions_by_name(json.loads(out))["SSL_write"]
    assert f["calls"] == lines, f"{f}\n{run.describe()}"
    assert f["mode"].startswith("entry+ret") and f["max_ns"] > 0, f


# --------------------------------------------------------------------------
# SSL_write in Debian's nginx, serving HTTPS on loopback

TLS_RECORD = 16384  # nginx's ssl_buffer_size, set in the configuration below
BIG_BODY = 40000  # more than two buffers: three SSL_write calls a response

NGINX_TLS_SERVER = """        listen 127.0.0.1:{port} ssl;
        ssl_certificate %(dir)s/cert.pem;
        ssl_certificate_key %(dir)s/key.pem;
        ssl_buffer_size 16k;
        location / { return 200 "ok\\n"; }
        location /big.txt { root %(dir)s; }"""


def self_signed(directory):
    """A key and a certificate for localhost in directory (openssl CLI)."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=localhost", "-days", "1",
                    "-keyout", os.path.join(directory, "key.pem"),
                    "-out", os.path.join(directory, "cert.pem")],
                   check=True, capture_output=True, timeout=60)


def https_responses(port, paths):
    """GETs paths in turn on one TLS connection (keep-alive), the
    certificate unchecked; the size of each response, header included."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    sizes = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as s:
        buf = b""
        for path in paths:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
            while b"\r\n\r\n" not in buf:
                chunk = s.recv(65536)
                assert chunk, f"connection closed before the response to {path}"
                buf += chunk
            head, _, buf = buf.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 "), head
            length = int(re.search(rb"\r\nContent-Length: (\d+)", head, re.I).group(1))
            while len(buf) < length:
                chunk = s.recv(65536)
                assert chunk, f"connection closed inside the response to {path}"
                buf += chunk
            sizes.append(len(head) + 4 + length)
            buf = buf[length:]
    return sizes


def test_ssl_write_in_nginx(tmp_path):
    """nginx gathers a response (header and body) into its ssl_buffer_size
    buffer and hands each full buffer, and the rest at the end, to one
    SSL_write: a response of S bytes is ceil(S / 16384) calls (1 for
    "ok\\n", 3 for a 40,000-byte file). Handshakes and close_notify are no
    SSL_write. New connections and keep-alive ones alike; durations measured,
    nothing left open."""
    d = str(tmp_path)
    self_signed(d)
    with open(os.path.join(d, "big.txt"), "w") as f:
        f.write("x" * BIG_BODY)
    sizes = []

    def requests():
        for _ in range(20):  # a connection per request: a handshake each
            sizes.extend(https_responses(port, ["/"]))
        sizes.extend(https_responses(port, ["/", "/big.txt"] * 10))

    with harness.nginx(d, NGINX_TLS_SERVER % {"dir": d}) as (srv, port):
        run, funcs = tracing.trace_during([srv.pid], ["libssl.so.3:SSL_write"], requests)
    want = sum(-(-size // TLS_RECORD) for size in sizes)
    assert len(sizes) == 40 and want == 30 + 10 * 3, sizes
    f = funcs["SSL_write"]
    assert f["calls"] == want, f"{f}\n{run.describe()}"
    assert f["mode"] == "entry+ret" and f["raw_p50_ns"] > 0 and f["max_ns"] > 0, f
    assert f["orphans"] == 0 and f["tail_exits"] == 0 and f["lost"] == 0, f
