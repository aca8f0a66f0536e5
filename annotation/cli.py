"""Commands of this stage, added to the `benchsmith` CLI by `register`."""

from __future__ import annotations

from typing import Annotated

import typer

from benchsmith.console import console, progress_bar, table


CONVERSATIONS_FLAG = typer.Option(
    "--conversations", help="The three-turn conversations instead of the questions: their own project "
                            "(review.conversation_project), where annotators edit each turn's instruction, "
                            "reference answer and focus points and keep or discard the conversation.")


def register(app: typer.Typer, context) -> None:
    """Add this stage's commands to `app`; `context(ctx)` gives the settings and the store."""
    review_app = typer.Typer(help="Human review of questions in Label Studio: push, pull, status.",
                             no_args_is_help=True)
    server_app = typer.Typer(help="A local Label Studio server in its own virtual environment.",
                             no_args_is_help=True)
    annotators_app = typer.Typer(help="Bring annotators into Label Studio and see how much each has done.",
                                 no_args_is_help=True)
    review_app.add_typer(annotators_app, name="annotators")
    app.add_typer(review_app, name="review")
    app.add_typer(server_app, name="labelstudio")

    @review_app.command("push")
    def review_push(
        ctx: typer.Context,
        flagged: Annotated[bool, typer.Option("--flagged", help=(
            "Instead of new candidates, send the published questions that `benchsmith eval items` flagged "
            "back for a second look (to review.second_look_project)."))] = False,
    ) -> None:
        """Send questions that passed the blind filter, and candidate conversations, to Label Studio in bulk
        batches.

        Creates the project named by `review.project` (or reuses it), with the labeling config, the overlap
        (`review.overlap` annotators per question) and access to the media folder. Each question is sent
        once: rerunning, even after a crash or a server restart half-way, sends only what is missing.
        Server: LABEL_STUDIO_URL (or services.label_studio_url); token: LABEL_STUDIO_API_KEY.

        With --flagged, published questions the models put in doubt (every model chose the same wrong
        option, no model beat chance, a blind baseline got it right) go to their own project; each task
        shows the flags, the published answer and every model's choice. `benchsmith review pull` then
        confirms, changes or withdraws each one for the next `publish`; a confirmed question is not sent
        again while it stays the same. Questions about image sets go to projects of their own (the same
        title, " (image sets)" added), which show a set's images side by side, numbered as the questions
        number them. Conversations go the same way to their own project (`review.conversation_project`).
        """
        from annotation import conversations as review_conversations
        from annotation.client import connect
        from annotation.push import FIRST, Round, push, questions_to_push
        from annotation.settings import ReviewSettings
        from benchsmith.dimensions import registry

        c = context(ctx)
        server = connect(c.settings)
        with c.store() as store:
            if flagged:
                from annotation.second_look import flagged_plan

                second = flagged_plan(store)
                questions, round_ = second.questions, Round(second.round, second.notes)
            else:
                questions = questions_to_push(store, c.settings.section("review", ReviewSettings))
                round_ = FIRST
            label = "second looks to Label Studio" if flagged else "pushing to Label Studio"
            with progress_bar(label, len(questions)) as advance:
                reports = push(store, server, c.settings, registry(), questions, progress=advance, round=round_)
            for report in reports:
                console.print(report.summary())
            talks = [] if flagged else store.get_conversations(status="candidate")
            if talks:
                with progress_bar("pushing conversations", len(talks)) as advance:
                    console.print(review_conversations.push(store, server, c.settings, progress=advance).summary())
        if flagged:
            for reason, n in second.skipped.most_common():
                console.print(f"  not sent: {n} {reason}", highlight=False, markup=False)

    @review_app.command("pull")
    def review_pull(ctx: typer.Context) -> None:
        """Bring annotations back, for questions and conversations, and decide each item from them.

        With `review.overlap` reviews a question is decided by majority: kept questions are accepted with
        the annotators' answer and dimension; discarded ones are rejected with their reasons; ties and
        spread votes are flagged for adjudication (add a deciding annotation in Label Studio, then pull
        again). Questions with fewer reviews stay in review. A conversation is decided by its latest
        submitted annotation: kept, it is accepted with the edited turns; discarded, rejected; an edit that
        breaks its structure holds it in review. Every version of a conversation's annotations is kept.

        An annotation changed after its item was decided, even after a release, revises the item (a kept
        edit) or withdraws it (a discard); the next `publish` lists it as changed or removed, with why.
        Each version of an annotation is pulled once (the work ledger keeps it, under the settings that
        decide: `review.overlap`, `review.second_look_overlap`, `generate.quality`; changing one decides
        again the items it applies to).
        Prints Cohen's or Fleiss' kappa per dimension, and per dimension and generator how often the
        annotators changed the generated answer or discarded the question, and why.
        """
        from annotation.client import connect
        from annotation.pull import pull
        from benchsmith.dimensions import registry

        c = context(ctx)
        server = connect(c.settings)
        with c.store() as store:
            report = pull(store, server, c.settings, registry())
            console.print(report.summary(), markup=False)
            print_round(store, c.settings, report.outcomes["flagged"])

    @review_app.command("status")
    def review_status(
        ctx: typer.Context,
        flagged: Annotated[bool, typer.Option("--flagged", help="Also list the questions that wait for a deciding "
                                                                "annotation, with their Label Studio tasks.")] = False,
    ) -> None:
        """Show where review stands, from the store alone: pushed, waiting, flagged, decided, and agreement."""
        from annotation.pull import review_status as state
        from annotation.settings import ReviewSettings

        c = context(ctx)
        review = c.settings.section("review", ReviewSettings)
        with c.store(create=False) as store:
            counts, agreement, ties = state(store, c.settings)
        console.print(table("review", ["state", "n"], list(counts.items())))
        console.print(agreement_table(agreement))
        if flagged:
            console.print(flagged_table(ties, c.settings.services.label_studio_url))
        print_adjudication_hint(len(ties), review.overlap)

    @annotators_app.command("invite")
    def annotators_invite(
        ctx: typer.Context,
        reset: Annotated[bool, typer.Option("--reset", help="Make a new link; the old one stops working (for a "
                                                            "link that reached the wrong people).")] = False,
    ) -> None:
        """Print the link annotators sign up with (the Label Studio organization's invite).

        Send it to each annotator: they open it, choose an email and a password, and land in the
        organization, where the review project is open to them. Needs the admin's LABEL_STUDIO_API_KEY.
        """
        from annotation.annotators import invite_link
        from annotation.client import connect

        console.print(invite_link(connect(context(ctx).settings), reset=reset), highlight=False, markup=False,
                      soft_wrap=True)

    @annotators_app.command("list")
    def annotators_list(ctx: typer.Context) -> None:
        """List the organization's users with their annotations on this workspace's review tasks (on the
        server, and already pulled into the store) and when each was last active."""
        from annotation.annotators import annotator_rows
        from annotation.client import connect
        from annotation.settings import ReviewSettings
        from benchsmith.dimensions import registry

        c = context(ctx)
        with c.store(create=False) as store:
            rows = annotator_rows(store, connect(c.settings), c.settings.section("review", ReviewSettings), registry())
        console.print(table("annotators", ["email", "name", "annotations", "pulled", "last active"], rows))

    @review_app.command("config")
    def review_config(ctx: typer.Context, conversations: Annotated[bool, CONVERSATIONS_FLAG] = False) -> None:
        """Print the Label Studio labeling config (options and dimensions come with each task)."""
        from annotation import conversations as review_conversations
        from annotation.labeling import label_config
        from annotation.settings import ReviewSettings

        review = context(ctx).settings.section("review", ReviewSettings)
        print((review_conversations.label_config if conversations else label_config)(review), end="")

    @server_app.command("install")
    def labelstudio_install(ctx: typer.Context) -> None:
        """Create the server's virtual environment (`review.server.venv`) with Label Studio in it."""
        from annotation.server import install
        from annotation.settings import ReviewSettings

        review = context(ctx).settings.section("review", ReviewSettings)
        console.print(f"installing Label Studio {review.server.version} (a few minutes the first time)...")
        console.print(f"ready: {install(review)}")

    @server_app.command("up")
    def labelstudio_up(
        ctx: typer.Context,
        detach: Annotated[bool, typer.Option("--detach", help="Leave the server running in the background; "
                                                              "stop it with `benchsmith labelstudio down`.")] = False,
    ) -> None:
        """Start a local Label Studio at LABEL_STUDIO_URL (default http://127.0.0.1:8080).

        The admin comes from LABEL_STUDIO_USERNAME (default `review.server.username`), LABEL_STUDIO_PASSWORD
        and LABEL_STUDIO_API_KEY (its API token, which the review commands use too). Data lives in
        <workspace>/labelstudio; images are served from the media folder. Installs the server first if needed.
        """
        from annotation.server import annotator_guide, healthy, install, running, start, stop
        from annotation.settings import ReviewSettings

        settings = context(ctx).settings
        review = settings.section("review", ReviewSettings)
        if detach and running(settings) and healthy(settings.services.label_studio_url):
            console.print(annotator_guide(settings, review))
            return
        install(review)
        process = start(settings, review)
        console.print(annotator_guide(settings, review))
        if detach:
            return
        console.print("\nPress Ctrl+C to stop the server.")
        try:
            process.wait()
        except KeyboardInterrupt:
            stop(process)

    @server_app.command("down")
    def labelstudio_down(ctx: typer.Context) -> None:
        """Stop a server started with `benchsmith labelstudio up --detach`."""
        from annotation.server import data_dir, running, stop

        settings = context(ctx).settings
        pid = running(settings)
        (data_dir(settings) / "server.pid").unlink(missing_ok=True)
        if pid is None:
            console.print(f"no server started from the workspace {settings.workspace} is running (`up` and `down` "
                          "go by the workspace: run `down` where you ran `up`, or pass --workspace)",
                          highlight=False, markup=False)
            return
        stop(pid)
        console.print("stopped")


