"""The engine: events in, decisions out. Pure, synchronous, and free of optional dependencies.

Nothing in this package imports a driver, an adapter, a face (CLI, agent, dashboard) or any
optional dependency; they all import it.
"""
