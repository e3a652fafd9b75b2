"""A local task service on 127.0.0.1 implementing the seed-002 task API, for tests.

Tasks "run" by executing a tiny deterministic agent in-process: the reply
echoes which harness files the bundle carried, so tests can see the bundle
arrived. Behaviour knobs: `slow_tasks` (never finish), `fail_tasks`,
`files_conflict` (GET /files answers 409), `responder` (optional
`fn(task, bundle_files) -> reply text` that replaces the echo agent, e.g. to
answer Harness² editor tasks with file blocks; the role is in `task["key"]`).
"""

from __future__ import annotations

import io
import json
import re
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class TaskService:
    def __init__(self, api_key: str = "test-key"):
        self.api_key = api_key
        self.uploads: dict[str, dict[str, bytes]] = {}
        self.tasks: dict[str, dict] = {}
        self.by_key: dict[str, str] = {}
        self.requests: list[tuple[str, str, dict]] = []
        self.cancelled: list[str] = []
        self.slow_prompts: set[str] = set()
        self.fail_prompts: set[str] = set()
        self.files_conflict = False
        self.polls_before_done = 1
        self.responder = None  # fn(task: dict, files: dict[str, bytes]) -> str
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, code: int, payload) -> None:
                body = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _auth(self) -> bool:
                service.requests.append((self.command, self.path, dict(self.headers)))
                if self.path == "/health":
                    return True
                if self.headers.get("X-API-Key") != service.api_key:
                    self._send(401, {"error": "bad api key"})
                    return False
                return True

            def do_GET(self):
                if not self._auth():
                    return
                if self.path == "/health":
                    return self._send(200, {"ok": True})
                m = re.fullmatch(r"/tasks/([^/]+)(/trace|/cost|/files)?", self.path)
                if not m or m.group(1) not in service.tasks:
                    return self._send(404, {"error": "no such task"})
                task = service.tasks[m.group(1)]
                sub = m.group(2)
                if sub is None:
                    with service._lock:
                        task["polls"] += 1
                        if task["status"] == "running" and task["polls"] >= service.polls_before_done \
                                and task["prompt"] not in service.slow_prompts:
                            service._finish(task)
                    return self._send(200, {k: v for k, v in task.items() if k in ("id", "status", "result_text", "error")})
                if sub == "/trace":
                    return self._send(200, {"events": [{"type": "start"}, {"type": "reply", "text": "done"}]})
                if sub == "/cost":
                    return self._send(200, {"usd_micros": 12500})
                if service.files_conflict:
                    return self._send(409, {"error": "worktree on another host"})
                return self._send(200, {"files": [{"path": "answer.txt", "content": task.get("answer", "")},
                                                  {"path": "../escape.txt", "content": "bad"}]})

            def do_POST(self):
                if not self._auth():
                    return
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                if self.path == "/uploads":
                    data = _multipart_file(body, self.headers.get("Content-Type", ""))
                    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
                        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
                    upload_id = f"up{len(service.uploads) + 1}"
                    service.uploads[upload_id] = files
                    return self._send(200, {"upload_id": upload_id})
                if self.path == "/tasks":
                    req = json.loads(body)
                    with service._lock:
                        key = req["idempotency_key"]
                        if key in service.by_key:
                            task = service.tasks[service.by_key[key]]
                            return self._send(200, {"id": task["id"], "status": task["status"]})
                        task_id = f"t{len(service.tasks) + 1}"
                        service.tasks[task_id] = {"id": task_id, "status": "running", "prompt": req["prompt"],
                                                  "upload_id": req["upload_id"], "key": key, "polls": 0,
                                                  "options": {k: v for k, v in req.items() if k not in ("prompt", "upload_id", "idempotency_key")}}
                        service.by_key[key] = task_id
                    return self._send(200, {"id": task_id, "status": "running"})
                m = re.fullmatch(r"/tasks/([^/]+)/cancel", self.path)
                if m and m.group(1) in service.tasks:
                    service.tasks[m.group(1)]["status"] = "cancelled"
                    service.cancelled.append(m.group(1))
                    return self._send(200, {"ok": True})
                return self._send(404, {"error": "not found"})

        return Handler

    def _finish(self, task: dict) -> None:
        files = self.uploads.get(task["upload_id"], {})
        if task["prompt"] in self.fail_prompts:
            task["status"] = "failed"
            task["error"] = "agent crashed"
            return
        names = ",".join(sorted(files))
        reply = f"I read: {names}" if self.responder is None else self.responder(task, files)
        task["answer"] = reply
        task["status"] = "completed"
        task["result_text"] = json.dumps({"task": task["id"], "thread_id": "th", "cwd": "/w", "status": "completed",
                                          "text": reply, "usage": {"input_tokens": 10}})


def _multipart_file(body: bytes, content_type: str) -> bytes:
    boundary = content_type.split("boundary=")[1].encode()
    for part in body.split(b"--" + boundary):
        if b"filename=" in part:
            return part.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n", 1)[0]
    raise ValueError("no file part")
