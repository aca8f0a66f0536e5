"""lmms-eval task functions for a benchsmith release (SEED-Bench columns: `question`, `choice_a` to
`choice_d`, `answer` letter, `image` list, `category`, `data_type`).

`benchsmith publish` copies this file beside the release's task YAML. It imports only the standard
library and Pillow, so it runs inside lmms-eval's own environment without benchsmith installed.
"""

import io
import re

from PIL import Image

LETTERS = "ABCD"
POST_PROMPT = "Answer with the option's letter from the given choices directly."

# Replies that name a letter, tried in this order (see `extract_letter`).
_ONLY_LETTER = re.compile(r"^[(\[]?([A-Da-d])[)\]]?[.:]?$")
_LEADING_LETTER = re.compile(r"^[(\[]?([A-D])(?:[)\].:,]|\s|$)")
_NAMED_LETTER = re.compile(r"(?i:\b(?:answer|option|choice))(?:\s+is)?\s*[:：]?\s*[(\[]?([A-D])\b")
_BRACKETED_LETTER = re.compile(r"[(\[]([A-D])[)\]]")


def doc_to_visual(doc):
    """The row's images as RGB, in order: one for an image question, every image of an image set, a
    video's sampled frames."""
    return [_open(image).convert("RGB") for image in doc["image"]]


def _open(image):
    """A decoded image as it is, or an undecoded parquet cell ({"bytes", "path"}), which is what a
    loader that skips the `datasets` Image feature hands over."""
    if isinstance(image, Image.Image):
        return image
    if image.get("bytes"):
        return Image.open(io.BytesIO(image["bytes"]))
    return Image.open(image["path"])


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    """The question, the four lettered options, and an instruction to answer with a letter; the task
    YAML's `pre_prompt` and `post_prompt` (per model, or `default`) replace the wording around it."""
    kwargs = lmms_eval_specific_kwargs or {}
    options = "\n".join(f"{letter}. {doc['choice_' + letter.lower()]}" for letter in LETTERS)
    post_prompt = kwargs.get("post_prompt", POST_PROMPT)
    text = f"{kwargs.get('pre_prompt', '')}{doc['question']}\n{options}"
    return f"{text}\n{post_prompt}" if post_prompt else text


def _normal(text):
    return " ".join(str(text).lower().split()).strip(" .!")


def extract_letter(reply, doc):
    """The option letter that a free-form reply picks, or "" when it picks none or is ambiguous.

    In order: the whole reply is one option's text ("blue"); the reply is a letter alone, any case
    ("b", "(B)", "B."); it starts with a capital letter ("B) blue", "A dog"); it names one ("Answer: C",
    "the answer is (C)", "option C"); it has a bracketed letter ("I think (C)"); exactly one option's
    text occurs in it as whole words ("It ends on blue."). Letters inside sentences are capitals only,
    so the article "a" is not read as option A.
    """
    text = str(reply or "").strip()
    options = {letter: _normal(doc["choice_" + letter.lower()]) for letter in LETTERS}
    whole = [letter for letter, option in options.items() if option == _normal(text)]
    if len(whole) == 1:
        return whole[0]
    for pattern in (_ONLY_LETTER, _LEADING_LETTER):
        found = pattern.match(text)
        if found:
            return found.group(1).upper()
    for pattern in (_NAMED_LETTER, _BRACKETED_LETTER):
        found = pattern.search(text)
        if found:
            return found.group(1)
    inside = [letter for letter, option in options.items()
              if option and re.search(rf"(?<!\w){re.escape(option)}(?!\w)", _normal(text))]
    return inside[0] if len(inside) == 1 else ""


def dimension_metric(category):
    """The metric that scores one dimension: "Instance Identity" -> "dim_instance_identity"."""
    return "dim_" + (re.sub(r"[^a-z0-9]+", "_", category.lower()).strip("_") or "unnamed")


def process_results(doc, results):
    """One scored record per question, filed under the overall metric, its data type's metric and its
    dimension's metric; lmms-eval aggregates each metric over the records filed under it."""
    reply = results[0] if results else ""
    pred = extract_letter(reply, doc)
    record = {"question_id": doc["question_id"], "category": doc["category"], "data_type": doc["data_type"],
              "pred": pred, "answer": doc["answer"], "score": int(pred == doc["answer"])}
    return {"accuracy": record, f"accuracy_{doc['data_type']}": record, dimension_metric(doc["category"]): record}


def accuracy(records):
    """Share of the records answered right. `score` is also the key lmms-eval reads for its standard
    errors."""
    return sum(record["score"] for record in records) / len(records) if records else 0.0
