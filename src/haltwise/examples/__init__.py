"""Runnable examples shipped with haltwise; the README shows their code verbatim."""
