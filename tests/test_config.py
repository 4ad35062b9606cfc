"""Search configs: the examples load; every kind of mistake names its file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from nas.core.errors import ConfigError, NasError
from nas.service.config import load_config, validate_config

REPO = Path(__file__).resolve().parents[1]

EXAMPLES = sorted((Path(__file__).parent.parent / "examples" / "searches").glob("*.yaml"))
MINIMAL = {"name": "t", "space": {"name": "ctr_stack"}}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_load(path: Path) -> None:
    config = load_config(path)
    assert config.objective_list()
    assert config.baseline_paths(path.parent), "examples include the baselines"


def test_defaults() -> None:
    config = validate_config(MINIMAL)
    assert [o.name for o in config.objectives] == ["ne", "flops"]
    assert [o.direction for o in config.objective_list()] == ["min", "min"]
    assert config.strategy.name == "evolution"
    assert config.references() == [1.0, None]
    assert [p.stem for p in config.baseline_paths(Path("."))] == [
        "autoint",
        "dcnv2",
        "deepfm",
        "dlrm",
    ]


def test_a_name_alone_stands_for_the_name_with_default_options() -> None:
    short = validate_config(
        {"name": "t", "space": "ctr_stack", "strategy": "random", "scheduler": "asha"}
    )
    full = validate_config(
        {
            "name": "t",
            "space": {"name": "ctr_stack", "options": {}},
            "strategy": {"name": "random"},
            "scheduler": {"name": "asha"},
        }
    )
    assert short == full
    assert short.to_dict()["space"] == {"name": "ctr_stack", "options": {}}
    with pytest.raises(ConfigError, match=r"space.name: unknown search space 'ctr'"):
        validate_config({"name": "t", "space": "ctr"})


def test_overrides_apply_to_nested_fields(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: t\nspace: {name: ctr_stack}\nbudget: {candidates: 5}\n")
    config = load_config(path, {"budget.candidates": 7, "budget.steps": 9, "seed": None})
    assert (config.budget.candidates, config.budget.steps, config.seed) == (7, 9, 0)
    config = load_config(path, {"resources.concurrency": 3})
    assert config.resources.concurrency == 3


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"space": {"name": "ctr_stak"}}, "space.name", "Did you mean 'ctr_stack'"),
        ({"strategy": {"name": "evolutoin"}}, "strategy.name", "Valid strategies"),
        (
            {"strategy": {"name": "evolution", "options": {"population_size": 2}}},
            "strategy.options",
            "sample_size (3) must be at most population_size (2)",
        ),
        (
            {"strategy": {"name": "optuna", "options": {"sampler": "cmaes"}}},
            "strategy.options.sampler",
            "'auto', 'tpe', 'nsga2' or 'random'",
        ),
        ({"budget": {"candidates": -1}}, "budget.candidates", "greater than or equal to 1"),
        ({"budget": {"steps": 0}}, "budget.steps", "greater than or equal to 1"),
        ({"budget": {"candidates": "many"}}, "budget.candidates", "valid integer"),
        ({"objectives": ["ne", "flop"]}, "objectives[1].name", "Did you mean 'flops'"),
        ({"objectives": ["ne", "ne"]}, "objectives", "twice"),
        ({"objectives": [{"ne": "click"}]}, "objectives[0]", "write ne:click (no space"),
        ({"objectives": ["flops:click"]}, "objectives[0].name", "only ne, auc, logloss"),
        ({"objectives": []}, "objectives", "at least one"),
        (
            {"objectives": [{"name": "auc", "direction": "min"}]},
            "objectives[0].direction",
            "always maximised",
        ),
        ({"dataset": "movielens"}, "dataset", "Did you mean 'movielens-1m'"),
        ({"bugdet": {}}, "bugdet", "valid fields here: name, dataset"),
        (
            {"objectives": ["ne", {"name": "flops", "max": 3}]},
            "objectives[1].max",
            "valid fields here: name, direction",
        ),
        ({"space": ["ctr_stack"]}, "space", "must be a name or a mapping of name, options"),
        ({"scheduler": 5}, "scheduler", "must be a name or a mapping of name, options"),
        ({"budget": 5}, "budget", "must be a mapping of candidates, steps"),
        ({"objectives": [5]}, "objectives[0]", "must be a name or a mapping of name, direction"),
        ({"resources": {"concurrency": 0}}, "resources.concurrency", "greater than or equal"),
        ({"name": "has space"}, "name", "is not a search name: use 1-100 letters"),
        ({"train": {"precision": "fp16"}}, "train.precision", "'fp32', 'bf16' or 'fp8'"),
        (
            {"space": {"name": "ctr_stack", "options": {"max_depth": -2}}},
            "space.options.max_depth",
            "greater than or equal to 1",
        ),
    ],
)
def test_mistakes_name_file_and_field(change, field, words, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_config({**MINIMAL, **change}, "s.yaml")
    assert caught.value.field == field
    assert str(caught.value).startswith("s.yaml: ")
    assert words in str(caught.value)


def test_broken_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: t\nspace: {name: ctr_stack\nbudget: 3\n")
    with pytest.raises(ConfigError, match=r"broken.yaml: not valid YAML, line \d+"):
        load_config(path)


def test_not_a_mapping_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(path)
    with pytest.raises(NasError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="space: is required"):
        validate_config({"name": "t"})


def test_a_schema_files_mistake_names_both_files(tmp_path: Path) -> None:
    """The search config names a dataset schema file: its error says the config, the field
    and the schema file with its own field."""
    search = (REPO / "examples/searches/ctr_quick.yaml").read_text()
    path = tmp_path / "search.yaml"
    path.write_text(search.replace("dataset: movielens-1m", "dataset: data/nope.yaml"))
    with pytest.raises(ConfigError, match=r"search.yaml: dataset: .*data/nope.yaml: cannot read"):
        load_config(path)
    schema = (REPO / "examples/datasets/my_ctr.yaml").read_text()
    (tmp_path / "data").mkdir()
    (tmp_path / "data/nope.yaml").write_text(schema.replace("labels: [click, like]", "labels: 5"))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}: dataset: {tmp_path / 'data/nope.yaml'}: labels:")


def test_an_error_of_a_file_the_source_names_already_is_not_named_twice() -> None:
    inner = ConfigError("embedding_dim", "must be at least 1", "spec.json")
    again = inner.within(source="spec.json (on movielens-1m)")
    assert str(again) == "spec.json (on movielens-1m): embedding_dim: must be at least 1"
    nested = inner.within("baselines[0]", "search.yaml")
    assert str(nested) == "search.yaml: baselines[0]: spec.json: embedding_dim: must be at least 1"
