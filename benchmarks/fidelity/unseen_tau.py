"""tau-bench-shaped customer-service sessions for :mod:`.unseen`: a simulated customer, an
agent with the airline or retail function tools (``get_user_details``,
``get_reservation_details``, ``search_direct_flight``, ``update_reservation_flights``,
``cancel_reservation``; ``find_user_id_by_name_zip``, ``get_order_details``,
``get_product_details``, ``exchange_delivered_order_items``, ``return_delivered_order_items``,
``cancel_pending_order``; ``transfer_to_human_agents``), JSON results and ``Error: …`` results.

One long shift per session: several customers in turn, each with a case that needs lookups
(long JSON results), a confirmation, an update and sometimes a failed call retried.
"""

from __future__ import annotations

import json
import random
import string
from typing import Any

from ctxengine import Message

__all__ = ["tau_messages"]

_FIRST = ("Noor", "Mateo", "Ines", "Kwame", "Lena", "Tariq", "Yara", "Oskar", "Priya", "Hugo")
_LAST = ("Okafor", "Lindqvist", "Moreau", "Tanaka", "Silva", "Haddad", "Novak", "Quinn")
_AIRPORTS = ("SFO", "JFK", "ORD", "DEN", "SEA", "ATL", "BOS", "MIA", "LAX", "PHX", "MSP", "DTW")
_PRODUCTS = (
    "desk lamp",
    "water bottle",
    "hiking boots",
    "wireless earbuds",
    "backpack",
    "office chair",
    "espresso machine",
    "yoga mat",
)


def _code(rng: random.Random, n: int = 6) -> str:
    return "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(n))


class _Tau:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.messages: list[Message] = []
        self.count = 0

    def call(self, name: str, arguments: dict[str, Any], result: Any) -> None:
        self.count += 1
        cid = f"call_{self.count:03d}{_code(self.rng, 12).lower()}"
        function = {"name": name, "arguments": json.dumps(arguments)}
        self.messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": cid, "type": "function", "function": function}],
            }
        )
        text = result if isinstance(result, str) else json.dumps(result)
        self.messages.append({"role": "tool", "tool_call_id": cid, "content": text})

    def say(self, role: str, text: str) -> None:
        self.messages.append({"role": role, "content": text})


def _flights(rng: random.Random, origin: str, destination: str, date: str) -> list[dict[str, Any]]:
    out = []
    for _ in range(rng.randint(12, 30)):
        hour = rng.randint(5, 21)
        out.append(
            {
                "flight_number": f"HAT{rng.randint(100, 299)}",
                "origin": origin,
                "destination": destination,
                "scheduled_departure_time_est": f"{hour:02d}:00:00",
                "scheduled_arrival_time_est": f"{(hour + 4) % 24:02d}:30:00",
                "status": "available",
                "available_seats": {
                    c: rng.randint(0, 20) for c in ("basic_economy", "economy", "business")
                },
                "prices": {
                    c: rng.randint(50, 2000) for c in ("basic_economy", "economy", "business")
                },
                "date": date,
            }
        )
    return out


