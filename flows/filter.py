"""The filter flow: the blind filter over every candidate question it has not judged yet."""

from __future__ import annotations

from prefect import flow

from benchsmith.settings import Settings
from flows.tasks import new_run_id, run_stage


def filter_stage(settings: Settings, run_id: str) -> dict:
    """The blind-filter task; callable inside any flow. Its cache key includes the number of questions
    still pending, so questions a solver could not answer last time are retried."""
    from benchsmith.store import Store
    from filters import blind

    config = blind.blind_settings(settings)
    with Store(settings.db_url) as store:
        pending = len(store.get_questions(status="candidate", without_verdict_from=blind.STAGE))

    def judge(store) -> dict:
        if not pending:  # nothing to judge: do not load any solver model
            return blind.FilterRun().as_dict()
        solvers = blind.solvers_from(config, settings=settings, store=store)
        return blind.apply(store, config, solvers).as_dict()
    return run_stage(settings, run_id, "blind", judge, reads=("questions",), input_token=str(pending))


@flow(name="benchsmith-filter")
def filter_flow(settings: Settings) -> dict:
    return {"blind": filter_stage(settings, new_run_id())}
