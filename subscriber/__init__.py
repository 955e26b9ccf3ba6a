"""xdn subscriber."""
