"""Text output (without --json) shows name, address, mode and returns."""

import re

import pytest

import harness


def shows_number(text, n):
    """n written in hex (0x1f, +0x1f, -0x1f, or bare 1f) or in decimal, as a
    whole word."""
    sign = "-" if n < 0 else r"\+?"
    mag = abs(n)
    forms = [rf"{sign}0x0*{mag:x}", rf"{sign}{mag}"]
    if n >= 0:
        forms.append(rf"0*{mag:x}")
    return any(re.search(rf"(?<![\w.+-]){f}(?!\w)", text, re.I) for f in forms)


CASES = [
    (harness.go_demo("default"), "main.ValidateCard"),
    (harness.go_demo("pie-stripped"), "main.fib"),
    (harness.c_fix("normal"), "checked_div"),
    (harness.c_fix("normal"), "dispatch"),
]


@pytest.mark.parametrize("b,name", CASES, ids=harness.param_id)
def test_text_output(b, name):
    want = harness.inspected(b, name)  # the same run's --json view
    run = harness.inspect(b.path, name)
    run.assert_no_crash()
    assert run.returncode == 0, run.describe()
    out = run.stdout
    assert name in out, run.describe()
    assert want["mode"] in out, run.describe()
    assert shows_number(out, want["address"]), f"address {want['address']:#x} missing\n{run.describe()}"
    for r in want["returns"]:
        assert shows_number(out, r) or shows_number(out, want["address"] + r), \
            f"return {r} missing\n{run.describe()}"
