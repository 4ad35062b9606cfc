"""A registered model's network written for serving (``nas export``): ``torch.export`` or
TorchScript, whole or split into its request side (computed once a request) and its
candidate side, each checked against the eager model before its folder is written."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch

from kernels.fp8_linear import Dispatched, Fp8Dispatch
from nas.core.disk import torch_file
from nas.core.errors import NasError
from nas.service.serving import MODEL_FILE, LoadedModel, open_model


def export_model(tracking_uri: str, model_uri: str, fmt: str, folder: Path) -> dict[str, Any]:
    """Write the model's network for serving: ``torch-export`` (``torch.export``, a .pt2
    with a dynamic batch) or ``torchscript`` (traced). Inputs are ids, as after the raw
    form: categorical [B, F], multi_hot [B, M, L], dense [B, Dn] (and history [B, L, 3]);
    the output is one logit per row. ``recnas_model.json`` beside it holds the raw form
    that makes those ids. The export is checked against the eager model on rows of the
    model's own input example before the folder is written."""
    pyfunc, loaded = open_model(tracking_uri, model_uri)
    return export_loaded(loaded, _example_inputs(loaded, pyfunc), fmt, folder, model_uri)


def export_loaded(
    loaded: LoadedModel, example: tuple[torch.Tensor, ...], fmt: str, folder: Path, source: str
) -> dict[str, Any]:
    """``export_model`` of a model in memory (``source``: where it came from)."""
    model = loaded.network
    with torch.no_grad():
        eager = model(*example)
    tmp = folder.with_name(f".{folder.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        name = "model.pt2" if fmt == "torch-export" else "model.pt"
        batch = torch.export.Dim("batch", min=2)
        shapes = tuple({0: batch} for _ in example)
        exported = _save_program(model, example, shapes, fmt, tmp / name)
        files = {
            name: "per-candidate scoring: ids -> logits"
            + (" (torch.export.load(...).module())" if fmt == "torch-export" else " (TorchScript)")
        }
        with torch.no_grad():  # the example, and a smaller batch
            again = exported(*example)
            fewer = exported(*(t[:2] for t in example))
        error = float((again - eager).abs().max())
        error = max(error, float((fewer - eager[:2]).abs().max()))
        if not error <= 1e-5:
            raise NasError(f"the {fmt} export differs from the eager model by {error:.2e}")
        split = {}
        if loaded.schema.num_request_tokens or loaded.model.reads_history:
            split = export_split(loaded.model, example, fmt, tmp, loaded.fp8_sites)
            files |= split.pop("files")
        names = ["categorical", "multi_hot", "dense", "history"][: len(example)]
        meta = {
            "format": fmt,
            "model_uri": source,
            "precision": loaded.precision,
            "inputs": {n: list(t.shape[1:]) for n, t in zip(names, example, strict=True)},
            "output": "logit per row; probability = sigmoid(logit)"
            if not loaded.schema.labels
            else f"logits [B, {loaded.schema.heads}], one per label "
            f"({', '.join(loaded.schema.labels)}); probability = sigmoid(logit)",
            "max_abs_difference_from_eager": error,
            **split,
        }
        (tmp / MODEL_FILE).write_text(json.dumps(loaded.info))
        (tmp / "export.json").write_text(json.dumps(meta, indent=2) + "\n")
        files |= {MODEL_FILE: "spec, schema and raw form", "export.json": "inputs and check"}
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"folder": str(folder), "files": files, **meta}


class RequestSide(torch.nn.Module):
    """The request half of request-oriented serving, as a program of tensors: the request
    fields' ids (and history) -> its tokens (and encoded history), once per request."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, categorical, multi_hot, history=None):
        from nas.arch.model import RequestInputs

        tokens, memory = self.model.tokens.request_tokens(
            RequestInputs(categorical, multi_hot, history)
        )
        return (tokens,) if memory is None else (tokens, memory.values, memory.lengths)


class CandidateSide(torch.nn.Module):
    """The candidate half: the request side's outputs, the candidates' ids and ``owner``
    (each candidate's request row) -> one logit per candidate."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(
        self, request_tokens, categorical, multi_hot, dense, owner, values=None, lengths=None
    ):
        from blocks.glm import Memory
        from nas.arch.model import CandidateInputs

        memory = None if values is None else Memory(values, lengths)
        candidates = CandidateInputs(categorical, multi_hot, dense)
        return self.model.score_candidates(request_tokens, memory, candidates, owner)


