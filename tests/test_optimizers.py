"""The optimizers written without ``torch.optim`` (``workers/optimizers.py``) move weights
exactly as torch's own do, save and load in torch's layout, and keep ``torch._dynamo`` out of
a process that trains."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tests.conftest import REPO
from workers.optimizers import Adam, AdamW


def _params(seed: int) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    shapes = [(7, 5), (5,), (3, 4, 2), (1,)]
    return [torch.nn.Parameter(torch.randn(*s, generator=g)) for s in shapes]


def _groups(params: list[torch.nn.Parameter]) -> list[dict]:
    """Two groups, the second with its own learning rate."""
    return [{"params": params[:2]}, {"params": params[2:], "lr": 3e-3}]


def _run(make, steps: int, seed: int = 0, swap_at: int | None = None, swap=None):
    """Weights after ``steps`` steps of an optimizer ``make(groups)`` makes, with a changing
    learning rate, one parameter without a gradient at every third step, and two groups;
    ``swap``: at ``swap_at``, the optimizer is rebuilt by ``swap`` from the state dict."""
    params = _params(seed)
    optimizer = make(_groups(params))
    g = torch.Generator().manual_seed(seed + 1)
    for step in range(steps):
        if step == swap_at:
            optimizer = swap(params, optimizer.state_dict())
        for group, base in zip(optimizer.param_groups, (1e-2, 3e-3), strict=True):
            group["lr"] = base * (1 + step) / steps
        for i, p in enumerate(params):
            p.grad = None if (i == 1 and step % 3 == 2) else torch.randn(p.shape, generator=g)
        optimizer.step()
    return [p.detach().clone() for p in params], optimizer


SETTINGS = {"betas": (0.8, 0.99), "eps": 1e-7, "weight_decay": 0.05}


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (
            lambda g: AdamW(g, lr=1e-2, **SETTINGS),
            lambda g: torch.optim.AdamW(g, lr=1e-2, fused=True, **SETTINGS),
        ),
        (
            lambda g: Adam(g, lr=1e-2, **SETTINGS),
            lambda g: torch.optim.Adam(g, lr=1e-2, **SETTINGS),
        ),
    ],
    ids=["adamw", "adam"],
)
def test_the_weights_are_torchs_to_the_bit_and_state_dicts_cross_over(ours, theirs) -> None:
    expected, _ = _run(theirs, 12)
    got, optimizer = _run(ours, 12)
    for a, b in zip(got, expected, strict=True):
        assert torch.equal(a, b)

    # A run that saves half way and goes on in the other class ends where an unbroken one
    # does, whichever way round: checkpoints from before and after this change both load.
    def into(make):
        def swap(params, state):
            rebuilt = make(_groups(params))
            rebuilt.load_state_dict(state)
            return rebuilt

        return swap

    for first, second in ((ours, theirs), (theirs, ours)):
        crossed, _ = _run(first, 12, swap_at=5, swap=into(second))
        for a, b in zip(crossed, expected, strict=True):
            assert torch.equal(a, b)
    saved = optimizer.state_dict()
    assert sorted(saved["state"]) == [0, 1, 2, 3]
    assert [g["params"] for g in saved["param_groups"]] == [[0, 1], [2, 3]]


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [(AdamW, torch.optim.AdamW), (Adam, torch.optim.Adam)],
    ids=["adamw", "adam"],
)
def test_the_settings_left_out_are_torchs_defaults(ours, theirs) -> None:
    (group,) = ours(_params(0), lr=1e-3).param_groups
    (expected,) = theirs(_params(0), lr=1e-3).param_groups
    for key in ("lr", "betas", "eps", "weight_decay"):
        assert group[key] == expected[key], key


def test_a_state_dict_for_other_parameters_is_refused() -> None:
    optimizer = AdamW(_params(0), lr=1e-3)
    other = AdamW([{"params": _params(1)[:2]}, {"params": _params(1)[2:]}], lr=1e-3)
    with pytest.raises(ValueError, match="groups of"):
        optimizer.load_state_dict(other.state_dict())


def test_training_a_candidate_never_imports_torch_dynamo(ml100k) -> None:
    """Its import costs about 3 s of CPU per process (why these optimizers exist)."""
    code = (
        "import sys, torch\n"
        "from nas.arch.spec import ArchSpec\n"
        "from nas.data import load_dataset\n"
        "from workers.train import TrainConfig\n"
        "from workers.trial import evaluate\n"
        "from workers.trial_data import TrialData\n"
        "data = TrialData.from_prepared(load_dataset('movielens-100k'), 'valid')\n"
        "evaluate(ArchSpec.load('examples/specs/dcnv2.json'), data,"
        " TrainConfig(steps=3, batch_size=64))\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
