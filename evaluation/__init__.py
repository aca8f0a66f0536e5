"""Evaluation: score models on a release (or the candidate pool) and read back what the scores say
about the items themselves.

- `records`: what is evaluated (`EvalQuestion`, `EvalConversation`), one showing of a question to a model
  (`Pass`), and what the model answered (`ModelAnswer`);
- `sources`: questions or conversations from a release folder, a Hub dataset or the store's candidates;
- `contract`: the protocol contract and the installed protocols by name; `protocols`: the question
  protocols (single, circular, instability); `conveval`: the conversation protocol;
- `adapters`: one small protocol per kind of model (likelihood ranking, chat + option matching, blind);
- `judge`: judge LLM calls and how their votes are read and pooled;
- `stage`: question evaluation as a runner stage, predictions kept in the store, and `evaluate`, which
  runs any protocol's stage;
- `board`, `items`: the question leaderboard and the item analysis.
"""
