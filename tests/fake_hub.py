"""A local stand-in for the 🤗 Hub's HTTP API, the way our commands push to it (`huggingface_hub.upload_folder`).

It answers `create_repo`, `whoami`, and the commit protocol: preupload (weights go through Git LFS,
as the Hub's default .gitattributes sends *.h5, *.safetensors, ... there), the LFS batch and
upload calls, and the commit itself. The Hub cannot be reached from here, so tests point
`HF_ENDPOINT` at this server: the real client makes its real requests, and the test inspects
what arrived (`files`, `commits`).
"""

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List

LFS_SUFFIXES = (".h5", ".bin", ".safetensors", ".msgpack", ".ckpt", ".pt", ".zip", ".png")
LFS_BATCH = re.compile(r"^/(?P<repo>[^/]+/[^/]+?)(?:\.git)?/info/lfs/objects/batch$")


class FakeHub:
    """Serve on 127.0.0.1 in a thread. `repos[repo_id]` is the folder of files committed to `repo_id`;
    `lfs/` holds the LFS objects uploaded; `commits` lists each commit's repo and summary."""

    def __init__(self, root: Path):
        self.root = root
        self.repos: Dict[str, Path] = {}
        self.commits: List[dict] = []
        self.lfs_paths: Dict[str, List[str]] = {}  # repo -> files committed as LFS pointers
        self.validated_readmes: List[dict] = []  # the metadata of each README.md checked before a commit
        (root / "lfs").mkdir(parents=True, exist_ok=True)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def files(self, repo_id: str) -> List[str]:
        """The paths committed to `repo_id`, relative to its root."""
        folder = self.repos[repo_id]
        return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())

    def _create_repo(self, repo_id: str) -> None:
        self.repos.setdefault(repo_id, self.root / "repos" / repo_id.replace("/", "--")).mkdir(parents=True,
                                                                                               exist_ok=True)

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
                if self.path.split("?")[0] == "/api/whoami-v2":
                    return self.reply({"name": "tester", "fullname": "Test User", "email": "tester@example.com",
                                       "type": "user", "orgs": []})
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
                if LFS_BATCH.match(path):
                    return self.lfs_batch(json.loads(body))
                parts = path.strip("/").split("/")
                if parts == ["api", "validate-yaml"]:
                    return self.validate_yaml(json.loads(body)["content"])
                if parts[:3] == ["api", "repos", "create"]:
                    request = json.loads(body)
                    repo_id = "/".join(filter(None, [request.get("organization") or "tester", request["name"]]))
                    hub._create_repo(repo_id)
                    return self.reply({"url": f"{hub.endpoint}/{repo_id}"})
                if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "preupload":
                    return self.reply({"files": [
                        {"path": f["path"], "uploadMode": "lfs" if f["path"].endswith(LFS_SUFFIXES) else "regular",
                         "shouldIgnore": False} for f in json.loads(body)["files"]]})
                if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "commit":
                    return self.api_commit("/".join(parts[2:4]), body)
                return self.reply({"error": f"not served by the fake Hub: {self.path}"}, status=404)

            def validate_yaml(self, readme: str):
                """What the Hub checks of a README.md before a commit: its metadata block is a YAML mapping."""
                import yaml

                if not readme.startswith("---\n"):
                    return self.reply({"errors": [], "warnings": [{"message": "empty or missing yaml metadata"}]})
                try:
                    metadata = yaml.safe_load(readme[4:].split("\n---\n", 1)[0])
                except yaml.YAMLError as error:
                    return self.reply({"errors": [{"message": str(error)}]}, status=400)
                if not isinstance(metadata, dict):
                    return self.reply({"errors": [{"message": "metadata is not a mapping"}]}, status=400)
                hub.validated_readmes.append(metadata)
                return self.reply({"errors": [], "warnings": []})

            def api_commit(self, repo_id: str, body: bytes):
                if repo_id not in hub.repos:
                    return self.reply({"error": "Repository not found"}, status=404)
                lines = [json.loads(line) for line in body.splitlines() if line.strip()]
                for line in lines:
                    if line["key"] == "file":
                        content = base64.b64decode(line["value"]["content"])
                    elif line["key"] == "lfsFile":
                        content = (hub.root / "lfs" / line["value"]["oid"]).read_bytes()
                        hub.lfs_paths.setdefault(repo_id, []).append(line["value"]["path"])
                    else:
                        continue
                    target = hub.repos[repo_id] / line["value"]["path"]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(content)
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
                    objects.append(entry)
                return self.reply({"transfer": "basic", "objects": objects}, content_type="application/vnd.git-lfs+json")

        return Handler

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
