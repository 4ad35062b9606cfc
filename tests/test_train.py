"""Training: deterministic, learns, separate optimizers for embeddings, fails loudly."""

from __future__ import annotations

import copy
import functools
import importlib.util
from pathlib import Path

import pytest
import torch

from kernels import rowwise_adam
from nas.arch.model import build_model
from nas.arch.spec import ArchSpec
from nas.core.errors import ConfigError, TrainingError
from nas.data import PrepareRequest, prepare_dataset
from workers.optimizers import AdamW, RowwiseAdam
from workers.train import TrainConfig, lr_scale, make_optimizers, train
from workers.train import evaluate as evaluate_rows
from workers.trial import evaluate
from workers.trial_data import TrialData

NEEDS_KERNEL = pytest.mark.skipif(not rowwise_adam.native_available(), reason="no C compiler here")

SPECS = Path(__file__).parent.parent / "examples" / "specs"


def test_same_seed_same_result_other_seed_other_result(ml100k):
    spec = ArchSpec.load(SPECS / "dcnv2.json")
    runs = [
        evaluate(
            spec, TrialData.from_prepared(ml100k), TrainConfig(steps=40, batch_size=256, seed=s)
        )
        for s in (1, 1, 2)
    ]
    assert runs[0].ne == runs[1].ne and runs[0].auc == runs[1].auc
    assert runs[0].ne != runs[2].ne


def test_a_history_encoder_repeats_to_the_bit_on_two_threads(ml100k):
    """HSTU over each row's history (gathers, attention, its sparse embedding gradients) on
    two threads: the same seed, the same figures, run after run."""
    spec = ArchSpec.load(SPECS / "modern" / "hstu_seq.json")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        runs = [
            evaluate(spec, TrialData.from_prepared(ml100k), TrainConfig(steps=20, batch_size=256))
            for _ in range(2)
        ]
    finally:
        torch.set_num_threads(threads)
    assert (runs[0].ne, runs[0].auc) == (runs[1].ne, runs[1].auc)


def test_training_beats_the_base_rate(ml100k):
    result = evaluate(
        ArchSpec.load(SPECS / "deepfm.json"),
        TrialData.from_prepared(ml100k),
        TrainConfig(steps=300),
    )
    assert result.ne < 0.9 and result.auc > 0.75
    assert result.arch_id == ArchSpec.load(SPECS / "deepfm.json").arch_id
    assert result.flops > 0 and result.params > 0 and result.train_examples_per_s > 0


def test_dense_features_are_learned(tmp_path):
    data = prepare_dataset("synthetic-criteo", tmp_path, PrepareRequest(rows=20_000, seed=0))[0]
    spec = ArchSpec.load(SPECS / "dlrm.json")
    result = evaluate(spec, TrialData.from_prepared(data), TrainConfig(steps=150, batch_size=512))
    assert result.auc > 0.65, "the generator's signal was not learned"


def test_embeddings_get_lazy_adam_and_only_touched_rows_move(ml100k):
    torch.manual_seed(0)
    model = build_model(ArchSpec.load(SPECS / "dlrm.json"), ml100k.schema)
    dense_opt, sparse_opt = make_optimizers(model, TrainConfig())
    assert isinstance(dense_opt, AdamW) and isinstance(sparse_opt, RowwiseAdam)
    table = model.tokens.embedding.table.weight
    assert any(p is table for g in sparse_opt.param_groups for p in g["params"])
    before = table.detach().clone()
    batch = ml100k.features("train")[:4]
    train(model, batch, TrainConfig(steps=1, batch_size=4, warmup_steps=0))
    moved = (table.detach() != before).any(dim=1)
    touched = torch.zeros_like(moved)
    candidate_ids = model.split_inputs(*batch.inputs())[1].categorical
    touched[(candidate_ids + model.tokens.embedding.offsets).flatten()] = True
    assert moved.any() and not (moved & ~touched).any()


class _Tables(torch.nn.Module):
    """Sparse tables of two row widths: a bag with a padding row, a table looked up only
    every other step (its Adam step count falls behind the others')."""

    def __init__(self):
        super().__init__()
        self.plain = torch.nn.Embedding(60, 5, sparse=True)
        self.bag = torch.nn.EmbeddingBag(60, 5, sparse=True, padding_idx=0)
        self.sometimes = torch.nn.Embedding(30, 5, sparse=True)
        self.narrow = torch.nn.Embedding(20, 3, sparse=True)

    def forward(self, ids: torch.Tensor, step: int) -> torch.Tensor:
        out = self.plain(ids).sum() + self.bag(ids).square().sum() + self.narrow(ids % 20).sum()
        return out + (self.sometimes(ids % 30).square().sum() if step % 2 == 0 else 0)


