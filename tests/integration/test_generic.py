"""Go generic functions: the binary holds one instance per shape
(main.sum[go.shape.int], main.(*box[go.shape.string]).get; a stripped Go
1.19 binary names each main.sum[...]), and a name without brackets, as the user
wrote it in the source, names every instance."""

import pytest

import harness
import tracing

TRACEES = [tracing.go_tracee("native", "default"), tracing.go_tracee("go1.19.8", "pie-stripped")]
GENERICS = {"main.sum": ("main.sum[",), "main.(*box).get": ("main.(*box[", "]).get")}


def instances(doc, generic):
    head, *tail = GENERICS[generic]
    return sorted(f["name"] for f in doc["functions"]
                  if f["name"].startswith(head) and all(t in f["name"] for t in tail))


@pytest.mark.parametrize("t", TRACEES, ids=tracing.param_id)
def test_a_name_without_brackets_matches_every_instance(t):
    for generic in GENERICS:
        doc = harness.inspect_json(t.path, [generic])
        names = [f["name"] for f in doc["functions"]]
        assert len(names) == 2 and sorted(names) == instances(doc, generic), (generic, names)
    # an instance by its own name is that instance alone (Go before 1.21
    # writes every instance's name as main.sum[...] in .gopclntab: the name
    # names them all there)
    names = [f["name"] for f in harness.inspect_json(t.path, ["main.sum"])["functions"]]
    if len(set(names)) == 2:
        assert [f["name"] for f in harness.inspect_json(t.path, [names[0]])["functions"]] == \
            [names[0]]
    # a glob includes them once each
    doc = harness.inspect_json(t.path, ["main.s*"])
    addrs = [f["address"] for f in doc["functions"]]
    assert len(addrs) == len(set(addrs)), addrs
    assert len([f for f in doc["functions"] if f["name"].startswith("main.sum[")]) == 2


def test_every_instance_traced():
    """Each generic function's calls are its instances' together."""
    t = TRACEES[0]
    r = tracing.run_ok([(t, "generic")], list(GENERICS))
    for generic, want in r.report["calls"].items():
        names = instances(r.doc, generic)
        assert len(names) == 2, (generic, names, r.describe())
        got = sum(r.function(n)["calls"] for n in names)
        assert got == want, f"{generic}: {got} calls over {names}, the tracee made {want}\n{r.describe()}"


def test_suggestions_name_the_generic_function():
    """A typo is answered with the name as written in the source, once for
    all its instances."""
    run = harness.inspect(TRACEES[0].path, "main.summ")
    run.assert_refused()
    assert "similar names: main.sum" in run.stderr and "main.sum[" not in run.stderr, \
        run.describe()
