"""Extract: describe each image in facts (captions, tags, labelled boxes with attributes, region captions,
OCR lines) that question writers read through `extractors.context.visual_context`.

- `base`: the extractor protocol (`Backend`), the extract settings, backends chosen by name;
- `supplied`, `ocr`, `captions`, `florence`, `tags`, `sam`: the backends;
- `run`: running them over the store, only where facts are missing;
- `context`: an image's facts as the text block an LLM prompt receives;
- `cli`: `benchsmith extract`.
"""
