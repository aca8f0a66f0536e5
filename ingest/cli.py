"""Commands of the ingest stage, added to the `benchsmith` CLI by `register`: images, videos and the
synthetic oracle scenes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

# Ingest's own options, shared with `benchsmith build`, which ingests the same way.
SourceName = Annotated[str, typer.Option("--source", help="Source name recorded on each item (default: the folder name).")]
License = Annotated[str, typer.Option("--license", help="License recorded on items that do not name one.")]
ImageColumn = Annotated[Optional[str], typer.Option("--image-column", help="Image column of a Hugging Face dataset.")]
ImagesFolder = Annotated[Optional[Path], typer.Option("--images", help="Folder of the images of a COCO .json "
                         "(file_name is relative to it; default: <root>/<split> for <root>/annotations/"
                         "instances_<split>.json) or of a YOLO .yaml (its train/val/test paths are relative to "
                         "it; default: the YAML's `path`).")]
Workers = Annotated[int, typer.Option("--workers", min=1, help="Processes that decode images in parallel.")]
TaskKind = Annotated[str, typer.Option("--task", help="Task kind of every row (data/reform_tasks.yaml: vqa, "
                                       "classification, matching, grounding, text_reading, ...): the rows are "
                                       "annotations for `benchsmith generate -g reform`. A `task` column does the "
                                       "same per row. On a COCO .json, `matching` makes each image's captions "
                                       "(captions_*.json beside it) caption-matching questions.")]


def check_task_kind(settings, task: str, sources: list[Path] = ()) -> None:
    """A `--task` that names no known reform task kind is a usage error listing the known ones; so is one a
    COCO file cannot feed (its rows are images with captions: only a kind of the `captions` method)."""
    if not task:
        return
    from ingest.tasks import load_tasks

    # the file `generate.reform.tasks` names (default data/reform_tasks.yaml), read from the settings as loaded
    # (every section is validated at load), so ingest needs no generator's settings model
    path = settings.raw["generate"]["reform"]["tasks"]
    known = load_tasks(Path(path) if path else None)
    if task not in known:
        raise typer.BadParameter(f"unknown task kind {task!r}; known: {', '.join(sorted(known))}", param_hint="--task")
    coco = [s for s in sources if s.suffix.lower() == ".json"]
    if coco and known[task].method != "captions":
        fitting = ", ".join(sorted(k for k, kind in known.items() if kind.method == "captions")) or "none"
        raise typer.BadParameter(f"{coco[0]} is a COCO file: its images bring only captions, so --task must be a "
                                 f"caption kind ({fitting}), not {task!r}", param_hint="--task")


def register(app: typer.Typer, context) -> None:
    """Add this stage's commands to `app`; `context(ctx)` gives the settings and the store."""
    scenes_app = typer.Typer(help="Synthetic oracle scenes with exact ground truth.", no_args_is_help=True)
    videos_app = typer.Typer(help="Videos with action annotations, for the temporal dimensions.", no_args_is_help=True)
    app.add_typer(scenes_app, name="scenes")
    app.add_typer(videos_app, name="videos")

    @app.command()
    def ingest(
        ctx: typer.Context,
        sources: Annotated[list[Path], typer.Argument(
            help="Folders of images, .jsonl/.csv manifests (paths relative to the manifest, with optional "
                 "annotations), Hugging Face datasets (save_to_disk folders or .parquet), COCO annotation "
                 ".json files (instances, with captions_*.json beside them) or YOLO dataset .yaml files.")],
        source: SourceName = "",
        license: License = "",
        image_column: ImageColumn = None,
        images: ImagesFolder = None,
        workers: Workers = 1,
        task: TaskKind = "",
    ) -> None:
        """Read image collections into the store.

        Every file is checked (readable, a real image, not truncated, not a decompression bomb, big enough,
        not a duplicate) and normalised to RGB with its EXIF orientation applied. Refused files are recorded
        with a reason and the run goes on; `benchsmith status` lists them. Re-ingesting adds nothing new.

        COCO and YOLO boxes come in as objects: a COCO crowd region (iscrowd) as an object marked crowd, and
        every box that cannot be kept (no box, no area, unknown class, a bad label line) is counted in the
        summary by its reason and listed under its image's annotations.dropped.
        """
        from benchsmith.console import console, stage_progress
        from ingest.stage import ingest_sources

        c = context(ctx)
        check_task_kind(c.settings, task, sources)
        with c.store() as store, stage_progress():
            reports = ingest_sources(store, c.settings, sources, source=source, license=license,
                                     image_column=image_column, images=images, workers=workers, task=task)
        for location, report in reports:
            console.print(f"[bold]{location}[/]: {report.summary()}")

    @scenes_app.command("make")
    def scenes_make(
        out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write the images and manifest.jsonl into.")],
        n: Annotated[int, typer.Option("--n", min=1, help="How many scenes.")] = 50,
        seed: Annotated[int, typer.Option(help="Seed; the same seed always renders the same scenes.")] = 0,
        kind: Annotated[str, typer.Option("--kind", help="shapes: the oracle scenes; chart, table, document, map, web "
                                          "(or a plugin's, entry-point group benchsmith.renderers): text-rich "
                                          "pages; mix: every text-rich kind in turn. With --sets: pairs (a scene "
                                          "and a changed copy), sets (a scene and 2-3 copies changed each "
                                          "its own way), views (a scene and 1-2 new views of it: every shape "
                                          "moved, some recoloured) or marked (a view pair whose image 1 frames "
                                          "one shape, for where it is in image 2).")] = "shapes",
        sets: Annotated[int, typer.Option("--sets", min=0, help="Render this many image sets of --kind pairs, "
                                          "sets, views or marked instead, each change recorded (for dimensions 27-29: "
                                          "sets feed 27-28 most, views and marked 29).")] = 0,
        workers: Annotated[int, typer.Option("--workers", min=1, help="Processes that render text-rich pages.")] = 1,
    ) -> None:
        """Render synthetic scenes with exact ground truth: oracle scenes (shapes, colours, sizes, positions,
        counts, sign text), sets of a scene and changed copies (an object moved, recoloured, resized, added
        or removed; a sign's text changed) or text-rich pages (charts, tables, documents: every text with its
        box, and the data they were drawn from).

        The manifest is in ingest format, so `benchsmith ingest OUT/manifest.jsonl` brings the truth in as
        supplied annotations, and a set's row (its images in order, and the changes) in as an image set.
        """
        from benchsmith.console import console, progress_bar

        if sets:
            from ingest.scene_sets import KINDS, make_sets

            if kind not in KINDS:
                raise typer.BadParameter(f"sets are of kind {', '.join(KINDS)}, not {kind!r}", param_hint="--kind")
            with progress_bar(f"rendering {kind}", sets) as advance:
                manifest = make_sets(out, sets, kind, seed, progress=advance)
            n = sets
        elif kind == "shapes":
            from ingest.scenes import make_scenes

            with progress_bar("rendering scenes", n) as advance:
                manifest = make_scenes(out, n, seed, progress=advance)
        else:
            from ingest import textrich

            if kind not in (*textrich.kinds(), textrich.MIX):
                raise typer.BadParameter(f"unknown kind {kind!r}; known: shapes, {', '.join(textrich.kinds())}, "
                                         f"{textrich.MIX}", param_hint="--kind")
            with progress_bar(f"rendering {kind} pages", n) as advance:
                manifest = textrich.make_pages(out, kind, n, seed, progress=advance, workers=workers)
        console.print(f"wrote {n} {'sets' if sets else 'scenes'} and {manifest}")

    @videos_app.command("add")
    def videos_add(
        ctx: typer.Context,
        manifest: Annotated[Path, typer.Argument(help="JSONL: path, segments [{start, end, label}], optional "
                                                      "steps, source, license; paths relative to the manifest.")],
    ) -> None:
        """Ingest annotated videos: copy them into the workspace and keep uniformly sampled frames."""
        from benchsmith.console import console
        from ingest.videos import ingest_videos

        c = context(ctx)
        # `generate.temporal.frames`, as loaded (every section is validated at load): ingest samples the
        # frames the temporal generator's questions show, without importing that generator
        frames = int(c.settings.raw["generate"]["temporal"]["frames"])
        with c.store() as store:
            report = ingest_videos(store, c.settings.media_dir, manifest, frames=frames)
        console.print(f"{manifest}: {report.summary()}")

    @videos_app.command("synth")
    def videos_synth(
        out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the clips and manifest.jsonl.")],
        n: Annotated[int, typer.Option("--n", min=1, help="How many clips.")] = 8,
        seed: Annotated[int, typer.Option(help="The same seed always writes the same clips.")] = 0,
    ) -> None:
        """Write tiny synthetic clips of moving shapes with known actions (an offline test set)."""
        from benchsmith.console import console
        from ingest.videos import make_moving_shapes

        console.print(f"wrote {make_moving_shapes(out, n, seed)}")
