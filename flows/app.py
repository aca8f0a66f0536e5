"""The `benchsmith` program: the kernel's command line with each stage package's commands added.

This is the one module that knows every stage package; the kernel (`benchsmith/`) imports none of them.
Commands appear in `--help` in pipeline order.
"""

from __future__ import annotations

from annotation import cli as annotation_cli
from benchsmith import cli
from evaluation import cli as evaluation_cli
from extractors import cli as extractors_cli
from filters import cli as filters_cli
from flows import cli as flows_cli
from generators import cli as generators_cli
from ingest import cli as ingest_cli
from publish import cli as publish_cli

for stage_cli in (ingest_cli, extractors_cli, generators_cli, filters_cli, annotation_cli, publish_cli,
                  evaluation_cli, flows_cli):
    stage_cli.register(cli.app, cli.context)

app = cli.app
main = cli.main
