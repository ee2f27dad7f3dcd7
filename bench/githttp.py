"""A smart-HTTP git server on 127.0.0.1 for bench/git_backends.py: `git http-backend` (CGI)
behind Python's threading HTTP server, so every client fetches the same packs that git
itself makes, as from a forge. Responses are streamed (chunked), not buffered.

    python bench/githttp.py --root DIR --port P      # serves DIR/<name>.git
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 256 * 1024


class GitHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = ""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._cgi()

    def do_POST(self) -> None:
        self._cgi()

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _cgi(self) -> None:
        path, _, query = self.path.partition("?")
        body = self._body()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": self.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
        }
        for header in ("Git-Protocol", "Content-Encoding"):
            if self.headers.get(header):
                env["HTTP_" + header.upper().replace("-", "_")] = self.headers[header]
        git = shutil.which("git") or "git"
        with subprocess.Popen(
            [git, "http-backend"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        ) as cgi:
            # stdout=PIPE with the default bufsize is a BufferedReader, whose read1 returns
            # what the pipe has now instead of waiting for CHUNK bytes.
            assert cgi.stdin is not None and isinstance(cgi.stdout, io.BufferedReader)
            cgi.stdin.write(body)
            cgi.stdin.close()
            status, headers = 200, []
            while True:
                line = cgi.stdout.readline().rstrip(b"\r\n")
                if not line:
                    break
                name, _, value = line.decode("latin-1").partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                else:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while chunk := cgi.stdout.read1(CHUNK):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    GitHandler.root = args.root
    with ThreadingHTTPServer(("127.0.0.1", args.port), GitHandler) as server:
        server.serve_forever()


if __name__ == "__main__":
    main()
