"""Declaration: @model, field helpers, the frozen spec, companion tables."""
