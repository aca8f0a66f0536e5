AVAILABLE_MODELS = {"scripted": "Scripted"}
