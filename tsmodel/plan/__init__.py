"""Planning: pure write and read planning, schema, GC rules, advice."""
