"""Arguments (--args): each slow and slowest call's arguments, read by the
entry probe (registers) and, for strings, as the call ends. The tracees call
a function 400 times, 10 of them with the input that makes it slow (the Go
tracee's main.charge(customer string, cents int64, express bool) for
customer "slow-co"; the C tracee's lookup(const char *key, int shard) for
key "slow-key"), and print the arguments of those 10 calls: the 10 slowest
calls kept carry exactly them. A stripped Go binary without DWARF gets the
raw argument registers, and says so."""

import pytest

import tracing

GO = tracing.go_tracee("native", "default")
GO_STRIPPED = tracing.go_tracee("go1.21.13", "pie-stripped")
C = tracing.c_tracee()


def args_of(call):
    return {a["name"]: a for a in call["arguments"]}


def slow_calls(r, fn):
    f = r.function(fn)
    assert f["calls"] == 400, r.describe()
    calls = f["slowest_calls"]
    assert len(calls) == 10 and all(c["duration_ns"] >= 99e6 for c in calls), r.describe()
    return calls


@pytest.mark.parametrize("t", [GO, tracing.go_tracee("go1.23.12", "default")],
                         ids=lambda t: t.id)
def test_go_arguments_are_the_slow_inputs(t):
    r = tracing.run_ok([(t, "charge")], ["main.charge"], options=("--args", "--slowest", "10"))
    calls = slow_calls(r, "main.charge")
    want = sorted((s["cents"], s["express"]) for s in r.report["slow"])
    got = []
    for c in calls:
        a = args_of(c)
        assert list(a) == ["customer", "cents", "express"], c["arguments"]
        assert a["customer"] == {"name": "customer", "type": "string", "value": "slow-co",
                                 "length": 7}, a
        assert a["cents"]["type"] == "int64" and a["express"]["type"] == "bool", a
        got.append((int(a["cents"]["value"]), a["express"]["value"] == "true"))
        assert "arguments_note" not in c, c
    assert sorted(got) == want, (got, want)


def test_c_arguments_are_the_slow_inputs():
    r = tracing.run_ok([(C, "lookup")], ["lookup"], options=("--args", "--slowest", "10"))
    calls = slow_calls(r, "lookup")
    want = sorted(s["shard"] for s in r.report["slow"])
    got = []
    for c in calls:
        a = args_of(c)
        assert list(a) == ["key", "shard"], c["arguments"]
        assert a["key"]["type"] == "const char *", a
        assert a["key"]["value"] == "slow-key" and a["key"]["length"] == 8, a
        assert a["shard"]["type"] == "int", a
        got.append(int(a["shard"]["value"]))
    assert sorted(got) == want, (got, want)


def test_stripped_go_gets_the_argument_registers_and_says_so():
    r = tracing.run_ok([(GO_STRIPPED, "charge")], ["main.charge"],
                       options=("--args", "--slowest", "10"))
    calls = slow_calls(r, "main.charge")
    want = sorted(s["cents"] for s in r.report["slow"])
    got = []
    for c in calls:
        regs = args_of(c)
        # Go's register ABI: customer in RAX (pointer) and RBX (length), cents in RCX
        assert list(regs) == ["rax", "rbx", "rcx", "rdi", "rsi", "r8", "r9", "r10", "r11"], regs
        assert all(a["type"] == "register" for a in regs.values()), regs
        assert int(regs["rbx"]["value"], 16) == 7, regs
        got.append(int(regs["rcx"]["value"], 16))
        assert "no DWARF" in c["arguments_note"], c
    assert sorted(got) == want, (got, want)


def test_without_args_no_call_carries_arguments():
    r = tracing.run_ok([(GO, "charge")], ["main.charge"],
                       options=("--slowest", "10", "--threshold", "60ms"))
    for c in r.function("main.charge")["slowest_calls"]:
        assert "arguments" not in c, c
    assert "slow-co" not in r.retwatch.stdout


def test_text_shows_the_arguments_of_slow_calls():
    r = tracing.run_ok([(GO, "charge")], ["main.charge"], json_out=False,
                       options=("--args", "--threshold", "60ms"))
    lines = [l.strip() for l in r.retwatch.stdout.splitlines() if l.strip().startswith("args:")]
    assert len(lines) == 10, r.retwatch.stdout
    assert all(l.startswith('args: customer="slow-co" cents=') for l in lines), lines