def _airline_case(rng: random.Random, out: _Tau, first: bool) -> None:
    name = (rng.choice(_FIRST), rng.choice(_LAST))
    user = f"{name[0].lower()}_{name[1].lower()}_{rng.randint(1000, 9999)}"
    reservations = [_code(rng) for _ in range(rng.randint(2, 4))]
    card = f"credit_card_{rng.randint(1_000_000, 9_999_999)}"
    out.say(
        "user",
        f"{'Hello' if first else 'Hi, next question from my colleague'}. I'm "
        f"{name[0]} {name[1]}, user id {user}. I need to move my trip on reservation "
        f"{reservations[-1]} to a later date.",
    )
    out.call(
        "get_user_details",
        {"user_id": user},
        {
            "name": {"first_name": name[0], "last_name": name[1]},
            "payment_methods": {
                card: {
                    "source": "credit_card",
                    "brand": "visa",
                    "last_four": str(rng.randint(1000, 9999)),
                    "id": card,
                },
                f"gift_card_{rng.randint(1_000_000, 9_999_999)}": {
                    "source": "gift_card",
                    "amount": rng.randint(10, 300),
                },
            },
            "membership": rng.choice(("gold", "silver", "regular")),
            "reservations": reservations,
        },
    )
    origin, destination = rng.sample(_AIRPORTS, 2)
    date = f"2024-05-{rng.randint(16, 28)}"
    bad = rng.random() < 0.4
    if bad:
        out.call(
            "get_reservation_details",
            {"reservation_id": reservations[-1].lower()},
            "Error: reservation not found",
        )
    out.call(
        "get_reservation_details",
        {"reservation_id": reservations[-1]},
        {
            "reservation_id": reservations[-1],
            "user_id": user,
            "origin": origin,
            "destination": destination,
            "flight_type": "one_way",
            "cabin": "economy",
            "flights": [
                {
                    "flight_number": f"HAT{rng.randint(100, 299)}",
                    "date": date,
                    "price": rng.randint(90, 600),
                }
            ],
            "passengers": [
                {
                    "first_name": name[0],
                    "last_name": name[1],
                    "dob": f"19{rng.randint(50, 99)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
                }
            ],
            "payment_history": [{"payment_id": card, "amount": rng.randint(90, 600)}],
            "created_at": "2024-05-02T10:11:12",
            "total_baggages": 1,
            "nonfree_baggages": 0,
            "insurance": "no",
        },
    )
    later = f"2024-05-{int(date[-2:]) + 1}"
    out.say("user", f"Something on {later}, morning if possible. Pay any difference with {card}.")
    flights = _flights(rng, origin, destination, later)
    out.call(
        "search_direct_flight",
        {"origin": origin, "destination": destination, "date": later},
        flights,
    )
    pick = flights[rng.randrange(len(flights))]["flight_number"]
    out.say(
        "assistant",
        f"{pick} on {later} has economy seats. Shall I move reservation "
        f"{reservations[-1]} to it and charge the difference to {card}? (yes/no)",
    )
    out.say("user", "Yes, go ahead.")
    arguments = {
        "reservation_id": reservations[-1],
        "cabin": "economy",
        "flights": [{"flight_number": pick, "date": later}],
        "payment_id": card,
    }
    if rng.random() < 0.3:
        out.call(
            "update_reservation_flights",
            {**arguments, "payment_id": "card"},
            "Error: payment method not found",
        )
    out.call(
        "update_reservation_flights",
        arguments,
        {
            "reservation_id": reservations[-1],
            "status": "updated",
            "flights": arguments["flights"],
            "charged": rng.randint(0, 200),
        },
    )
    out.say("assistant", f"Done: reservation {reservations[-1]} now flies {pick} on {later}.")
    if rng.random() < 0.5:
        other = reservations[0]
        out.say("user", f"Also please cancel {other}, I booked it by mistake within 24 hours.")
        out.call(
            "cancel_reservation",
            {"reservation_id": other},
            {"reservation_id": other, "status": "cancelled"},
        )
        out.say(
            "assistant",
            f"Reservation {other} is cancelled; the refund goes to the original payment.",
        )


