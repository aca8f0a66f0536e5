"""Answers each question with the reply scripted for its question id, after checking that lmms-eval
handed it every image of the question and its prompt."""

import json
from pathlib import Path

from lmms_eval.api.model import lmms
from PIL import Image


class Scripted(lmms):
    def __init__(self, replies: str, **_settings) -> None:
        super().__init__()
        self.replies = json.loads(Path(replies).read_text(encoding="utf-8"))

    def generate_until(self, requests) -> list[str]:
        out = []
        for context, _generation, doc_to_visual, doc_id, task, split in (request.args for request in requests):
            doc = self.task_dict[task][split][doc_id]
            images = doc_to_visual(doc)
            if not images or len(images) != len(doc["image"]) or not all(isinstance(image, Image.Image) for image in images):
                raise AssertionError(f"{doc['question_id']}: doc_to_visual gave {images!r}")
            if doc["question"] not in context or doc["choice_d"] not in context:
                raise AssertionError(f"{doc['question_id']}: the prompt lacks the question: {context!r}")
            out.append(self.replies[doc["question_id"]])
        return out

    def loglikelihood(self, requests):
        raise NotImplementedError("the task is generate_until")

    def generate_until_multi_round(self, requests):
        raise NotImplementedError("the task is generate_until")
