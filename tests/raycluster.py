"""A real 2-node Ray cluster for the tests, on this machine, with its traffic on loopback.

Ray binds the machine's interface address even when told 127.0.0.1; inside a network
namespace that has only loopback (`unshare -n`, as root: CI is) both nodes bind
127.0.0.1. So a test runs its code in a child process there: `run(body)` runs `body` (Python
source) with `cluster`, `node2`, `ray` and `report(**values)` in scope and returns what
`report` was given (a dict; its printed output under "_output"). The cluster
(`ray.cluster_utils.Cluster`: a head and a second node, `NODE_CPUS` CPUs each, no
dashboard, a small object store) is started once per test process and kept for the next
body (a start costs ~8 s); each body runs in a namespace of its own, and the actors it
left are gone before the next one starts (its generators are collected). `fresh=True`
runs the body on a cluster of its own, which it may break (remove a node), shut down
after it; then no Ray process may be left (`ray_processes`).

Skipped where the namespace cannot be made (not root, no `unshare` or `ip`) or Ray is not
installed (`pip install kerasgen3[ray]`).
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

NODE_CPUS = 2
OBJECT_STORE = 128 << 20  # bytes of object store per node (Ray's default is 30% of memory)

PRELUDE = """\
import json, os, sys, time
os.environ.setdefault("KERAS_BACKEND", {backend!r})
import ray
from ray.cluster_utils import Cluster

def report(**values):
    _REPORT.update(values)

_REPORT = {{}}
cluster = Cluster(initialize_head=True, head_node_args=dict(
    num_cpus={cpus}, include_dashboard=False, object_store_memory={store}))
node2 = cluster.add_node(num_cpus={cpus}, object_store_memory={store})
cluster.wait_for_nodes()
ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
try:
{body}
finally:
    ray.shutdown()
    cluster.shutdown()
    print("RAYCLUSTER-REPORT " + json.dumps(_REPORT), flush=True)
"""

RAY_PROCESS_MARKS = ("raylet", "gcs_server", "ray::", "ray/_private", "ray/dashboard",
                     "ray/autoscaler", "default_worker.py", "runtime_env")


def available():
    """Why a namespaced cluster cannot run here (a reason), or None."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return "Ray is not installed (pip install kerasgen3[ray])"
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return "a loopback-only network namespace needs root, unshare and ip"
    return None


def skip_unless_available():
    reason = available()
    if reason:
        pytest.skip(reason)


def ray_processes(root_pid=None):
    """Ray's processes running now (`ps`), as (pid, command) pairs: under `root_pid`
    (its descendants and itself) when given, else all."""
    out = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True,
                         text=True).stdout
    rows = [line.strip().split(None, 2) for line in out.splitlines()[1:]]
    rows = [(int(pid), int(ppid), args) for pid, ppid, *rest in rows
            for args in [rest[0] if rest else ""]]
    found = [(pid, args) for pid, _, args in rows
             if any(mark in args for mark in RAY_PROCESS_MARKS)]
    if root_pid is None:
        return found
    children = {}
    for pid, ppid, _ in rows:
        children.setdefault(ppid, []).append(pid)
    under, todo = set(), [root_pid]
    while todo:
        pid = todo.pop()
        under.add(pid)
        todo.extend(children.get(pid, ()))
    return [(pid, args) for pid, args in found if pid in under]


SERVER = """\
import faulthandler, gc, json, os, sys, time, traceback
os.environ.setdefault("KERAS_BACKEND", {backend!r})
import ray
from ray.cluster_utils import Cluster

cluster = Cluster(initialize_head=True, head_node_args=dict(
    num_cpus={cpus}, include_dashboard=False, object_store_memory={store}))
node2 = cluster.add_node(num_cpus={cpus}, object_store_memory={store})
cluster.wait_for_nodes()
ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
print("RAYCLUSTER-READY", flush=True)
try:
    for line in sys.stdin:
        body = json.loads(line)["body"]
        values = {{}}
        scope = {{"__name__": "__main__", "ray": ray, "cluster": cluster, "node2": node2,
                  "report": values.update}}
        faulthandler.dump_traceback_later(200)  # where a body that hangs stands
        try:
            exec(compile(body, "<ray test body>", "exec"), scope)
        except BaseException:
            traceback.print_exc()
            values["_error"] = traceback.format_exc()
        faulthandler.cancel_dump_traceback_later()
        scope.clear()
        gc.collect()
        total = ray.cluster_resources().get("CPU", 0)
        deadline = time.monotonic() + 20
        while ray.available_resources().get("CPU", 0) < total and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.1)
        print("RAYCLUSTER-REPORT " + json.dumps(values), flush=True)
finally:
    ray.shutdown()
    cluster.shutdown()
"""


