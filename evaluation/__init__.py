"""Evaluation: score models on a release (or the candidate pool) and read back what the scores say
about the questions themselves.

- `records`: what is evaluated (`EvalQuestion`), one showing of it to a model (`Pass`), and what the
  model answered (`ModelAnswer`);
- `sources`: questions from a release folder, a Hub dataset or the store's candidates;
- `protocols`: which passes a protocol makes (single, circular, instability) and how they score;
- `adapters`: one small protocol per kind of model (likelihood ranking, chat + option matching, blind);
- `stage`: evaluation as a runner stage, predictions kept in the store;
- `board`, `items`: the leaderboard and the item analysis.
"""
