"""The classic group's states and their legal transitions (Kafka's ``GroupState``)."""

from __future__ import annotations

from enum import Enum

__all__ = ["GroupState", "VALID_PREVIOUS_STATES"]


class GroupState(Enum):
    """The value is Kafka's name, as DescribeGroups/ListGroups show it."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @classmethod
    def parse(cls, name: str) -> GroupState | None:
        """The state named ``name`` (case-insensitive, as Kafka's ListGroups filter), else None."""
        lowered = name.lower()
        for state in cls:
            if state.value.lower() == lowered:
                return state
        return None


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}
