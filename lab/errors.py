"""The lab's one error type: a one-line message meant for a person."""


class LabError(Exception):
    """A user-facing failure. ``str(err)`` is a single line naming the culprit."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


def check_choice(flag: str, value: object, choices: tuple[str, ...]) -> None:
    """A one-line error naming ``flag`` for a word option that is none of its ``choices`` (an empty choice, "the
    default", is allowed but not listed): what each piece of the run options (lab.run.options) checks its words
    with, so an option built in code or read from JSON is refused as the command line's argparse would."""
    if value not in choices:
        raise LabError(f"{flag}: {value!r} is not one of {', '.join(c for c in choices if c)}")
