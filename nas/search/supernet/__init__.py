"""Weight-sharing supernets of search spaces, for one-shot and differentiable search.

net = build_supernet(space, schema)       # ConfigError if the space has no supernet form
logits = net(spec, *batch.inputs())       # one member, on the shared weights
model = net.extract(spec)                 # that member as a stand-alone RankingModel
cost = net.expected_cost(probabilities)   # differentiable in per-decision probabilities
"""

from nas.search.supernet.shared import SharedBlock
from nas.search.supernet.stack import CostFn, StackSupernet, flops_cost


def build_supernet(space, schema, cost: CostFn = flops_cost) -> StackSupernet:
    space.supernet_plan()  # a space without a supernet form says why here
    return StackSupernet(space, schema, cost)


def check_supernet(space, schema) -> StackSupernet:
    """The supernet's structure without its weights (built on the meta device): a space
    whose candidates do not build is a ``ConfigError`` before anything starts."""
    import torch

    with torch.device("meta"):
        return build_supernet(space, schema)


__all__ = [
    "CostFn",
    "SharedBlock",
    "StackSupernet",
    "build_supernet",
    "check_supernet",
    "flops_cost",
]
