"""No harm to what a node's probes trace (issue 45), across tenants: a probe
goes only on an instruction of the traced file's own code, whatever a
debug file in a container's root says, and one container's debug file names
nothing in another's.

The pods run tests/fixtures/c/harmfix.c (build/fixtures/c/harm, `make
fixtures`): a stripped static executable whose function mix() holds 8-byte
immediates, so that a breakpoint byte written into one changes the sum each
round prints. Every pod's container is an overlay of one image, so all run
the same inode of /app/harmfix; a debug file is written into one container's
own upper layer, and the other container's root has none. Each test runs
twice, with the debug file at each place the agent looks for one in a
container's root: beside the executable, by the name its .gnu_debuglink
holds (/app/harmfix.debug), and under /usr/lib/debug/.build-id by its build
id. The forged debug file
(tests/fixtures/forge_debug.py) moves mix one byte into an instruction, with
the CRC-32 and build id the binary expects: an agent that believed it would
trap inside an immediate, and the program would print a wrong sum.

[REF] The untraced sum: the program itself, run on the host without retwatch.
"""

import json
import os
import re
import subprocess

import pytest

import pods
from agentproc import REPO, wait_for
from test_agent import fns

FIXTURES = os.environ.get("RETWATCH_FIXTURES", os.path.join(REPO, "build", "fixtures"))
HARM = os.path.join(FIXTURES, "c", "harm")
EXE = "/app/harmfix"
ROUNDS = ("rounds", "600")  # 5 minutes of rounds: the pods are deleted long before


def fixture(name):
    path = os.path.join(HARM, name)
    assert os.path.exists(path), f"{path} is missing (run `make fixtures`)"
    return path


def build_id_path():
    """/usr/lib/debug/.build-id/xx/yyyy.debug of harmfix's GNU build id."""
    notes = subprocess.run(["readelf", "-n", fixture("harmfix")], capture_output=True,
                           text=True, check=True).stdout
    bid = re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)
    return f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"


@pytest.fixture(params=["beside", "build-id"])
def debug_place(request):
    """Where a container's root holds its debug file of /app/harmfix."""
    return EXE + ".debug" if request.param == "beside" else build_id_path()


