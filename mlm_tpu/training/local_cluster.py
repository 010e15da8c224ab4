"""N worker processes of one training run on this machine, each with its TF_CONFIG, as a cluster would start them:
how to try multi-worker training without a cluster (`mlm-tpu launch`), and how the tests run it.

Each worker's output lines come out prefixed with its index. Ctrl-C, SIGTERM and SIGHUP (a closed terminal or
dropped ssh session) are passed on to every worker (as SIGTERM for SIGHUP: they save a backup at the same step and
stop); a second one kills them. No worker outlives the launcher: one whose launcher is gone, even killed by SIGKILL,
stops as SIGTERM would make it (`follow_launcher`). When a worker fails, the others stop on their own within seconds
(the coordination service's heartbeat) and are killed if they have not after GRACE_SECONDS; the launcher then exits
non-zero with one line: the first failing worker's own `error:` line where it printed one, else the way it ended.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

from mlm_tpu.errors import STOPPED_EXIT_CODE, UserError

GRACE_SECONDS = 60.0  # how long the others may take to stop after a worker failed (or a worker its launcher died)
HOST = "localhost"
LAUNCHER_PID = "MLM_TPU_LAUNCHER_PID"  # set in each worker's environment: the process it must not outlive
WATCHER = "mlm-tpu-launcher-watch"
WATCH_SECONDS = 0.5
# what a worker ends with: our `error:` and `stopped:` lines, and argparse's `<prog>: error: ...` for a bad flag
LAST_LINE = re.compile(r"(?:[^:\s][^:]*: )?(error|stopped): (.*)")
# A worker that stops because another failed quotes that one's error; it may exit before the one it quotes.
QUOTED = re.compile(r"error: worker (\d+) \([^)]*\) failed, so .+? stops too: (.*)")


def free_ports(count: int) -> List[int]:
    """`count` ports nothing listens on now (the system's choice)."""
    sockets = []
    try:
        for _ in range(count):
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            probe.bind(("", 0))
            sockets.append(probe)
        return [probe.getsockname()[1] for probe in sockets]
    finally:
        for probe in sockets:
            probe.close()


def check_ports(first: int, count: int) -> List[int]:
    """Ports first .. first + count - 1, each checked to be free."""
    ports = list(range(first, first + count))
    if ports[-1] > 65535:
        raise UserError(f"--port {first} leaves no room for {count} workers below 65536; choose a lower --port")
    for port in ports:
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError as error:
            raise UserError(f"port {port} is in use ({error.strerror}): the {count} workers need ports {first} to "
                            f"{ports[-1]}; choose another --port, or leave it out to use free ports") from None
        finally:
            probe.close()
    return ports


def tf_config(ports: Sequence[int], index: int) -> str:
    return json.dumps({"cluster": {"worker": [f"{HOST}:{port}" for port in ports]},
                       "task": {"type": "worker", "index": index}})


@dataclass
class _Process:
    index: int
    popen: subprocess.Popen
    last_line: str = ""  # its last `error:` or `stopped:` line
    relays: List[threading.Thread] = field(default_factory=list)


class LocalCluster:
    """Runs `command` (an argv list) as `workers` processes on consecutive `ports`; `wait()` gives the exit code."""

    def __init__(self, command: Sequence[str], ports: Sequence[int]):
        self.command, self.ports = list(command), list(ports)
        self.processes: List[_Process] = []
        self.signals: List[str] = []  # the signals passed on to the workers
        self.lock = threading.Lock()

    def start(self) -> None:
        for index in range(len(self.ports)):
            env = {**os.environ, "TF_CONFIG": tf_config(self.ports, index), "PYTHONUNBUFFERED": "1",
                   LAUNCHER_PID: str(os.getpid())}
            popen = subprocess.Popen(self.command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True, text=True, errors="replace")
            process = _Process(index, popen)
            for stream, out in ((popen.stdout, sys.stdout), (popen.stderr, sys.stderr)):
                relay = threading.Thread(target=self._relay, args=(process, stream, out), daemon=True)
                relay.start()
                process.relays.append(relay)
            self.processes.append(process)
            self._say(sys.stderr, f"Worker {index}: process {popen.pid}, TF_CONFIG task {index} at "
                                  f"{HOST}:{self.ports[index]}\n")

    def _say(self, out, text: str) -> None:
        """Write to the launcher's terminal; once it is gone (SIGHUP), the workers' output is dropped, but still
        read, so that no worker blocks writing to a full pipe."""
        with self.lock:
            try:
                out.write(text)
                out.flush()
            except OSError:
                pass

    def _relay(self, process: _Process, stream, out) -> None:
        for line in stream:
            found = LAST_LINE.fullmatch(line.strip())
            if found:
                process.last_line = f"{found.group(1)}: {found.group(2)}"
            self._say(out, f"[worker {process.index}] {line}")

    def pass_on(self, number: int, frame=None) -> None:
        """A signal to the launcher goes to every worker still running (SIGHUP as SIGTERM: a worker stops with a
        backup); a second one kills them."""
        name = signal.Signals(number).name
        self.signals.append(name)
        kill = len(self.signals) > 1
        for process in self.processes:
            if process.popen.poll() is None:
                process.popen.send_signal(signal.SIGKILL if kill else signal.SIGTERM if number == signal.SIGHUP
                                          else number)

    def wait(self) -> int:
        """Wait for every worker; the exit code, with one line if any worker failed."""
        failed: Optional[_Process] = None
        deadline = None
        while None in [process.popen.poll() for process in self.processes]:
            for process in self.processes:
                if failed is None and process.popen.returncode not in (None, 0):
                    failed, deadline = process, time.monotonic() + GRACE_SECONDS
            if deadline is not None and time.monotonic() > deadline:
                for process in self.processes:
                    if process.popen.poll() is None:
                        process.popen.kill()
                break
            time.sleep(0.1)
        for process in self.processes:
            process.popen.wait()
            for relay in process.relays:
                relay.join(timeout=5)
        codes = [process.popen.returncode for process in self.processes]
        if failed is None:
            failed = next((process for process in self.processes if process.popen.returncode), None)
        if failed is None:
            return 0
        if all(code == STOPPED_EXIT_CODE for code in codes):
            self._say(sys.stderr, f"stopped: every worker saved a backup at the same step and stopped "
                                  f"({self._words(failed)}); run the same command again to continue\n")
            return STOPPED_EXIT_CODE
        others = "; the others stopped with it" if len(self.processes) > 1 else ""
        quoted = QUOTED.fullmatch(failed.last_line)
        if quoted:  # it exited first, but only passed on the error of the worker it names
            self._say(sys.stderr, f"error: {quoted.group(2)} (worker {quoted.group(1)}, the first to fail{others})\n")
        elif failed.last_line.startswith("error:"):  # the worker's own words: a bad flag, a bad file, a value check
            self._say(sys.stderr, f"{failed.last_line} (worker {failed.index}, the first to fail{others})\n")
        else:
            self._say(sys.stderr, f"error: worker {failed.index} failed first ({self._words(failed)}){others}\n")
        code = failed.popen.returncode
        return code if 0 < code < 128 and code != STOPPED_EXIT_CODE else 1

    @staticmethod
    def _words(process: _Process) -> str:
        code = process.popen.returncode
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        return f"{how}: {process.last_line}" if process.last_line else how


def launch(command: Sequence[str], workers: int, first_port: Optional[int] = None) -> int:
    """Run `command` as `workers` local workers of one cluster; the exit code (see the module's docstring)."""
    ports = check_ports(first_port, workers) if first_port else free_ports(workers)
    cluster = LocalCluster(command, ports)
    previous = {number: signal.signal(number, cluster.pass_on)
                for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        cluster.start()
        return cluster.wait()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def follow_launcher(environ=os.environ) -> None:
    """In a worker `mlm-tpu launch` started: once the launcher is gone (killed, by SIGKILL too, where it could pass
    nothing on), stop as SIGTERM makes a worker stop (every worker saves a backup at the same step), with the output
    nobody reads any more going to /dev/null, and be killed if still running GRACE_SECONDS later. It watches from a
    thread whether its parent is still the launcher, from the process' start on: TensorFlow offers no hook."""
    launcher = environ.get(LAUNCHER_PID)
    if not launcher or any(thread.name == WATCHER for thread in threading.enumerate()):
        return
    threading.Thread(target=_stop_without, args=(int(launcher),), name=WATCHER, daemon=True).start()


def _stop_without(launcher: int) -> None:
    while os.getppid() == launcher:
        time.sleep(WATCH_SECONDS)
    quiet = os.open(os.devnull, os.O_WRONLY)
    for stream in (1, 2):  # the pipes to the launcher have no reader: writing there would fail
        os.dup2(quiet, stream)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE_SECONDS)
    os.kill(os.getpid(), signal.SIGKILL)
