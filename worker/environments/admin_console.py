"""admin-console: a shop admin console where the task is to restock a SKU and place a customer's order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from domain.specs import AdminConsoleSpec
from domain.vocabulary import AdminConsoleFailure, LoopFailure
from domain.worlds import Task, draw_shop
from worker.environments.base import Environment, ToolError, ToolSpec, require_int
from worker.environments.registry import TrialPlace, environment_of


@dataclass
class Order:
    """An order in the console: draft until checkout places it."""

    id: str
    customer_id: str
    sku: str
    quantity: int
    placed: bool = False


@dataclass
class World:
    """Inventory, customers and orders of one episode."""

    stock: dict[str, int]
    names: dict[str, str]
    customers: dict[str, str]
    orders: dict[str, Order] = field(default_factory=dict)
    restocked: dict[str, int] = field(default_factory=dict)
    failed_checkouts: int = 0
    next_order: int = 8841


class AdminConsole(Environment):
    """Restock SKU X by R units, then order Q units of it for customer Y and check the order out."""

    name = "admin-console"
    tool_specs = (
        ToolSpec("list_inventory", "List every SKU with its name and units in stock."),
        ToolSpec("list_customers", "List every customer id and name."),
        ToolSpec("restock", "Add units to a SKU's stock.", {"sku": "string", "quantity": "integer"}),
        ToolSpec(
            "create_order",
            "Create a draft order of a SKU for a customer.",
            {"customer_id": "string", "sku": "string", "quantity": "integer"},
        ),
        ToolSpec("checkout", "Place a draft order; needs enough stock.", {"order_id": "string"}),
    )

    def reset(self, world_seed: int) -> Task:
        """Draw inventory, customers and the task from `world_seed` (domain.worlds.draw_shop)."""
        drawn = draw_shop(self.params, world_seed)
        self.world = World(
            stock=dict(drawn.stock),
            names=dict(drawn.names),
            customers=dict(drawn.customers),
            next_order=drawn.next_order,
        )
        self.goal: dict[str, Any] = dict(drawn.goal)
        self.note(
            f"opened admin-console (world {world_seed}): {len(self.world.stock)} SKUs, "
            f"{len(self.world.customers)} customers"
        )
        return drawn.task

    def tool_list_inventory(self) -> str:
        self.note("list_inventory")
        return "\n".join(f"{sku}  {self.world.names[sku]}  stock={n}" for sku, n in sorted(self.world.stock.items()))

    def tool_list_customers(self) -> str:
        self.note("list_customers")
        return "\n".join(f"{cid}  {name}" for cid, name in sorted(self.world.customers.items()))

    def tool_restock(self, sku: Any, quantity: Any) -> str:
        quantity = require_int("quantity", quantity, 1)
        if sku not in self.world.stock:
            raise ToolError(f"no SKU {sku!r}")
        before = self.world.stock[sku]
        self.world.stock[sku] += quantity
        self.world.restocked[sku] = self.world.restocked.get(sku, 0) + quantity
        self.note(f"restocked {sku} +{quantity}")
        return f"restocked {sku}: stock {before} -> {self.world.stock[sku]}"

    def tool_create_order(self, customer_id: Any, sku: Any, quantity: Any) -> str:
        quantity = require_int("quantity", quantity, 1)
        if customer_id not in self.world.customers:
            raise ToolError(f"no customer {customer_id!r}")
        if sku not in self.world.stock:
            raise ToolError(f"no SKU {sku!r}")
        order = Order(f"ORD-{self.world.next_order}", customer_id, sku, quantity)
        self.world.next_order += 1
        self.world.orders[order.id] = order
        self.note(f"created {order.id} for {customer_id}: {quantity} x {sku}")
        return f"created draft order {order.id} for {customer_id}: {quantity} x {sku}"

    def tool_checkout(self, order_id: Any) -> str:
        order = self.world.orders.get(order_id)
        if order is None:
            raise ToolError(f"no order {order_id!r}")
        if order.placed:
            return f"{order.id} is already placed"
        if self.world.stock[order.sku] < order.quantity:
            self.world.failed_checkouts += 1
            self.note(f"checkout of {order.id} refused: {order.sku} has {self.world.stock[order.sku]} in stock")
            return (
                f"cannot place {order.id}: {order.sku} has {self.world.stock[order.sku]} in stock, "
                f"order needs {order.quantity}"
            )
        self.world.stock[order.sku] -= order.quantity
        order.placed = True
        self.note(f"placed {order.id}")
        return f"placed {order.id}"

    def _orders_for_goal(self) -> list[Order]:
        goal = self.goal
        return [o for o in self.world.orders.values() if o.customer_id == goal["customer_id"] and o.sku == goal["sku"]]

    def score(self) -> dict[str, float]:
        """stage_inventory: exact restock of only the target; stage_order: the right order; stage_checkout: placed."""
        goal, restocked = self.goal, self.world.restocked
        target = restocked.get(goal["sku"], 0)
        others = any(sku != goal["sku"] for sku in restocked)
        inventory = 1.0 if target == goal["restock"] and not others else 0.5 if target and not others else 0.0
        exact = [o for o in self._orders_for_goal() if o.quantity == goal["quantity"]]
        order = 1.0 if exact else 0.5 if self._orders_for_goal() else 0.0
        checkout = 1.0 if any(o.placed for o in exact) else 0.0
        return {"stage_inventory": inventory, "stage_order": order, "stage_checkout": checkout}

    def explain(self) -> dict[str, str]:
        """Each stage's verdict in words: what the goal was and what the final state holds."""
        goal, world = self.goal, self.world
        restocked = ", ".join(f"{sku} by {n}" for sku, n in sorted(world.restocked.items())) or "nothing"
        orders = self._orders_for_goal()
        quantities = ", ".join(f"{o.id} of {o.quantity}{' (placed)' if o.placed else ''}" for o in orders) or "none"
        return {
            "stage_inventory": f"goal: restock {goal['sku']} by {goal['restock']} and nothing else; "
            f"restocked: {restocked}",
            "stage_order": f"goal: an order of {goal['quantity']} {goal['sku']} for {goal['customer_id']}; "
            f"orders of it for that customer: {quantities}",
            "stage_checkout": "the exact order was placed"
            if any(o.placed and o.quantity == goal["quantity"] for o in orders)
            else f"no order of {goal['quantity']} {goal['sku']} for {goal['customer_id']} was placed"
            + (f" ({world.failed_checkouts} checkout refused)" if world.failed_checkouts else ""),
        }

    def diagnose(self) -> AdminConsoleFailure | LoopFailure:
        """wrong_item, wrong_customer, wrong_quantity, insufficient_stock, tool_error or gave_up, from the final
        state: a wrong SKU restocked or ordered is wrong_item; the right SKU ordered for another customer is
        wrong_customer."""
        goal, world = self.goal, self.world
        wrong_item = any(sku != goal["sku"] for sku in world.restocked) or any(
            o.sku != goal["sku"] for o in world.orders.values()
        )
        if wrong_item:
            return "wrong_item"
        if any(o.customer_id != goal["customer_id"] for o in world.orders.values()):
            return "wrong_customer"
        if world.restocked.get(goal["sku"], goal["restock"]) != goal["restock"] or any(
            o.quantity != goal["quantity"] for o in world.orders.values()
        ):
            return "wrong_quantity"
        if world.failed_checkouts:
            return "insufficient_stock"
        return "tool_error" if self.tool_errors else "gave_up"


@environment_of(AdminConsoleSpec)
def start(spec: AdminConsoleSpec, place: TrialPlace) -> AdminConsole:
    """A trial's admin console, with the spec's params."""
    return AdminConsole(spec.params.model_dump(mode="json"))
