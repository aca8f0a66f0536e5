"""The `review` settings section: how questions go to Label Studio and how reviews are decided."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from benchsmith.settings import Strict


class LocalServer(Strict):
    """The local server `benchsmith labelstudio up` starts."""

    version: str = "1.23.2"
    # Empty: a per-user data folder ($XDG_DATA_HOME/benchsmith/labelstudio-venv). Otherwise a path, absolute
    # or relative to the benchsmith checkout.
    venv: str = ""
    username: str = "admin@benchsmith.local"  # LABEL_STUDIO_USERNAME overrides it


class ReviewSettings(Strict):
    project: str = "benchsmith review"
    after_stage: str = "blind"
    overlap: int = Field(2, ge=1)
    second_look_project: str = "benchsmith second look"
    second_look_overlap: int = Field(1, ge=1)
    batch_size: int = Field(1000, ge=1)
    show_predictions: bool = False
    images: Literal["local", "url"] = "local"
    image_base_url: str = ""
    local_files_root: str = ""
    instructions: str = ""
    discard_reasons: dict[str, str] = Field(default_factory=lambda: {
        "ambiguous": "Ambiguous",
        "no_correct_option": "No correct option",
        "several_correct": "Several correct options",
        "answerable_without_image": "Answerable without the image",
        "wrong_dimension": "Wrong dimension",
        "bad_image": "Bad image",
        "other": "Other",
    })
    conversation_project: str = "benchsmith conversations"
    conversation_discard_reasons: dict[str, str] = Field(default_factory=lambda: {
        "gives_answer_away": "An instruction gives an earlier answer away",
        "wrong_reference": "A reference answer is wrong",
        "not_progressive": "The turns do not build on each other",
        "not_about_image": "Not answerable from the image",
        "bad_image": "Bad image",
        "other": "Other",
    })
    server: LocalServer = LocalServer()
