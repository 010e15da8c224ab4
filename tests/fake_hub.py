"""A local stand-in for the 🤗 Hub's HTTP API, enough for `create_repo` + `upload_folder`.

The Hub cannot be reached from here, so tests point `HF_ENDPOINT` at this server: the real
huggingface_hub client then makes its real requests, and the files it commits land in a folder
the test can compare with what was saved locally.
"""

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List


class FakeHub:
    """Serve on 127.0.0.1 in a thread; `repos[repo_id]` is a folder holding each repo's files."""

    def __init__(self, root: Path):
        self.root = root
        self.repos: Dict[str, Path] = {}
        self.commits: List[dict] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                parts = self.path.split("?")[0].strip("/").split("/")
                if parts[:3] == ["api", "repos", "create"]:
                    request = json.loads(body)
                    repo_id = "/".join(filter(None, [request.get("organization"), request["name"]]))
                    hub.repos.setdefault(repo_id, hub.root / repo_id.replace("/", "--")).mkdir(parents=True, exist_ok=True)
                    return self.reply({"url": f"{hub.endpoint}/{repo_id}"})
                if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "preupload":
                    files = json.loads(body)["files"]
                    return self.reply({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                                 for f in files]})
                if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "commit":
                    repo_id = "/".join(parts[2:4])
                    if repo_id not in hub.repos:
                        return self.reply({"error": "Repository not found"}, status=404)
                    lines = [json.loads(line) for line in body.splitlines() if line.strip()]
                    for line in lines:
                        if line["key"] == "file":
                            target = hub.repos[repo_id] / line["value"]["path"]
                            target.parent.mkdir(parents=True, exist_ok=True)
                            target.write_bytes(base64.b64decode(line["value"]["content"]))
                    hub.commits.append({"repo_id": repo_id, "summary": lines[0]["value"]["summary"]})
                    return self.reply({"commitUrl": f"{hub.endpoint}/{repo_id}/commit/{len(hub.commits):040x}",
                                       "commitOid": f"{len(hub.commits):040x}"})
                return self.reply({"error": f"not served by the fake Hub: {self.path}"}, status=404)

            def reply(self, payload: dict, status: int = 200):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