def _rowwise_and_sparse_adam(
    generator, steps: int, dense_below: float, resume_at=None, backend: str = "auto"
):
    """(ours, theirs): _Tables trained by RowwiseAdam and by SparseAdam from the same start;
    with ``resume_at``, ours is rebuilt from its state dicts at that step."""
    torch.manual_seed(0)
    ours, theirs = _Tables(), _Tables()
    theirs.load_state_dict(ours.state_dict())
    settings = {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6, "backend": backend}
    optimizers = [
        RowwiseAdam(ours.parameters(), dense_below=dense_below, **settings),
        torch.optim.SparseAdam(theirs.parameters(), **without_backend(settings)),
    ]
    for step in range(steps):
        if step == resume_at:
            saved = (ours.state_dict(), optimizers[0].state_dict())
            ours = _Tables()
            ours.load_state_dict(saved[0])
            optimizers[0] = RowwiseAdam(ours.parameters(), dense_below=dense_below, **settings)
            optimizers[0].load_state_dict(saved[1])
        ids = torch.randint(0, 40, (16, 3), generator=generator)  # rows 40-59: never touched
        for module, optimizer in zip((ours, theirs), optimizers, strict=True):
            optimizer.zero_grad()
            module(ids, step).backward()
            optimizer.step()
    return ours, theirs, optimizers[0]


def without_backend(settings: dict) -> dict:
    return {k: v for k, v in settings.items() if k != "backend"}


# The C kernel, and the PyTorch reference finding the touched rows by coalescing the
# gradient or by summing it into a dense buffer.
BACKENDS = [
    pytest.param("native", 8.0, id="native", marks=NEEDS_KERNEL),
    pytest.param("torch", 0.0, id="torch-coalesce"),
    pytest.param("torch", 1e9, id="torch-dense-sum"),
]


@pytest.mark.parametrize(("backend", "dense_below"), BACKENDS)
def test_rowwise_adam_follows_sparse_adam(backend: str, dense_below: float):
    """Several tables in one optimizer, of two row widths; repeated ids in a batch, rows
    never touched, padding rows (bag), a table that misses steps: the same trajectory as
    torch's SparseAdam, to float rounding, over many steps."""
    ours, theirs, optimizer = _rowwise_and_sparse_adam(
        torch.Generator().manual_seed(1), 50, dense_below=dense_below, backend=backend
    )
    for name, weight in theirs.named_parameters():
        torch.testing.assert_close(ours.get_parameter(name), weight, rtol=0, atol=1e-5)
    assert torch.equal(ours.plain.weight[40:], theirs.plain.weight[40:])
    state = optimizer.state
    assert (
        state[ours.plain.weight]["step"] == 50
        and not state[ours.plain.weight]["exp_avg"][40:].any()
    )
    assert state[ours.sometimes.weight]["step"] == 25


@pytest.mark.parametrize(("backend", "dense_below"), BACKENDS)
def test_rowwise_adam_resumes_from_its_state_dict_as_if_unbroken(backend, dense_below):
    generator = functools.partial(torch.Generator().manual_seed, 2)
    unbroken, _, _ = _rowwise_and_sparse_adam(generator(), 30, dense_below, backend=backend)
    resumed, _, _ = _rowwise_and_sparse_adam(generator(), 30, dense_below, 13, backend)
    for name, weight in unbroken.named_parameters():
        assert torch.equal(resumed.get_parameter(name), weight), name


def test_rowwise_adam_rewinds_to_a_state_dict_after_it_has_stepped():
    torch.manual_seed(0)
    module = _Tables()
    optimizer = RowwiseAdam(module.parameters(), lr=0.02)
    generator = torch.Generator().manual_seed(3)

    def run(steps: int) -> dict[str, torch.Tensor]:
        for step in range(steps):
            optimizer.zero_grad()
            module(torch.randint(0, 40, (16, 3), generator=generator), step).backward()
            optimizer.step()
        return {k: v.clone() for k, v in module.state_dict().items()}

    run(5)
    saved = copy.deepcopy((module.state_dict(), optimizer.state_dict(), generator.get_state()))
    ahead = run(5)
    module.load_state_dict(saved[0])
    optimizer.load_state_dict(saved[1])
    generator.set_state(saved[2])
    again = run(5)
    assert all(torch.equal(again[k], ahead[k]) for k in ahead)


def test_rowwise_adam_steps_a_table_whose_data_was_replaced():
    """The tables are views of one buffer; a table given new data after the optimizer was
    made (``module.to``, an assignment to ``.data``) is still the one stepped."""
    torch.manual_seed(0)
    ours, theirs = _Tables(), _Tables()
    theirs.load_state_dict(ours.state_dict())
    optimizers = [
        RowwiseAdam(ours.parameters(), lr=0.02),
        torch.optim.SparseAdam(theirs.parameters(), lr=0.02),
    ]
    ours.plain.weight.data = ours.plain.weight.data.clone()
    generator = torch.Generator().manual_seed(4)
    for step in range(5):
        ids = torch.randint(0, 40, (16, 3), generator=generator)
        for module, optimizer in zip((ours, theirs), optimizers, strict=True):
            optimizer.zero_grad()
            module(ids, step).backward()
            optimizer.step()
    for name, weight in theirs.named_parameters():
        torch.testing.assert_close(ours.get_parameter(name), weight, rtol=0, atol=1e-6)


