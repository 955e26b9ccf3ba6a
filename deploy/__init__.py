"""xdn deploy."""
