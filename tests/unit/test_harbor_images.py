"""Whether a Harbor task's trial reaches the internet: the task's allow_internet and the operator's
AGENTFORGE_TASK_NETWORK together."""

from __future__ import annotations

import pytest

from worker.harbor_images import task_network, trial_network


@pytest.mark.parametrize(
    ("allow_internet", "policy", "expected"),
    [
        (True, "any", (True, "the internet (AGENTFORGE_TASK_NETWORK=any, the task's allow_internet is true)")),
        (
            True,
            "none",
            (False, "no network: AGENTFORGE_TASK_NETWORK=none on this worker (the task's allow_internet is true)"),
        ),
        (False, "any", (False, "no network: the task's allow_internet is false")),
    ],
)
def test_a_trial_reaches_the_internet_only_when_the_task_and_the_operator_both_allow_it(
    allow_internet, policy, expected
):
    assert trial_network(allow_internet, policy) == expected


def test_the_task_network_is_none_unless_the_operator_says_any():
    assert task_network({}) == "none" and task_network({"AGENTFORGE_TASK_NETWORK": "any"}) == "any"
    with pytest.raises(ValueError, match="AGENTFORGE_TASK_NETWORK must be one of none, any, not 'all'"):
        task_network({"AGENTFORGE_TASK_NETWORK": "all"})