def test_arguments_at_a_moved_entry_and_a_slice():
    """main.spill[T](xs []T, rounds int) stores an argument to its spill slot
    before its entry site (a few instructions in): its arguments are still
    read as passed, and a slice shows its length and capacity."""
    r = tracing.run_ok([(GO, "spill")], ["main.spill"], options=("--args", "--slowest", "3"))
    (f,) = r.functions().values()
    assert f["calls"] == 200 and f["entry"] != "stepped", r.describe()
    for c in f["slowest_calls"]:
        assert args_of(c)["xs"]["value"] == "len 1024 cap 1024", c["arguments"]
        assert args_of(c)["rounds"] == {"name": "rounds", "type": "int", "value": "1000"}, c


def test_secrets_are_redacted_by_name():
    """db_connect(host, passwd, auth_token, port), 5 of 20 calls slow: the
    slowest calls and the slow calls printed show host and port; passwd and
    auth_token show as redacted with their type and length, and no secret
    string reaches stdout or stderr, in JSON and in text."""
    r = tracing.run_ok([(C, "login")], ["db_connect"],
                       options=("--args", "--slowest", "5", "--threshold", "50ms"))
    calls = r.function("db_connect")["slowest_calls"]
    assert len(calls) == 5, r.describe()
    for c in calls:
        a = args_of(c)
        assert a["host"]["value"] == "slow-host" and a["port"]["value"] == "5432", a
        for name, length in (("passwd", 11), ("auth_token", 7)):
            assert a[name] == {"name": name, "type": "const char *", "redacted": True,
                               "length": length}, a
    text = tracing.run_ok([(C, "login")], ["db_connect"], json_out=False,
                          options=("--args", "--threshold", "50ms"))
    lines = [l.strip() for l in text.retwatch.stdout.splitlines() if l.strip().startswith("args:")]
    assert lines and all(l == 'args: host="slow-host" passwd=<redacted> auth_token=<redacted> '
                         'port=5432' for l in lines), lines
    for run in (r.retwatch, text.retwatch):
        assert "hunter2" not in run.stdout + run.stderr and "tok-" not in run.stdout + run.stderr


def test_go_secrets_are_redacted_by_name():
    """main.login(user, password string, apiKey string, attempt int), 5 of
    20 calls slow: the user and the attempt show; password and apiKey (case
    and separators ignored) show as redacted with their type and length, and
    no secret reaches stdout or stderr, in JSON and in text."""
    r = tracing.run_ok([(GO, "login")], ["main.login"],
                       options=("--args", "--slowest", "5", "--threshold", "30ms"))
    calls = r.function("main.login")["slowest_calls"]
    assert len(calls) == 5, r.describe()
    for c in calls:
        a = args_of(c)
        assert list(a) == ["user", "password", "apiKey", "attempt"], c["arguments"]
        assert a["user"]["value"] == "slow-user" and int(a["attempt"]["value"]) % 4 == 1, a
        for name, length in (("password", 11), ("apiKey", 7)):
            assert a[name] == {"name": name, "type": "string", "redacted": True,
                               "length": length}, a
    text = tracing.run_ok([(GO, "login")], ["main.login"], json_out=False,
                          options=("--args", "--threshold", "30ms"))
    lines = [l.strip() for l in text.retwatch.stdout.splitlines() if l.strip().startswith("args:")]
    assert len(lines) == 5 and all(l.startswith('args: user="slow-user" password=<redacted> '
                                                'apiKey=<redacted> attempt=') for l in lines), lines
    for run in (r.retwatch, text.retwatch):
        assert "hunter2" not in run.stdout + run.stderr and "key-0" not in run.stdout + run.stderr


def test_redaction_extended_and_turned_off():
    """--redact port adds a name to the list; --no-redact shows everything."""
    r = tracing.run_ok([(C, "login")], ["db_connect"],
                       options=("--args", "--slowest", "5", "--redact", "PORT"))
    for c in r.function("db_connect")["slowest_calls"]:
        a = args_of(c)
        assert a["port"].get("redacted") and "value" not in a["port"], a
        assert a["passwd"].get("redacted"), a
    r = tracing.run_ok([(C, "login")], ["db_connect"],
                       options=("--args", "--slowest", "5", "--no-redact"))
    for c in r.function("db_connect")["slowest_calls"]:
        a = args_of(c)
        assert a["passwd"]["value"].startswith("hunter2-"), a
        assert a["auth_token"]["value"].startswith("tok-"), a
