"""The GEMM record: what a block's analytic cost is made of, and what the cost model prices."""

from __future__ import annotations

from dataclasses import dataclass

OPERANDS = ("b", "a", "none")  # which operand of [m, k] @ [k, n] is a learned weight


@dataclass(frozen=True)
class Gemm:
    """``count`` matrix multiplies of ``[m, k] @ [k, n]``.

    ``request_side``: it reads request-side inputs only, so request-oriented inference runs
    it once per request instead of once per candidate (``count`` is then per request).

    ``weight``: which operand is a learned weight, the same for all ``count`` multiplies: "b"
    (a linear layer, ``x @ W``), "a" (a token mixer, ``W @ X``) or "none" (two activations,
    as in attention's ``Q K^T``). A weight can be quantised to FP8 once, ahead of time; an
    activation must be quantised on every call (what FP8 costs, ``nas.arch.cost``)."""

    m: int
    n: int
    k: int
    count: int = 1
    request_side: bool = False
    weight: str = "b"

    def __post_init__(self) -> None:
        if self.weight not in OPERANDS:
            raise ValueError(f"Gemm.weight must be one of {OPERANDS}, got {self.weight!r}")

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * self.count

    @property
    def activation_elements(self) -> int:
        """Elements of the operands that are activations, over all ``count`` multiplies."""
        a, b = self.m * self.k, self.k * self.n
        per = {"b": a, "a": b, "none": a + b}[self.weight]
        return per * self.count

    @property
    def weight_elements(self) -> int:
        """Elements of the weight operand (read once: it is shared by the ``count``)."""
        return {"b": self.k * self.n, "a": self.m * self.k, "none": 0}[self.weight]

    @property
    def output_elements(self) -> int:
        return self.m * self.n * self.count
