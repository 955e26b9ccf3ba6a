"""xdn audit."""