def _retail_case(rng: random.Random, out: _Tau, first: bool) -> None:
    name = (rng.choice(_FIRST), rng.choice(_LAST))
    zip_code = f"{rng.randint(10000, 99999)}"
    user = f"{name[0].lower()}_{name[1].lower()}_{rng.randint(1000, 9999)}"
    out.say(
        "user",
        f"{'Hi' if first else 'Another one'}: I'm {name[0]} {name[1]}, zip {zip_code}. "
        "One of my orders arrived and I want to exchange an item.",
    )
    out.call(
        "find_user_id_by_name_zip",
        {"first_name": name[0], "last_name": name[1], "zip": zip_code},
        user,
    )
    orders = [f"#W{rng.randint(1_000_000, 9_999_999)}" for _ in range(rng.randint(2, 4))]
    payment = f"paypal_{rng.randint(1_000_000, 9_999_999)}"
    out.call(
        "get_user_details",
        {"user_id": user},
        {
            "user_id": user,
            "orders": orders,
            "payment_methods": {payment: {"source": "paypal", "id": payment}},
            "address": {"address1": f"{rng.randint(10, 999)} Main St", "zip": zip_code},
        },
    )
    order = orders[rng.randrange(len(orders))]
    product = rng.choice(_PRODUCTS)
    item = str(rng.randint(1_000_000_000, 9_999_999_999))
    product_id = str(rng.randint(1_000_000_000, 9_999_999_999))
    out.call(
        "get_order_details",
        {"order_id": order},
        {
            "order_id": order,
            "user_id": user,
            "status": "delivered",
            "items": [
                {
                    "name": product,
                    "product_id": product_id,
                    "item_id": item,
                    "price": rng.randint(20, 400),
                    "options": {
                        "color": rng.choice(("black", "white", "red")),
                        "size": rng.choice(("S", "M", "L")),
                    },
                }
            ],
            "payment_history": [
                {
                    "transaction_type": "payment",
                    "amount": rng.randint(20, 400),
                    "payment_method_id": payment,
                }
            ],
        },
    )
    out.say("user", f"The {product} in {order}: I want it in another color, same size.")
    variants = {
        str(rng.randint(1_000_000_000, 9_999_999_999)): {
            "item_id": "",
            "options": {
                "color": rng.choice(("blue", "green", "grey", "black")),
                "size": rng.choice(("S", "M", "L")),
            },
            "available": rng.random() < 0.7,
            "price": rng.randint(20, 400),
        }
        for _ in range(rng.randint(15, 40))
    }
    for key, value in variants.items():
        value["item_id"] = key
    out.call(
        "get_product_details",
        {"product_id": product_id},
        {"name": product, "product_id": product_id, "variants": variants},
    )
    new_item = next(iter(k for k, v in variants.items() if v["available"]), next(iter(variants)))
    out.say(
        "assistant",
        f"Item {new_item} is available. Exchange {item} for {new_item} in order {order}, "
        f"price difference to {payment}? Please confirm (yes/no).",
    )
    out.say("user", "yes")
    arguments = {
        "order_id": order,
        "item_ids": [item],
        "new_item_ids": [new_item],
        "payment_method_id": payment,
    }
    if rng.random() < 0.3:
        out.call(
            "exchange_delivered_order_items",
            {**arguments, "order_id": order[1:]},
            "Error: order not found",
        )
    out.call(
        "exchange_delivered_order_items",
        arguments,
        {"order_id": order, "status": "exchange requested"},
    )
    out.say(
        "assistant",
        f"The exchange for {order} is requested; you'll get return instructions by email.",
    )
    if rng.random() < 0.4:
        out.say("user", f"And cancel {orders[0]} if it hasn't shipped.")
        out.call(
            "get_order_details",
            {"order_id": orders[0]},
            {"order_id": orders[0], "status": "pending"},
        )
        out.call(
            "cancel_pending_order",
            {"order_id": orders[0], "reason": "no longer needed"},
            {"order_id": orders[0], "status": "cancelled"},
        )
        out.say("assistant", f"Order {orders[0]} is cancelled.")


def tau_messages(rng: random.Random, domain: str, target_chars: int) -> list[Message]:
    """One shift of customers in ``domain`` (``airline`` or ``retail``) until the messages hold
    about ``target_chars`` characters."""
    out = _Tau(rng)
    policy = (
        "# Airline agent policy\nAct for one user at a time. Before any booking change, list "
        "the change and get an explicit yes. Basic economy cannot be modified."
        if domain == "airline"
        else "# Retail agent policy\nAuthenticate by email or by name and zip. Exchanges and "
        "returns only for delivered orders; cancellations only for pending ones. Confirm first."
    )
    out.say("system", policy)
    first = True
    while sum(len(str(m.get("content") or "")) for m in out.messages) < target_chars:
        (_airline_case if domain == "airline" else _retail_case)(rng, out, first)
        first = False
    if rng.random() < 0.5:
        out.say("user", "One more thing: I want to complain about the last delay to a person.")
        out.call(
            "transfer_to_human_agents",
            {"summary": "Customer asks to file a complaint."},
            "Transfer successful",
        )
    return out.messages
