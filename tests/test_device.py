"""Training on a device other than the host, checked on a machine without a GPU:

- every model scores on PyTorch's ``meta`` device, which holds no data and refuses to mix
  with host tensors, so a tensor made on the host inside a forward pass (what would break on
  a GPU) fails here;
- the loss read back every N steps (as on a GPU) trains to the same weights and figures as
  read every step, and a diverging loss is still named by its step;
- asking for a GPU where there is none exits 2 before anything is written.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from nas.arch.model import build_model
from nas.arch.spec import ArchSpec
from nas.core.errors import TrainingError
from tests.test_search import REPO, nas_here

SPECS = sorted((REPO / "examples" / "specs").glob("**/*.json"))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_every_example_model_scores_on_another_device(ml100k, path: Path) -> None:
    spec = ArchSpec.load(path)
    model = build_model(spec, ml100k.schema).to("meta").eval()
    rows = ml100k.features("valid")[torch.arange(12)]
    if not model.reads_history:
        rows = rows.without_history()
    rows = rows.to("meta")
    logits = model(*rows.inputs())
    assert logits.device.type == "meta" and logits.shape == (12,)
    # request-oriented scoring: 3 requests of 4 candidates each
    request, candidates = model.split_inputs(*rows.inputs())
    owner = torch.arange(12, device="meta") // 4
    request = type(request)(
        request.categorical[::4],
        request.multi_hot[::4],
        None if request.history is None else request.history[::4],
    )
    assert model.score_requests(request, candidates, owner).device.type == "meta"


def test_reading_the_loss_every_n_steps_trains_to_the_same_result(ml100k, monkeypatch) -> None:
    from workers import train as training

    spec = ArchSpec.load(REPO / "examples" / "specs" / "dcnv2.json")
    rows = ml100k.features("train").without_history()
    config = training.TrainConfig(steps=23, batch_size=256, warmup_steps=5)
    results = []
    for every in (1, 7):
        monkeypatch.setattr(training, "read_every", lambda device, every=every: every)
        torch.manual_seed(0)
        model = build_model(spec, ml100k.schema)
        heard: list[tuple[int, float]] = []
        stats = training.train(model, rows, config, lambda s, loss, h=heard: h.append((s, loss)))
        results.append((stats, model.state_dict(), heard))
    (one, weights_one, heard_one), (seven, weights_seven, heard_seven) = results
    assert one.final_loss == seven.final_loss and one.steps == seven.steps == 23
    assert all(torch.equal(weights_one[k], weights_seven[k]) for k in weights_one)
    # read every 7 steps, the running loss a callback hears is the one of the last read
    assert heard_seven[6] == heard_one[6] and heard_seven[13] == heard_one[13]
    assert math.isnan(heard_seven[0][1]) and heard_seven[7][1] == heard_one[6][1]


def test_a_diverging_loss_read_late_is_named_by_its_step() -> None:
    from workers.train import Losses

    losses = Losses(steps=100, every=5)
    for step, value in enumerate([0.7, 0.6, float("nan"), 0.5]):
        losses.add(torch.tensor(value), step)
    with pytest.raises(TrainingError, match="loss is nan at step 3"):
        losses.read()


def test_asking_for_a_gpu_without_one_exits_2(tmp_path: Path) -> None:
    from workers.device import gpu_count

    if gpu_count():
        pytest.skip("this machine has a GPU")
    runs = tmp_path / "runs"
    spec = str(REPO / "examples" / "specs" / "dcnv2.json")
    done = nas_here(runs, "train", spec, "--dataset", "movielens-100k", "--device", "cuda")
    assert done.returncode == 2 and "--device: no CUDA GPU is visible" in done.stderr
    for value, words in (
        ("0.25", "resources.gpus_per_trial: 0.25 GPUs per trial, but this machine has 0"),
        ("1.5", "resources.gpus_per_trial: a trial takes a share of one GPU"),
        ("-1", "resources.gpus_per_trial"),
    ):
        search = tmp_path / "g.yaml"
        search.write_text(
            "name: g\ndataset: movielens-100k\nspace: {name: ctr_stack}\n"
            f"resources: {{gpus_per_trial: {value}}}\n"
        )
        done = nas_here(runs, "submit", str(search))
        assert done.returncode == 2, done.stderr
        assert words in " ".join(done.stderr.split()) and "Traceback" not in done.stderr
    assert not runs.exists()


def test_setup_jobs_train_on_another_device(xor, monkeypatch) -> None:
    """The supernet's and DNAS's steps on ``meta``: the rows, the weights, the optimizers and
    DNAS's architecture logits all on the device. Reading a value back (a loss, a drawn
    choice, whether a mixture weight is zero) is what ``meta`` cannot do: the loss reads are
    skipped here, and DNAS's relaxed steps, which read the others, are left to the GPU check
    (``benchmarks/gpu_check.py``). Before the fix this found, a supernet's block templates
    kept their buffers on the host."""
    import torch.fx.experimental._config

    from tests.workers.test_dnas import settings as dnas_settings
    from tests.workers.test_oneshot import settings as oneshot_settings
    from workers import dnas, oneshot
    from workers.supernet_job import job_supernet
    from workers.train import Losses

    monkeypatch.setattr(Losses, "read", lambda self: self.pending.clear())
    # the embeddings' optimizer finds the rows a batch touched: a shape meta cannot know
    monkeypatch.setattr(torch.fx.experimental._config, "meta_nonzero_assume_all_nonzero", True)
    meta = torch.device("meta")
    settings = oneshot_settings(steps=3)
    net = job_supernet(settings, xor, meta)
    oneshot.train_supernet(net, xor, oneshot.OneShotSettings(**settings), None, lambda *_: None)
    assert {p.device for p in net.parameters()} == {meta}

    settings = dnas_settings(steps=4, warmup=0.5, relaxation="softmax", cost_reference=1.0)
    job = dnas.Dnas(job_supernet(settings, xor, meta), xor, dnas.DnasSettings(**settings))
    for _ in range(2):  # the warm-up: uniform members, weights only
        job.one_step()
    job.penalty_term().backward()  # the expected cost, differentiated to the logits
    assert all(a.device == meta for a in job.alpha.values())
    assert any(a.grad is not None and a.grad.device == meta for a in job.alpha.values())
