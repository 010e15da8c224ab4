"""A local stand-in for the 🤗 Hub, for the two ways our commands push to it.

- HTTP API: `create_repo`, `whoami`, and `upload_folder`'s preupload and commit calls (what
  `python -m mlm_tpu.tokenizer train --push-to-hub` uses);
- git over HTTP, served by git's own `git http-backend`, with a Git LFS batch endpoint (what
  transformers' `PushToHubCallback` uses through `huggingface_hub.Repository`).

The Hub cannot be reached from here, so tests point `HF_ENDPOINT` at this server: the real
clients then make their real requests and the test inspects what arrived.
"""

import base64
import json
import os
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List

GIT_HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
# Like the Hub, a new repo starts with one commit: a .gitattributes sending binary weights to LFS.
INITIAL_GITATTRIBUTES = "".join(f"*.{ext} filter=lfs diff=lfs merge=lfs -text\n"
                                for ext in ("h5", "bin", "safetensors", "msgpack", "ckpt", "pt", "zip"))
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "hub", "GIT_AUTHOR_EMAIL": "hub@example.com",
                "GIT_COMMITTER_NAME": "hub", "GIT_COMMITTER_EMAIL": "hub@example.com"}
GIT_PATH = re.compile(r"^/(?P<repo>[^/]+/[^/]+?)(?:\.git)?/(?P<rest>info/refs|git-upload-pack|git-receive-pack)$")
LFS_BATCH = re.compile(r"^/(?P<repo>[^/]+/[^/]+?)(?:\.git)?/info/lfs/objects/batch$")