def test_divergence_is_reported(ml100k):
    model = build_model(ArchSpec.load(SPECS / "deepfm.json"), ml100k.schema)
    with torch.no_grad():
        model.top.layers[0].weight.fill_(float("nan"))
    with pytest.raises(TrainingError, match="loss is nan at step 1"):
        train(model, ml100k.features("train"), TrainConfig(steps=5))


def test_schedule_warms_up_then_decays():
    config = TrainConfig(steps=1000, warmup_steps=100)
    assert lr_scale(0, config) == pytest.approx(0.01)
    assert lr_scale(99, config) == pytest.approx(1.0)
    assert lr_scale(550, config) == pytest.approx(0.55)
    assert lr_scale(1000, config) == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("field", "value"), [("steps", 0), ("batch_size", -1), ("lr", 0.0), ("steps", 1.5)]
)
def test_config_errors_name_the_field(field, value):
    with pytest.raises(ConfigError) as err:
        TrainConfig(**{field: value})
    assert err.value.field == field


def test_a_model_without_a_sequence_learns_the_same_without_the_history(ml100k):
    """The history is not gathered for specs that do not read it; nothing learned changes."""
    spec = ArchSpec.load(SPECS / "dcnv2.json")
    rows = TrialData.from_prepared(ml100k).features("train")
    assert rows.history is not None and rows.without_history().history is None
    config = TrainConfig(steps=30, batch_size=256, seed=3)
    losses = []
    for features in (rows, rows.without_history()):
        torch.manual_seed(0)
        losses.append(train(build_model(spec, ml100k.schema), features, config).final_loss)
    assert losses[0] == losses[1]


@functools.cache
def _throughput_benchmark():
    path = Path(__file__).parent.parent / "benchmarks" / "train_throughput.py"
    spec = importlib.util.spec_from_file_location("train_throughput", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A model's weights by name, a per-field table's fields joined back as the fused one."""
    weights = {
        f"{name}.table.weight": torch.cat([table.weight for table in module.tables])
        for name, module in model.named_modules()
        if hasattr(module, "tables")
    }
    weights |= {k: p for k, p in model.named_parameters() if ".tables." not in k}
    return {k: v.detach().clone() for k, v in weights.items()}


@pytest.mark.parametrize("name", ["dcnv2", "deepfm", "dlrm", "autoint"])
def test_the_trainer_learns_what_its_recipe_written_plainly_learns(ml100k, name):
    """The trainer's speed-ups (fused tables, RowwiseAdam, fused AdamW, the one-GEMM top) are
    the same math as per-field sparse tables, SparseAdam, AdamW and a LambdaLR started from
    the same weights (benchmarks/train_throughput.py's NE check): equal to float rounding.
    (Over more steps Adam magnifies the rounding where a weight's second moment is tiny: up
    to 4e-4 apart after 60 steps, none past 1e-6 after 30.)"""
    bench = _throughput_benchmark()
    data = ml100k.features("train").without_history()
    config = TrainConfig(steps=30, batch_size=256, warmup_steps=10, seed=4)
    torch.manual_seed(0)
    ours = build_model(ArchSpec.load(SPECS / f"{name}.json"), ml100k.schema)
    theirs = bench.same_recipe_model(ours)
    start = _weights(ours)
    assert _weights(theirs).keys() == start.keys()
    train(ours, data, config)
    bench.same_recipe_train(theirs, data, config)
    ours_end, theirs_end = _weights(ours), _weights(theirs)
    for key, value in ours_end.items():
        assert not torch.equal(value, start[key]), f"{key} did not train"
        torch.testing.assert_close(value, theirs_end[key], atol=1e-5, rtol=1e-4, msg=key)


def test_bf16_mixed_precision_learns_what_fp32_learns(ml100k):
    """bf16 rounds the GEMMs' inputs, not the weights, the optimizer or the loss: the same
    training ends close to float32's, and both learn."""
    data, valid = ml100k.features("train"), ml100k.features("valid")
    rate = ml100k.positive_rate("train")
    ne = {}
    for precision in ("fp32", "bf16"):
        torch.manual_seed(0)
        model = build_model(ArchSpec.load(SPECS / "dcnv2.json"), ml100k.schema)
        train(model, data, TrainConfig(steps=150, batch_size=256, precision=precision))
        assert all(p.dtype == torch.float32 for p in model.parameters())
        ne[precision] = evaluate_rows(model, valid, rate, 4096)["ne"]
    assert ne["fp32"] < 0.97 and ne["bf16"] < 0.97
    assert ne["bf16"] != ne["fp32"] and abs(ne["bf16"] - ne["fp32"]) < 0.01


def test_an_unknown_precision_is_named():
    with pytest.raises(ConfigError, match="precision: must be one of fp32, bf16, fp8, got 'fp16'"):
        TrainConfig(precision="fp16")
