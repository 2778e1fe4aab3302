"""``haltwise dashboard``: a web page over the ledger (live runs, budgets, approvals, the kill
switch). ``watch`` reads the ledger into snapshots and needs nothing else; ``app`` serves them
with Starlette and needs ``haltwise[dashboard]``; ``static/`` holds the page, its script and its
styles, written by hand (nothing is fetched from anywhere else)."""
