"""The ground vocabulary: what planners, layouts and backends all speak.

`tsmodel.ground.base` holds the `Backend` protocol and the backend-neutral
value objects (rows, cells, mutations, read requests, table specs, GC rules,
features); `tsmodel.ground.gc` what a GC rule deletes. Nothing here does I/O
or opens a backend: the concrete backends (`tsmodel.backends`) sit above the
planners, and only the executors open them.
"""