@pytest.fixture(scope="module")
def untraced_sum():
    """The sum of one round of the program run on the host, untraced."""
    out = subprocess.run([fixture("harmfix"), "rounds", "1"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    (line,) = out.splitlines()
    return json.loads(line)["sum"]


@pytest.fixture(scope="module")
def harm_image(workdir):
    """An image like the others (busybox, podapp, which the harness checks
    each container has) with harmfix at /app/harmfix and no debug file."""
    root = pods.make_rootfs(os.path.join(workdir, "harm-image"),
                            pods.build_podapp(os.path.join(workdir, "bin")))
    pods._install(fixture("harmfix"), os.path.join(root, EXE.lstrip("/")))
    return root


@pytest.fixture
def harm_pod(cluster, harm_image, workdir, debug_place):
    """harm_pod(ns, name, debug) -> a Pod running `harmfix rounds` whose
    container's root holds the fixture debug (or nothing) at debug_place;
    deleted after the test."""
    made = []

    def make(ns, name, debug=None):
        pod = pods.Pod(cluster.kubectl, ns, name, {"app": "harm"}, "node-a",
                       {"app": (EXE, *ROUNDS)}, harm_image, workdir)
        made.append(pod)
        pod.create()
        if debug:
            # the container's own file, in its upper layer, written through its root
            c = pod.containers["app"]
            dst = os.path.join(c.rootfs, debug_place.lstrip("/"))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(fixture(debug), "rb") as src, open(dst + ".part", "wb") as f:
                f.write(src.read())
            os.rename(dst + ".part", dst)
        return pod

    yield make
    for pod in made:
        pod.delete()


def one_inode(image, place, having, lacking):
    """Both pods' processes run the image's inode of harmfix (not a copy in
    an upper layer), and only the first one's root holds a debug file."""
    want = os.stat(os.path.join(image, EXE.lstrip("/"))).st_ino
    for p in (having, lacking):
        c = p.containers["app"]
        assert os.stat(f"/proc/{c.pid}/exe").st_ino == want, (p.name, want)
        assert os.stat(os.path.join(c.rootfs, EXE.lstrip("/"))).st_ino == want, (p.name, want)
        debug = os.path.join(f"/proc/{c.pid}/root", place.lstrip("/"))
        assert os.path.exists(debug) == (p is having), (p.name, debug)


def rounds(pod):
    """The rounds the pod's program printed so far (its container's log)."""
    with open(pod.containers["app"].log_path, errors="replace") as f:
        return [json.loads(line) for line in f
                if line.startswith('{"scenario":"rounds"') and line.endswith("\n")]


def probe_on_mix(cluster, ns, name="harm"):
    # mix is called 20,000 times a round: no overhead guard, every call measured
    cluster.apply_probe(ns, name, {"selector": {"matchLabels": {"app": "harm"}},
                                   "functions": ["mix"], "executable": EXE,
                                   "reportInterval": "2s", "maxOverhead": "0"})


def refusal(cluster, ns, pods_, name="harm"):
    """node-a's report of the probe once it holds an error, and the Attached
    condition once the summary says AttachFailed. Without an error, fails
    with the pods' last rounds (an attach the agent should have refused
    shows in their sums)."""
    try:
        entry = wait_for(f"{ns}/{name}'s error",
                         lambda: (e := cluster.node_entry(ns, name, "node-a"))
                         and e.get("errors") and e, timeout=90)
    except AssertionError as e:
        last = {p.name: (rounds(p) or [None])[-1] for p in pods_}
        raise AssertionError(f"{e}\nthe pods' last rounds: {last}") from None
    cond = wait_for(f"{ns}/{name}'s Attached=False",
                    lambda: (c := cluster.condition(ns, name, "Attached"))
                    and c["reason"] == "AttachFailed" and c, timeout=60)
    return entry, cond


def more_rounds(pods_, n=4):
    """Waits until each pod printed n more rounds (rounds after the agent's
    outcome: the program ran on with whatever the agent did to it); returns
    every round of each."""
    seen = {p.name: rounds(p) for p in pods_}
    wait_for(f"{n} more rounds of each pod",
             lambda: all(len(rounds(p)) >= len(seen[p.name]) + n for p in pods_), timeout=60)
    return {p.name: rounds(p) for p in pods_}


def assert_untouched(all_rounds, want):
    """Every round of every pod computed the untraced sum with 20,000 calls."""
    for name, rs in all_rounds.items():
        assert rs, f"pod {name} printed nothing"
        bad = [r for r in rs if r["sum"] != want or r["calls"]["mix"] != 20000]
        assert not bad, f"pod {name}: {len(bad)} of {len(rs)} rounds changed: {bad[:3]} " \
                        f"(untraced sum {want})"


def test_forged_debug_file_in_one_tenants_root_harms_no_one(cluster, harm_pod, harm_image,
                                                             untraced_sum, debug_place):
    """Two namespaces' pods of one image, the forger's root holding the
    forged debug file, each namespace probing mix. The forger's probe
    first: its report and Attached condition say its debug file does not
    match the executable (the function, and why: not an instruction
    boundary), and nothing is attached. Then the victim's: its root holds no
    debug file, so mix is not found there, and nothing of the forger's file
    is said to it (an analysis keyed by the inode alone would hand it the
    forger's). Neither program's output changes, in the rounds before the
    probes and in those after the agent's outcome."""
    forger_ns, victim_ns = cluster.namespace(), cluster.namespace()
    forger = harm_pod(forger_ns, "forger-1", "harmfix.forged.debug")
    victim = harm_pod(victim_ns, "victim-1")
    one_inode(harm_image, debug_place, forger, victim)
    with cluster.agent("node-a") as agent:
        probe_on_mix(cluster, forger_ns)
        entry, cond = refusal(cluster, forger_ns, (forger, victim))
        (err,) = entry["errors"]
        pid = forger.containers["app"].pid
        for part in (f"pod forger-1, container app, process {pid}: ",
                     "no function matches 'mix'", f"ignored debug file {debug_place}: it "
                     "does not match the executable: function mix: 0x",
                     "is not an instruction boundary"):
            assert part in err, (part, err)
        print(f"the forger's probe: {err}")
        assert "does not match the executable" in cond["message"], cond
        assert entry["attached"] is False and not entry.get("functions"), entry

        probe_on_mix(cluster, victim_ns)
        entry, cond = refusal(cluster, victim_ns, (forger, victim))
        (err,) = entry["errors"]
        pid = victim.containers["app"].pid
        for part in (f"pod victim-1, container app, process {pid}: ",
                     "no function matches 'mix' in /app/harmfix", "not found"):
            assert part in err, (part, err)
        print(f"the victim's probe: {err}")
        for said in (err, cond["message"]):
            assert "ignored debug file" not in said and "does not match" not in said, said
        assert entry["attached"] is False and not entry.get("functions"), entry
        assert not agent.links(), "the agent holds uprobe links though nothing attached"

        assert_untouched(more_rounds((forger, victim)), untraced_sum)
        # both refusals stand, the programs having run on
        for ns in (forger_ns, victim_ns):
            assert cluster.node_entry(ns, "harm", "node-a")["attached"] is False, ns
        assert agent.proc.poll() is None


def test_real_debug_file_in_one_tenants_root_names_mix_there_only(cluster, harm_pod, harm_image,
                                                                   untraced_sum, debug_place):
    """The control: the real debug file in one namespace's root. Its probe
    attaches on mix and counts its calls, at most the 20,000 of each round
    its program began since the probe was made; the other namespace's pod
    of the same inode, whose root has none, is told mix is not found. Both
    programs print the untraced sum in every round."""
    owner_ns, other_ns = cluster.namespace(), cluster.namespace()
    owner = harm_pod(owner_ns, "owner-1", "harmfix.debug")
    other = harm_pod(other_ns, "other-1")
    one_inode(harm_image, debug_place, owner, other)
    with cluster.agent("node-a") as agent:
        before = len(rounds(owner))
        probe_on_mix(cluster, owner_ns)
        probe_on_mix(cluster, other_ns)
        try:
            entry = wait_for("calls of mix in the owner's report",
                             lambda: (e := cluster.node_entry(owner_ns, "harm", "node-a"))
                             and fns(e).get("mix", {}).get("calls", 0) >= 20000 and e,
                             timeout=90)
        except AssertionError as e:
            errors = (cluster.node_entry(owner_ns, "harm", "node-a") or {}).get("errors")
            raise AssertionError(f"{e}\nthe owner's errors: {errors}") from None
        began = len(rounds(owner)) - before + 1  # the rounds printed since, and one under way
        mix = fns(entry)["mix"]
        assert entry["attached"] is True and entry["errors"] == [], entry
        assert 20000 <= mix["calls"] <= 20000 * began, (mix, began)
        cond = wait_for("the owner's Attached=True",
                        lambda: (c := cluster.condition(owner_ns, "harm", "Attached"))
                        and c["status"] == "True" and c, timeout=60)
        assert cond["reason"] == "Attached", cond

        entry, _ = refusal(cluster, other_ns, (owner, other))
        (err,) = entry["errors"]
        assert "no function matches 'mix' in /app/harmfix" in err, err
        assert "ignored debug file" not in err and "does not match" not in err, err

        assert_untouched(more_rounds((owner, other)), untraced_sum)
        # the owner's probe went on counting the rounds after
        try:
            wait_for("more calls of mix", lambda: fns(cluster.node_entry(
                owner_ns, "harm", "node-a"))["mix"]["calls"] > mix["calls"], timeout=30)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{cluster.node_entry(owner_ns, 'harm', 'node-a')}\n"
                                 f"{agent.tail(60)}") from None
        assert agent.proc.poll() is None
