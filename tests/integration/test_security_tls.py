"""`tidings serve --tls-cert --tls-key`: HTTPS straight from the node, as a real process."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_cert(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


def serve(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    return subprocess.Popen([sys.executable, "-m", "tidings", "serve", "--db",
                             f"sqlite:///{tmp_path}/t.db", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_the_node_serves_https_with_the_given_certificate(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path)
    port = free_port()
    proc = serve(tmp_path, "--port", str(port), "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        deadline, answer = time.monotonic() + 60, None
        while answer is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                answer = httpx.get(f"https://127.0.0.1:{port}/health",
                                   verify=ssl.create_default_context(cafile=str(cert)))
            except httpx.HTTPError:
                time.sleep(0.2)
        assert answer is not None and answer.status_code == 200
        with pytest.raises(httpx.HTTPError):  # plain HTTP is not spoken on that port
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=3)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_a_certificate_without_its_key_stops_the_command(tmp_path: Path) -> None:
    cert, _ = make_cert(tmp_path)
    proc = serve(tmp_path, "--tls-cert", str(cert))
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "--tls-cert and --tls-key go together" in out
