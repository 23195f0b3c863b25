"""The `tidings` command: `serve`, `worker`, `queue …`, `schedule …`, `schedule-group …`,
`email …`, `smtp-sink`, `fanout`, `campaign …`, `forecast`, `backup` and `restore` (console
script and `python -m`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from tidings.cli import backup, campaigns, email, limits, queues, schedules, security
from tidings.cli.options import CreateOption, creating
from tidings.cli.output import errors_handled, report
from tidings.cli.where import database_settings
from tidings.settings import Settings

app = typer.Typer(
    name="tidings",
    help="Self-hosted queues, schedules and email delivery.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals can hold database URLs with passwords
)


def _version(value: bool) -> None:
    if value:
        from tidings.version import VERSION

        typer.echo(f"tidings {VERSION}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="Print the version and exit.")] = False) -> None:
    """Self-hosted queues, schedules and email delivery."""


app.add_typer(queues.app, name="queue")
app.add_typer(schedules.app, name="schedule")
app.add_typer(schedules.groups_app, name="schedule-group")
app.add_typer(email.app, name="email")
app.add_typer(email.sink_app, name="smtp-sink")
app.add_typer(campaigns.app, name="campaign")
app.add_typer(limits.app, name="limit")
app.command("fanout")(campaigns.fanout)
app.command("forecast")(campaigns.forecast)
app.add_typer(security.token_app, name="token")
app.command("audit")(security.audit)
app.command("api")(security.api)
app.command("backup")(backup.backup)
app.command("restore")(backup.restore)

# Defaults of None: Settings.from_env fills them from TIDINGS_* variables, then its own
# defaults, so a flag beats the environment, which beats the built-in value.
DbFlag = Annotated[str | None, typer.Option(
    "--db", metavar="URL", show_default=False,
    help="Database URL (env TIDINGS_DB; default sqlite:///tidings.db).")]
AppFlag = Annotated[str | None, typer.Option(
    "--app", metavar="MODULE:ATTR", show_default=False,
    help="Your tidings.App, to run its consumers (env TIDINGS_APP).")]
ConcurrencyFlag = Annotated[int | None, typer.Option(
    min=1, show_default=False,
    help="Messages handled at once by consumers (env TIDINGS_CONCURRENCY; default 8).")]

SmtpUrlFlag = Annotated[str | None, typer.Option(
    "--smtp-url", metavar="URL", show_default=False,
    help="Relay for email, smtp://user:pass@host:587 or smtps://… (env TIDINGS_SMTP_URL).")]


def _settings_epilog() -> str:
    """Every setting with its variable, so `--help` shows those that have no flag too."""
    lines = [f"[bold]{var}[/bold]  {escape(text)}" for var, text in Settings.described()]
    return "Settings (environment variables; a flag beats its variable):\n\n" + \
        "\n".join(lines)


SETTINGS_EPILOG = _settings_epilog()


@app.command(epilog=SETTINGS_EPILOG)
def serve(
    db: DbFlag = None,
    host: Annotated[str | None, typer.Option(
        show_default=False, help="Interface to listen on (env TIDINGS_HOST; default "
        "127.0.0.1, loopback only).")] = None,
    port: Annotated[int | None, typer.Option(
        show_default=False, help="TCP port (env TIDINGS_PORT; default 9324).")] = None,
    app_spec: AppFlag = None,
    concurrency: ConcurrencyFlag = None,
    smtp_url: SmtpUrlFlag = None,
    insecure_no_auth: Annotated[bool | None, typer.Option(
        "--insecure-no-auth", show_default=False,
        help="Listen beyond loopback without credentials; a warning repeats every minute "
        "(env TIDINGS_INSECURE_NO_AUTH).")] = None,
    tls_cert: Annotated[str | None, typer.Option(
        "--tls-cert", metavar="PEM", show_default=False,
        help="Certificate (chain) for direct HTTPS, with --tls-key (env TIDINGS_TLS_CERT).")]
    = None,
    tls_key: Annotated[str | None, typer.Option(
        "--tls-key", metavar="PEM", show_default=False,
        help="Private key for direct HTTPS (env TIDINGS_TLS_KEY).")] = None,
    create_folders: CreateOption = False,
) -> None:
    """Run the HTTP API, the background loops and your app's consumers until Ctrl-C.

    Makes a new database where there is none (logged with its absolute path) and
    migrates an older one; refuses (exit 3) one a newer tidings migrated."""
    settings = database_settings(db, host=host, port=port, app=app_spec,
                                 concurrency=concurrency, smtp_url=smtp_url,
                                 insecure_no_auth=insecure_no_auth, tls_cert=tls_cert,
                                 tls_key=tls_key)
    with errors_handled():
        from tidings.node import serve as run_server  # heavy: only when serving

        run_server(settings, create=creating(create_folders))


@app.command(epilog=SETTINGS_EPILOG)
def worker(
    app_spec: AppFlag = None,
    db: DbFlag = None,
    concurrency: ConcurrencyFlag = None,
    smtp_url: SmtpUrlFlag = None,
    create_folders: CreateOption = False,
) -> None:
    """Run your app's consumers (and maintenance) without the HTTP API (the database as
    `serve` opens it)."""
    settings = database_settings(db, app=app_spec, concurrency=concurrency,
                                 smtp_url=smtp_url)
    with errors_handled():
        from tidings.node import work

        work(settings, create=creating(create_folders))


@app.command("migrate")
def migrate_command(
    db: DbFlag = None,
    create_folders: CreateOption = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Change nothing: say where the database stands; exit 1 when it "
        "needs migrations, 3 when a newer tidings migrated it.")] = False,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print one JSON document on stdout instead of a line.")] = False,
) -> None:
    """Make the database, or bring it to this release's schema, now (a node does the same
    at its start). Back it up first: docs/upgrading.md."""
    import logging

    from tidings.client import Tidings
    from tidings.store import Create
    from tidings.version import VERSION

    # The node's own lines, one per migration with its duration, on stderr.
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    settings = database_settings(db)
    with errors_handled():
        opening = Create.NOTHING if check else creating(create_folders)
        with Tidings(settings=settings, create=opening) as t:
            status = t.schema_status()
        top = status.database
        by = status.migrated_by
        report(as_json, {"database": t.database_url, "schema": top,
                         "name": status.applied.get(top), "migrated_by": by,
                         "tidings": VERSION},
               f"{t.database_url}: schema {top} ({status.applied.get(top, '-')})"
               + (f", migrated by tidings {by}" if by else "")
               + f"; this is tidings {VERSION}: up to date")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
