"""The one exception type the CLI turns into a clean one-line message instead of a traceback."""


class BenchsmithError(Exception):
    """A problem the user can act on; the message says what is wrong and what to do."""
