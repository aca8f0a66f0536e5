"""White-box evaluation, SEED-Bench's way: a vision-language model ranks the options of a question by
the log-likelihood of each option's text after the image(s) and the prompt, so the model never has to
follow an answer format.

Any transformers model that loads with AutoModelForImageTextToText and AutoProcessor (LLaVA, Qwen2-VL,
Idefics style). The prompt goes through the processor's chat template when it has one (a user turn with
the images and the prompt, then the assistant's turn opened), else the model's image token starts it.
Rows of (question, option) are scored `batch_size` questions at a time, right-padded; an option's score
is the sum (or the mean) of its tokens' log-probabilities.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from evaluation.adapters import EvalError, VlmLikelihoodConfig
from evaluation.records import ModelAnswer, Pass
from evaluation.templates import Templates
from filters.solvers import pick_device, pick_dtype


class LikelihoodAdapter:
    def __init__(self, name: str, config: VlmLikelihoodConfig, templates: Templates) -> None:
        self.name = name
        self.config = config
        self.templates = templates
        self.model = None
        self.processor = None

    def load(self) -> None:
        from transformers import AutoModelForImageTextToText, AutoProcessor

        device = pick_device(self.config.device)
        dtype = pick_dtype(self.config.dtype, device)
        remote = self.config.trust_remote_code
        try:
            self.processor = AutoProcessor.from_pretrained(self.config.model, trust_remote_code=remote)
            self.model = AutoModelForImageTextToText.from_pretrained(self.config.model, dtype=dtype,
                                                                     trust_remote_code=remote)
        except (OSError, ValueError, KeyError) as exc:
            raise EvalError(f"cannot load evaluation model {self.config.model!r}: "
                            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}") from None
        self.model.to(device).eval()
        tokenizer = self.processor.tokenizer
        tokenizer.padding_side = "right"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token

    def release(self) -> None:
        import torch

        self.model = self.processor = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def prefix(self, p: Pass, n_images: int) -> str:
        """The text before the option: the prompt, with one image placeholder per image."""
        prompt = self.templates.likelihood[p.template].format(question=p.question.text, options=p.options_block())
        if getattr(self.processor, "chat_template", None):
            content = [{"type": "image"} for _ in range(n_images)] + [{"type": "text", "text": prompt}]
            return self.processor.apply_chat_template([{"role": "user", "content": content}],
                                                      add_generation_prompt=True, tokenize=False)
        token = getattr(self.processor, "image_token", None) or "<image>"
        return token * n_images + "\n" + prompt

    def predict(self, passes: Sequence[Pass]) -> Iterator[tuple[Pass, ModelAnswer]]:
        if self.model is None:
            self.load()
        ready: list[Pass] = []
        for p in passes:
            if len(p.question.frames) > 1 and not self.config.video:
                yield p, ModelAnswer(skipped=f"a video question ({len(p.question.frames)} frames) and model "
                                             f"{self.config.model!r} takes one image (evaluate.models: video false)")
            elif not p.question.frames:
                yield p, ModelAnswer(skipped="the question has no image")
            else:
                ready.append(p)
        for start in range(0, len(ready), self.config.batch_size):
            batch = ready[start:start + self.config.batch_size]
            for p, scores in zip(batch, self.score(batch)):
                best = max(range(len(scores)), key=scores.__getitem__)
                yield p, ModelAnswer(choice=best, scores=tuple(scores), matched_by="likelihood")

    def score(self, batch: Sequence[Pass]) -> list[list[float]]:
        """Each shown option's log-likelihood after its pass's images and prompt."""
        import torch

        texts, images, starts = [], [], []
        for p in batch:
            frames = p.question.images(self.config.max_frames)
            prefix = self.prefix(p, len(frames))
            start = len(self.processor(text=[prefix], images=frames, return_tensors="pt")["input_ids"][0])
            for option in p.options:
                texts.append(f"{prefix} {option.strip()}")
                images.extend(frames)
                starts.append(start)
        inputs = self.processor(text=texts, images=images, padding=True, return_tensors="pt").to(self.model.device)
        with torch.inference_mode():
            logits = self.model(**inputs).logits.float()
        logps = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, inputs["input_ids"][:, 1:, None]).squeeze(-1)
        lengths = inputs["attention_mask"].sum(-1).tolist()
        totals = []
        for row, (start, length) in enumerate(zip(starts, lengths)):
            picked = logps[row, start - 1:length - 1]    # logits at t-1 predict token t
            totals.append(float(picked.sum() if self.config.normalise == "sum" else picked.mean()))
        n = len(batch[0].options)
        return [totals[i * n:(i + 1) * n] for i in range(len(batch))]
