"""The built-in worlds' draws: what a world seed gives, the world and the task, with no I/O.

One seed, one world and one task, always: the worker's environments (worker/environments/admin_console.py and
support_desk.py) start every episode from these draws, and a dataset version's preview shows the same task texts
without running anything (`builtin_task`). A draw consumes its `random.Random(world_seed)` in a fixed order, so
changing that order changes every world ever recorded: add to the end, never in between.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

PRODUCTS = (
    "USB-C cable",
    "Laptop stand",
    "Wireless mouse",
    "Mechanical keyboard",
    "27in monitor",
    "Webcam",
    "Desk lamp",
    "Noise-cancelling headset",
    "Docking station",
    "Ergonomic chair",
    "HDMI adapter",
    "Portable SSD",
    "Phone charger",
    "Cable organiser",
    "Standing mat",
    "Label printer",
    "Drawing tablet",
    "Bluetooth speaker",
    "Microphone arm",
    "Monitor arm",
)
CUSTOMERS = (
    "Dana Whitfield",
    "Omar Haddad",
    "Mei Lin",
    "Lars Eriksen",
    "Priya Natarajan",
    "Jonas Weber",
    "Ana Souza",
    "Kofi Mensah",
    "Yuki Tanaka",
    "Sofia Rossi",
    "Liam O'Connor",
    "Zara Ahmed",
)
TEAMS = ("billing", "shipping", "accounts", "technical")
PRIORITIES = ("low", "normal", "high", "urgent")
ISSUES = {
    "billing": ("was charged twice for order", "needs a refund for order", "sees a wrong amount on invoice"),
    "shipping": ("has not received order", "got a damaged parcel for order", "wants to change the address of order"),
    "accounts": ("cannot log in after resetting the password", "wants the account email changed", "is locked out"),
    "technical": ("gets error 500 on checkout", "cannot upload an avatar", "sees a blank dashboard"),
}


@dataclass(frozen=True)
class Task:
    """What the agent is asked to do: the prompt text and the same facts as data (for scripted agents)."""

    text: str
    data: dict[str, Any]


@dataclass(frozen=True)
class ShopDraw:
    """admin-console's world as a seed draws it: stock and names by SKU, customers by id, the first order number,
    the goal (sku, restock, customer_id, quantity) and the task."""

    stock: dict[str, int]
    names: dict[str, str]
    customers: dict[str, str]
    next_order: int
    goal: dict[str, Any]
    task: Task


def draw_shop(params: dict[str, Any], world_seed: int) -> ShopDraw:
    """Draw admin-console's inventory, customers and task from `world_seed` (`params`: skus, customers)."""
    rng = random.Random(world_seed)
    skus = rng.sample(range(1000, 9999), params["skus"])
    products = rng.sample(PRODUCTS, params["skus"])
    customer_ids = rng.sample(range(100, 999), params["customers"])
    stock = {f"SKU-{s}": rng.randint(0, 12) for s in skus}
    names = {f"SKU-{s}": p for s, p in zip(skus, products, strict=True)}
    customers = {f"CUST-{c}": n for c, n in zip(customer_ids, rng.sample(CUSTOMERS, len(customer_ids)), strict=True)}
    next_order = rng.randint(1000, 9000)
    sku = rng.choice(sorted(stock))
    customer = rng.choice(sorted(customers))
    quantity = stock[sku] + rng.randint(2, 6)
    restock = quantity - stock[sku] + rng.randint(0, 5)
    goal: dict[str, Any] = {"sku": sku, "restock": restock, "customer_id": customer, "quantity": quantity}
    text = (
        f"Restock {sku} ({names[sku]}) by {restock} units, then place an order of {quantity} "
        f"units of {sku} for customer {customer} ({customers[customer]})."
    )
    data = {
        **goal,
        "distractors": {
            "sku": sorted(s for s in stock if s != sku),
            "customer_id": sorted(c for c in customers if c != customer),
        },
    }
    return ShopDraw(stock, names, customers, next_order, goal, Task(text, data))


@dataclass(frozen=True)
class DrawnTicket:
    """One ticket of support-desk's queue as drawn: its id, subject, body and the team it needs."""

    id: str
    subject: str
    body: str
    needs_team: str


@dataclass(frozen=True)
class DeskDraw:
    """support-desk's world as a seed draws it: the open tickets in queue order, the goal (ticket_id, priority, team,
    reference) and the task."""

    tickets: tuple[DrawnTicket, ...]
    goal: dict[str, Any]
    task: Task


def draw_desk(params: dict[str, Any], world_seed: int) -> DeskDraw:
    """Draw support-desk's ticket queue and the ticket to handle from `world_seed` (`params`: tickets,
    reference_prefix)."""
    rng = random.Random(world_seed)
    tickets: dict[str, DrawnTicket] = {}
    for number in rng.sample(range(100, 999), params["tickets"]):
        team = rng.choice(TEAMS)
        order = f"#{rng.randint(10000, 99999)}"
        problem = rng.choice(ISSUES[team])
        ticket = DrawnTicket(
            f"T-{number}", f"Customer {problem} {order}", f"Customer reports: {problem} {order}.", team
        )
        tickets[ticket.id] = ticket
    target = tickets[rng.choice(sorted(tickets))]
    reference = f"{params['reference_prefix']}-{rng.randint(1000, 9999)}"
    goal: dict[str, Any] = {
        "ticket_id": target.id,
        "priority": rng.choice(("high", "urgent")),
        "team": target.needs_team,
        "reference": reference,
    }
    text = (
        f"Handle ticket {target.id}: set its priority to {goal['priority']}, assign it to the "
        f"{goal['team']} team, and reply to the customer quoting reference {reference}."
    )
    data = {
        **goal,
        "distractors": {
            "ticket_id": sorted(t for t in tickets if t != target.id),
            "team": [t for t in TEAMS if t != goal["team"]],
            "priority": [p for p in PRIORITIES if p != goal["priority"]],
        },
    }
    return DeskDraw(tuple(tickets.values()), goal, Task(text, data))


def builtin_task(spec: dict[str, Any], world_seed: int) -> Task:
    """The task a built-in version draws for `world_seed`: what its every trial of that seed is asked. `spec` is a
    normalised built-in spec (domain.specs.validate_spec: `environment` and its `params` filled in)."""
    if spec["environment"] == "admin-console":
        return draw_shop(spec["params"], world_seed).task
    if spec["environment"] == "support-desk":
        return draw_desk(spec["params"], world_seed).task
    raise ValueError(f"no built-in world {spec['environment']!r}")
