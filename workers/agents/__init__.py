"""The seats: one runner per agent kind behind one protocol (``workers/agents/seat.py``).

``run_seat(SeatRequest(...))`` runs an agent of any kind; the built-in kinds' seats are registered by
importing this package (``workers/agents/builtin.py``).
"""

from __future__ import annotations

from workers.agents import builtin as builtin
from workers.agents.run import AgentRun
from workers.agents.seat import SEATS, Seat, SeatHooks, SeatRequest, register_seat, run_seat

__all__ = ["SEATS", "AgentRun", "Seat", "SeatHooks", "SeatRequest", "register_seat", "run_seat"]
