"""A small shop on tidings: tasks, a periodic job and a welcome drip.

    tidings serve --app examples.shop:app        # from the repository root

then, from another shell (same TIDINGS_DB):

    python -c "from examples.shop import signup; signup.send(email='ada@example.com', name='Ada')"
    tidings queue send shop '{"type": "place_order", "args": {"order":
        {"id": 1, "sku": "mug", "quantity": 2, "email": "ada@example.com"}}}'

Emails go through the node's relay (`--smtp-url`, e.g. `tidings smtp-sink`); without one
they wait, logged as QUEUED (`tidings email log`). `tests/integration/test_example_shop.py`
runs this app as a real process and through time travel.
"""

from __future__ import annotations

from datetime import timedelta

import pydantic

import tidings

app = tidings.App(queue="shop")
SENDER = "shop@example.com"


class Order(pydantic.BaseModel):
    id: int
    sku: str
    quantity: int
    email: str


def mail(to: str, subject: str, text: str) -> None:
    """Hand an email to tidings (a SES v2 SendEmail document): sent by a node with a
    relay, logged and retried like any delivery."""
    app.client().email.send({
        "FromEmailAddress": SENDER, "Destination": {"ToAddresses": [to]},
        "Content": {"Simple": {"Subject": {"Data": subject},
                               "Body": {"Text": {"Data": text}}}}})


# tasks ---------------------------------------------------------------------------------

@app.task
def place_order(order: Order) -> None:
    mail(order.email, f"Order {order.id} confirmed", f"{order.quantity} x {order.sku}.")
    ship.send_in(timedelta(hours=1), order_id=order.id, job_id=f"ship-{order.id}")


@app.task(max_attempts=3)
async def ship(order_id: int) -> None:
    print("shipping order", order_id)


# the welcome drip: three emails over five days, each a task sent for later ----------------

@app.task
def signup(email: str, name: str) -> None:
    welcome.send(email=email, name=name, job_id=f"welcome-{email}")
    tips.send_in(timedelta(days=2), email=email, name=name, job_id=f"tips-{email}")
    offer.send_in(timedelta(days=5), email=email, name=name, job_id=f"offer-{email}")


@app.task
def welcome(email: str, name: str) -> None:
    mail(email, f"Welcome, {name}", "Thanks for signing up.")


@app.task
def tips(email: str, name: str) -> None:
    mail(email, f"Three tips for {name}", "1. Browse. 2. Buy. 3. Enjoy.")


@app.task
def offer(email: str, name: str) -> None:
    mail(email, f"10% off for you, {name}", "Use code WELCOME10.")


# periodic ------------------------------------------------------------------------------

@app.cron("0 6 * * *", tz="Europe/Paris")
def nightly_report() -> None:
    print("nightly report")


@app.rate("1 hour")
def restock() -> None:
    print("restock check")
