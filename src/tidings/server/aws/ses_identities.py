"""SES v2 email identities (`/v2/email/identities`): CreateEmailIdentity,
GetEmailIdentity, ListEmailIdentities, DeleteEmailIdentity.

tidings cannot see DNS or a mailbox, so an identity is verified when created: it is the
operator's statement that this node may send as the address or domain. What the node
refuses without one is in `tidings/email/identities.py`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from tidings.email.identities import Identities
from tidings.errors import ConflictError, ValidationError
from tidings.model.audit import EmailIdentity
from tidings.runtime.bridge import Bridge

Doc = dict[str, Any]


def _type(identity: str) -> str:
    return "EMAIL_ADDRESS" if "@" in identity else "DOMAIN"


def _dkim() -> Doc:
    return {"SigningEnabled": False, "Status": "NOT_STARTED", "Tokens": [],
            "SigningAttributesOrigin": "AWS_SES"}


class IdentityApi:
    def __init__(self, identities: Identities, bridge: Bridge) -> None:
        self.identities = identities
        self.bridge = bridge

    async def create_email_identity(self, _request: Request, body: Doc) -> Doc:
        name = body.get("EmailIdentity")
        if not isinstance(name, str):
            raise ValidationError("EmailIdentity", "is required")
        if not await self.bridge.run(self.identities.create, name):
            raise ConflictError(f"Email identity {name.strip().lower()} already exists.")
        return {"IdentityType": _type(name), "VerifiedForSendingStatus": True,
                "DkimAttributes": _dkim()}

    async def get_email_identity(self, request: Request, _body: Doc) -> Doc:
        found: EmailIdentity = await self.bridge.run(
            self.identities.get, request.path_params["EmailIdentity"])
        return {"IdentityType": _type(found.identity), "FeedbackForwardingStatus": True,
                "VerifiedForSendingStatus": True, "VerificationStatus": "SUCCESS",
                "DkimAttributes": _dkim(), "Policies": {}, "Tags": []}

    async def list_email_identities(self, _request: Request, _body: Doc) -> Doc:
        found = await self.bridge.run(self.identities.list)
        return {"EmailIdentities": [
            {"IdentityType": _type(i.identity), "IdentityName": i.identity,
             "SendingEnabled": True, "VerificationStatus": "SUCCESS"} for i in found]}

    async def delete_email_identity(self, request: Request, _body: Doc) -> Doc:
        await self.bridge.run(self.identities.delete, request.path_params["EmailIdentity"])
        return {}
