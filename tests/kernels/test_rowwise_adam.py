"""The row-wise (lazy) Adam step: the C kernel against its PyTorch reference and SparseAdam,
its bad input, and the build: cached, rebuilt for another source, and absent without a C
compiler (training then takes the reference)."""

from __future__ import annotations

import pytest
import torch

from kernels import rowwise_adam
from kernels.native import build
from kernels.pytorch import pt_rowwise_adam

SETTINGS = {"lr": 0.05, "betas": (0.8, 0.99), "eps": 1e-6}


def adam(step: int) -> rowwise_adam.AdamStep:
    return rowwise_adam.AdamStep(step=step, **SETTINGS)


needs_kernel = pytest.mark.skipif(not rowwise_adam.native_available(), reason="no C compiler here")


def _buffers(rows: int, dim: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(rows, dim, generator=g),
        torch.randn(rows, dim, generator=g) * 0.1,
        torch.rand(rows, dim, generator=g) * 0.01,
    ]


def _sparse(ids: torch.Tensor, values: torch.Tensor, rows: int) -> torch.Tensor:
    return torch.sparse_coo_tensor(
        ids.unsqueeze(0), values, (rows, values.shape[1]), check_invariants=True
    )


def _parts(sizes: list[int], dim: int, lookups: int, seed: int, strided: bool):
    """Sparse gradients of tables of ``sizes`` rows laid one after another: repeated ids,
    rows never looked up, values that are a view with a row stride wider than ``dim``."""
    g = torch.Generator().manual_seed(seed)
    parts, start = [], 0
    for size in sizes:
        ids = torch.randint(0, max(1, size // 2), (lookups,), generator=g)  # half never touched
        wide = torch.randn(lookups, dim + 3, generator=g)
        values = wide[:, 1 : dim + 1] if strided else wide[:, :dim].contiguous()
        parts.append((start, _sparse(ids, values, size)))
        start += size
    return parts


@needs_kernel
@pytest.mark.parametrize(
    ("sizes", "dim"), [([7], 1), ([50, 3, 20], 5), ([100, 64], 16), ([40], 33)]
)
@pytest.mark.parametrize("strided", [False, True])
def test_the_kernel_matches_the_reference(sizes, dim, strided) -> None:
    rows = sum(sizes)
    ours, theirs = _buffers(rows, dim, 0), _buffers(rows, dim, 0)
    slots = rowwise_adam.slots_for(ours[0])
    for step in range(1, 6):
        parts = _parts(sizes, dim, lookups=3 * rows // 2, seed=step, strided=strided)
        rowwise_adam.step_rows(*ours, parts, adam(step), slots=slots, backend="native")
        rowwise_adam.step_rows(*theirs, parts, adam(step), backend="torch")
        assert (slots == -1).all(), "the kernel leaves its row map as it found it"
    for got, want in zip(ours, theirs, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    starts = torch.tensor([0, *sizes[:-1]]).cumsum(0).tolist()
    untouched = torch.cat(
        [torch.arange(s + n // 2, s + n) for s, n in zip(starts, sizes, strict=True)]
    )
    assert torch.equal(ours[0][untouched], _buffers(rows, dim, 0)[0][untouched])


@needs_kernel
def test_the_kernel_is_sparse_adam_for_one_table() -> None:
    """No repeated ids, so nothing summed in another order, and gradients that do not depend
    on the weights: the moments are SparseAdam's to the bit (each scalar rounded from double
    as torch rounds it), the weights within a rounding of torch's vectorised square root
    (Sleef's, not the C library's)."""
    torch.manual_seed(0)
    table = torch.nn.Embedding(30, 8, sparse=True)
    weights = table.weight.detach().clone()
    moments = [torch.zeros_like(weights), torch.zeros_like(weights)]
    slots = rowwise_adam.slots_for(weights)
    optimizer = torch.optim.SparseAdam(table.parameters(), **SETTINGS)
    g = torch.Generator().manual_seed(1)
    for step in range(1, 21):
        ids = torch.randperm(30, generator=g)[:12]
        optimizer.zero_grad()
        (table(ids) * torch.randn(12, 8, generator=g)).sum().backward()  # the same grads
        grad = table.weight.grad
        rowwise_adam.step_rows(
            weights, *moments, [(0, grad)], adam(step), slots=slots, backend="native"
        )
        optimizer.step()
        state = optimizer.state[table.weight]
        assert torch.equal(moments[0], state["exp_avg"])
        assert torch.equal(moments[1], state["exp_avg_sq"])
        torch.testing.assert_close(weights, table.weight.detach(), rtol=2e-7, atol=2e-7)


@pytest.mark.parametrize(("sizes", "dim"), [([7], 1), ([50, 3, 20], 5), ([40], 33)])
def test_the_sync_free_step_is_the_gathered_one(sizes, dim) -> None:
    """The GPU's way for small tables (every row stepped on copies, the looked-up ones kept:
    no ``nonzero``, which would wait for the GPU) against listing the looked-up rows."""
    rows = sum(sizes)
    ours, theirs = _buffers(rows, dim, 0), _buffers(rows, dim, 0)
    for step in range(1, 6):
        parts = _parts(sizes, dim, lookups=rows, seed=step, strided=step % 2 == 0)
        pt_rowwise_adam.reference(*ours, parts, adam(step), dense_below=1e9, sync_free=True)
        pt_rowwise_adam.reference(*theirs, parts, adam(step), dense_below=1e9, sync_free=False)
        for got, want in zip(ours, theirs, strict=True):  # a vectorised square root or not
            torch.testing.assert_close(got, want, rtol=2e-7, atol=2e-7)
    starts = torch.tensor([0, *sizes[:-1]]).cumsum(0).tolist()
    untouched = torch.cat(
        [torch.arange(s + max(1, n // 2), s + n) for s, n in zip(starts, sizes, strict=True)]
    )
    for got, start in zip(ours, _buffers(rows, dim, 0), strict=True):
        assert torch.equal(got[untouched], start[untouched]), "rows never looked up stay"


@needs_kernel
def test_an_id_out_of_range_changes_nothing() -> None:
    buffers = _buffers(10, 4, 0)
    before = [b.clone() for b in buffers]
    slots = rowwise_adam.slots_for(buffers[0])
    bad = torch.sparse_coo_tensor(
        torch.tensor([[1, 2, 12]]), torch.ones(3, 4), (10, 4), check_invariants=False
    )
    with pytest.raises(IndexError, match="outside its 10 rows"):
        rowwise_adam.step_rows(*buffers, [(0, bad)], adam(1), slots=slots)
    assert all(torch.equal(b, a) for b, a in zip(buffers, before, strict=True))
    assert (slots == -1).all()


def test_a_backend_not_known_or_not_given_what_it_needs_is_refused() -> None:
    buffers = _buffers(10, 4, 0)
    with pytest.raises(ValueError, match="backend must be one of"):
        rowwise_adam.step_rows(*buffers, [], adam(1), backend="cuda")
    with pytest.raises(ValueError, match="needs slots"):
        rowwise_adam.step_rows(*buffers, [], adam(1), backend="native")


@pytest.fixture
def fresh_build(tmp_path, monkeypatch):
    """An empty kernel cache and no library loaded yet in this process."""
    monkeypatch.setenv("RECNAS_KERNEL_CACHE", str(tmp_path / "kernels"))

    def forget():
        build._load.cache_clear()
        build._compiler.cache_clear()
        build._failures.clear()
        rowwise_adam._kernel.cache_clear()

    forget()
    yield tmp_path / "kernels"
    monkeypatch.undo()
    forget()


@needs_kernel
def test_the_library_is_built_once_into_the_cache_and_again_for_another_source(
    fresh_build, monkeypatch, tmp_path
) -> None:
    assert "built on first use" in build.status("rowwise_adam").found
    assert build.load("rowwise_adam") is not None
    (built,) = fresh_build.glob("rowwise_adam-*.so")
    assert "built with" in build.status("rowwise_adam").found
    build._load.cache_clear()
    assert build.load("rowwise_adam") is not None
    assert list(fresh_build.glob("rowwise_adam-*.so")) == [built], "loaded from the cache"
    edited = tmp_path / "sources"
    edited.mkdir()
    source = (build.SOURCES / "rowwise_adam.c").read_text()
    (edited / "rowwise_adam.c").write_text(source + "\n/* edited */\n")
    monkeypatch.setattr(build, "SOURCES", edited)
    build._load.cache_clear()
    assert build.load("rowwise_adam") is not None
    assert len(list(fresh_build.glob("rowwise_adam-*.so"))) == 2


def test_without_a_compiler_training_takes_the_reference(fresh_build, monkeypatch) -> None:
    from workers.optimizers import RowwiseAdam

    monkeypatch.setenv("CC", "no-such-compiler")
    assert build.load("rowwise_adam") is None
    status = build.status("rowwise_adam")
    usable, found = status.usable, status.found
    assert not usable and "no C compiler (no-such-compiler)" in found
    assert "gcc" in status.fix
    assert not rowwise_adam.native_available()
    torch.manual_seed(0)
    ours, theirs = torch.nn.Embedding(20, 4, sparse=True), torch.nn.Embedding(20, 4, sparse=True)
    theirs.load_state_dict(ours.state_dict())
    optimizers = [
        RowwiseAdam(ours.parameters(), **SETTINGS),
        torch.optim.SparseAdam(theirs.parameters(), **SETTINGS),
    ]
    for _ in range(5):
        ids = torch.randint(0, 10, (16,))
        for table, optimizer in zip((ours, theirs), optimizers, strict=True):
            optimizer.zero_grad()
            table(ids).square().sum().backward()
            optimizer.step()
    torch.testing.assert_close(ours.weight, theirs.weight, rtol=0, atol=1e-6)
    assert not (fresh_build.exists() and any(fresh_build.iterdir())), "nothing built"
    with pytest.raises(RuntimeError, match="not built: no C compiler"):
        rowwise_adam.step_rows(
            *_buffers(4, 2, 0),
            [],
            adam(1),
            slots=torch.full((4,), -1, dtype=torch.int32),
            backend="native",
        )


def test_a_compiler_that_fails_is_reported(fresh_build, monkeypatch) -> None:
    monkeypatch.setenv("CC", "false")  # on PATH, fails every build
    assert build.load("rowwise_adam") is None
    status = build.status("rowwise_adam")
    usable, found = status.usable, status.found
    assert not usable and "failed" in found
    assert "CC" in status.fix
    assert not list(fresh_build.glob("*.so"))


def test_turned_off_it_is_not_loaded(monkeypatch) -> None:
    monkeypatch.setenv("RECNAS_NATIVE_KERNELS", "0")
    assert build.load("rowwise_adam") is None and not rowwise_adam.native_available()
    status = build.status("rowwise_adam")
    assert (status.usable, status.found) == (False, "turned off (RECNAS_NATIVE_KERNELS=0)")
    assert status.fix == "unset RECNAS_NATIVE_KERNELS"


def test_a_cache_that_cannot_be_made_is_reported_and_training_goes_on(
    fresh_build, monkeypatch, tmp_path
) -> None:
    from nas.service.doctor import kernels_check

    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("not a folder")
    monkeypatch.setenv("RECNAS_KERNEL_CACHE", str(in_the_way / "kernels"))
    status = build.status("rowwise_adam")
    usable, found = status.usable, status.found
    assert not usable and "cannot be made" in found and str(in_the_way) in found
    assert "RECNAS_KERNEL_CACHE" in kernels_check().fix
    assert build.load("rowwise_adam") is None and not rowwise_adam.native_available()
