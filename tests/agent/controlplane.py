"""A real Kubernetes control plane for the agent's tests: etcd and kube-apiserver.

Started the way controller-runtime's envtest starts one: self-signed
certificates made with the openssl command, RBAC authorization, a static token
file, and no controller manager, scheduler or kubelet. The binaries come from
tests/k8s/build.sh (see build_bindir()).

    with ControlPlane(tmpdir, build_bindir()) as cp:
        cp.kubectl("apply", "-f", "crds/")
        agent_config = cp.kubeconfig("agent")

Users (see kubeconfig()):
  admin       token, group system:masters
  agent       token for system:serviceaccount:retwatch:retwatch-agent, so RBAC
              bindings to the ServiceAccount retwatch/retwatch-agent apply to it
  admin-cert  client certificate CN=admin-cert, O=system:masters
  agent-files the agent's token again, but the kubeconfig names the CA and the
              token by file path (certificate-authority:, tokenFile:)

Without a controller manager, nothing runs the controllers: a deleted
namespace stays Terminating, owner references are not garbage collected,
and no ServiceAccount or token is made for a namespace. The ServiceAccount
admission plugin is off so that Pods can be created without one.

Standard library only, so it runs without pytest.
"""

import base64
import ctypes
import json
import os
import re
import secrets
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_SCRIPT = os.path.join(REPO, "tests", "k8s", "build.sh")

AGENT_USER = "system:serviceaccount:retwatch:retwatch-agent"
AGENT_GROUPS = "system:serviceaccounts,system:serviceaccounts:retwatch,system:authenticated"

START_TIMEOUT = 60.0
_PR_SET_PDEATHSIG = 1


def build_bindir():
    """Build (or find in the cache) the binaries; return their directory.

    A cold build takes minutes; its progress goes to this process's stderr."""
    out = subprocess.run([BUILD_SCRIPT], stdout=subprocess.PIPE, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def free_ports(n):
    """n distinct loopback TCP ports that were free a moment ago."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:  # all bound at once, so the kernel hands out distinct ports
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _die_with_parent(parent_pid):
    """A preexec_fn that has the child SIGKILLed when the thread that started it
    dies, so that a crashed or killed test run leaks no etcd or kube-apiserver.

    prctl is looked up here, in the parent: dlopen in a child forked from a
    threaded process can deadlock on a lock another thread held."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec():
        if prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0 or os.getppid() != parent_pid:
            os._exit(127)  # no guard, or the parent died before prctl took effect

    return preexec


def _openssl(*args, cwd):
    res = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)}: {res.stderr.strip()}")