class _Session:
    """A cluster kept in a child process (SERVER), running the bodies sent to it."""

    def __init__(self, backend, env):
        import queue
        import threading

        script = SERVER.format(backend=backend, cpus=NODE_CPUS, store=OBJECT_STORE)
        self.process = subprocess.Popen(
            _namespaced(script), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.backend = backend
        self.startup = self._until("RAYCLUSTER-READY", 120)

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _until(self, mark, timeout):
        """The output up to the line starting with `mark` (included)."""
        import queue

        output, deadline = [], time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError("".join(output)) from None
            if line is None:
                raise RuntimeError("the cluster's process ended:\n" + "".join(output))
            output.append(line)
            if line.startswith(mark):
                return "".join(output)

    def run(self, body, timeout):
        self.process.stdin.write(json.dumps({"body": body}) + "\n")
        self.process.stdin.flush()
        return self._until("RAYCLUSTER-REPORT ", timeout)

    def close(self):
        try:
            self.process.stdin.close()
            self.process.wait(timeout=30)
        except Exception:  # noqa: BLE001 - ended by force below
            pass
        _end(self.process)


_SESSIONS = {}  # backend -> _Session: one cluster per test process and backend


def _close_sessions():
    for session in _SESSIONS.values():
        session.close()
    _SESSIONS.clear()


def _namespaced(script):
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" -c "$1"',
            sys.executable, script]


def _environment(env):
    environment = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONUNBUFFERED="1",
                       RAY_DEDUP_LOGS="0", **(env or {}))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environment["PYTHONPATH"] = os.pathsep.join(
        [root] + [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p])
    return environment


def _end(process):
    """Ends every process of the child's session (Ray's daemons share the session, not
    the process group), if anything of it is left."""
    out = subprocess.run(["ps", "-eo", "pid"], capture_output=True, text=True).stdout
    for pid in [int(p) for p in out.split()[1:]]:
        if pid != os.getpid() and _session_of(pid) == process.pid:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def run(body, timeout=240, backend=None, env=None, fresh=False):
    """Runs `body` (Python source) on the 2-node cluster in a loopback-only namespace;
    returns the dict `report(...)` was given, with the output under "_output". A body
    that raises fails the test with its output. `fresh`: a cluster of its own, shut down
    after it (then Ray processes left 10 s after it ended fail the test)."""
    skip_unless_available()
    backend = backend or os.environ.get("KERAS_BACKEND", "tensorflow")
    if fresh or env:
        output, left = _run_fresh(body, timeout, backend, _environment(env))
        assert not left, f"Ray processes left after the script ended: {left}"
    else:
        session = _SESSIONS.get(backend)
        if session is None or session.process.poll() is not None:
            if not _SESSIONS:
                import atexit

                atexit.register(_close_sessions)
            session = _SESSIONS[backend] = _Session(backend, _environment(None))
        try:
            output = session.run(textwrap.dedent(body), timeout)
        except (TimeoutError, RuntimeError) as error:
            session.close()
            _SESSIONS.pop(backend, None)
            pytest.fail(f"the Ray body failed or ran over {timeout} s:\n{str(error)[-8000:]}")
    lines = [line for line in output.splitlines() if line.startswith("RAYCLUSTER-REPORT ")]
    if not lines:
        pytest.fail(f"the Ray script reported nothing:\n{output[-8000:]}")
    result = json.loads(lines[-1].split(" ", 1)[1])
    if "_error" in result:
        pytest.fail(f"the Ray body failed:\n{output[-8000:]}")
    result["_output"] = output
    return result


def _run_fresh(body, timeout, backend, environment):
    script = PRELUDE.format(backend=backend, cpus=NODE_CPUS, store=OBJECT_STORE,
                            body=textwrap.indent(textwrap.dedent(body), "    "))
    process = subprocess.Popen(_namespaced(script), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=environment,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _end(process)
        output, _ = process.communicate()
        pytest.fail(f"the Ray script ran over {timeout} s:\n{output[-6000:]}")
    finally:
        left = _wait_gone(process.pid)
    if process.returncode != 0:
        pytest.fail(f"the Ray script failed (exit {process.returncode}):\n{output[-8000:]}")
    return output, left


def _wait_gone(session, within=10.0):
    """Ray processes of the script's session still running after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        left = [(pid, args) for pid, args in ray_processes()
                if _session_of(pid) == session]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.25)


def _session_of(pid):
    try:
        return os.getsid(pid)
    except OSError:
        return None
