"""Question generators and the generate stage.

- `programmatic`: exact questions from labels, boxes, attributes and OCR (no LLM);
- `llm`: questions written by an LLM from an image's facts, one prompt template per dimension in
  `prompts/`;
- `temporal`: questions about videos from their action segments and steps;
- `reform`: questions reformulated from annotated datasets (VQA answers, class labels, captions,
  referring expressions, OCR ground truth), task kinds in `data/reform_tasks.yaml`;
- `textrich`: exact questions about rendered charts, tables and documents (`ingest.textrich`) from the
  structure they were drawn from (the `charts` group of dimensions);
- `image_sets`: exact questions over the images of a scene set (`ingest.scene_sets`): what changed between
  two images, how the images compare, where a shape of one image is in another (the `multi_image` group);
- `conversation`: three-turn conversations (perception, reasoning, creation) written turn by turn from
  an image's facts, with the templates in `prompts/conversation/`;
- `stage`: finds the (generator, item, dimension) jobs not done yet, runs them in batches, passes the
  results through `generators.quality`, balances answer letters and stores them.

Each generator is registered in the entry-point group `benchsmith.generators` by its stage class, which
names its settings model (`settings_model`): that model validates `generate.<name>`, a plugin's as ours.
"""
