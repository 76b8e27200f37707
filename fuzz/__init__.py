"""In-project fuzzing of every decoder and key parser (docs/FUZZING.md).

Nothing is imported here: the atheris runner must instrument streamcrypt before it is
first imported, so the modules load only when a command needs them.
"""
