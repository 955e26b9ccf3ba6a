"""xdn disseminator."""
