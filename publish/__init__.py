"""Publishing: Hugging Face dataset folders, VLMEvalKit TSV, dataset cards, versions and stats."""
