"""The haltwise agent: a small, real tool-using agent over any OpenAI-compatible endpoint.

- ``tools``: the workspace-confined tools (read, list, search, write, edit, shell).
- ``loop``: ``Agent``, the one loop behind ``haltwise chat``, ``haltwise run`` and the demo; it
  reports every step to the governor and carries out its decisions.
- ``store``: the embedded SQLite store of conversations, runs and checkpoints (a ``Ledger``).
- ``options``: the command-line options and settings the faces share.
- ``render``: how runs look on a terminal (rich).
- ``chat``: the interactive face (prompt_toolkit + rich); ``headless``: ``haltwise run``.

It is a face of haltwise: it imports the engine and the drivers; nothing imports it. Its
dependencies (``openai``, ``prompt_toolkit``, ``rich``, ``pydantic``, ``google-re2``,
``psutil``: the ``agent`` extra) are imported only where used.
"""
