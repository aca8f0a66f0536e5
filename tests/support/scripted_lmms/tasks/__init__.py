"""Empty: lmms-eval's CLI adds every plugin's `tasks` package to its task search path."""