def _split_example(model, example: tuple[torch.Tensor, ...]):
    """Two requests and every example row as a candidate of one of them, alternately:
    (request inputs, candidate inputs + owner, per-candidate logits to match)."""
    from nas.arch.model import RequestInputs

    request, candidates = model.split_inputs(*example)
    owner = torch.arange(candidates.dense.shape[0]) % 2
    history = request.history
    requests = (request.categorical[:2], request.multi_hot[:2])
    requests += () if history is None else (history[:2],)
    repeated = RequestInputs(
        request.categorical[owner],
        request.multi_hot[owner],
        None if history is None else history[owner],
    )
    with torch.no_grad():
        expected = model.score_requests(repeated, candidates, None)
    return (
        requests,
        (candidates.categorical, candidates.multi_hot, candidates.dense, owner),
        expected,
    )


def export_split(model, example, fmt: str, folder: Path, fp8_sites=()) -> dict[str, Any]:
    """``request`` and ``candidate`` programs beside the model (``fmt`` as it), checked:
    candidate(request(R requests), C candidates, owner) == per-candidate scoring (with
    ``fp8_sites`` served in FP8 in both)."""
    request_side, candidate_side = RequestSide(model).eval(), CandidateSide(model).eval()
    if fp8_sites:
        request_side = Dispatched(request_side, model, fp8_sites).eval()
        candidate_side = Dispatched(candidate_side, model, fp8_sites).eval()
        with Fp8Dispatch(model, fp8_sites):
            requests, candidates, expected = _split_example(model, example)
    else:
        requests, candidates, expected = _split_example(model, example)
    with torch.no_grad():
        state = request_side(*requests)
    r, c = torch.export.Dim("requests", min=2), torch.export.Dim("candidates", min=2)
    candidate_args = (state[0], *candidates, *state[1:])
    candidate_shapes = ({0: r}, {0: c}, {0: c}, {0: c}, {0: c}) + tuple({0: r} for _ in state[1:])
    suffix = ".pt2" if fmt == "torch-export" else ".pt"
    request_file, candidate_file = folder / f"request{suffix}", folder / f"candidate{suffix}"
    loaded_request = _save_program(
        request_side, requests, tuple({0: r} for _ in requests), fmt, request_file
    )
    loaded_candidate = _save_program(
        candidate_side, candidate_args, candidate_shapes, fmt, candidate_file
    )
    with torch.no_grad():
        again = loaded_request(*requests)
        logits = loaded_candidate(again[0], *candidates, *again[1:])
    error = float((logits - expected).abs().max())
    if not error <= 1e-5:
        raise NasError(
            f"the request/candidate {fmt} programs differ from per-candidate scoring by {error:.2e}"
        )
    return {
        "files": {
            request_file.name: "request side: request ids (and history) -> tokens (and history)",
            candidate_file.name: "candidate side: request outputs, candidate ids, owner -> logits",
        },
        "request_split_max_abs_difference": error,
    }


def _save_program(module, args, shapes, fmt: str, path: Path):
    """``module`` exported (batch dimensions dynamic) or traced, saved at ``path``, loaded back."""
    if fmt == "torch-export":
        if isinstance(module, Dispatched):  # forward(*args): one parameter holds them all
            shapes = (shapes,)
        with torch.no_grad():
            program = torch.export.export(module, args, dynamic_shapes=shapes)
        with torch_file(path) as file:
            torch.export.save(program, file)
        return torch.export.load(path).module()
    with torch.no_grad(), warnings.catch_warnings():
        # Branches on shapes that are fixed per model (a side with no tokens); the callers
        # compare the traced program with the eager one. TorchScript is deprecated in
        # favour of torch.export, but it is what was asked for.
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        traced = torch.jit.trace(module, args, check_trace=False)
        with torch_file(path) as file:
            torch.jit.save(traced, file)
        return torch.jit.load(str(path))


def _example_inputs(loaded: LoadedModel, pyfunc) -> tuple[torch.Tensor, ...]:
    """The network's inputs for the model's logged input example (its raw rows)."""
    frame = pyfunc.input_example
    rows = frame.to_dict(orient="records") if frame is not None else []
    if len(rows) < 2:
        raise NasError("the model has no input example of two or more rows to export from")
    return loaded.features(rows).inputs()
