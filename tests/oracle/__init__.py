"""The oracle harness: a pure-Python reference of what tables hold and queries answer.

``shapes`` declares the model shapes (each with a hand-written description the
reference reads, never tsmodel's spec), ``reference`` computes what each table
must hold and what each query must answer from the events saved, and
``machine`` drives a Hypothesis state machine that saves, queries, repairs and
snapshots on one backend (or two, in differential mode) and compares every
answer with the reference. ``exclusions`` lists the open bugs the harness
steps around, each with its issue item.
"""
