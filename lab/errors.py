"""The lab's one error type: a one-line message meant for a person."""


class LabError(Exception):
    """A user-facing failure. ``str(err)`` is a single line naming the culprit."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
