"""Console views of contact lists: every list with its topics, and one list's contacts
with each one's topic preferences (filtered by status and topic, as ListContacts is);
an operator may remove a contact or opt it out of a topic. Returned mail (bounces and
complaints) is shown on the email page, beside the delivery log."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.email.contacts import ContactFilter
from tidings.errors import ValidationError
from tidings.model.contacts import subscription_status
from tidings.server.console.session import Session
from tidings.server.console.web import Console, action, page

PAGE = 50


def routes(console: Console) -> list[Route]:
    ctx = console.ctx
    contacts = ctx.t.email.contacts

    async def lists_page(request: Request, session: Session) -> Response:
        found, token = await ctx.bridge.run(lambda: contacts.lists(
            limit=PAGE, next_token=request.query_params.get("after") or None))
        return console.render(request, session, "contact_lists.html", lists=found,
                              next_token=token, now=ctx.t.clock.now_ms())

    async def one(request: Request, session: Session) -> Response:
        name = request.path_params["name"]
        p = request.query_params
        status, topic = p.get("status", "").strip().upper(), p.get("topic", "").strip()
        found = await ctx.bridge.run(contacts.get_list, name)
        error = ""
        try:
            where = ContactFilter(subscription_status("status", status) if status else None,
                                  topic or None, use_default=True)
            rows, token = await ctx.bridge.run(lambda: contacts.contacts(
                name, where=where, limit=PAGE, next_token=p.get("after") or None))
        except ValidationError as exc:
            rows, token, error = [], None, str(exc)
        return console.render(request, session, "contact_list.html", cl=found, contacts=rows,
                              next_token=token, error=error,
                              filters={"status": status, "topic": topic},
                              now=ctx.t.clock.now_ms())

    async def remove(request: Request, session: Session, form: dict[str, Any]) -> str:
        name, address = form.get("list") or "", form.get("address") or ""
        await ctx.bridge.run(contacts.delete_contact, name, address)
        return f"Removed {address} from {name}."

    async def opt_out(request: Request, session: Session, form: dict[str, Any]) -> str:
        name, address = form.get("list") or "", form.get("address") or ""
        topic = form.get("topic") or ""
        await ctx.bridge.run(contacts.opt_out, f"{name}/{topic}" if topic else name, address)
        return f"{address} opted out of {topic or 'the whole list'}."

    return [
        Route("/email/lists", page(console, lists_page), methods=["GET"]),
        Route("/email/lists/{name}", page(console, one), methods=["GET"]),
        Route("/email/lists/contacts/remove", action(console, "operate", remove),
              methods=["POST"]),
        Route("/email/lists/contacts/opt-out", action(console, "operate", opt_out),
              methods=["POST"]),
    ]