class FakeHub:
    """Serve on 127.0.0.1 in a thread. `repos[repo_id]` holds files committed through the HTTP API;
    `git_dir(repo_id)` is the bare git repository pushed to over git; `lfs/` holds LFS objects."""

    def __init__(self, root: Path):
        self.root = root
        self.repos: Dict[str, Path] = {}
        self.commits: List[dict] = []
        (root / "git").mkdir(parents=True, exist_ok=True)
        (root / "lfs").mkdir(parents=True, exist_ok=True)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def git_dir(self, repo_id: str) -> Path:
        return self.root / "git" / repo_id

    def git(self, repo_id: str, *args: str, stdin: str = "") -> str:
        """Run a git command in the bare repository of `repo_id`; return its output."""
        return subprocess.run(["git", *args], cwd=self.git_dir(repo_id), capture_output=True, text=True,
                              check=True, input=stdin, env={**os.environ, **GIT_IDENTITY}).stdout.strip()

    def _create_repo(self, repo_id: str) -> None:
        self.repos.setdefault(repo_id, self.root / "api" / repo_id.replace("/", "--")).mkdir(parents=True,
                                                                                             exist_ok=True)
        if not self.git_dir(repo_id).exists():
            subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(self.git_dir(repo_id))],
                           check=True)
            self.git(repo_id, "config", "http.receivepack", "true")
            blob = self.git(repo_id, "hash-object", "-w", "--stdin", stdin=INITIAL_GITATTRIBUTES)
            tree = self.git(repo_id, "mktree", stdin=f"100644 blob {blob}\t.gitattributes\n")
            commit = self.git(repo_id, "commit-tree", tree, "-m", "initial commit")
            self.git(repo_id, "update-ref", "refs/heads/main", commit)

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            self.rfile.readline()
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length", 0)))

            def reply(self, payload, status: int = 200, content_type: str = "application/json"):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                path = self.path.split("?")[0]
                if path == "/api/whoami-v2":
                    return self.reply({"name": "tester", "fullname": "Test User", "email": "tester@example.com",
                                       "type": "user", "orgs": []})
                if GIT_PATH.match(path):
                    return self.git_backend(b"")
                if path.startswith("/lfs-objects/"):
                    target = hub.root / "lfs" / path.rsplit("/", 1)[1]
                    if target.exists():
                        return self.reply(target.read_bytes(), content_type="application/octet-stream")
                return self.reply({"error": f"not served by the fake Hub: {self.path}"}, status=404)

            def do_PUT(self):
                path = self.path.split("?")[0]
                if path.startswith("/lfs-objects/"):
                    (hub.root / "lfs" / path.rsplit("/", 1)[1]).write_bytes(self.body())
                    return self.reply({})
                return self.reply({"error": f"not served by the fake Hub: {self.path}"}, status=404)

            def do_POST(self):
                path = self.path.split("?")[0]
                body = self.body()
                if GIT_PATH.match(path):
                    return self.git_backend(body)
                match = LFS_BATCH.match(path)
                if match:
                    return self.lfs_batch(json.loads(body))
                parts = path.strip("/").split("/")
                if parts[:3] == ["api", "repos", "create"]:
                    request = json.loads(body)
                    repo_id = "/".join(filter(None, [request.get("organization") or "tester", request["name"]]))
                    hub._create_repo(repo_id)
                    return self.reply({"url": f"{hub.endpoint}/{repo_id}"})
                if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "preupload":
                    return self.reply({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                                 for f in json.loads(body)["files"]]})
                if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "commit":
                    return self.api_commit("/".join(parts[2:4]), body)
                return self.reply({"error": f"not served by the fake Hub: {self.path}"}, status=404)

            def api_commit(self, repo_id: str, body: bytes):
                if repo_id not in hub.repos:
                    return self.reply({"error": "Repository not found"}, status=404)
                lines = [json.loads(line) for line in body.splitlines() if line.strip()]
                for line in lines:
                    if line["key"] == "file":
                        target = hub.repos[repo_id] / line["value"]["path"]
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(base64.b64decode(line["value"]["content"]))
                hub.commits.append({"repo_id": repo_id, "summary": lines[0]["value"]["summary"]})
                oid = f"{len(hub.commits):040x}"
                return self.reply({"commitUrl": f"{hub.endpoint}/{repo_id}/commit/{oid}", "commitOid": oid})

            def lfs_batch(self, request: dict):
                objects = []
                for item in request["objects"]:
                    stored = hub.root / "lfs" / item["oid"]
                    entry = {"oid": item["oid"], "size": item["size"], "authenticated": True}
                    href = {"href": f"{hub.endpoint}/lfs-objects/{item['oid']}", "expires_in": 3600}
                    if request["operation"] == "upload" and not stored.exists():
                        entry["actions"] = {"upload": href}
                    elif request["operation"] == "download":
                        entry["actions"] = {"download": href}
                    objects.append(entry)
                return self.reply({"transfer": "basic", "objects": objects}, content_type="application/vnd.git-lfs+json")

            def git_backend(self, body: bytes):
                """Hand the request to `git http-backend` (CGI) and relay its answer."""
                path, _, query = self.path.partition("?")
                match = GIT_PATH.match(path)
                env = {**os.environ, "GIT_PROJECT_ROOT": str(hub.root / "git"), "GIT_HTTP_EXPORT_ALL": "1",
                       "PATH_INFO": f"/{match['repo']}/{match['rest']}", "QUERY_STRING": query,
                       "REQUEST_METHOD": self.command, "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                       "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": "tester", "REMOTE_ADDR": "127.0.0.1",
                       "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                       "GIT_PROTOCOL": self.headers.get("Git-Protocol", "")}
                output = subprocess.run([GIT_HTTP_BACKEND], input=body, env=env, capture_output=True).stdout
                head, _, payload = output.partition(b"\r\n\r\n")
                headers = [line.split(b":", 1) for line in head.split(b"\r\n") if b":" in line]
                status = next((int(v.split()[0]) for k, v in headers if k.lower() == b"status"), 200)
                self.send_response(status)
                for key, value in headers:
                    if key.lower() != b"status":
                        self.send_header(key.decode(), value.strip().decode())
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
