"""The lmms-eval task every release carries: `lmms_eval/<task>.yaml` and `lmms_eval/utils.py`.

The YAML is standalone (no `include` of an installed task). It reads the release's own parquet shards
through `dataset_path: parquet` with `data_files` written relative to the YAML, which lmms-eval (0.7.3
checked) resolves against the YAML's folder: so the same file works in the local release, wherever it
is moved, and in a downloaded copy of the Hub repository. When the release is published with a Hub
repository, a second task `<task>_hub` loads that repository at the version's tag instead, for users
who fetch only this folder.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from string import Template

import yaml

from publish.lmms_eval.utils import POST_PROMPT, dimension_metric

HERE = Path(__file__).parent
TEMPLATE = HERE / "task.yaml.template"
UTILS = HERE / "utils.py"
FOLDER = "lmms_eval"


def task_name(name: str, version: str) -> str:
    """Letters, digits and underscores, starting with a letter, as lmms-eval's own task names are: safe on
    the command line and as a key of its results."""
    slug = re.sub(r"[^a-z0-9]+", "_", f"{name}_{version}".lower()).strip("_")
    return slug if slug[:1].isalpha() else f"bench_{slug}"


def _render(*, task: str, dataset: dict, usage: str, pretty_name: str, version: str, split: str,
            metrics: list[str]) -> str:
    return Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        task=task, dataset=yaml.safe_dump(dataset, sort_keys=False, default_flow_style=False, width=1000).strip(),
        usage=usage, pretty_name=" ".join(pretty_name.split()), version=version, split=split,
        metrics="\n".join(f"  - metric: {name}\n    aggregation: !function utils.accuracy\n    higher_is_better: true"
                          for name in metrics), post_prompt=json.dumps(POST_PROMPT))


def write_task(folder: Path, *, name: str, pretty_name: str, version: str, split: str,
               shards: dict[str, list[str]], categories: Iterable[str], data_types: Iterable[str],
               repo: str = "") -> str:
    """Write the task files into `folder/lmms_eval` and return the task name. `shards` are the parquet
    paths relative to `folder`; `categories` and `data_types` are those present in the release, one
    metric each beside the overall `accuracy`."""
    task = task_name(name, version)
    out = folder / FOLDER
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(UTILS, out / "utils.py")
    metrics = ["accuracy", *(f"accuracy_{kind}" for kind in sorted(set(data_types))),
               *sorted({dimension_metric(category) for category in categories})]
    files = [f"../{path}" for paths in shards.values() for path in paths]
    common = dict(pretty_name=pretty_name, version=version, split=split, metrics=metrics)
    (out / f"{task}.yaml").write_text(_render(
        task=task, dataset={"dataset_path": "parquet", "dataset_kwargs": {"data_files": {split: files}}},
        usage=f"lmms-eval --model MODEL --tasks {task} --include_path <release folder>/{FOLDER}", **common),
        encoding="utf-8")
    if repo:
        (out / f"{task}_hub.yaml").write_text(_render(
            task=f"{task}_hub",
            dataset={"dataset_path": repo, "dataset_name": "all", "dataset_kwargs": {"revision": version}},
            usage=f"Loads {repo} at tag {version} from the Hub; only this folder is needed locally.", **common),
            encoding="utf-8")
    return task
