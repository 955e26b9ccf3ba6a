"""xdn publisher."""
