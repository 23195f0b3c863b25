"""Console views of email: the delivery log with filters, the suppression list (add,
remove), and templates with a preview rendered from sample data.

The preview's HTML is the one page of the console that shows markup someone else wrote, so
it is served on its own address inside an `<iframe sandbox>` (no script runs, no form posts,
a unique origin) under a CSP of its own that forbids every script and every remote load
(images only as `data:`): a template that tries anything shows up broken, not dangerous.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from tidings.email.template_engine import RenderingError
from tidings.errors import TidingsError, ValidationError
from tidings.server.console.session import Session
from tidings.server.console.web import HEADERS, Console, action, page

PREVIEW_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
               "form-action 'none'; base-uri 'none'; frame-ancestors 'self'; sandbox")
SAMPLE = '{"name": "Ada", "order": {"id": 42}}'
MAX_SAMPLE = 8192


def routes(console: Console) -> list[Route]:
    ctx = console.ctx
    mail = ctx.t.email

    async def email_page(request: Request, session: Session) -> Response:
        p = request.query_params
        recipient = p.get("recipient", "").strip()
        state = p.get("state", "").strip().upper()
        error = ""
        try:
            log, next_log = await ctx.bridge.run(
                lambda: mail.log(recipient=recipient or None, state=state or None, limit=50,
                                 next_token=p.get("after") or None))
        except ValidationError as exc:
            log, next_log, error = [], None, str(exc)
        suppressions, next_sup = await ctx.bridge.run(
            lambda: mail.list_suppressions(limit=50, next_token=p.get("sup_after") or None))
        templates, _ = await ctx.bridge.run(lambda: mail.list_templates(limit=100))
        returned, _ = await ctx.bridge.run(lambda: mail.returns.events(
            address=recipient or None, limit=50))
        chosen = p.get("template", "")
        sample = p.get("data", SAMPLE)[:MAX_SAMPLE]
        rendered, render_error = None, ""
        if chosen:
            try:
                rendered = await ctx.bridge.run(mail.render, chosen, sample)
            except (RenderingError, TidingsError) as exc:
                render_error = str(exc)
        return console.render(
            request, session, "email.html", log=log, next_log=next_log, error=error,
            filters={"recipient": recipient, "state": state}, suppressions=suppressions,
            next_sup=next_sup, templates=templates, chosen=chosen, sample=sample,
            rendered=rendered, render_error=render_error, now=ctx.t.clock.now_ms(),
            returned=returned,
            states=["QUEUED", "SENT", "SUPPRESSED", "BOUNCED", "FAILED", "RENDERING_FAILURE"])

    async def preview(request: Request) -> Response:
        session = console.session(request)
        if session is None and console.sessions.required:
            return HTMLResponse("Sign in first", 401, headers=HEADERS)
        name = request.path_params["name"]
        data = request.query_params.get("data", SAMPLE)[:MAX_SAMPLE]
        try:
            rendered = await ctx.bridge.run(mail.render, name, data)
            html = rendered.html
            if html is None:
                from markupsafe import escape

                html = f"<pre>{escape(rendered.text or '')}</pre>"
        except (RenderingError, TidingsError) as exc:
            from markupsafe import escape

            html = f"<p>Cannot render: {escape(str(exc))}</p>"
        return HTMLResponse(html, headers={
            **HEADERS, "Content-Security-Policy": PREVIEW_CSP,
            "X-Frame-Options": "SAMEORIGIN"})

    async def suppress(request: Request, session: Session, form: dict[str, Any]) -> str:
        address = (form.get("address") or "").strip()
        if not address:
            raise ValidationError("address", "give an email address")
        added = await ctx.bridge.run(mail.suppress, address, "MANUAL")
        return f"Suppressed {address}." if added else f"{address} was already suppressed."

    async def unsuppress(request: Request, session: Session, form: dict[str, Any]) -> str:
        address = form.get("address") or ""
        removed = await ctx.bridge.run(mail.unsuppress, address)
        return (f"Removed {address} from the suppression list." if removed
                else f"{address} was not on the suppression list.")

    return [
        Route("/email", page(console, email_page), methods=["GET"]),
        Route("/email/templates/{name}/preview", preview, methods=["GET"]),
        Route("/email/suppressions/add", action(console, "admin", suppress), methods=["POST"]),
        Route("/email/suppressions/remove", action(console, "admin", unsuppress),
              methods=["POST"]),
    ]
