"""``haltwise audit``: replay recorded agent runs through a set of limits and report what would
have been saved, and what would have been cut.

- ``readers``: SWE-agent, mini-swe-agent, tau-bench, OpenAI transcripts and haltwise event logs,
  detected per file, each turned into the event stream the governor sees live;
- ``replay``: each run fed to a ``Governor`` on a clock that stands still; where it would
  have stopped;
- ``report``: per run, per corpus and per model: runs stopped, spend saved, solved runs cut;
- ``html``: one self-contained page with plots; ``suggest``: limits from the corpus itself;
- ``expr``: the safe parser of ``--limits`` expressions; ``cli``: the command.

This is a face: it imports the engine, never the other way round.
"""
