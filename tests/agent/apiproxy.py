"""An HTTPS proxy between the agent and the test control plane's API server,
for the answers the real server cannot be made to give on demand: a 429 or
503 with Retry-After, a watch that stays open and silent.

It serves TLS with the API server's own certificate (so the agent, trusting
the cluster's CA, cannot tell), reads each request and asks rule(req) what
to do with it:
  None             forward it to the real API server and relay the answer;
  Reply(...)       answer it itself;
  "stall"          forward it, relay the answer's first bytes (the watch is
                   established), then pass nothing either way, holding the
                   connection open until the proxy stops.
A rule may also act on the cluster before the request goes on (to make the
real server answer 409). Each request goes upstream on a connection of its
own ("Connection: close"), so every request of the agent passes the rule.
Every request is logged in `seen` with its time and what was done."""

import json
import os
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

from controlplane import _b64, _kubeconfig_yaml


@dataclass
class Reply:
    status: int
    body: str = ""
    headers: dict = field(default_factory=dict)


@dataclass
class Request:
    method: str
    path: str
    headers: dict
    body: bytes
    at: float = 0.0  # time.monotonic() when it was read
    action: str = ""  # "forwarded", "stalled" or the status answered


REASONS = {409: "Conflict", 429: "Too Many Requests", 503: "Service Unavailable"}


def status_body(code, reason, message):
    """A Kubernetes Status, as the API server writes it."""
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": reason, "code": code})


class ApiProxy:
    def __init__(self, cp, rule):
        self.cp = cp
        self.rule = rule
        self.seen = []
        self.errors = []  # what went wrong serving a connection (closed then)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.socks = []
        up = urllib.parse.urlsplit(cp.url)
        self.upstream = (up.hostname, up.port)
        self.server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.server_ctx.load_cert_chain(os.path.join(cp.pki, "apiserver.crt"),
                                        os.path.join(cp.pki, "apiserver.key"))
        self.client_ctx = cp.ssl_context()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.url = f"https://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def kubeconfig_user(self, name="agent-proxy"):
        """A kubeconfig user (for cluster.agent(user=...)) that reaches the API
        server through this proxy with the agent's token."""
        with open(os.path.join(self.cp.workdir, f"kubeconfig-{name}"), "w") as f:
            f.write(_kubeconfig_yaml(self.url, name,
                                     {"certificate-authority-data": _b64(self.cp.ca_file)},
                                     {"token": self.cp.agent_token}))
        return name

    def requests(self, method=None, path_has=""):
        with self.lock:
            return [r for r in self.seen
                    if (method is None or r.method == method) and path_has in r.path]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self.stopping.set()
        # close() alone leaves the accepting thread blocked in accept() (it
        # was joined only by the timeout below): shutdown() wakes it
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.close()
            except OSError:
                pass
        self.thread.join(5)

    def _track(self, s):
        with self.lock:
            self.socks.append(s)
        return s

    def _accept(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, raw):
        self._track(raw)
        conn = None
        try:
            conn = self._track(self.server_ctx.wrap_socket(raw, server_side=True))
            conn.settimeout(60)
            req = self._read_request(conn)
            if req is None:
                return
            action = self.rule(req)
            if isinstance(action, Reply):
                req.action = str(action.status)
                self._reply(conn, action)
            else:
                req.action = "stalled" if action == "stall" else "forwarded"
                self._forward(conn, req, stall=action == "stall")
        except Exception as e:  # noqa: BLE001 - the connection ends, the agent sees it
            self.errors.append(repr(e))
        finally:
            # wrap_socket detached raw: the TLS socket is the one to close
            for s in (conn, raw):
                try:
                    if s is not None:
                        s.close()
                except OSError:
                    pass

    def _read_request(self, conn):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        length = int(headers.get("content-length", "0"))
        if headers.get("expect", "").lower() == "100-continue" and len(body) < length:
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            body += chunk
        req = Request(method, path, headers, body, time.monotonic())
        with self.lock:
            self.seen.append(req)
        return req

    def _reply(self, conn, r):
        body = r.body.encode()
        head = [f"HTTP/1.1 {r.status} {REASONS.get(r.status, 'Error')}",
                "Content-Type: application/json", f"Content-Length: {len(body)}",
                "Connection: close", *[f"{k}: {v}" for k, v in r.headers.items()]]
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)

    def _forward(self, conn, req, stall):
        up = self._track(self.client_ctx.wrap_socket(
            socket.create_connection(self.upstream, timeout=10),
            server_hostname=self.upstream[0]))
        up.settimeout(None)
        head = [f"{req.method} {req.path} HTTP/1.1"]
        head += [f"{k}: {v}" for k, v in req.headers.items()
                 if k not in ("connection", "expect", "content-length")]
        head += [f"Content-Length: {len(req.body)}", "Connection: close"]
        up.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + req.body)
        try:
            head = b""
            while True:
                chunk = up.recv(65536)
                if not chunk:
                    return
                conn.sendall(chunk)
                if b"\r\n\r\n" in head:
                    continue
                head += chunk
                if b"\r\n\r\n" in head:
                    # "forwarded 409": what the real server answered
                    req.action += " " + head.split(b" ", 2)[1].decode()
                    if stall:
                        # established: from now on nothing passes, either way
                        self.stopping.wait()
                        return
        finally:
            up.close()