def _b64(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def _tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return f"({e})"


class ControlPlaneError(RuntimeError):
    pass


class ControlPlane:
    """etcd + kube-apiserver on free loopback ports, all state under workdir.

    watch_cache=False serves every watch from etcd itself (--watch-cache=false),
    so that compact_etcd() makes older resourceVersions 410 Gone at once. With
    the watch cache (the default, as in a real cluster), the cache keeps serving
    the events it holds after a compaction; a watch gets 410 only from a
    resourceVersion older than the cache's window, which after
    restart_apiserver() is every resourceVersion from before the restart.
    """

    def __init__(self, workdir, bindir, watch_cache=True):
        self.workdir = os.path.abspath(workdir)
        self.bindir = bindir
        self.watch_cache = watch_cache
        self.pki = os.path.join(self.workdir, "pki")
        self.ca_file = os.path.join(self.pki, "ca.crt")
        self.admin_token = secrets.token_hex(16)
        self.agent_token = secrets.token_hex(16)
        self.etcd_url = None
        self.url = None
        self._etcd = None
        self._apiserver = None
        self._apiserver_args = None

    # -- life cycle -------------------------------------------------------

    def start(self):
        """Start etcd and kube-apiserver; return self once the API is usable."""
        if self._etcd is not None:
            raise ControlPlaneError("start() called twice")
        os.makedirs(self.pki, exist_ok=True)
        self._make_pki()
        try:
            self._start_etcd()
            self._apiserver_args = self._apiserver_argv()
            self._write_kubeconfigs()
            self._start_apiserver()
        except BaseException:
            self.stop()
            raise
        return self

    def restart_apiserver(self):
        """Stop kube-apiserver and start it again with the same port and flags."""
        self._stop_apiserver()
        self._start_apiserver()

    def stop_apiserver(self):
        """Stop kube-apiserver (etcd runs on); start_apiserver() brings it back."""
        self._stop_apiserver()

    def start_apiserver(self):
        """Start kube-apiserver again, with the same port and flags."""
        self._start_apiserver()

    def stop(self):
        """Stop kube-apiserver, then etcd. Safe to call more than once."""
        self._stop_apiserver()
        self._stop_process(self._etcd)

    def __enter__(self):
        # Also accepts an already started control plane: with cp.start() as cp.
        return self if self._etcd is not None else self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- clients ----------------------------------------------------------

    def kubeconfig(self, user="admin"):
        """Path of a kubeconfig for "admin", "agent", "admin-cert" or "agent-files"."""
        path = os.path.join(self.workdir, f"kubeconfig-{user}")
        if not os.path.exists(path):
            raise ValueError(f"no kubeconfig for user {user!r}")
        return path

    def add_token_user(self, user, token):
        """Writes a kubeconfig for user, who authenticates with token (for
        example a pod-bound service-account token); kubeconfig(user) names it."""
        with open(self._path(f"kubeconfig-{user}"), "w") as f:
            f.write(_kubeconfig_yaml(self.url, user,
                                     {"certificate-authority-data": _b64(self.ca_file)},
                                     {"token": token}))
        return self.kubeconfig(user)

    def kubectl(self, *args, user="admin", input=None, check=True, timeout=60):
        """Run kubectl as user; return the CompletedProcess (text, output captured).
        A "-f -" reads input from a file, not a pipe: once in a full run, kubectl
        1.37 parsed a piped JSON document as YAML and refused it."""
        if input is not None and "-" in args:
            with tempfile.NamedTemporaryFile("w", dir=self.workdir, prefix="kubectl-input-",
                                             delete=False) as f:
                f.write(input)
            try:
                args = tuple(f.name if a == "-" else a for a in args)
                return self.kubectl(*args, user=user, check=check, timeout=timeout)
            finally:
                os.unlink(f.name)
        argv = [os.path.join(self.bindir, "kubectl"), "--kubeconfig", self.kubeconfig(user), *args]
        res = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise ControlPlaneError(
                f"kubectl {' '.join(args)} exited {res.returncode}: {res.stderr.strip()}")
        return res

    def ssl_context(self):
        """A TLS context that trusts the control plane's CA."""
        return ssl.create_default_context(cafile=self.ca_file)

    def urlopen(self, path, user="admin", method="GET", body=None, timeout=30):
        """An HTTP request to the API server with a user's token (admin or agent).

        Returns the open response (read or stream it); raises
        urllib.error.HTTPError for a non-2xx status."""
        token = {"admin": self.admin_token, "agent": self.agent_token}[user]
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        # a GET whose connection failed before an answer (once in a CI run, a
        # TLS handshake's "bad record mac" on a loaded machine) is asked again
        for attempt in range(3):
            try:
                return urllib.request.urlopen(req, context=self.ssl_context(), timeout=timeout)
            except urllib.error.HTTPError:
                raise
            except urllib.error.URLError as e:
                if method != "GET" or attempt == 2 or not isinstance(
                        e.reason, (ssl.SSLError, ConnectionError)):
                    raise
                time.sleep(0.2)

    # -- etcd -------------------------------------------------------------

    def etcd_revision(self):
        """etcd's current revision (the newest resourceVersion in the cluster)."""
        out = self._etcdctl("endpoint", "status", "-w", "json")
        return json.loads(out)[0]["Status"]["header"]["revision"]

    def compact_etcd(self):
        """Compact etcd at its current revision R; return R.

        A watch that reaches etcd (see watch_cache in the class's doc) from a
        resourceVersion below R - 1 then gets 410 Gone; one from R - 1 still
        works, since it reads etcd from R on."""
        rev = self.etcd_revision()
        self._etcdctl("compaction", "--physical", str(rev))
        return rev

    def _etcdctl(self, *args):
        argv = [os.path.join(self.bindir, "etcdctl"), "--endpoints", self.etcd_url, *args]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if res.returncode != 0:
            raise ControlPlaneError(f"etcdctl {' '.join(args)}: {res.stderr.strip()}")
        return res.stdout

    # -- internals --------------------------------------------------------

    def _path(self, name):
        return os.path.join(self.workdir, name)

    def _make_pki(self):
        """CA, serving and client certificates, and the ServiceAccount key pair.

        ECDSA P-256 keys: RSA key generation would add seconds to every start."""
        pki = self.pki
        newkey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        _openssl("req", "-x509", *newkey, "-keyout", "ca.key", "-out", "ca.crt",
                 "-days", "3650", "-subj", "/CN=retwatch-test-ca", cwd=pki)
        self._signed_cert("apiserver", "/CN=kube-apiserver", newkey,
                          "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                          "extendedKeyUsage=serverAuth\n", serial=2)
        self._signed_cert("admin", "/O=system:masters/CN=admin-cert", newkey,
                          "extendedKeyUsage=clientAuth\n", serial=3)
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-out", "sa.key", cwd=pki)
        _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
        with open(os.path.join(pki, "tokens.csv"), "w") as f:
            f.write(f'{self.admin_token},admin,admin,"system:masters"\n')
            f.write(f'{self.agent_token},{AGENT_USER},retwatch-agent-uid,"{AGENT_GROUPS}"\n')
        with open(os.path.join(pki, "agent.token"), "w") as f:
            f.write(self.agent_token)

    def _signed_cert(self, name, subject, newkey, extensions, serial):
        pki = self.pki
        ext = os.path.join(pki, f"{name}.ext")
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n" + extensions)
        _openssl("req", "-new", *newkey, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", subject, cwd=pki)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-set_serial", str(serial), "-days", "3650", "-extfile", ext,
                 "-out", f"{name}.crt", cwd=pki)

    def _spawn(self, name, argv):
        """Start a child whose output is appended to workdir/<name>.log."""
        with open(self._path(f"{name}.log"), "ab") as log:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT,
                                    preexec_fn=_die_with_parent(os.getpid()))

    @staticmethod
    def _stop_process(proc, timeout=15):
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _stop_apiserver(self):
        """SIGTERM: kube-apiserver stops listening at once, then waits for the
        watches still open on its connections, longer than _stop_process()
        waits (it was killed after 15 s every time a client watched). Once it
        takes no connection, it serves nobody new: it is killed then."""
        proc = self._apiserver
        if proc is None or proc.poll() is not None:
            return
        port = urllib.parse.urlsplit(self.url).port
        proc.terminate()
        deadline = time.monotonic() + 15
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                break  # refused: no longer listening
            time.sleep(0.05)
        self._stop_process(proc, timeout=0.5)

    def _fail(self, message):
        raise ControlPlaneError(
            f"{message}\n--- kube-apiserver.log (tail) ---\n{_tail(self._path('kube-apiserver.log'))}"
            f"\n--- etcd.log (tail) ---\n{_tail(self._path('etcd.log'))}")

    def _wait(self, what, proc, ready, deadline):
        """Poll ready() until true; fail early if proc exits, late at deadline."""
        last = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self._fail(f"{what}: process exited with {proc.returncode}")
            try:
                if ready():
                    return
            except (OSError, ValueError) as e:  # URLError and HTTPError are OSErrors
                last = e
            time.sleep(0.1)
        self._fail(f"{what}: not ready after {START_TIMEOUT:.0f} s (last error: {last})")

    def _start_etcd(self):
        client, peer = free_ports(2)
        self.etcd_url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        self._etcd = self._spawn("etcd", [
            os.path.join(self.bindir, "etcd"),
            "--name", "default",
            "--data-dir", self._path("etcd-data"),
            "--listen-client-urls", self.etcd_url,
            "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", peer_url,
            "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"default={peer_url}",
            # Test data need not survive a power cut; fsync would slow every write.
            "--unsafe-no-fsync",
        ])

        def healthy():
            with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as r:
                return json.load(r).get("health") == "true"

        self._wait("etcd", self._etcd, healthy, time.monotonic() + START_TIMEOUT)

    def _apiserver_argv(self):
        port, = free_ports(1)
        self.url = f"https://127.0.0.1:{port}"
        pki = lambda name: os.path.join(self.pki, name)  # noqa: E731
        return [
            os.path.join(self.bindir, "kube-apiserver"),
            "--etcd-servers", self.etcd_url,
            "--bind-address", "127.0.0.1",
            "--advertise-address", "127.0.0.1",
            # The endpoint reconciler refuses a loopback advertise address, and
            # there is no pod network to publish a real one to.
            "--endpoint-reconciler-type", "none",
            "--secure-port", str(port),
            # Without it the server writes self-signed certs to /var/run/kubernetes.
            "--cert-dir", self._path("apiserver-certs"),
            "--tls-cert-file", pki("apiserver.crt"),
            "--tls-private-key-file", pki("apiserver.key"),
            "--client-ca-file", pki("ca.crt"),
            "--token-auth-file", pki("tokens.csv"),
            "--authorization-mode", "RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", pki("sa.pub"),
            "--service-account-signing-key-file", pki("sa.key"),
            "--service-cluster-ip-range", "10.0.0.0/24",
            "--allow-privileged=true",
            # No controller manager makes the "default" ServiceAccount, which
            # this plugin would require of every Pod.
            "--disable-admission-plugins", "ServiceAccount",
            f"--watch-cache={str(self.watch_cache).lower()}",
        ]

    def _start_apiserver(self):
        self._apiserver = self._spawn("kube-apiserver", self._apiserver_args)
        deadline = time.monotonic() + START_TIMEOUT
        self._wait("kube-apiserver /readyz", self._apiserver,
                   lambda: self._get_ok("/readyz"), deadline)
        # /readyz does not wait for the default namespace (a post-start
        # controller makes it); tests that create objects in it need it.
        self._wait("kube-apiserver default namespace", self._apiserver,
                   lambda: self._get_ok("/api/v1/namespaces/default"), deadline)
        self._wait("kube-apiserver RBAC bootstrap", self._apiserver,
                   lambda: self._get_ok("/apis/rbac.authorization.k8s.io/v1/clusterroles/cluster-admin"),
                   deadline)

    def _get_ok(self, path):
        with self.urlopen(path, timeout=5) as r:
            return r.status == 200

    def _write_kubeconfigs(self):
        ca_data = _b64(self.ca_file)
        users = {
            "admin": ({"certificate-authority-data": ca_data}, {"token": self.admin_token}),
            "agent": ({"certificate-authority-data": ca_data}, {"token": self.agent_token}),
            "admin-cert": ({"certificate-authority-data": ca_data},
                           {"client-certificate-data": _b64(os.path.join(self.pki, "admin.crt")),
                            "client-key-data": _b64(os.path.join(self.pki, "admin.key"))}),
            "agent-files": ({"certificate-authority": self.ca_file},
                            {"tokenFile": os.path.join(self.pki, "agent.token")}),
        }
        for user, (cluster, auth) in users.items():
            with open(self._path(f"kubeconfig-{user}"), "w") as f:
                f.write(_kubeconfig_yaml(self.url, user, cluster, auth))


def _yaml_scalar(value):
    """value as YAML: plain where that is unambiguous, as kubectl writes it,
    else JSON-quoted, which YAML reads as a double-quoted scalar."""
    if re.fullmatch(r"[A-Za-z0-9/][A-Za-z0-9/._:+=-]*", value) and ": " not in value:
        return value
    return json.dumps(value)


def _kubeconfig_yaml(url, user, cluster, auth):
    """A kubeconfig laid out as kubectl writes one (the standard library has no
    YAML writer)."""
    q = _yaml_scalar
    lines = ["apiVersion: v1", "clusters:", "- cluster:"]
    lines += [f"    {k}: {q(v)}" for k, v in sorted(cluster.items())]
    lines += [f"    server: {q(url)}", "  name: retwatch-test",
              "contexts:", "- context:", "    cluster: retwatch-test",
              f"    user: {q(user)}", f"  name: {q(user)}",
              f"current-context: {q(user)}", "kind: Config", "preferences: {}",
              "users:", f"- name: {q(user)}", "  user:"]
    lines += [f"    {k}: {q(v)}" for k, v in sorted(auth.items())]
    return "\n".join(lines) + "\n"
