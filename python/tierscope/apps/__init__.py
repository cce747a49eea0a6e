"""Real programs measured for the model's inputs: `tierscope measure apps` (measure.py)."""
