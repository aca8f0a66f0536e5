"""The ingest stage: image collections, annotated videos and synthetic oracle scenes into the store."""
