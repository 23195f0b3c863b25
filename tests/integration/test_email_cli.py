"""`tidings email …` and `tidings smtp-sink` as users run them: real subprocesses."""

from __future__ import annotations

import json
import os
import smtplib
import subprocess
import sys
from email.message import EmailMessage
from pathlib import Path

from email_relay import free_port

from tidings.client import Tidings
from tidings.model.email import DeliveryState
from tidings.settings import Settings


def cli(db: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    env["TIDINGS_DB"] = db
    env["COLUMNS"] = "200"
    return subprocess.run([sys.executable, "-m", "tidings", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=60, check=False)


def ok(db: str, cwd: Path, *args: str) -> str:
    r = cli(db, cwd, *args)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r.stdout


def test_templates_render_send_log_and_suppress(tmp_path: Path, db_url: str) -> None:
    db = db_url
    (tmp_path / "t.html").write_text("<p>Hello {{name}} &amp; {{company}}</p>")
    (tmp_path / "t.txt").write_text("Hello {{name}} from {{company}}")
    ok(db, tmp_path, "email", "template", "create", "hello", "--subject", "Hi {{name}} ✓",
       "--html", "t.html", "--text", "t.txt")
    out = ok(db, tmp_path, "email", "render", "hello", "--data",
             '{"name": "Zoë", "company": "C&A"}')
    assert "Subject: Hi Zoë ✓" in out
    assert "Hello Zoë from C&A" in out and "<p>Hello Zoë &amp; C&amp;A</p>" in out
    rendered = json.loads(ok(db, tmp_path, "email", "render", "hello", "--data",
                             '{"name": "A", "company": "B"}', "--json"))
    assert rendered == {"subject": "Hi A ✓", "text": "Hello A from B",
                        "html": "<p>Hello A &amp; B</p>"}
    missing = cli(db, tmp_path, "email", "render", "hello", "--data", '{"name": "A"}')
    assert missing.returncode == 1 and "company" in missing.stderr
    bad = cli(db, tmp_path, "email", "render", "hello", "--data", "[1]")
    assert bad.returncode == 2 and "TemplateData" in bad.stderr
    assert json.loads(ok(db, tmp_path, "email", "template", "list", "--json"))[0]["name"] == \
        "hello"
    queued = ok(db, tmp_path, "email", "send", "--from", "news@example.com", "--to",
                "ana@example.org", "--template", "hello", "--data",
                '{"name": "Ana", "company": "X"}')
    assert queued.startswith("queued ")
    ok(db, tmp_path, "email", "suppress", "add", "Spam@Example.org", "--reason", "complaint")
    listed = json.loads(ok(db, tmp_path, "email", "suppress", "list", "--json"))
    assert [(s["address"], s["reason"]) for s in listed] == [("spam@example.org", "COMPLAINT")]
    log = json.loads(ok(db, tmp_path, "email", "log", "--json"))
    assert [(d["state"], d["recipients"], d["template"]) for d in log] == \
        [("QUEUED", ["ana@example.org"], "hello")]
    table = ok(db, tmp_path, "email", "log", "--recipient", "ana@example.org")
    assert "QUEUED" in table and "ana@example.org" in table
    assert json.loads(ok(db, tmp_path, "email", "log", "--state", "SENT", "--json")) == []
    ok(db, tmp_path, "email", "suppress", "remove", "spam@example.org")
    assert cli(db, tmp_path, "email", "suppress", "remove", "spam@example.org").returncode == 1
    ok(db, tmp_path, "email", "template", "delete", "hello")
    assert cli(db, tmp_path, "email", "template", "get", "hello").returncode == 1
    with Tidings(settings=Settings(db=db)) as t:
        assert t.email.log()[0][0].state is DeliveryState.QUEUED


def test_smtp_sink_stores_and_lists_messages(tmp_path: Path) -> None:
    port = free_port()
    sink_dir = tmp_path / "sink"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    proc = subprocess.Popen([sys.executable, "-m", "tidings", "smtp-sink", "--port", str(port),
                             "--dir", str(sink_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        assert "listening on smtp://127.0.0.1:" in proc.stdout.readline()
        msg = EmailMessage()
        msg["From"] = "a@example.com"
        msg["To"] = "b@example.org"
        msg["Subject"] = "Sink test ü"
        msg.set_content("hello sink")
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as smtp:
            smtp.send_message(msg)
        listed = json.loads(ok("sqlite:///unused.db", tmp_path, "smtp-sink", "list", "--dir",
                               str(sink_dir), "--json"))
        assert [(e["mail_from"], e["rcpt_tos"], e["subject"]) for e in listed] == \
            [("a@example.com", ["b@example.org"], "Sink test ü")]
        assert b"hello sink" in (sink_dir / listed[0]["file"]).read_bytes()
        table = ok("sqlite:///unused.db", tmp_path, "smtp-sink", "list", "--dir", str(sink_dir))
        assert "Sink test ü" in table and "b@example.org" in table
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == 0