def print_adjudication_hint(n_flagged: int, overlap: int) -> None:
    """What to do about ties: they wait for one more annotation, which the overlap or a reviewer gives."""
    if n_flagged:
        console.print(f"{n_flagged} question(s) wait for a deciding annotation (a tie or a split vote); list them "
                      f"with `benchsmith review status --flagged`. To get one, raise `review.overlap` to {overlap + 1} "
                      "and run `benchsmith review push` (Label Studio then asks one more annotator), or assign a "
                      "reviewer to those tasks in Label Studio (Data Manager: select the tasks, Assign Annotators); "
                      "then pull again.", highlight=False, markup=False)


def print_round(store, settings, n_flagged: int) -> None:
    """What a pull leaves a maintainer to look at: agreement, the generators' signal, and open ties."""
    from annotation.pull import agreement
    from annotation.settings import ReviewSettings
    from annotation.signal import COLUMNS, review_signal
    from benchsmith.dimensions import registry

    console.print(agreement_table(agreement(store)))
    console.print(table("reviewed answers against the generators' keys", COLUMNS, review_signal(store, registry())))
    print_adjudication_hint(n_flagged, settings.section("review", ReviewSettings).overlap)


def flagged_table(ties, url: str) -> object:
    """One row per tie: the question, what has no majority, and the task to open in Label Studio."""
    from benchsmith.dimensions import registry

    dimensions = registry()
    rows = [(question.id, f"{question.dimension_id} {dimensions.get(question.dimension_id).name}",
             " and ".join(decision.details["unsettled"]), decision.details["n_reviews"],
             f"{url.rstrip('/')}/projects/{project}/data?task={task}" if task else "not on the server",
             question.text[:60])
            for question, decision, (project, task) in ties]
    out = table(f"waiting for a deciding annotation ({len(rows)})",
                ["question", "dimension", "no majority on", "reviews", "task", "text"], rows)
    out.columns[4].no_wrap = True  # a link folded over lines cannot be opened
    return out


def agreement_table(agreement) -> object:
    """κ per dimension (by name) and over all, rounded, with the method and how many questions it covers."""
    from benchsmith.dimensions import registry

    dimensions = registry()
    rows = [(group if group == "all" else f"{group} {dimensions.get(int(group)).name}", by["answer"].show(),
             by["keep"].show())
            for group, by in sorted(agreement.items(), key=lambda kv: (kv[0] == "all", kv[0].zfill(4)))]
    return table("agreement (kappa)", ["dimension", "answer", "keep/discard"], rows)
